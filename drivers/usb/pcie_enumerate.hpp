// PCIe enumeration over any PcieTransport (issue 18 item 3): behind a USB bridge no firmware
// or kernel has set the hierarchy up, so hcq does what Linux's drivers/pci/probe.c and
// setup-bus.c do at boot, and what tinygrad's System.pci_setup_usb_bars does for the ASM2464
// (runtime/support/system.py):
//
//   1. walk from the root bus (bus 0), depth first, giving each bridge its primary, secondary
//      and subordinate bus numbers (one dword write: tinygrad notes the ASM2464's bridges want
//      all three at once); behind a root or downstream port only device 0 is scanned (Linux
//      only_one_child);
//   2. per function, with memory and I/O decode off (Linux __pci_read_base), size every BAR by
//      writing all ones and reading the mask back (32/64-bit, prefetchable), and read the
//      Resizable BAR capability;
//   3. give every resizable BAR the largest size it offers with which all BARs still fit the
//      apertures, write it to the control register and size the BAR again (Linux rebar.c
//      pci_rebar_set_size, then the BAR re-read, as pci_resize_resource does);
//   4. place the BARs naturally aligned: 64-bit prefetchable ones in the prefetchable aperture
//      (the bridges' 64-bit prefetchable windows), all others in the non-prefetchable one below
//      4 GiB (the bridges' memory windows); windows are 1 MiB granular (PCI-to-PCI Bridge
//      Architecture Specification 1.2, 3.2.5.8 and 3.2.5.9);
//   5. program BARs and windows, read them back, then turn on memory decode and bus mastering.
//
// I/O BARs are sized and listed but not assigned: the bridges get no I/O window (the GPU
// needs none; tinygrad assigns none either).
//
// Configuration reads completing with CRS (a function still initialising) are retried up to a
// bound (PCIe Base Specification 6.6.1: a function answers within 1.0 s of a conventional
// reset); any other failed completion, and every limit, is an exact error.
//
// Threads: enumerate_pcie must not run while anything else uses the transport's hierarchy.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "os/pci.hpp"
#include "usb/pcie_transport.hpp"

namespace hcq::usb {

// [base, base + size) of PCI memory space.
struct PcieAperture {
  uint64_t base = 0, size = 0;
};

struct EnumerateOptions {
  // BARs that are not 64-bit prefetchable (register BARs); must lie below 4 GiB. tinygrad's
  // mem_base for the ASM2464: 0x10000000.
  PcieAperture memory{0x10000000, 0x10000000};
  // 64-bit prefetchable BARs (VRAM). tinygrad's pref_mem_base: 32 GiB.
  PcieAperture prefetchable{32ull << 30, 64ull << 30};
  // The highest bus number a bridge may be given.
  unsigned last_bus = 255;
  // CRS: retries of one configuration read, and the wait before each (about 1 s in all).
  unsigned crs_retries = 1000;
  std::chrono::microseconds crs_delay{1000};
  // Grow resizable BARs (false: leave them at their current size).
  bool resize_bars = true;
};

struct PcieBarInfo {
  int index = 0;
  uint64_t address = 0, size = 0;
  bool io = false, is64 = false, prefetchable = false;
  bool assigned = false;       // false: I/O BARs (no I/O space over the transport)
  uint64_t size_before = 0;    // before resizing; equal to size when not resized
};

// A window of a bridge: [base, base + size); size 0: closed.
struct PcieWindow {
  uint64_t base = 0, size = 0;
};

struct PcieFunctionInfo {
  Bdf bdf;
  int parent = -1;  // index of the bridge above; -1: on the root bus
  uint16_t vendor = 0, device = 0;
  uint8_t revision = 0, header_type = 0;  // header type without the multi-function bit
  uint32_t class_code = 0;                // base class << 16 | subclass << 8 | prog-if
  os::PciPort port = os::PciPort::None;   // from the PCIe capability
  std::vector<PcieBarInfo> bars;          // implemented BARs, by index
  std::vector<os::PciResizableBar> resizable_bars;  // as left (current = the new size)
  bool bridge = false;
  uint8_t primary = 0, secondary = 0, subordinate = 0;
  PcieWindow memory, prefetchable;

  const PcieBarInfo* bar(int index) const;
};

struct PcieHierarchy {
  std::vector<PcieFunctionInfo> functions;  // depth first, in the order found
  const PcieFunctionInfo* find(Bdf f) const;
  // One line per function, indented by depth, with its BARs and windows:
  //   00:00.0 1b21:2463 class 060400, switch upstream port: buses 00/01-04, memory
  //   [0x10000000, 0x10200000) 2 MiB, prefetchable [0x800000000, 0x1000200000) 32770 MiB
  //           BAR0 [0x800000000, 0x1000000000) 32 GiB, 64-bit, prefetchable (resized from 256 MiB)
  std::string text() const;
};

// Enumerates and sets up everything behind the transport's root bus. InvalidInput for an
// aperture the BARs do not fit ("PCIe enumeration: the BARs need 0x... bytes of
// prefetchable memory from 0x...; the aperture has 0x..."), more buses than last_bus allows,
// a BAR that does not take its address or size; PcieError for a request that fails.
PcieHierarchy enumerate_pcie(PcieTransport& transport, const EnumerateOptions& options = {});

}  // namespace hcq::usb
