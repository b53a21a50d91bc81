// AMD GPUs on the PCI bus: how hcq opens them, and the registers `hcq reg` reads (the
// descriptions in regs.def, placed in the register BAR where a public source places them).
#pragma once

#include <cstdint>
#include <vector>

#include "core/registry.hpp"
#include "os/mmio.hpp"

namespace hcq::amd {

constexpr uint16_t kPciVendor = 0x1002;
// amdgpu maps registers from BAR5 on Bonaire and later (amdgpu_device.c amdgpu_device_init).
constexpr int kRegisterBar = 5;
// Byte offsets in the register BAR: the GC block's GRBM registers at 0x8000 (Linux
// gc_9_4_1_offset.h gc_grbmdec: mmGRBM_STATUS2 0x0002, mmGRBM_STATUS 0x0004 dwords, base
// index 0; the same offsets in gc_10 and gc_11). regs.def's GRBM_STATUS and GRBM_STATUS2.
constexpr uint64_t kGrbmStatus = 0x8010, kGrbmStatus2 = 0x8008;

PciSupport pci_support();

// gfx1100's registers as the AM boot describes them (am/*.def), at the offsets the GPU's own
// IP discovery table gives, read through the register BAR `regs` and the VRAM BAR `vram`
// (null: none; MM_INDEX/MM_DATA only when `may_use_mm_index`, i.e. no kernel driver uses the
// pair). A register past the register BAR is named but refused. Empty for other GPUs. The
// windows may be mapped BARs or TLPs behind a USB bridge (usb::TransportMmio).
std::vector<PciSupport::Register> discovered_registers(uint16_t device, os::Mmio& regs,
                                                       os::Mmio* vram, bool may_use_mm_index);

}  // namespace hcq::amd
