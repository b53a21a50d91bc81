// Where an ir3 container's pieces sit once loaded into device memory: a 16-byte header (the
// magic "hcqir3ld" and the container's size), the container file (so the emulated GPU, like a
// debugger, finds kernels by parsing it at the start of the mapping), then each kernel's
// instructions padded to whole 16-instruction groups (128 bytes,
// how SP_CS_INSTRLEN may count them) and its immediates. The loader and the emulated GPU both
// lay it out with this one function.
#pragma once

#include <cstdint>
#include <vector>

#include "qcom/ir3_program.hpp"

namespace hcq::qcom {

inline constexpr char kLoadedMagic[8] = {'h', 'c', 'q', 'i', 'r', '3', 'l', 'd'};
inline constexpr uint64_t kLoadedHeaderBytes = 16;

struct Ir3Placement {
  uint64_t code = 0;        // byte offset of the kernel's instructions
  uint64_t immediates = 0;  // byte offset of its immediates (0 when it has none)
};

// Placements in kernel order (offsets from the image's start); `total` gets the bytes the
// image spans.
inline std::vector<Ir3Placement> place_ir3(const Ir3Module& m, uint64_t file_bytes,
                                           uint64_t& total) {
  auto align = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  std::vector<Ir3Placement> out;
  uint64_t at = align(kLoadedHeaderBytes + file_bytes, 256);
  for (const Ir3Kernel& k : m.kernels) {
    Ir3Placement p;
    p.code = at;
    at = align(at + k.instructions.size() * 4, 128);
    if (!k.immediates.empty()) {
      p.immediates = at;
      at = align(at + k.immediates.size() * 4, 128);
    }
    at = align(at, 256);
    out.push_back(p);
  }
  total = at;
  return out;
}

}  // namespace hcq::qcom
