// The NVIDIA driver's entry in the driver registry: "nv:N" opens the N-th GPU the NVIDIA
// kernel module reports, "emu:sm_XX" an emulated NVIDIA GPU of that target.
#include "nv/factory.hpp"

#include "core/error.hpp"
#include "nv/emu/rm.hpp"
#include "nv/pci.hpp"
#include "nv/rm_driver.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {

DriverFactory factory() {
  DriverFactory f;
  f.name = "nv";
  f.pci = pci_support();
  f.list = [] {
    std::vector<Device::Listing> out;
    auto gpus = rm_gpus(*os::real_kernel());
    for (size_t i = 0; i < gpus.size(); i++) out.push_back({"nv:" + std::to_string(i), gpus[i], false});
    for (auto& t : targets()) out.push_back({"emu:" + t.name, t.marketing_name, true});
    return out;
  };
  f.open = [](const std::string& name) -> std::unique_ptr<DeviceDriver> {
    if (name.rfind("nv:", 0) == 0) {
      std::string idx = name.substr(3);
      if (idx.empty() || idx.size() > 3 || idx.find_first_not_of("0123456789") != std::string::npos)
        throw InvalidInput("bad device name '" + name + "': expected nv:<index>");
      return open_rm_device(os::real_kernel(), std::stoi(idx), name);
    }
    if (name.rfind("emu:", 0) == 0) {
      const Target* t = find_target(name.substr(4));
      if (!t) return nullptr;  // maybe another vendor's emulated target
      return open_rm_device(emu::make_emulated_system(*t), 0, name);
    }
    return nullptr;
  };
  return f;
}

}  // namespace hcq::nv
