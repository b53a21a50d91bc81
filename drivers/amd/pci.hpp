// AMD GPUs on the PCI bus: how hcq opens them, and the registers `hcq reg` reads (the
// descriptions in regs.def, placed in the register BAR where a public source places them).
#pragma once

#include <cstdint>

#include "core/registry.hpp"

namespace hcq::amd {

constexpr uint16_t kPciVendor = 0x1002;
// amdgpu maps registers from BAR5 on Bonaire and later (amdgpu_device.c amdgpu_device_init).
constexpr int kRegisterBar = 5;
// Byte offsets in the register BAR: the GC block's GRBM registers at 0x8000 (Linux
// gc_9_4_1_offset.h gc_grbmdec: mmGRBM_STATUS2 0x0002, mmGRBM_STATUS 0x0004 dwords, base
// index 0; the same offsets in gc_10 and gc_11). regs.def's GRBM_STATUS and GRBM_STATUS2.
constexpr uint64_t kGrbmStatus = 0x8010, kGrbmStatus2 = 0x8008;

PciSupport pci_support();

}  // namespace hcq::amd
