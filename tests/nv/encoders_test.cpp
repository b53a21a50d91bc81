// The NVIDIA encoders, byte-exact against encodings worked out by hand from open-gpu-doc's
// class headers (clc56f.h host methods, clc6c0.h compute methods, clc6b5.h copy methods) and
// the QMD layouts (clc6c0qmd.h V03, clcbc0qmd.h V04, clcec0qmd.h V05).
#include "nv/encoders.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace hcq::nv {
namespace {

using Words = std::vector<uint32_t>;
Words words(const CommandStream& cs) { return Words(cs.data(), cs.data() + cs.size()); }

TEST(NvEncoders, SemaphoreWaitIsA64BitStrictAcquire) {
  CommandStream cs;
  std::vector<PatchSite> s;
  ComputeEncoder(QmdVersion::V03).wait(cs, 0x123456789000, 0x100000002, s);
  // SEM_ADDR_LO header: sec_op 1, count 5, subchannel 0, 0x05c >> 2 = 0x17. SEM_EXECUTE:
  // OPERATION ACQ_STRICT_GEQ (2) | PAYLOAD_SIZE_64BIT (bit 24).
  EXPECT_EQ(words(cs), (Words{0x20050017, 0x56789000, 0x1234, 2, 1, 0x01000002}));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].dword, 1u);
  EXPECT_EQ(s[0].role, PatchRole::WaitAddress);
  EXPECT_EQ(s[1].dword, 3u);
  EXPECT_EQ(s[1].role, PatchRole::WaitValue);
}

TEST(NvEncoders, SignalReleasesAfterIdleAndWakesTheHost) {
  CommandStream cs;
  std::vector<PatchSite> s;
  CopyEncoder().signal(cs, 0x2000, 7, true, s);
  // RELEASE (1) | RELEASE_WFI (bit 20) | 64-bit payload (bit 24); NON_STALL_INTERRUPT is
  // method 0x020: header 0x20010008.
  EXPECT_EQ(words(cs), (Words{0x20050017, 0x2000, 0, 7, 0, 0x01100001, 0x20010008, 0}));
  cs.patch(s[1], 0x500000009);  // the value site rewrites both payload words
  EXPECT_EQ(cs.data()[3], 9u);
  EXPECT_EQ(cs.data()[4], 5u);
}

TEST(NvEncoders, TimestampIsAReleaseThatAlsoWritesTheTimer) {
  CommandStream cs;
  std::vector<PatchSite> s;
  ComputeEncoder(QmdVersion::V05).timestamp(cs, 0x3000, s);
  // The record at 0x3000: payload 0 there, the timer at 0x3008 (RELEASE_TIMESTAMP, bit 25).
  EXPECT_EQ(words(cs), (Words{0x20050017, 0x3000, 0, 0, 0, 0x03100001}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].role, PatchRole::TimestampAddress);
}

TEST(NvEncoders, MemoryBarrierInvalidatesShaderCaches) {
  CommandStream cs;
  ComputeEncoder(QmdVersion::V03).memory_barrier(cs);
  // INVALIDATE_SHADER_CACHES_NO_WFI (0x1698) on subchannel 1: INSTRUCTION, GLOBAL_DATA, CONSTANT.
  EXPECT_EQ(words(cs), (Words{0x200125a6, 0x1011}));
}

TEST(NvEncoders, CopiesSplitAtTwoGiB) {
  CommandStream cs;
  std::vector<PatchSite> s;
  CopyEncoder().copy(cs, 0x7f0000002000, 0x1000, 0x80000005, s);
  // OFFSET_IN_UPPER (0x400) x4 on subchannel 4: 0x20048100; LINE_LENGTH_IN (0x418): 0x20018106;
  // LAUNCH_DMA (0x300): 0x200180c0 with NON_PIPELINED | SRC and DST pitch = 0x182.
  EXPECT_EQ(words(cs), (Words{0x20048100, 0, 0x1000, 0x7f00, 0x2000, 0x20018106, 0x80000000,
                              0x200180c0, 0x182,  //
                              0x20048100, 0, 0x80001000, 0x7f00, 0x80002000, 0x20018106, 5,
                              0x200180c0, 0x182}));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[2].dword, 10u);
  EXPECT_EQ(s[2].add, 0x80000000u);
  cs.patch(s[3], 0x4000);  // a new destination moves the second chunk with it
  EXPECT_EQ(cs.data()[12], 0u);
  EXPECT_EQ(cs.data()[13], 0x80004000u);
}

