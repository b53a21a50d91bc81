// Test data: reproducible pseudo-random bytes, so a copy that returns the wrong bytes (another
// copy's, a stale chunk's) cannot pass by accident.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace hcq::testing_support {

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

}  // namespace hcq::testing_support
