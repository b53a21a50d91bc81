// libFuzzer target: the PM4 and SDMA decoders on arbitrary dwords, for every generation.
// Every decode must end, account for every dword and never read past the input.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "amd/decode.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::vector<uint32_t> words((size - 1) / 4);
  if (!words.empty()) std::memcpy(words.data(), data + 1, words.size() * 4);
  const hcq::amd::Gen gens[] = {hcq::amd::Gen::Gfx9, hcq::amd::Gen::Gfx11, hcq::amd::Gen::Gfx12};
  const hcq::amd::Gen gen = gens[selector % 3];
  auto packets = (selector & 0x80) ? hcq::amd::decode_sdma(words, gen)
                                   : hcq::amd::decode_pm4(words, gen);
  size_t total = 0;
  for (auto& p : packets) {
    if (p.offset != total || p.dwords == 0) std::abort();
    total += p.dwords;
    (void)hcq::to_text(p);
  }
  if (total != words.size()) std::abort();
  return 0;
}