TEST(NvEncoders, WrongQueueKindsAreClearErrors) {
  CommandStream cs;
  std::vector<PatchSite> s;
  NvKernel k;
  EXPECT_THROW(CopyEncoder().exec(cs, k, 0, {}, {}, s), InvalidInput);
  EXPECT_THROW(ComputeEncoder(QmdVersion::V03).copy(cs, 0, 0, 4, s), InvalidInput);
}

NvKernel kernel(QmdVersion v) {
  NvKernel k;
  k.name = std::string("k");  // not = "k": GCC 12 -O3 -Wrestrict false positive
  k.code_va = 0x12345600;
  k.code_bytes = 0x480;
  k.sm = 90;
  k.registers = 24;
  k.shared_bytes = 0x120;
  k.param_base = 0x210;
  k.cbuf0_bytes = 0x230;
  ComputeEncoder(v).prepare(k);
  return k;
}

// The launch: inline DMA of QMD + launch dimensions into the kernarg area, SEND_PCAS, WFI.
TEST(NvEncoders, LaunchWritesTheQmdInlineAndSchedulesIt) {
  const uint64_t args = 0x7f0000100000;
  NvKernel k = kernel(QmdVersion::V03);
  CommandStream cs;
  std::vector<PatchSite> s;
  ComputeEncoder(QmdVersion::V03).exec(cs, k, args, {40, 2, 3}, {64, 2, 1}, s);
  const uint32_t* w = cs.data();
  const uint32_t n = 64 + 6;  // V03 QMD dwords + blockDim/gridDim
  ASSERT_EQ(cs.size(), 15u + n);
  // OFFSET_OUT_UPPER (0x188) x2: 0x20022062; LINE_LENGTH_IN (0x180) x2: 0x20022060;
  // LAUNCH_DMA (0x1b0): 0x2001206c with DST pitch (bit 0) and COMPLETION_TYPE FLUSH_ONLY (1 in
  // bits 5:4), SYSMEMBAR_DISABLE (bit 6) clear; LOAD_INLINE_DATA (0x1b4) non-incrementing
  // (sec_op 3) x70: 0x6046206d.
  EXPECT_EQ(Words(w, w + 9), (Words{0x20022062, 0x7f00, 0x100000, 0x20022060, n * 4, 1,
                                    0x2001206c, 0x11, 0x6046206d}));
  const uint32_t* q = w + 9;
  EXPECT_EQ(q[12], 40u);                       // CTA_RASTER_WIDTH, bits 415:384
  EXPECT_EQ(q[13], 2u);                        // CTA_RASTER_HEIGHT, bits 431:416
  EXPECT_EQ(q[14], 3u);                        // CTA_RASTER_DEPTH, bits 463:448
  EXPECT_EQ(q[18] >> 16, 64u);                 // CTA_THREAD_DIMENSION0, bits 607:592
  EXPECT_EQ(q[19], 2u | 1u << 16);             // DIMENSION1 623:608, DIMENSION2 639:624
  EXPECT_EQ(q[32], 0x100100u);                 // constant buffer 0 at args + 256 (the QMD)
  EXPECT_EQ(q[33] & 0x1ffff, 0x7f00u);         // its upper bits 1072:1056
  EXPECT_EQ(q[33] >> 19, 0x230u >> 4);         // CONSTANT_BUFFER_SIZE_SHIFTED4 1087:1075
  EXPECT_EQ(q[48], 0x12345600u);               // PROGRAM_ADDRESS_LOWER 1567:1536
  EXPECT_EQ((q[18] >> 4) & 0xf, 3u);           // QMD_MAJOR_VERSION 583:580
  EXPECT_EQ(q[17] & 0x3ffff, 0x400u);          // SHARED_MEMORY_SIZE: at least 1 KiB
  EXPECT_EQ((q[20] >> 8) & 0x1ff, 24u);        // REGISTER_COUNT_V 656:648
  EXPECT_EQ(Words(q + 64, q + 70), (Words{64, 2, 1, 40, 2, 3}));  // blockDim, gridDim
  const uint32_t* t = q + n;
  // SEND_PCAS_A (0x2b4) = args >> 8; SEND_SIGNALING_PCAS2_B (0x2c0) = 9; host WFI (0x078).
  EXPECT_EQ(Words(t, t + 6),
            (Words{0x200120ad, uint32_t(args >> 8), 0x200120b0, 9, 0x2001001e, 0}));
}

