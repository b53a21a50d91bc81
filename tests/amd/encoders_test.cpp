// Byte-exact PM4 and SDMA encodings. The expected dwords are worked out by hand from the
// public packet definitions (Linux amdgpu nvd.h/soc15d.h, sdma_v6_0_0_pkt_open.h,
// vega10_sdma_pkt_open.h), not from hcq's own tables.
#include "amd/encoders.hpp"

#include <gtest/gtest.h>

#include "amd/code_object.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "common/error_of.hpp"

namespace hcq::amd {
namespace {

using Words = std::vector<uint32_t>;
const InterruptTarget kIrq{0x7f0000001008, 7};

Words words(const CommandStream& cs) { return Words(cs.data(), cs.data() + cs.size()); }

TEST(Pm4Encoder, WaitIsWaitRegMem64GreaterEqualOnGfx11AndGfx12) {
  for (Gen g : {Gen::Gfx11, Gen::Gfx12}) {
    Pm4Encoder e(g, kIrq);
    CommandStream cs;
    std::vector<PatchSite> sites;
    e.wait(cs, 0x00007f0012345678, 0x100000002, sites);
    EXPECT_EQ(words(cs), (Words{0xC0079300, 0x15, 0x12345678, 0x7f00, 0x2, 0x1, 0xffffffff,
                                0xffffffff, 0x4}));
    cs.patch(sites[1], 0xAABBCCDD11223344);
    EXPECT_EQ(cs.data()[4], 0x11223344u);
    EXPECT_EQ(cs.data()[5], 0xAABBCCDDu);
  }
}

// gfx9: two WAIT_REG_MEMs (Linux soc15d.h: PACKET3(0x3C, 5) = 0xC0053C00; FUNCTION 5 (>=) |
// MEM_SPACE 1 << 4 = 0x15; address, reference, mask, poll interval 4 as gfx_v9_0.c
// emit_pipeline_sync), on the high word (address + 4) and then the low word.
TEST(Pm4Encoder, WaitOnGfx9IsTwo32BitWaitRegMems) {
  Pm4Encoder e(Gen::Gfx9, kIrq);
  CommandStream cs;
  std::vector<PatchSite> sites;
  e.wait(cs, 0x00007f0012345678, 0x100000002, sites);
  EXPECT_EQ(words(cs), (Words{0xC0053C00, 0x15, 0x1234567C, 0x7f00, 0x1, 0xffffffff, 0x4,  //
                              0xC0053C00, 0x15, 0x12345678, 0x7f00, 0x2, 0xffffffff, 0x4}));
  // Patching the value and the address moves both halves.
  for (auto& site : sites)
    cs.patch(site, site.role == PatchRole::WaitValue ? 0xAABBCCDD11223344 : 0x7f0000001000);
  EXPECT_EQ(words(cs), (Words{0xC0053C00, 0x15, 0x00001004, 0x7f00, 0xAABBCCDD, 0xffffffff, 0x4,
                              0xC0053C00, 0x15, 0x00001000, 0x7f00, 0x11223344, 0xffffffff, 0x4}));
}

// gfx10.3 waits as gfx9 does (pm4.def: WAIT_REG_MEM64 is not described there); gfx11 and
// gfx12 with one WAIT_REG_MEM64 (PACKET3(0x93, 8) = 0xC0079300).
TEST(Pm4Encoder, WaitOnGfx10IsTwo32BitWaitRegMemsAndOneWaitRegMem64From11On) {
  auto wait_words = [](Gen g) {
    Pm4Encoder e(g, kIrq);
    CommandStream cs;
    std::vector<PatchSite> sites;
    e.wait(cs, 0x00007f0012345678, 0x100000002, sites);
    return words(cs);
  };
  EXPECT_EQ(wait_words(Gen::Gfx10), wait_words(Gen::Gfx9));
  for (Gen g : {Gen::Gfx11, Gen::Gfx12})
    EXPECT_EQ(wait_words(g), (Words{0xC0079300, 0x15, 0x12345678, 0x7f00, 2, 1, 0xffffffff,
                                    0xffffffff, 0x4}))
        << to_string(g);
  EXPECT_FALSE(pm4::exists(pm4::WAIT_REG_MEM64, Gen::Gfx10));
  EXPECT_TRUE(pm4::exists(pm4::WAIT_REG_MEM64, Gen::Gfx11));
  EXPECT_TRUE(pm4::exists(pm4::WAIT_REG_MEM, Gen::Gfx10));
  EXPECT_TRUE(pm4::exists(pm4::NOP, Gen::Gfx10));  // no fields: on every generation
}

TEST(Pm4Encoder, SignalPerGenerationWithAndWithoutWake) {
  struct Case {
    Gen gen;
    uint32_t event_dw;
  };
  // EVENT_TYPE 0x14 | EVENT_INDEX 5 plus each generation's cache write-back bits.
  for (auto c : {Case{Gen::Gfx9, 0x00088514}, Case{Gen::Gfx10, 0x0070F514},
                 Case{Gen::Gfx11, 0x0070F514}, Case{Gen::Gfx12, 0x00600514}}) {
    Pm4Encoder e(c.gen, kIrq);
    CommandStream cs;
    std::vector<PatchSite> sites;
    e.signal(cs, 0x00007f0012345678, 0x100000002, false, sites);
    EXPECT_EQ(words(cs), (Words{0xC0064900, c.event_dw, 0x40000000, 0x12345678, 0x7f00, 2, 1, 0}))
        << to_string(c.gen);
    CommandStream w;
    e.signal(w, 0x1000, 5, true, sites);
    ASSERT_EQ(w.size(), 16u);
    // Second RELEASE_MEM: 32-bit event id to the mailbox, interrupt after write confirm.
    EXPECT_EQ(Words(w.data() + 8, w.data() + 16),
              (Words{0xC0064900, 0x514, 0x22000000, 0x00001008, 0x7f00, 7, 0, 7}));
  }
}

TEST(Pm4Encoder, TimestampWritesTheGpuClock) {
  Pm4Encoder e(Gen::Gfx11, kIrq);
  CommandStream cs;
  std::vector<PatchSite> sites;
  e.timestamp(cs, 0x2000, sites);  // the record; the clock lands at +8
  EXPECT_EQ(words(cs), (Words{0xC0064900, 0x514, 0x60000000, 0x2008, 0, 0, 0, 0}));
}

TEST(Pm4Encoder, MemoryBarrierIsAcquireMem) {
  CommandStream g9, g11;
  Pm4Encoder(Gen::Gfx9, kIrq).memory_barrier(g9);
  Pm4Encoder(Gen::Gfx11, kIrq).memory_barrier(g11);
  EXPECT_EQ(words(g9), (Words{0xC0055800, 0x28C40000, 0xffffffff, 0xff, 0, 0, 0xA}));
  EXPECT_EQ(words(g11), (Words{0xC0065800, 0, 0xffffffff, 0xff, 0, 0, 0xA, 0xC3F1}));
}

AmdKernel test_kernel() {
  AmdKernel k;
  k.name = std::string("k");  // not = "k": GCC 12 -O3 -Wrestrict false positive
  k.code_va = 0x7f0000042100;
  k.kd.compute_pgm_rsrc1 = 0x00AC0041;
  k.kd.compute_pgm_rsrc2 = 0x0000008C;  // USER_SGPR = 6, TGID_X_EN
  k.kd.compute_pgm_rsrc3 = 0x9;
  k.kd.kernel_code_properties = 0x9;  // private segment buffer (4 SGPRs) + kernarg pointer
  k.lds_bytes = 1000;                 // 2 blocks of 512 bytes
  k.wave_size = 32;
  return k;
}

TEST(Pm4Encoder, DispatchRegistersAndPacket) {
  AmdKernel k = test_kernel();
  ASSERT_EQ(k.kd.kernarg_sgpr(), 4);
  Pm4Encoder e(Gen::Gfx11, kIrq);
  CommandStream cs;
  std::vector<PatchSite> sites;
  e.exec(cs, k, 0x7f00AABB0000, {10, 2, 1}, {64, 1, 1}, sites);
  Words expect = {
      0xC0027600, 0x20C, 0x00000421, 0x7f,           // PGM_LO/HI = code >> 8
      0xC0027600, 0x212, 0x00AC0041, 0x0001008C,     // RSRC1, RSRC2 | LDS_SIZE 2 << 15
      0xC0017600, 0x228, 0x9,                        // RSRC3 (gfx10+ address)
      0xC0017600, 0x218, 0,                          // TMPRING_SIZE
      0xC0037600, 0x21B, 0, 0, 0,                    // RESTART_X/Y/Z
      0xC0067600, 0x240, 0, 0, 0, 0, 0xAABB0000, 0x7f00,  // USER_DATA: s[4:5] = kernargs
      0xC0017600, 0x215, 0,                          // RESOURCE_LIMITS
      0xC0067600, 0x204, 0, 0, 0, 64, 1, 1,          // START_X..Z, NUM_THREAD_X..Z
      0xC0031500, 10, 2, 1, 0x8005,                  // DISPATCH_DIRECT, wave32 initiator
      0xC0004600, 0x407,                             // EVENT_WRITE CS_PARTIAL_FLUSH
  };
  EXPECT_EQ(words(cs), expect);
  // gfx9 differs in the RSRC3 address and has no CS_W32_EN.
  CommandStream g9;
  Pm4Encoder(Gen::Gfx9, kIrq).exec(g9, k, 0x7f00AABB0000, {10, 2, 1}, {64, 1, 1}, sites);
  EXPECT_EQ(g9.data()[9], 0x22Du);
  EXPECT_EQ(g9.data()[g9.size() - 3], 0x5u);
}

// A kernel without user SGPRs (COMPUTE_PGM_RSRC2.USER_SGPR = 0) gets no USER_DATA packet: a
// SET_SH_REG carries at least one register (Linux gfx_v9_0.c and Mesa ac_cmdbuf.c only emit
// it with values), so an empty one is left out rather than sent with a count of -1.
TEST(Pm4Encoder, DispatchWithoutUserSgprsHasNoEmptySetShReg) {
  AmdKernel k = test_kernel();
  k.kd.compute_pgm_rsrc2 = 0x00000080;  // USER_SGPR = 0, TGID_X_EN
  k.kd.kernel_code_properties = 0;
  for (Gen g : {Gen::Gfx9, Gen::Gfx11, Gen::Gfx12}) {
    Pm4Encoder e(g, kIrq);
    CommandStream cs;
    std::vector<PatchSite> sites;
    e.exec(cs, k, 0x7f00AABB0000, {10, 2, 1}, {64, 1, 1}, sites);
    const uint32_t rsrc3 = g == Gen::Gfx9 ? 0x22D : 0x228;
    const uint32_t initiator = g == Gen::Gfx9 ? 0x5 : 0x8005;
    Words expect = {
        0xC0027600, 0x20C, 0x00000421, 0x7f,        // PGM_LO/HI
        0xC0027600, 0x212, 0x00AC0041, 0x00010080,  // RSRC1, RSRC2 | LDS_SIZE 2 << 15
        0xC0017600, rsrc3, 0x9,                     // RSRC3
        0xC0017600, 0x218, 0,                       // TMPRING_SIZE
        0xC0037600, 0x21B, 0, 0, 0,                 // RESTART_X/Y/Z
        0xC0017600, 0x215, 0,                       // RESOURCE_LIMITS (no USER_DATA before it)
        0xC0067600, 0x204, 0, 0, 0, 64, 1, 1,       // START_X..Z, NUM_THREAD_X..Z
        0xC0031500, 10, 2, 1, initiator,            // DISPATCH_DIRECT
        0xC0004600, 0x407,                          // EVENT_WRITE CS_PARTIAL_FLUSH
    };
    EXPECT_EQ(words(cs), expect) << to_string(g);
    EXPECT_EQ(sites.size(), 6u);  // block and grid; no kernarg address
  }
}

TEST(Pm4Encoder, IndirectBuffer) {
  uint32_t p[4];
  Pm4Encoder::indirect_buffer(p, 0x7f0000123400, 40);
  EXPECT_EQ(Words(p, p + 4), (Words{0xC0023F00, 0x00123400, 0x7f00, 0x00800028}));
}

// Values entering from outside are checked against their field where they enter, with the
// field's exact error (desc::checked), at each limit and one past it.
using testing_support::error_of;

TEST(Pm4Encoder, IndirectBufferSizeIsCheckedNeverTruncated) {
  uint32_t p[4];
  Pm4Encoder::indirect_buffer(p, 0x1000, 0xFFFFF);  // IB_SIZE is 20 bits
  EXPECT_EQ(p[3], 0x008FFFFFu);
  EXPECT_EQ(error_of([&] { Pm4Encoder::indirect_buffer(p, 0x1000, 0x100000); }),
            "INDIRECT_BUFFER.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
  uint32_t q[6];
  SdmaEncoder::indirect(q, 0x1000, 0xFFFF8);
  EXPECT_EQ(q[3], 0xFFFF8u);
  EXPECT_EQ(error_of([&] { SdmaEncoder::indirect(q, 0x1000, 0x100000); }),
            "INDIRECT.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
}

// The KFD queue refuses a command buffer past IB_SIZE before it writes anything (a batch of
// about 17,000 launches would need one): the field's error, not a truncated run.
TEST(Pm4Encoder, KfdQueueRefusesAnIndirectBufferPastTheLimit) {
  auto dev = Device::open("emu:gfx1100");
  EXPECT_EQ(error_of([&] { dev->hw_queue(QueueKind::Compute).submit_indirect(0x1000, 0x100000); }),
            "INDIRECT_BUFFER.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
  // SDMA runs whole 8-dword units: 0xFFFF8 is its longest; 0xFFFF9 rounds up past the field.
  EXPECT_EQ(error_of([&] { dev->hw_queue(QueueKind::Copy).submit_indirect(0x1000, 0xFFFF9); }),
            "INDIRECT.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
}

TEST(Pm4Encoder, ProgramValuesAreCheckedAtPrepare) {
  Pm4Encoder e(Gen::Gfx11, kIrq);
  AmdKernel k;
  k.code_va = 0x7f0000100000;
  k.lds_bytes = 511 * 512;  // LDS_SIZE is 9 bits of 512-byte blocks
  e.prepare(k);
  k.lds_bytes = 511 * 512 + 1;
  EXPECT_EQ(error_of([&] { e.prepare(k); }),
            "COMPUTE_PGM_RSRC2.LDS_SIZE: 512 does not fit in 9 bits (at most 511)");
  k.lds_bytes = 0;
  k.code_va = (uint64_t{1} << 48) - 256;  // COMPUTE_PGM_HI.DATA holds address bits 47:40
  e.prepare(k);
  k.code_va = uint64_t{1} << 48;
  EXPECT_EQ(error_of([&] { e.prepare(k); }),
            "COMPUTE_PGM_HI.DATA: 256 does not fit in 8 bits (at most 255)");
}

// NUM_THREAD_FULL is 16 bits up to gfx11; gfx12 keeps 13 for X and Y (15:13 are
// INTERLEAVE_BITS, Linux gc_12_0_0_sh_mask.h) and 16 for Z: a larger block must not spill into
// the interleave bits.
TEST(Pm4Encoder, BlockSizeIsCheckedAtRecording) {
  for (Gen g : {Gen::Gfx11, Gen::Gfx12}) {
    SCOPED_TRACE(to_string(g));
    Pm4Encoder e(g, kIrq);
    AmdKernel k;
    k.code_va = 0x7f0000100000;
    e.prepare(k);
    CommandStream cs;
    std::vector<PatchSite> sites;
    const uint32_t xy = g == Gen::Gfx12 ? 8191 : 65535;
    e.exec(cs, k, 0, {1, 1, 1}, {xy, xy, 65535}, sites);
    EXPECT_EQ(error_of([&] { e.exec(cs, k, 0, {1, 1, 1}, {1, 1, 65536}, sites); }),
              "COMPUTE_NUM_THREAD_Z.NUM_THREAD_FULL: 65536 does not fit in 16 bits (at most "
              "65535)");
    if (g != Gen::Gfx12) continue;
    EXPECT_EQ(error_of([&] { e.exec(cs, k, 0, {1, 1, 1}, {8192, 1, 1}, sites); }),
              "COMPUTE_NUM_THREAD_X.NUM_THREAD_FULL: 8192 does not fit in 13 bits (at most 8191)");
    EXPECT_EQ(error_of([&] { e.exec(cs, k, 0, {1, 1, 1}, {1, 0xE001, 1}, sites); }),
              "COMPUTE_NUM_THREAD_Y.NUM_THREAD_FULL: 57345 does not fit in 13 bits (at most "
              "8191)");
  }
}

TEST(SdmaEncoder, CopySplitsAtTheEngineLimit) {
  CommandStream cs;
  std::vector<PatchSite> sites;
  SdmaEncoder(Gen::Gfx11, kIrq).copy(cs, 0x2000000000, 0x1000000000, 0x40000005, sites);
  EXPECT_EQ(words(cs), (Words{1, 0x3FFFFEFF, 0, 0, 0x10, 0, 0x20,  //
                              1, 0x00000104, 0, 0x3FFFFF00, 0x10, 0x3FFFFF00, 0x20}));
  CommandStream g9;
  SdmaEncoder(Gen::Gfx9, kIrq).copy(g9, 0x2000, 0x1000, 0x400000, sites);
  EXPECT_EQ(words(g9), (Words{1, 0x3FFEFF, 0, 0x1000, 0, 0x2000, 0,  //
                              1, 0xFF, 0, 0x3FFF00 + 0x1000, 0, 0x3FFF00 + 0x2000, 0}));
  // Patching the addresses moves every chunk.
  cs.patch(sites[2], 0x3000000000);  // chunk 2 source of the gfx11 copy
  EXPECT_EQ(cs.data()[10], 0x3FFFFF00u);
  EXPECT_EQ(cs.data()[11], 0x30u);
}

TEST(SdmaEncoder, SignalIsTwoFencesLowFirstThenMailboxAndTrap) {
  CommandStream cs;
  std::vector<PatchSite> sites;
  SdmaEncoder(Gen::Gfx11, kIrq).signal(cs, 0x5000, 0x300000004, true, sites);
  EXPECT_EQ(words(cs), (Words{0x00030005, 0x5000, 0, 4,  //
                              0x00030005, 0x5004, 0, 3,  //
                              0x00030005, 0x00001008, 0x7f00, 7, 6, 7}));
  CommandStream g9;
  SdmaEncoder(Gen::Gfx9, kIrq).signal(g9, 0x5000, 1, false, sites);
  EXPECT_EQ(words(g9), (Words{5, 0x5000, 0, 1, 5, 0x5004, 0, 0}));
}

TEST(SdmaEncoder, WaitPollsHighThenLowOnlyWhileHighMatches) {
  CommandStream cs;
  std::vector<PatchSite> sites;
  SdmaEncoder(Gen::Gfx12, kIrq).wait(cs, 0x5000, 0x100000002, sites);
  EXPECT_EQ(words(cs), (Words{0xD0000008, 0x5004, 0, 1, 0xffffffff, 0x0FFF0004,  //
                              9, 0x5004, 0, 1, 6,                                //
                              0xD0000008, 0x5000, 0, 2, 0xffffffff, 0x0FFF0004}));
}

TEST(SdmaEncoder, TimestampAndIndirect) {
  CommandStream cs;
  std::vector<PatchSite> sites;
  SdmaEncoder(Gen::Gfx9, kIrq).timestamp(cs, 0x6000, sites);
  EXPECT_EQ(words(cs), (Words{0x20D, 0x6008, 0}));
  uint32_t p[6];
  SdmaEncoder::indirect(p, 0x7f0000001000, 16);
  EXPECT_EQ(Words(p, p + 6), (Words{4, 0x1000, 0x7f00, 16, 0, 0}));
}

}  // namespace
}  // namespace hcq::amd
