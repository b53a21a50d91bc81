#include "core/decoded.hpp"

#include <gtest/gtest.h>

namespace hcq {
namespace {

// `n` one-dword packets named P0, P1, ...
std::vector<DecodedPacket> packets(uint32_t n) {
  std::vector<DecodedPacket> out(n);
  for (uint32_t i = 0; i < n; i++) {
    out[i].offset = i;
    out[i].dwords = 1;
    out[i].name = std::string("P").append(std::to_string(i));
  }
  return out;
}

std::string line(const char* mark, uint32_t i) {
  return std::string("\n    ") + mark + " " + to_text(packets(20)[i]);
}

TEST(IndirectBufferText, MarksThePacketTheEngineIsOnWithEightEitherSide) {
  const uint32_t at = 10;
  std::string want = "  indirect buffer 0x1000, 20 dwords, the engine at dword 10:";
  for (uint32_t i = 2; i < 10; i++) want += line("done   ", i);
  want += line("HERE > ", 10);
  for (uint32_t i = 11; i < 19; i++) want += line("pending", i);
  EXPECT_EQ(indirect_buffer_text(0x1000, 20, packets(20), &at, "  "), want);
}

TEST(IndirectBufferText, WithoutAPositionShowsTheFirstPacketsAndSaysSo) {
  std::string want = "  indirect buffer 0x1000, 20 dwords: position inside the indirect buffer "
                     "unknown; its first packets:";
  for (uint32_t i = 0; i < 17; i++) want += line("?      ", i);
  EXPECT_EQ(indirect_buffer_text(0x1000, 20, packets(20), nullptr, "  "), want);
  // A position outside every packet is no position.
  const uint32_t past = 20;
  EXPECT_EQ(indirect_buffer_text(0x1000, 20, packets(20), &past, "  "), want);
}

}  // namespace
}  // namespace hcq