// HCQ_NV_QMD_BY_ADDRESS: the QMD and the launch dimensions go to the kernarg area from the
// CPU, bit for bit what the inline launch's LOAD_INLINE_DATA carries; the push buffer holds
// only the launch by address. clcbc0.h (Hopper): SEND_PCAS_A 0x02b4, QMD_ADDRESS_SHIFTED8
// 31:0; SEND_SIGNALING_PCAS2_B 0x02c0, PCAS_ACTION 3:0; incrementing headers of one method on
// subchannel 1: 0x20010000 | 1 << 13 | method >> 2.
TEST(NvEncoders, LaunchByAddressWritesTheQmdToMemoryAndSendsItsAddress) {
  const uint64_t args = 0x7f0000100000;
  for (QmdVersion v : {QmdVersion::V03, QmdVersion::V04, QmdVersion::V05}) {
    SCOPED_TRACE(int(v));
    NvKernel k = kernel(v);
    CommandStream inline_cs;
    std::vector<PatchSite> inline_sites;
    ComputeEncoder(v).exec(inline_cs, k, args, {40, 2, 3}, {64, 2, 1}, inline_sites);
    const uint32_t data_dw = qmd_bytes(v) / 4 + 6;  // what LOAD_INLINE_DATA carries
    const uint32_t* inline_data = inline_cs.data() + 9;

    Words memory(data_dw + 16, 0xdeadbeef);
    std::vector<std::pair<uint64_t, uint64_t>> asked;
    ComputeEncoder enc(v, [&](uint64_t va, uint64_t bytes) -> void* {
      asked.push_back({va, bytes});
      return va == args ? memory.data() : nullptr;
    });
    CommandStream cs;
    std::vector<PatchSite> s;
    enc.exec(cs, k, args, {40, 2, 3}, {64, 2, 1}, s);
    EXPECT_EQ(words(cs), (Words{0x200120ad, uint32_t(args >> 8), 0x200120b0, 9, 0x2001001e, 0}));
    EXPECT_TRUE(s.empty());  // the values are in memory: nothing in the stream to patch
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0], (std::pair<uint64_t, uint64_t>{args, data_dw * 4}));
    EXPECT_EQ(Words(memory.begin(), memory.begin() + data_dw), Words(inline_data, inline_data + data_dw));
    EXPECT_EQ(memory[data_dw], 0xdeadbeefu);  // nothing past the dimensions
    EXPECT_EQ(Words(memory.begin() + data_dw - 6, memory.begin() + data_dw),
              (Words{64, 2, 1, 40, 2, 3}));  // blockDim, gridDim at constant bank 0's start

    // A second launch in the same stream does not chain (V03 would inline): two launches.
    enc.exec(cs, k, args, {1, 1, 1}, {32, 1, 1}, s);
    EXPECT_EQ(cs.size(), 12u);
    // A kernarg area the CPU cannot write is an error naming it.
    try {
      enc.exec(cs, k, 0x1000, {1, 1, 1}, {1, 1, 1}, s);
      ADD_FAILURE() << "expected an error";
    } catch (const InvalidInput& e) {
      EXPECT_STREQ(e.what(), "kernel 'k': kernarg area 0x1000 is not memory the CPU writes (a "
                             "launch by address, HCQ_NV_QMD_BY_ADDRESS, writes its QMD there)");
    }
    EXPECT_EQ(cs.size(), 12u);
  }
}

