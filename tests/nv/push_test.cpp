// NVIDIA push buffer, GPFIFO and QMD encodings, byte-exact against values worked out by hand
// from open-gpu-doc's class headers (clc56f.h, clc7c0.h, clc7b5.h, clc6c0qmd.h), and the
// decoder built from the same descriptions.
#include "nv/push.hpp"

#include <gtest/gtest.h>

#include <random>

#include "core/error.hpp"

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

// GP_ENTRY1_LENGTH is 21 bits of dwords: a segment of 2^21 dwords is refused, not cut.
TEST(NvPush, GpfifoLengthIsCheckedAtItsLimit) {
  EXPECT_NO_THROW(check_gpfifo_length((1u << 21) - 1, "entry"));
  EXPECT_EQ(decode_gpfifo(encode_gpfifo({0x1000, (1u << 21) - 1, true, false})).dwords,
            (1u << 21) - 1);
  try {
    check_gpfifo_length(1u << 21, "channel 0: GPFIFO entry");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "channel 0: GPFIFO entry.LENGTH: 2097152 does not fit in 21 bits (at "
                           "most 2097151)");
  }
}

// One framing rule: how many words each kind of header takes, for the decoder and the
// emulated GPU alike.
TEST(NvPush, HeadersFrameTheirPackets) {
  EXPECT_EQ(parse_method_header(0).framing, Framing::Nop);
  EXPECT_EQ(parse_method_header(0).dwords(), 1u);
  const MethodHeader inc5 = parse_method_header(inc(0, HOST_SEM_ADDR_LO, 5));
  EXPECT_EQ(inc5.framing, Framing::Methods);
  EXPECT_EQ(inc5.dwords(), 6u);
  EXPECT_EQ(inc5.method_of(4), HOST_SEM_EXECUTE);
  const MethodHeader ni = parse_method_header(non_inc(1, COMPUTE_LOAD_INLINE_DATA, 70));
  EXPECT_EQ(ni.dwords(), 71u);
  EXPECT_EQ(ni.method_of(69), COMPUTE_LOAD_INLINE_DATA);
  const MethodHeader one = parse_method_header(method_header(SecOp::OneInc, 4, COPY_PITCH_IN, 3));
  EXPECT_EQ(one.dwords(), 4u);
  EXPECT_EQ(one.method_of(2), COPY_PITCH_OUT);
  const MethodHeader imm = parse_method_header(method_header(SecOp::ImmdDataMethod, 4, COPY_LAUNCH_DMA, 0x182));
  EXPECT_EQ(imm.framing, Framing::Immediate);
  EXPECT_EQ(imm.dwords(), 1u);  // the data is the header's count field
  EXPECT_EQ(imm.count, 0x182u);
  EXPECT_EQ(parse_method_header(0xE0000000).framing, Framing::EndSegment);
  EXPECT_EQ(parse_method_header(0x40000001).framing, Framing::Invalid);  // sec_op 2
  // The decoder steps by the same lengths: an immediate, then a 1-method run, then a NOP.
  const uint32_t push[] = {method_header(SecOp::ImmdDataMethod, 4, COPY_LAUNCH_DMA, 0x182),
                           inc(1, COMPUTE_SEND_PCAS_A, 1), 5, 0};
  auto ps = decode_push(push, Gen::Hopper);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].name, "COPY immediate");
  EXPECT_EQ(ps[1].offset, 1u);
  EXPECT_EQ(ps[1].dwords, 2u);
  EXPECT_EQ(ps[2].name, "NOP");
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
