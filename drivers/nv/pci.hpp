// NVIDIA GPUs on the PCI bus: how hcq opens them, and the few BAR0 registers bring-up reads.
#pragma once

#include <cstdint>
#include <string>

#include "core/registry.hpp"

namespace hcq::nv {

constexpr uint16_t kPciVendor = 0x10de;

// NV_PMC_BOOT_0 at BAR0 + 0 names the chip (open-gpu-kernel-modules
// src/common/inc/swref/published/maxwell/gm107/dev_boot.h; the field split as nova-core's
// regs.rs gives it): minor revision 3:0, major revision 7:4, architecture bit 5 at 8:8,
// implementation 23:20, architecture bits 4:0 at 28:24. The architecture and
// implementation are the ones NV2080_CTRL_CMD_MC_GET_ARCH_INFO reports (architecture 0x180
// there is 0x18 here, shifted by the 4 implementation bits).
uint32_t pmc_boot_0(uint32_t architecture, uint32_t implementation, uint8_t revision);
// "chip 0x180 (GH100, Hopper), revision a1"
std::string describe_pmc_boot_0(uint32_t value);

PciSupport pci_support();

}  // namespace hcq::nv
