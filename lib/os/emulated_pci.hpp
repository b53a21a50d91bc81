// An emulated PCI bus: a real sysfs-shaped directory tree (libpci reads it as it reads
// /sys) mounted on an EmulatedKernel, BAR resource files backed by emulated MMIO, the
// driver bind/unbind/driver_override attributes, and VFIO (emulated_vfio.hpp) for the
// functions bound to vfio-pci.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "os/emulated_kernel.hpp"
#include "os/mmio.hpp"
#include "os/pci.hpp"

namespace hcq::os {

// Emulated MMIO behind one BAR: shared memory that every mapping of the BAR (sysfs resource
// files, VFIO regions) sees, with the registers' reset values. Created on first use, so a
// large VRAM BAR costs nothing until mapped.
//
// Or, with a handler, a BAR whose every access calls a device model (a register BAR with side
// effects): it cannot be mapped (an emulator limit: a mapping would bypass the model), only
// read and written a dword at a time through VFIO's pread/pwrite (VfioRegionRwMmio).
class EmulatedBar {
 public:
  EmulatedBar(uint64_t size, std::map<uint64_t, uint32_t> reset_values,
              std::shared_ptr<MmioHandler> handler = nullptr);
  ~EmulatedBar();
  EmulatedBar(const EmulatedBar&) = delete;
  EmulatedBar& operator=(const EmulatedBar&) = delete;

  uint64_t size() const { return size_; }
  // Whether accesses go to a device model (then map refuses).
  bool handled() const { return handler_ != nullptr; }
  // mmap(2) of [offset, offset + length) of the BAR: MAP_FAILED with errno EINVAL when the
  // range is not page aligned or leaves the BAR, as the kernel's resource files refuse, and
  // for a handled BAR.
  // MAP_FIXED in `flags` places the map exactly at `addr`, as mmap(2) does; other flags are
  // ignored (the map is always shared).
  void* map(void* addr, size_t length, int prot, off_t offset, int flags = 0);
  // What the device sees (tests and the emulated device side); a handled BAR's go to the
  // handler.
  uint32_t read32(uint64_t offset);
  void write32(uint64_t offset, uint32_t value);
  // A range of whole dwords at a dword-aligned offset, as read32/write32 of each dword would
  // (one memcpy where the BAR is memory).
  void read(uint64_t offset, std::span<std::byte> out);
  void write(uint64_t offset, std::span<const std::byte> data);
  // A function-level reset: every register back to its reset value, the rest zero. A handled
  // BAR keeps nothing itself: its model is reset through EmulatedPciFunction::on_reset.
  void reset();

 private:
  int fd();
  // The memfd mapped whole: the device side's accesses are memcpy, not pread/pwrite, so no
  // syscall per access and no limit on file writes (RLIMIT_FSIZE, which a test lowers to make
  // a capture fail) reaches the emulated device.
  // Where [offset, offset + bytes) of the BAR is (InvalidInput for a range that leaves it).
  std::byte* memory(uint64_t offset, uint64_t bytes);
  uint64_t size_;
  std::map<uint64_t, uint32_t> reset_values_;
  std::shared_ptr<MmioHandler> handler_;
  int fd_ = -1;
  std::byte* memory_ = nullptr;
  std::once_flag mapped_;  // the device model's threads may be first at once
};

// One function of the emulated bus, as the test or system description gives it.
struct EmulatedPciFunction {
  std::string address;  // "0000:07:00.0"
  std::string parent;   // the bridge above; empty under the host bridge
  uint16_t vendor = 0, device = 0, subsystem_vendor = 0, subsystem_device = 0;
  uint32_t class_code = 0;
  uint8_t revision = 0;
  struct Bar {
    int index = 0;
    uint64_t size = 0;
    bool is64 = true, prefetchable = false, io = false;
    std::map<uint64_t, uint32_t> registers;  // reset values by byte offset
    // Set: every access calls the device model (EmulatedBar above); must be thread-safe.
    std::shared_ptr<MmioHandler> handler;
  };
  std::vector<Bar> bars;
  std::vector<PciResizableBar> resizable_bars;
  PciPort port = PciPort::Endpoint;  // None: no PCIe capability
  PciLink link;                      // max_* and trained speed/width (port_* unused)
  bool thunderbolt = false;
  std::string driver;
  int iommu_group = -1, numa_node = -1;
  // Config space as a real device returned it; empty: built from the fields above.
  std::vector<uint8_t> config;
  // Set: a function-level reset (VFIO_DEVICE_RESET) calls it instead of resetting the BARs;
  // the device model decides what the reset loses (a GPU keeps its VRAM: the reset does not
  // clear memory).
  std::function<void()> on_reset;
  // An MSI vector VFIO can route to an eventfd (EmulatedVfio::interrupt signals it).
  bool msi = false;
  // Set: called when a process starts to sleep on that eventfd (poll): the device model
  // looks at its doorbells then, as a real GPU notices a doorbell write at once.
  std::function<void()> on_interrupt_wait;
};

// A function's config space as the emulated bus serves it (PCI Local Bus Specification 3.0
// chapter 6, PCI-to-PCI Bridge Architecture Specification 1.2 chapter 3, PCIe Base
// Specification chapter 7; offsets from Linux include/uapi/linux/pci_regs.h): the header with
// memory decode and bus mastering on, a PCIe capability at 0x40 and the extended capabilities
// (Resizable BAR, Thunderbolt VSEC) from 0x100; a bridge's secondary and subordinate bus
// numbers as given. The BAR registers read 0. `f.config`, when set, is returned as it is.
std::vector<uint8_t> emulated_config_space(const EmulatedPciFunction& f, unsigned secondary,
                                           unsigned subordinate);

class EmulatedVfio;
class TempTree;

class EmulatedPciBus {
 public:
  // Writes the tree into a new temporary directory and mounts it on a new EmulatedKernel.
  explicit EmulatedPciBus(std::vector<EmulatedPciFunction> functions);
  ~EmulatedPciBus();  // removes the directory
  EmulatedPciBus(const EmulatedPciBus&) = delete;
  EmulatedPciBus& operator=(const EmulatedPciBus&) = delete;

  // The kernel serving the tree; its write handlers refer to this bus, so it must not be
  // used after the bus is gone.
  const std::shared_ptr<EmulatedKernel>& kernel() const { return kernel_; }
  // The emulated MMIO of a BAR; throws InvalidInput when the function has no such BAR.
  EmulatedBar& bar(const std::string& address, int index);
  EmulatedVfio& vfio() { return *vfio_; }

  // State the VFIO emulation consults.
  const EmulatedPciFunction* function(const std::string& address) const;
  std::vector<std::string> group_members(int group) const;
  void reset(const std::string& address);

 private:
  void write_function(const EmulatedPciFunction& f);
  void set_driver(const std::string& address, const std::string& driver);
  int bind(const std::string& driver, const std::string& address);
  int unbind(const std::string& driver, const std::string& address);

  std::unique_ptr<TempTree> tree_;  // the sysfs directory
  std::string dir_;
  std::shared_ptr<EmulatedKernel> kernel_;
  std::vector<EmulatedPciFunction> functions_;
  std::map<std::string, std::string> overrides_;
  std::map<std::pair<std::string, int>, std::unique_ptr<EmulatedBar>> bars_;
  std::unique_ptr<EmulatedVfio> vfio_;
};

}  // namespace hcq::os
