#include "amd/targets.hpp"

namespace hcq::amd {

// gfx_target_version values as KFD reports them (Linux amdkfd kfd_topology.c); topology
// figures of the parts named (public spec sheets).
const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"gfx90a", Gen::Gfx9, 90010, "AMD Instinct MI210 (emulated)", 0x740f, 104, 4, 1, 8, 1, 64, 64,
       2, 64ull << 30},
      {"gfx942", Gen::Gfx9, 90402, "AMD Instinct MI300X (emulated)", 0x74a1, 304, 4, 8, 32, 1, 64,
       64, 2, 192ull << 30},
      // Navi 21: KFD reports 4 SDMA engines (kfd_device.c sienna_cichlid_device_info). array_count
      // holds the shader engines (4), as the other RDNA rows do, not KFD's SEs x SAs (8).
      {"gfx1030", Gen::Gfx10, 100300, "AMD Radeon RX 6900 XT (emulated)", 0x73bf, 80, 2, 1, 4, 2,
       32, 64, 4, 16ull << 30},
      {"gfx1100", Gen::Gfx11, 110000, "AMD Radeon RX 7900 XTX (emulated)", 0x744c, 96, 2, 1, 6, 2,
       32, 64, 2, 24ull << 30},
      {"gfx1201", Gen::Gfx12, 120001, "AMD Radeon RX 9070 XT (emulated)", 0x7550, 64, 2, 1, 4, 2,
       32, 64, 2, 16ull << 30},
  };
  return t;
}

const Target* find_target(const std::string& name) {
  for (auto& t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

const Target* find_target(uint32_t v) {
  for (auto& t : targets())
    if (t.gfx_target_version == v) return &t;
  return nullptr;
}

const Target* find_target_by_device_id(uint32_t device_id) {
  for (auto& t : targets())
    if (t.device_id == device_id) return &t;
  return nullptr;
}

}  // namespace hcq::amd