TEST(NvEncoders, LaunchPatchSitesRewriteOnlyTheirFields) {
  for (QmdVersion v : {QmdVersion::V03, QmdVersion::V04, QmdVersion::V05}) {
    SCOPED_TRACE(int(v));
    NvKernel k = kernel(v);
    CommandStream cs;
    std::vector<PatchSite> s;
    const uint64_t args = 0x7f0000100000;
    ComputeEncoder(v).exec(cs, k, args, {40, 2, 3}, {64, 2, 1}, s);
    const Words before = words(cs);
    for (auto& site : s)
      if (site.role == PatchRole::GridY) cs.patch(site, 9);
    for (auto& site : s)
      if (site.role == PatchRole::KernargAddress) cs.patch(site, 0x7e0000200000);
    const uint32_t* q = cs.data() + 9;
    const uint32_t qd = qmd_bytes(v) / 4;
    uint64_t cbuf = 0;
    uint32_t grid_y = 0, block_x = 0, block_z = 0;
    switch (v) {
      case QmdVersion::V03:
        grid_y = QMD_V03_CTA_RASTER_HEIGHT.get(q);
        block_x = QMD_V03_CTA_THREAD_DIMENSION0.get(q);
        block_z = QMD_V03_CTA_THREAD_DIMENSION2.get(q);
        cbuf = uint64_t(QMD_V03_CONSTANT_BUFFER_ADDR_UPPER0.get(q)) << 32 |
               QMD_V03_CONSTANT_BUFFER_ADDR_LOWER0.get(q);
        EXPECT_EQ(QMD_V03_CONSTANT_BUFFER_SIZE_SHIFTED4_0.get(q), 0x23u);  // kept
        break;
      case QmdVersion::V04:
        grid_y = QMD_V04_GRID_HEIGHT.get(q);
        block_x = QMD_V04_CTA_THREAD_DIMENSION0.get(q);
        block_z = QMD_V04_CTA_THREAD_DIMENSION2.get(q);
        cbuf = (uint64_t(QMD_V04_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0.get(q)) << 32 |
                QMD_V04_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0.get(q)) << 6;
        EXPECT_EQ(QMD_V04_CONSTANT_BUFFER_SIZE_SHIFTED4_0.get(q), 0x23u);
        EXPECT_EQ(QMD_V04_QMD_MAJOR_VERSION.get(q), 4u);
        break;
      case QmdVersion::V05:
        grid_y = QMD_V05_GRID_HEIGHT.get(q);
        block_x = QMD_V05_CTA_THREAD_DIMENSION0.get(q);
        block_z = QMD_V05_CTA_THREAD_DIMENSION2.get(q);
        cbuf = (uint64_t(QMD_V05_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0.get(q)) << 32 |
                QMD_V05_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0.get(q)) << 6;
        EXPECT_EQ(QMD_V05_CONSTANT_BUFFER_SIZE_SHIFTED4_0.get(q), 0x23u);
        EXPECT_EQ(QMD_V05_PROGRAM_ADDRESS_LOWER_SHIFTED4.get(q), 0x12345600u >> 4);
        break;
    }
    EXPECT_EQ(grid_y, 9u);
    EXPECT_EQ(block_x, 64u);  // the neighbours of patched fields are intact
    EXPECT_EQ(block_z, 1u);
    EXPECT_EQ(cbuf, 0x7e0000200000u + qmd_bytes(v));
    EXPECT_EQ(q[qd + 4], 9u);  // gridDim.y in constant bank 0
    EXPECT_EQ(cs.data()[1], 0x7e00u);  // the inline DMA's destination
    EXPECT_EQ(cs.data()[2], 0x200000u);
    EXPECT_EQ(cs.data()[9 + qd + 6 + 1], uint32_t(0x7e0000200000 >> 8));  // SEND_PCAS_A
    size_t changed = 0;
    for (size_t i = 0; i < before.size(); i++) changed += before[i] != cs.data()[i];
    EXPECT_LE(changed, 8u);  // grid y twice, address: DMA hi/lo, cbuf lo/hi, PCAS
  }
}

