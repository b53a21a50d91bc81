// The emulated PCI system hcq's PCI commands and tests run on (HCQ_EMULATED_PCI=1):
//
//   0000:00:00.0  host bridge
//   0000:00:01.0  root port, 16 GT/s x16
//     0000:01:00.0  AMD Radeon RX 7900 XTX (emu:gfx1100), amdgpu, 16 GT/s x16,
//                   resizable BAR0 at 256 MiB of up to 32 GiB
//   0000:00:02.0  Intel integrated GPU, i915 (no hcq driver)
//   0000:00:07.0  Thunderbolt 4 root port, 8 GT/s x4
//     0000:20:00.0  Thunderbolt enclosure: switch upstream port
//       0000:21:01.0  switch downstream port, 8 GT/s x4
//         0000:22:00.0  NVIDIA H100 (emu:sm_90), nouveau, link trained at 2.5 GT/s x4
//                       (degraded), NV_PMC_BOOT_0 = GH100 rev a1
#pragma once

#include <memory>
#include <vector>

#include "os/emulated_pci.hpp"

namespace hcq {

std::vector<os::EmulatedPciFunction> emulated_pci_functions();
std::unique_ptr<os::EmulatedPciBus> emulated_pci_system();

}  // namespace hcq
