#include "amd/pci.hpp"

namespace hcq::amd {

PciSupport pci_support() {
  PciSupport s;
  s.vendor = kPciVendor;
  s.vendor_name = "AMD";
  s.paths = {{"amdgpu", "KFD (amdgpu, amd:N)"}};
  s.how = "hcq opens AMD GPUs through amdgpu's KFD or vfio-pci";
  s.registers = {{"GRBM_STATUS", kRegisterBar, kGrbmStatus},
                 {"GRBM_STATUS2", kRegisterBar, kGrbmStatus2}};
  // GRBM_STATUS bit 31 is GUI_ACTIVE (gc_9_0_sh_mask.h GRBM_STATUS__GUI_ACTIVE_MASK).
  s.describe = [](const std::string& name, uint32_t v) -> std::string {
    if (name != "GRBM_STATUS") return {};
    return v >> 31 ? "GUI_ACTIVE: the graphics/compute engine is busy" : "GUI_ACTIVE clear: idle";
  };
  return s;
}

}  // namespace hcq::amd