TEST(NvEncoders, LaunchRejectsUnpreparedKernelsAndMisalignedArguments) {
  NvKernel k = kernel(QmdVersion::V03);
  CommandStream cs;
  std::vector<PatchSite> s;
  try {
    ComputeEncoder(QmdVersion::V05).exec(cs, k, 0x1000, {1, 1, 1}, {1, 1, 1}, s);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "kernel 'k' was not prepared for QMD V05 (loaded on another device?)");
  }
  try {
    ComputeEncoder(QmdVersion::V03).exec(cs, k, 0x1040, {1, 1, 1}, {1, 1, 1}, s);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "kernel 'k': kernarg area 0x1040 is not 256-byte aligned (the QMD is "
                           "sent as address >> 8)");
  }
}

size_t count_word(const CommandStream& cs, uint32_t w) {
  return size_t(std::count(cs.data(), cs.data() + cs.size(), w));
}

// Back-to-back V03 launches chain: the first QMD schedules the second when it completes, one
// SEND_PCAS starts the chain, and the patch sites follow the words that moved.
TEST(NvEncoders, BackToBackLaunchesChainThroughDependentQmds) {
  NvKernel k = kernel(QmdVersion::V03);
  ComputeEncoder enc(QmdVersion::V03);
  CommandStream cs;
  std::vector<PatchSite> s;
  const uint64_t a = 0x7f0000100000, b = 0x7f0000200000;
  enc.exec(cs, k, a, {1, 1, 1}, {64, 1, 1}, s);
  const size_t first_sites = s.size();
  enc.memory_barrier(cs);
  enc.exec(cs, k, b, {2, 1, 1}, {64, 1, 1}, s);
  const uint32_t pcas = inc(kSubCompute, COMPUTE_SEND_PCAS_A, 1);
  EXPECT_EQ(count_word(cs, pcas), 1u);
  EXPECT_EQ(count_word(cs, 0x200125a6), 0u);  // the barrier went: the QMD invalidates
  const uint32_t* w = cs.data();
  const size_t n = cs.size();
  // Ends with the first launch's SEND_PCAS (its QMD) and the WFI.
  EXPECT_EQ(std::vector<uint32_t>(w + n - 6, w + n),
            (std::vector<uint32_t>{pcas, uint32_t(a >> 8), 0x200120b0, 9, 0x2001001e, 0}));
  const uint32_t* qa = w + 9;  // the first QMD
  EXPECT_EQ(QMD_V03_DEPENDENT_QMD0_POINTER.get(qa), uint32_t(b >> 8));
  EXPECT_EQ(QMD_V03_DEPENDENT_QMD0_ENABLE.get(qa), 1u);
  EXPECT_EQ(QMD_V03_DEPENDENT_QMD0_ACTION.get(qa), 1u);
  // Moving either launch's arguments rewrites every place that names them.
  std::vector<PatchSite> a_sites(s.begin(), s.begin() + long(first_sites));
  std::vector<PatchSite> b_sites(s.begin() + long(first_sites), s.end());
  for (auto& site : b_sites)
    if (site.role == PatchRole::KernargAddress) cs.patch(site, 0x7e0000300000);
  EXPECT_EQ(QMD_V03_DEPENDENT_QMD0_POINTER.get(cs.data() + 9), uint32_t(0x7e0000300000 >> 8));
  for (auto& site : a_sites)
    if (site.role == PatchRole::KernargAddress) cs.patch(site, 0x7e0000400000);
  EXPECT_EQ(cs.data()[n - 5], uint32_t(0x7e0000400000 >> 8));
  // V05 launches are not chained (no dependent QMD fields described for it).
  NvKernel k5 = kernel(QmdVersion::V05);
  CommandStream c5;
  std::vector<PatchSite> s5;
  ComputeEncoder(QmdVersion::V05).exec(c5, k5, a, {1, 1, 1}, {64, 1, 1}, s5);
  ComputeEncoder(QmdVersion::V05).exec(c5, k5, b, {1, 1, 1}, {64, 1, 1}, s5);
  EXPECT_EQ(count_word(c5, pcas), 2u);
}

