// NVIDIA push buffer, GPFIFO and QMD encodings, byte-exact against values worked out by hand
// from open-gpu-doc's class headers (clc56f.h, clc7c0.h, clc7b5.h, clc6c0qmd.h), and the
// decoder built from the same descriptions.
#include "nv/push.hpp"

#include <gtest/gtest.h>

#include <random>

namespace hcq::nv {
namespace {

TEST(NvPush, MethodHeaders) {
  EXPECT_EQ(inc(1, COMPUTE_SEND_PCAS_A, 1), 0x200120ADu);  // sec_op 1, count 1, subc 1, 0x2b4>>2
  EXPECT_EQ(inc(0, HOST_SEM_ADDR_LO, 5), 0x20050017u);
  EXPECT_EQ(method_header(SecOp::NonIncMethod, 1, COMPUTE_LOAD_INLINE_DATA, 3), 0x6003206Du);
  EXPECT_EQ(method_header(SecOp::ImmdDataMethod, 4, COPY_LAUNCH_DMA, 0x182), 0x818280C0u);
}

TEST(NvPush, SemaphoreAndCopyFieldValues) {
  // Release with WFI, 64-bit payload and timestamp; acquire circular >= on 64 bits.
  EXPECT_EQ(HOST_SEM_EXECUTE_OPERATION_ALL(1) | HOST_SEM_EXECUTE_RELEASE_WFI_ALL(1) |
                HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL(1) | HOST_SEM_EXECUTE_RELEASE_TIMESTAMP_ALL(1),
            0x03100001u);
  EXPECT_EQ(HOST_SEM_EXECUTE_OPERATION_ALL(3) | HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL(1), 0x01000003u);
  // A pitch-linear, non-pipelined copy.
  EXPECT_EQ(COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_ALL(2) | COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_ALL(1) |
                COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL(1),
            0x182u);
  EXPECT_EQ(COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_ALL(1) |
                COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_ALL(1) |
                COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_ALL(1),
            0x1011u);
}

TEST(NvPush, GpfifoEntriesRoundTrip) {
  GpfifoEntry e{0x1234567000, 100, true, false};
  EXPECT_EQ(encode_gpfifo(e), 0x0001921234567000ull);
  GpfifoEntry d = decode_gpfifo(0x0001921234567000ull);
  EXPECT_EQ(d.address, 0x1234567000u);
  EXPECT_EQ(d.dwords, 100u);
  EXPECT_TRUE(d.subroutine);
  EXPECT_FALSE(d.sync);
  EXPECT_EQ(decode_gpfifo(encode_gpfifo({0xfc, 1, false, true})).sync, true);
}

TEST(NvPush, DecodesMethodsByClass) {
  const uint32_t push[] = {inc(0, HOST_SEM_ADDR_LO, 5), 0x1000, 0x7f, 5, 0, 0x03100001,
                           inc(1, COMPUTE_SEND_PCAS_A, 1), 0x12345,
                           inc(4, 0x7fc, 1), 9,  // a copy method hcq does not describe
                           0xE0000000};          // sec_op 7: END_PB_SEGMENT
  auto ps = decode_push(push, Gen::Hopper);
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].name, "HOST incrementing");
  ASSERT_EQ(ps[0].registers.size(), 5u);
  EXPECT_EQ(ps[0].registers[1], (std::pair<std::string, uint32_t>{"SEM_ADDR_HI", 0x7f}));
  EXPECT_EQ(ps[0].registers[4].first, "SEM_EXECUTE");
  bool timestamp = false;
  for (auto& [n, v] : ps[0].fields) timestamp |= n == "SEM_EXECUTE.RELEASE_TIMESTAMP" && v == 1;
  EXPECT_TRUE(timestamp);
  EXPECT_EQ(ps[1].registers[0], (std::pair<std::string, uint32_t>{"SEND_PCAS_A", 0x12345}));
  EXPECT_EQ(ps[2].registers[0].first, "COPY.0x7fc");
  EXPECT_EQ(ps[3].name, "END_PB_SEGMENT");
  const uint32_t cut[] = {inc(0, HOST_SEM_ADDR_LO, 5), 1, 2};
  ps = decode_push(cut, Gen::Ampere);
  EXPECT_EQ(ps[0].problem, "truncated: 5 data dwords, 2 left");
}

TEST(NvQmd, FieldsPutAndDecode) {
  uint32_t qmd[64] = {};
  QMD_V03_CTA_RASTER_WIDTH.put(qmd, 10);
  QMD_V03_CTA_THREAD_DIMENSION0.put(qmd, 64);
  QMD_V03_QMD_MAJOR_VERSION.put(qmd, 3);
  QMD_V03_PROGRAM_ADDRESS_UPPER.put(qmd, 0x7f);
  EXPECT_EQ(qmd[12], 10u);           // bits 415:384
  EXPECT_EQ(qmd[18], 0x00400030u);  // 607:592 = 64, 583:580 = 3
  EXPECT_EQ(qmd[49], 0x7fu);         // 1584:1568
  auto d = decode_qmd(qmd, QmdVersion::V03);
  EXPECT_TRUE(d.ok);
  EXPECT_EQ(d.name, "QMD V03_00");
  bool width = false;
  for (auto& [n, v] : d.fields) width |= n == "CTA_RASTER_WIDTH" && v == 10;
  EXPECT_TRUE(width);
  EXPECT_EQ(decode_qmd(std::span<const uint32_t>(qmd, 10), QmdVersion::V05).problem,
            "truncated: a V05 QMD is 96 dwords, 10 given");
}

TEST(NvPush, SurvivesRandomInput) {
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; i++) {
    std::vector<uint32_t> w(rng() % 64);
    for (auto& x : w) x = rng();
    for (Gen g : {Gen::Ampere, Gen::Hopper, Gen::Blackwell}) {
      uint32_t total = 0;
      for (auto& p : decode_push(w, g)) {
        ASSERT_EQ(p.offset, total);
        total += p.dwords;
      }
      ASSERT_EQ(total, w.size());
    }
  }
}

}  // namespace
}  // namespace hcq::nv
