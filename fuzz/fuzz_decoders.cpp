// libFuzzer target: every decoder on arbitrary dwords (the first byte picks the decoder and
// generation): AMD PM4 and SDMA, NVIDIA push buffers and QMDs, Adreno CP and UAV descriptors.
// Every decode must
// end, account for every dword (QMDs: fields of one descriptor) and never read past the input.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "amd/decode.hpp"
#include "nv/push.hpp"
#include "qcom/decode.hpp"

namespace {

void check_tiling(const std::vector<hcq::DecodedPacket>& packets, size_t words) {
  size_t total = 0;
  for (auto& p : packets) {
    if (p.offset != total || p.dwords == 0) std::abort();
    total += p.dwords;
    (void)hcq::to_text(p);
  }
  if (total != words) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::vector<uint32_t> words((size - 1) / 4);
  if (!words.empty()) std::memcpy(words.data(), data + 1, words.size() * 4);
  switch (selector % 5) {
    case 0:
    case 1: {
      const hcq::amd::Gen gens[] = {hcq::amd::Gen::Gfx9, hcq::amd::Gen::Gfx10, hcq::amd::Gen::Gfx11,
                                    hcq::amd::Gen::Gfx12};
      const hcq::amd::Gen gen = gens[(selector >> 3) % 4];
      check_tiling(selector % 5 ? hcq::amd::decode_sdma(words, gen) : hcq::amd::decode_pm4(words, gen),
                   words.size());
      break;
    }
    case 2: {
      const hcq::nv::Gen gens[] = {hcq::nv::Gen::Ampere, hcq::nv::Gen::Ada, hcq::nv::Gen::Hopper,
                                   hcq::nv::Gen::Blackwell};
      check_tiling(hcq::nv::decode_push(words, gens[(selector >> 3) % 4]), words.size());
      break;
    }
    case 3: {
      const hcq::nv::QmdVersion vs[] = {hcq::nv::QmdVersion::V03, hcq::nv::QmdVersion::V04,
                                        hcq::nv::QmdVersion::V05};
      (void)hcq::to_text(hcq::nv::decode_qmd(words, vs[(selector >> 3) % 3]));
      break;
    }
    case 4: {
      const hcq::qcom::Gen gen = (selector >> 3) & 1 ? hcq::qcom::Gen::A7xx : hcq::qcom::Gen::A6xx;
      check_tiling((selector >> 4) & 1 ? hcq::qcom::decode_descriptors(words)
                                       : hcq::qcom::decode_cp(words, gen),
                   words.size());
      break;
    }
  }
  return 0;
}
