// An emulated PCIe hierarchy behind a USB bridge (issue 18 item 6), reached as a
// PcieTransport: what the bridge's TLP engine sees once it has sent a request downstream.
// Each function has a real config space (os::emulated_config_space: header, PCIe capability,
// Resizable BAR) with read-only and writable bits as the specification gives them, BARs that
// answer sizing (all ones written, the size mask read back), a Resizable BAR control whose size
// field changes its BAR's size, and bridges that forward configuration requests only inside
// their secondary..subordinate bus range and memory requests only inside their memory and
// prefetchable windows with memory decode on. Anything no function claims completes with
// unsupported request (UR). Memory requests that land in a BAR go to the BAR's emulated MMIO
// (os::EmulatedBar: shared memory with reset values, or a device model's handler).
//
// Posted writes: a real memory write gets no completion, so a write nobody claims is lost
// silently; this hierarchy reports it as UR so that a test sees the misrouted write.
//
// Fault injection: a memory address that fails (UR or CA), a function whose configuration
// requests fail, CRS for a function's next N configuration reads (a device still
// initialising), and the link going down (every request fails).
//
// Threads: every member may be called from several threads at once (one lock around each
// request and each fault setting).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "os/emulated_pci.hpp"
#include "usb/pcie_transport.hpp"

namespace hcq::usb::emu {

// One function of the hierarchy. Its identity, class, PCIe port type, BARs (with their
// registers' reset values or handler) and resizable BARs come from the emulated PCI bus's
// description; `description.address`, `parent`, `driver` and the sysfs-only fields are not
// used. A bridge is a function of class 0x0604xx.
struct TopologyFunction {
  os::EmulatedPciFunction description;
  int parent = -1;  // index in the list of the bridge above; -1: on the root bus (bus 0)
  uint8_t device = 0, function = 0;
};

// The hierarchy behind an ASM2464 enclosure holding a Navi 31 card, with the GPU on bus 4 as
// tinygrad expects it (System.pci_setup_usb_bars(gpu_bus=4): bridges on buses 0 to 3):
//   [0] 00:00.0  ASM2464 switch upstream port     (1b21:2464)
//   [1] 01:00.0  ASM2464 switch downstream port   (1b21:2464)
//   [2] 02:00.0  the card's switch upstream port  (1002:1478, as lspci lists Navi cards)
//   [3] 03:00.0  the card's switch downstream port (1002:1479)
//   [4] 04:00.0  `gpu` (the emulated PCI system's RX 7900 XTX description)
//   [5] 04:00.1  its HDMI audio function          (1002:ab30; BAR0 16 KiB)
// ASMedia's vendor ID is 1b21 (pci.ids); no public list gives the ASM2464's bridge device
// IDs, so 2464 (the chip's name) stands in for them.
std::vector<TopologyFunction> asm2464_topology(const os::EmulatedPciFunction& gpu);
// The ASM2464's SRAM as the device reaches it: 0x80000 bytes at PCI address 0x200000
// (tinygrad USBPCIDevice: sram BumpAllocator(size=0x80000), paddrs 0x200000 + offset).
DmaWindow asm2464_sram_window();

class EmulatedPcieTopology final : public PcieTransport {
 public:
  // InvalidInput for a parent that is not an earlier bridge, two functions at one place, or a
  // BAR the header cannot hold.
  explicit EmulatedPcieTopology(std::vector<TopologyFunction> functions,
                                std::vector<DmaWindow> dma_windows = {});
  ~EmulatedPcieTopology() override;

  std::vector<DmaWindow> dma_windows() const override { return dma_windows_; }

  // The device side, by index in the list: a config register as the function holds it now,
  // and a BAR's contents.
  uint32_t config32(size_t function, uint32_t offset) const;
  os::EmulatedBar& bar(size_t function, int index);
  // Configuration reads the function has answered (CRS included): what a retry loop cost.
  unsigned config_reads(size_t function) const;

  // Every memory request whose range holds `address` completes with `status` (UR or CA).
  void fail_memory(uint64_t address, CompletionStatus status);
  // Every configuration request that reaches the function completes with `status`.
  void fail_config(size_t function, CompletionStatus status);
  // The function's next `count` configuration reads complete with CRS.
  void retry_config_reads(size_t function, unsigned count);
  // Link down: every request completes with UR, detail "link down".
  void set_link_down(bool down);

 protected:
  Completion do_config_read(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                            uint32_t& value) override;
  Completion do_config_write(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                             uint32_t value) override;
  Completion do_memory_read(uint64_t address, std::span<std::byte> out) override;
  Completion do_memory_write(uint64_t address, std::span<const std::byte> data) override;

 private:
  struct Function;
  struct Hit {
    Function* function = nullptr;
    int bar = -1;
    uint64_t offset = 0;
  };
  Function* route_config(Bdf f);
  Function* find_child(int parent, uint8_t device, uint8_t function);
  std::optional<Hit> route_memory(uint64_t address, uint64_t bytes);
  std::optional<Hit> route_memory_below(int parent, uint64_t address, uint64_t bytes);
  std::optional<Completion> memory_fault(uint64_t address, uint64_t bytes) const;
  // The BAR memory a memory request lands in and the offset there, or why it fails.
  Completion reach(uint64_t address, uint64_t bytes, os::EmulatedBar*& bar, uint64_t& offset);
  Function& at(size_t function) const;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Function>> functions_;
  std::vector<DmaWindow> dma_windows_;
  std::vector<std::pair<uint64_t, CompletionStatus>> memory_faults_;
  bool link_down_ = false;
};

}  // namespace hcq::usb::emu
