// The AMD targets hcq knows: packet generation, KFD gfx_target_version, and the topology an
// emulated GPU of that target reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "amd/packets.hpp"

namespace hcq::amd {

struct Target {
  std::string name;            // "gfx1100"
  Gen gen;
  uint32_t gfx_target_version;  // KFD topology encoding: major*10000 + minor*100 + stepping
  // Topology of the emulated part (a real GPU reports its own through sysfs).
  std::string marketing_name;
  uint32_t device_id;
  uint32_t cu_count, simd_per_cu, num_xcc, array_count, simd_arrays_per_engine;
  uint32_t wave_size, lds_size_in_kb, num_sdma_engines;
  uint64_t vram_bytes;
};

const std::vector<Target>& targets();
const Target* find_target(const std::string& name);
const Target* find_target(uint32_t gfx_target_version);
// The target whose PCI device ID is `device_id`, or null.
const Target* find_target_by_device_id(uint32_t device_id);

}  // namespace hcq::amd
