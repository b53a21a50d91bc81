// The Qualcomm driver's entry in the driver registry: "qcom:N" opens this machine's N-th
// Adreno GPU (KGSL's first, then msm DRM render nodes), "emu:a660" / "emu:a740" an emulated
// Adreno GPU behind an emulated KGSL, "emu:a660_msm" / "emu:a740_msm" one behind an emulated
// msm DRM driver.
#include "qcom/factory.hpp"

#include "core/error.hpp"
#include "qcom/adreno_driver.hpp"
#include "qcom/emu/kgsl.hpp"
#include "qcom/emu/msm.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {
namespace {

constexpr const char* kMsmSuffix = "_msm";

std::vector<std::pair<KmdNode, bool>> real_nodes(os::Kernel& kernel) {  // (node, is msm)
  std::vector<std::pair<KmdNode, bool>> out;
  for (auto& n : kgsl_nodes(kernel)) out.push_back({n, false});
  for (auto& n : msm_nodes(kernel)) out.push_back({n, true});
  return out;
}

}  // namespace

DriverFactory factory() {
  DriverFactory f;
  f.name = "qcom";
  // Adreno GPUs are platform devices on Snapdragon SoCs; one on PCI (Qualcomm's vendor ID
  // 0x17cb) would open through the kernel driver bound to it.
  f.pci.vendor = 0x17cb;
  f.pci.vendor_name = "Qualcomm";
  f.pci.paths = {{"msm", "msm DRM (qcom:N)"}, {"kgsl-3d", "KGSL (qcom:N)"}};
  f.pci.how = "hcq opens Adreno GPUs through KGSL or msm DRM";
  f.list = [] {
    std::vector<Device::Listing> out;
    auto nodes = real_nodes(*os::real_kernel());
    for (size_t i = 0; i < nodes.size(); i++)
      out.push_back({"qcom:" + std::to_string(i), nodes[i].first.description, false});
    for (auto& t : targets()) out.push_back({"emu:" + t.name, t.marketing_name, true});
    for (auto& t : targets())
      out.push_back({"emu:" + t.name + kMsmSuffix, t.marketing_name + ", msm DRM", true});
    return out;
  };
  f.open = [](const std::string& name) -> std::unique_ptr<DeviceDriver> {
    if (name.rfind("qcom:", 0) == 0) {
      auto kernel = os::real_kernel();
      auto nodes = real_nodes(*kernel);
      const std::string index = name.substr(5);
      size_t i = 0;
      if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos ||
          (i = std::stoul(index)) >= nodes.size())
        throw InvalidInput("bad device name '" + name + "': this machine has " +
                           std::to_string(nodes.size()) + " Adreno GPU(s) (qcom:0 ...)");
      auto& [node, is_msm] = nodes[i];
      auto kmd = is_msm ? open_msm(kernel, node.path, name) : open_kgsl(kernel, node.path, name);
      return open_adreno_device(kernel, std::move(kmd), name);
    }
    if (name.rfind("emu:", 0) == 0) {
      std::string target = name.substr(4);
      const bool msm = target.size() > 4 && target.ends_with(kMsmSuffix);
      if (msm) target.resize(target.size() - 4);
      const Target* t = find_target(target);
      if (!t) return nullptr;
      if (msm) {
        auto kernel = emu::make_emulated_msm_system(*t);
        return open_adreno_device(kernel, open_msm(kernel, emu::kMsmRenderNode, name), name);
      }
      auto kernel = emu::make_emulated_system(*t);
      return open_adreno_device(kernel, open_kgsl(kernel, "/dev/kgsl-3d0", name), name);
    }
    return nullptr;
  };
  return f;
}

}  // namespace hcq::qcom
