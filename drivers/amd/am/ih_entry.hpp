// The IH ring entry's fields (ih_entry.def) as values: read one out of an entry, make an entry
// from fields. The driver's IhEntry::decode (ih.hpp) and the emulated GPU's interrupt sources
// go through these, never through shifts of their own.
//
// Thread safety: constants and pure functions; call from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "common/bitfield.hpp"

namespace hcq::amd::am::ih_entry {

inline constexpr uint32_t kDwords = 8;
inline constexpr uint32_t kBytes = kDwords * 4;
using Words = std::array<uint32_t, kDwords>;

struct Field {
  const char* name;
  uint8_t dword, lo, width;
};

#define IH_FIELD(NAME, dword, lo, width) inline constexpr Field NAME{#NAME, dword, lo, width};
#include "amd/am/ih_entry.def"
#undef IH_FIELD

constexpr uint32_t get(const Words& entry, const Field& f) {
  return desc::Bits{f.lo, f.width}.get(entry[f.dword]);
}

// An entry with `fields` set, the others 0. InvalidInput "IH entry.VMID: 16 does not fit in 4
// bits (at most 15)" for a value too wide.
inline Words make(std::initializer_list<std::pair<Field, uint64_t>> fields) {
  Words w{};
  for (const auto& [f, v] : fields) w[f.dword] |= desc::checked(f, v, "IH entry");
  return w;
}

}  // namespace hcq::amd::am::ih_entry