TEST(NvEncoders, TheDecoderShowsTheInlineQmdByField) {
  for (QmdVersion v : {QmdVersion::V03, QmdVersion::V04, QmdVersion::V05}) {
    NvKernel k = kernel(v);
    CommandStream cs;
    std::vector<PatchSite> s;
    ComputeEncoder(v).exec(cs, k, 0x7f0000100000, {40, 2, 3}, {64, 2, 1}, s);
    auto ps = decode_push({cs.data(), cs.size()}, Gen::Hopper);
    std::map<std::string, uint64_t> f;
    for (auto& p : ps)
      for (auto& [name, value] : p.fields) f[name] = value;
    EXPECT_EQ(f["QMD.VERSION"], uint64_t(v));
    const char* width = v == QmdVersion::V03 ? "QMD.CTA_RASTER_WIDTH" : "QMD.GRID_WIDTH";
    EXPECT_EQ(f[width], 40u);
    EXPECT_EQ(f["QMD.CTA_THREAD_DIMENSION0"], 64u);
    for (auto& p : ps) EXPECT_TRUE(p.ok) << p.problem;
  }
}

std::string prepare_error(QmdVersion v, void (*change)(NvKernel&)) {
  NvKernel k = kernel(v);
  change(k);
  try {
    ComputeEncoder(v).prepare(k);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

// What a cubin brings enters at load: each value is checked against its QMD field there, at
// the field's limit and one past it.
TEST(NvEncoders, ProgramValuesThatDoNotFitTheirQmdFieldsAreRefusedAtLoad) {
  using V = QmdVersion;
  // REGISTER_COUNT_V (V03) and REGISTER_COUNT (V04, V05): 9 bits.
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.registers = 511; }), "");
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.registers = 512; }),
            "kernel 'k': QMD V03.REGISTER_COUNT_V: 512 does not fit in 9 bits (at most 511)");
  EXPECT_EQ(prepare_error(V::V05, [](NvKernel& k) { k.registers = 512; }),
            "kernel 'k': QMD V05.REGISTER_COUNT: 512 does not fit in 9 bits (at most 511)");
  // BARRIER_COUNT: 5 bits (a cubin's EIATTR_NUM_BARRIERS carries 8).
  EXPECT_EQ(prepare_error(V::V04, [](NvKernel& k) { k.barriers = 31; }), "");
  EXPECT_EQ(prepare_error(V::V04, [](NvKernel& k) { k.barriers = 32; }),
            "kernel 'k': QMD V04.BARRIER_COUNT: 32 does not fit in 5 bits (at most 31)");
  // SHARED_MEMORY_SIZE: 18 bits of bytes, rounded up to 256; V05 counts 128-byte units in 11.
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.shared_bytes = 0x3ff00; }), "");
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.shared_bytes = 0x3ff01; }),
            "kernel 'k': QMD V03.SHARED_MEMORY_SIZE: 262144 does not fit in 18 bits (at most "
            "262143)");
  EXPECT_EQ(prepare_error(V::V04, [](NvKernel& k) { k.shared_bytes = 0x3ff01; }),
            "kernel 'k': QMD V04.SHARED_MEMORY_SIZE: 262144 does not fit in 18 bits (at most "
            "262143)");
  EXPECT_EQ(prepare_error(V::V05, [](NvKernel& k) { k.shared_bytes = 2047 * 128; }), "");
  EXPECT_EQ(prepare_error(V::V05, [](NvKernel& k) { k.shared_bytes = 2047 * 128 + 1; }),
            "kernel 'k': QMD V05.SHARED_MEMORY_SIZE_SHIFTED7: 2048 does not fit in 11 bits (at "
            "most 2047)");
  // CONSTANT_BUFFER_SIZE_SHIFTED4_0: 13 bits of 16-byte units.
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.cbuf0_bytes = 8191 * 16; }), "");
  EXPECT_EQ(prepare_error(V::V03, [](NvKernel& k) { k.cbuf0_bytes = 8191 * 16 + 1; }),
            "kernel 'k': QMD V03.CONSTANT_BUFFER_SIZE_SHIFTED4_0: 8192 does not fit in 13 bits "
            "(at most 8191)");
}

