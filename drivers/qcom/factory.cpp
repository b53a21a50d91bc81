// The Qualcomm driver's entry in the driver registry: "qcom:0" opens this machine's KGSL GPU,
// "emu:a660" / "emu:a740" an emulated Adreno GPU of that target.
#include "qcom/factory.hpp"

#include "core/error.hpp"
#include "qcom/emu/kgsl.hpp"
#include "qcom/kgsl_driver.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {

DriverFactory factory() {
  DriverFactory f;
  f.name = "qcom";
  f.list = [] {
    std::vector<Device::Listing> out;
    auto gpus = kgsl_gpus(*os::real_kernel());
    for (size_t i = 0; i < gpus.size(); i++) out.push_back({"qcom:" + std::to_string(i), gpus[i], false});
    for (auto& t : targets()) out.push_back({"emu:" + t.name, t.marketing_name, true});
    return out;
  };
  f.open = [](const std::string& name) -> std::unique_ptr<DeviceDriver> {
    if (name.rfind("qcom:", 0) == 0) {
      if (name != "qcom:0")
        throw InvalidInput("bad device name '" + name + "': KGSL shows one GPU, qcom:0");
      return open_kgsl_device(os::real_kernel(), name);
    }
    if (name.rfind("emu:", 0) == 0) {
      const Target* t = find_target(name.substr(4));
      if (!t) return nullptr;
      return open_kgsl_device(emu::make_emulated_system(*t), name);
    }
    return nullptr;
  };
  return f;
}

}  // namespace hcq::qcom
