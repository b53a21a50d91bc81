// Helpers for encoders that record a launch once (a template of words and patch sites, dwords
// from its start) and copy it per launch. Internal to the drivers (not installed).
#pragma once

#include <cstddef>
#include <vector>

#include "core/command_stream.hpp"

namespace hcq {

// Append a template's `count` sites for a copy of it placed at dword `at`. Inserted as one
// block copy, then moved (resize would first zero the new sites: a launch appends 10 to 16).
inline void append_sites(std::vector<PatchSite>& s, const PatchSite* from, size_t count,
                         uint32_t at) {
  const size_t first = s.size();
  s.insert(s.end(), from, from + count);
  PatchSite* out = s.data() + first;
  for (size_t i = 0; i < count; i++) out[i].dword += at;
}

}  // namespace hcq