std::string exec_error(QmdVersion v, Dim3 grid, Dim3 block) {
  NvKernel k = kernel(v);
  CommandStream cs;
  std::vector<PatchSite> s;
  try {
    ComputeEncoder(v).exec(cs, k, 0x7f0000100000, grid, block, s);
  } catch (const InvalidInput& e) {
    EXPECT_EQ(cs.size(), 0u);  // nothing recorded
    return e.what();
  }
  return "";
}

// Grid and CTA sizes enter at recording: the QMD fields narrower than 32 bits refuse what they
// cannot hold instead of keeping its low bits.
TEST(NvEncoders, GridAndBlockSizesAreCheckedAgainstTheirQmdFields) {
  using V = QmdVersion;
  EXPECT_EQ(exec_error(V::V03, {0xffffffff, 65535, 65535}, {1, 1, 1}), "");
  EXPECT_EQ(exec_error(V::V03, {1, 65536, 1}, {1, 1, 1}),
            "kernel 'k': QMD V03.CTA_RASTER_HEIGHT: 65536 does not fit in 16 bits (at most 65535)");
  EXPECT_EQ(exec_error(V::V04, {1, 1, 65536}, {1, 1, 1}),
            "kernel 'k': QMD V04.GRID_DEPTH: 65536 does not fit in 16 bits (at most 65535)");
  EXPECT_EQ(exec_error(V::V03, {1, 1, 1}, {65535, 65535, 65535}), "");
  EXPECT_EQ(exec_error(V::V03, {1, 1, 1}, {1, 65536, 1}),
            "kernel 'k': QMD V03.CTA_THREAD_DIMENSION1: 65536 does not fit in 16 bits (at most "
            "65535)");
  EXPECT_EQ(exec_error(V::V04, {1, 1, 1}, {65536, 1, 1}),
            "kernel 'k': QMD V04.CTA_THREAD_DIMENSION0: 65536 does not fit in 16 bits (at most "
            "65535)");
  // V05's CTA_THREAD_DIMENSION2 is 8 bits (clcec0qmd.h 1127:1120).
  EXPECT_EQ(exec_error(V::V05, {1, 1, 1}, {1, 1, 255}), "");
  EXPECT_EQ(exec_error(V::V05, {1, 1, 1}, {1, 1, 256}),
            "kernel 'k': QMD V05.CTA_THREAD_DIMENSION2: 256 does not fit in 8 bits (at most 255)");
}

TEST(NvEncoders, ChannelSetupBindsTheClassesAndWindows) {
  // SET_OBJECT on subchannel 1 (0x20012000) and 4 (0x20018000); the windows' A methods take
  // the upper address bits first.
  EXPECT_EQ(ComputeEncoder::setup(0xcbc0, 0xfe000000, 0xff000000),
            (Words{0x20012000, 0xcbc0, 0x200220a8, 0, 0xfe000000, 0x200221ec, 0, 0xff000000}));
  EXPECT_EQ(CopyEncoder::setup(0xc8b5), (Words{0x20018000, 0xc8b5}));
}

}  // namespace
}  // namespace hcq::nv
