// Emulated VFIO (Linux include/uapi/linux/vfio.h, iommufd.h) as a 6.6+ kernel offers it:
// the container /dev/vfio/vfio with a type1 IOMMU, a group node per IOMMU group with a
// function bound to vfio-pci, and also /dev/iommu with IO address spaces and a device cdev
// (/dev/vfio/devices/vfioN) per bound function. Device fds' regions are the functions'
// emulated BARs; their reset restores the registers. All DMA mappings share one IOVA space
// (tests open one device at a time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "os/emulated_kernel.hpp"

namespace hcq::os {

class EmulatedPciBus;

class EmulatedVfio {
 public:
  EmulatedVfio(EmulatedPciBus& bus, EmulatedKernel& kernel);
  // A function was bound to vfio-pci: /dev/vfio/<group> and its cdev become openable.
  // Returns the cdev's number N (/dev/vfio/devices/vfioN).
  int add_device(const std::string& address, int group);
  // The host memory a device address maps to through any container's DMA mappings, as the
  // device side of a DMA sees it; null when [iova, iova + size) is not inside one mapping.
  void* translate(uint64_t iova, uint64_t size) const;
  int resets(const std::string& address) const;
  // The command register as VFIO users see and write it. vfio-pci never sets Bus Master
  // Enable, and the function comes to it with it off (the previous driver's remove disables
  // the device: Linux drivers/pci/pci.c do_pci_disable_device) or loses it when the device
  // is closed (drivers/vfio/pci/vfio_pci_core.c vfio_pci_core_disable). An emulated device
  // model's DMA reaches memory only while bus_master() is true.
  uint16_t command(const std::string& address) const;
  void set_command(const std::string& address, uint16_t value);
  bool bus_master(const std::string& address) const;
  // The function raises its MSI: the eventfd VFIO_DEVICE_SET_IRQS gave is signalled, if one
  // was given and bus mastering is on (an MSI is a memory write of the device). Returns
  // whether it was signalled. May be called from several threads at once.
  bool interrupt(const std::string& address);
  // Used by the device node: the eventfd for the function's MSI, or null to stop.
  void set_msi(const std::string& address, std::shared_ptr<EmulatedEventfd> eventfd);

  // Used by the emulated nodes: 0 or -errno (EINVAL unaligned or empty, EEXIST overlapping).
  int map(uint64_t iova, uint64_t vaddr, uint64_t size);
  // The bytes unmapped: a whole mapping at iova of that size, else 0.
  uint64_t unmap(uint64_t iova, uint64_t size);
  std::mutex& mu() const { return mu_; }
  // Every function of the group is on vfio-pci or on no driver (drivers/vfio/group.c).
  bool viable(int group) const;
  void count_reset(const std::string& address);
  EmulatedPciBus& bus() { return bus_; }
  EmulatedKernel& kernel() { return kernel_; }

 private:
  EmulatedPciBus& bus_;
  EmulatedKernel& kernel_;
  mutable std::mutex mu_;
  std::set<int> groups_;
  std::map<std::string, int> cdevs_;
  struct Dma {
    uint64_t vaddr, size;
  };
  std::map<uint64_t, Dma> dma_;  // by IOVA
  std::map<std::string, int> resets_;
  std::map<std::string, uint16_t> command_;
  std::map<std::string, std::shared_ptr<EmulatedEventfd>> msi_;
};

}  // namespace hcq::os
