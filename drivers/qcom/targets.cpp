#include "qcom/targets.hpp"

#include "core/error.hpp"
#include "qcom/kgsl_abi.hpp"

namespace hcq::qcom {

const std::vector<Target>& targets() {
  // Chip ids: Linux drm/msm a6xx_catalog.c and Mesa freedreno_devices.py (kgsl_abi.hpp).
  // GMEM sizes from freedreno_devices.py; SP counts as Mesa lists them (num_sp_cores).
  static const std::vector<Target> t = {
      {"a660", kgsl::kChipIdA660, Gen::A6xx, "Adreno 660 (Snapdragon 888, emulated)", 2,
       1536 * 1024, 16ull << 30},
      {"a740", kgsl::kChipIdA740, Gen::A7xx, "Adreno 740 (Snapdragon 8 Gen 2, emulated)", 3,
       2048 * 1024, 16ull << 30},
  };
  return t;
}

const Target* find_target(const std::string& name) {
  for (auto& t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

std::string chip_name(uint32_t chip_id) {
  for (auto& t : targets())
    if (t.chip_id == chip_id) return t.name;
  return "adreno " + hex(chip_id);
}

}  // namespace hcq::qcom
