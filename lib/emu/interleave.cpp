#include "emu/interleave.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace hcq::emu {

std::optional<uint64_t> Interleaver::parse_seed(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    const uint64_t digit = uint64_t(ch - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;  // past 2^64 - 1
    v = v * 10 + digit;
  }
  return v;
}

Interleaver Interleaver::from_environment() {
  const char* text = std::getenv(kSeedVariable);
  if (!text || !*text) return Interleaver();
  const auto seed = parse_seed(text);
  if (!seed)
    throw InvalidInput(std::string(kSeedVariable) + "='" + text +
                       "' is not a decimal number below 2^64 (the emulated GPUs' queue "
                       "interleaving seed)");
  return Interleaver(*seed);
}

uint64_t Interleaver::below(uint64_t n) {
  // splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z % n;
}

}  // namespace hcq::emu
