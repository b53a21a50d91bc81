#include "nv/pci.hpp"

#include <cstdio>

#include "nv/rm_abi.hpp"

namespace hcq::nv {

uint32_t pmc_boot_0(uint32_t architecture, uint32_t implementation, uint8_t revision) {
  const uint32_t arch = architecture >> 4;
  return (arch & 0x1f) << 24 | (arch >> 5 & 1) << 8 | (implementation & 0xf) << 20 | revision;
}

std::string describe_pmc_boot_0(uint32_t v) {
  using namespace rm;
  const uint32_t arch = ((v >> 24 & 0x1f) | (v >> 8 & 1) << 5) << 4, impl = v >> 20 & 0xf;
  struct Family {
    uint32_t arch;
    const char* name;
    const char* prefix;  // chip names are the prefix and the implementation: GA102
  };
  static const Family families[] = {
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_TU100, "Turing", "TU10"},
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100, "Ampere", "GA10"},
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100, "Hopper", "GH10"},
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_AD100, "Ada", "AD10"},
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB100, "Blackwell", "GB10"},
      {NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB200, "Blackwell", "GB20"}};
  char buf[96];
  for (auto& f : families)
    if (f.arch == arch) {
      std::snprintf(buf, sizeof buf, "chip 0x%x (%s%x, %s), revision %x%x", arch | impl, f.prefix,
                    impl, f.name, v >> 4 & 0xf, v & 0xf);
      return buf;
    }
  std::snprintf(buf, sizeof buf, "chip 0x%x (unknown architecture), revision %x%x", arch | impl,
                v >> 4 & 0xf, v & 0xf);
  return buf;
}

PciSupport pci_support() {
  PciSupport s;
  s.vendor = kPciVendor;
  s.vendor_name = "NVIDIA";
  s.paths = {{"nvidia", "RM (nvidia.ko, nv:N)"}};
  s.how = "hcq opens NVIDIA GPUs through the open nvidia.ko (RM) or vfio-pci";
  // dev_boot.h (gm107): NV_PMC_BOOT_0 0x0, NV_PMC_INTR(0) 0x100, NV_PMC_INTR_EN(0) 0x140.
  s.registers = [](uint16_t) -> std::vector<PciSupport::Register> {
    return {{"NV_PMC_BOOT_0", 0, 0x0, {}, {}},
            {"NV_PMC_INTR_0", 0, 0x100, {}, {}},
            {"NV_PMC_INTR_EN_0", 0, 0x140, {}, {}}};
  };
  s.register_bar = 0;
  s.describe = [](const std::string& name, uint32_t v) {
    return name == "NV_PMC_BOOT_0" ? describe_pmc_boot_0(v) : std::string();
  };
  return s;
}

}  // namespace hcq::nv
