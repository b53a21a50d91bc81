// Adreno GPUs hcq knows: the emulated targets (emu:a660, emu:a740) and how a chip id maps to a
// generation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qcom/packets.hpp"

namespace hcq::qcom {

struct Target {
  std::string name;            // "a660"
  uint32_t chip_id = 0;        // as KGSL reports it
  Gen gen = Gen::A6xx;
  std::string marketing_name;  // "Adreno 660 (Snapdragon 888, emulated)"
  uint32_t shader_processors = 0;
  uint64_t gmem_bytes = 0;
  uint64_t memory_bytes = 0;   // the SoC's memory the GPU shares
};
const std::vector<Target>& targets();
const Target* find_target(const std::string& name);
// "a660" for chip id 0x06060001, else "adreno 0x<chip id>".
std::string chip_name(uint32_t chip_id);

}  // namespace hcq::qcom
