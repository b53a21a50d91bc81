// The decoder reads back what the encoders write, and survives anything else.
#include "amd/decode.hpp"

#include <gtest/gtest.h>

#include <random>

#include "amd/code_object.hpp"
#include "amd/encoders.hpp"

namespace hcq::amd {
namespace {

uint64_t field(const DecodedPacket& p, const std::string& name) {
  for (auto& [n, v] : p.fields)
    if (n == name) return v;
  ADD_FAILURE() << p.name << " has no field " << name;
  return 0;
}

std::vector<std::string> names(const std::vector<DecodedPacket>& ps) {
  std::vector<std::string> n;
  for (auto& p : ps) n.push_back(p.name);
  return n;
}

TEST(Decode, Pm4ReadsBackWhatTheEncoderWrote) {
  AmdKernel k;
  k.code_va = 0x7f0000042100;
  k.kd.compute_pgm_rsrc2 = 0x8C;
  k.kd.kernel_code_properties = 0x9;
  for (Gen g : {Gen::Gfx9, Gen::Gfx11, Gen::Gfx12}) {
    SCOPED_TRACE(to_string(g));
    Pm4Encoder e(g, {0x7f0000001008, 7});
    CommandStream cs;
    std::vector<PatchSite> s;
    e.wait(cs, 0x7f0000002000, 0x100000029, s);
    e.memory_barrier(cs);
    e.exec(cs, k, 0x7f00000a0000, {10, 2, 1}, {64, 1, 1}, s);
    e.signal(cs, 0x7f0000002000, 42, true, s);
    auto ps = decode_pm4({cs.data(), cs.size()}, g);
    // gfx9 waits with two 32-bit WAIT_REG_MEMs (high word, low word); check them and go on
    // with the packets every generation shares.
    if (g == Gen::Gfx9) {
      ASSERT_GE(ps.size(), 2u);
      EXPECT_EQ(ps[0].name, "WAIT_REG_MEM");
      EXPECT_EQ(field(ps[0], "ADDRESS_LO"), 0x2004u);
      EXPECT_EQ(field(ps[0], "REFERENCE"), 1u);
      EXPECT_EQ(ps[1].name, "WAIT_REG_MEM");
      EXPECT_EQ(field(ps[1], "REFERENCE"), 0x29u);
      ps[1].fields = {{"REFERENCE_LO", 0x29}, {"REFERENCE_HI", 1}};  // as one 64-bit wait
      ps[1].name = "WAIT_REG_MEM64";
      ps[1].offset = 0;
      ps[1].dwords += ps[0].dwords;
      ps.erase(ps.begin());
    }
    EXPECT_EQ(names(ps), (std::vector<std::string>{
                             "WAIT_REG_MEM64", "ACQUIRE_MEM", "SET_SH_REG", "SET_SH_REG",
                             "SET_SH_REG", "SET_SH_REG", "SET_SH_REG", "SET_SH_REG",
                             "SET_SH_REG", "SET_SH_REG", "DISPATCH_DIRECT", "EVENT_WRITE",
                             "RELEASE_MEM", "RELEASE_MEM"}));
    uint32_t total = 0;
    for (auto& p : ps) {
      EXPECT_TRUE(p.ok) << p.name << ": " << p.problem;
      EXPECT_EQ(p.offset, total);
      total += p.dwords;
    }
    EXPECT_EQ(total, cs.size());
    EXPECT_EQ(field(ps[0], "REFERENCE_LO"), 0x29u);
    EXPECT_EQ(field(ps[0], "REFERENCE_HI"), 1u);
    EXPECT_EQ(ps[2].registers[0], (std::pair<std::string, uint32_t>{"COMPUTE_PGM_LO", 0x421}));
    EXPECT_EQ(ps[4].registers[0].first, "COMPUTE_PGM_RSRC3");  // at its gen's address
    EXPECT_EQ(ps[7].registers[4], (std::pair<std::string, uint32_t>{"COMPUTE_USER_DATA_4", 0xa0000}));  // kernargs
    EXPECT_EQ(field(ps[10], "DIM_X"), 10u);
    EXPECT_EQ(field(ps[12], "DATA_LO"), 42u);
    EXPECT_EQ(field(ps[13], "INT_SEL"), 2u);
    EXPECT_EQ(field(ps[13], "INT_CTXID"), 7u);
  }
}

TEST(Decode, Pm4IndirectBufferAndProblems) {
  uint32_t ib[4];
  Pm4Encoder::indirect_buffer(ib, 0x7f0000050000, 64);
  auto ps = decode_pm4(ib, Gen::Gfx11);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].ib_address, 0x7f0000050000u);
  EXPECT_EQ(ps[0].ib_dwords, 64u);

  // Unknown opcode: skipped by its header's length, the next packet decodes.
  const uint32_t unknown[] = {0xC0019900, 1, 2, 0x80000000, 0xC0004600, 0x407};
  ps = decode_pm4(unknown, Gen::Gfx11);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"UNKNOWN", "TYPE2_FILLER", "EVENT_WRITE"}));
  EXPECT_EQ(ps[0].problem, "unknown opcode 0x99");
  EXPECT_EQ(ps[0].dwords, 3u);
  EXPECT_TRUE(ps[2].ok);

  // WAIT_REG_MEM64 is described for gfx11+ only (pm4.def): on gfx9 and gfx10.3 it is flagged.
  const uint32_t wait64[] = {0xC0079300, 0x15, 0x2000, 0x7f00, 1, 0, 0xffffffff, 0xffffffff, 4};
  ps = decode_pm4(wait64, Gen::Gfx9);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].name, "WAIT_REG_MEM64");
  EXPECT_FALSE(ps[0].ok);
  EXPECT_EQ(ps[0].problem, "not a gfx9 packet");
  EXPECT_EQ(decode_pm4(wait64, Gen::Gfx10)[0].problem, "not a gfx10 packet");
  EXPECT_TRUE(decode_pm4(wait64, Gen::Gfx11)[0].ok);

  // A packet running past the end, and a type-0 header.
  const uint32_t bad[] = {0x00001234, 0xC0064900, 0x514};
  ps = decode_pm4(bad, Gen::Gfx11);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].name, "INVALID");
  EXPECT_EQ(ps[0].problem, "type-0 header (hcq emits type-3 packets only)");
  EXPECT_EQ(ps[1].name, "RELEASE_MEM");
  EXPECT_EQ(ps[1].problem, "truncated: needs 7 body dwords, 1 left");
}

// Mesa's PKT3_NOP_PAD (sid.h: PKT3(PKT3_NOP, 0x3fff, 0), "header-only version") and Linux
// amdgpu's ring padding (gfx_v9_0.c .nop = PACKET3(PACKET3_NOP, 0x3FFF)) are one dword: the next
// dword is a new packet. The decoder used to read 0x4000 body dwords and report the rest of
// the stream as a truncated NOP.
TEST(Decode, HeaderOnlyNopIsOneDword) {
  const uint32_t words[] = {0xFFFF1000, 0xFFFF1000, 0xC0004600, 0x407};
  auto ps = decode_pm4(words, Gen::Gfx11);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"NOP", "NOP", "EVENT_WRITE"}));
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].dwords, 1u);
  EXPECT_TRUE(ps[0].ok) << ps[0].problem;
  EXPECT_EQ(ps[2].offset, 2u);
  EXPECT_TRUE(ps[2].ok);
  EXPECT_EQ(pm4::packet_dwords(pm4::kNopHeaderOnly), 1u);
  EXPECT_EQ(pm4::kNopHeaderOnly, 0xFFFF1000u);
  // A NOP of count 0x3FFE is an ordinary packet of 0x3FFF body dwords.
  EXPECT_EQ(pm4::packet_dwords(0xFFFE1000), 0x4000u);
}

// SET_SH_REG's values are printed by register, then each register's described fields that are
// not zero (regs.def), as REGISTER.FIELD.
TEST(Decode, SetShRegShowsRegisterFields) {
  const uint32_t words[] = {0xC0027600, 0x212, 0x00AC0041, 0x0001008C};
  auto ps = decode_pm4(words, Gen::Gfx11);
  ASSERT_EQ(ps.size(), 1u);
  using R = std::vector<std::pair<std::string, uint32_t>>;
  EXPECT_EQ(ps[0].registers, (R{{"COMPUTE_PGM_RSRC1", 0x00AC0041},
                                {"COMPUTE_PGM_RSRC1.VGPRS", 1},
                                {"COMPUTE_PGM_RSRC1.SGPRS", 1},
                                {"COMPUTE_PGM_RSRC1.FLOAT_MODE", 0xC0},
                                {"COMPUTE_PGM_RSRC1.DX10_CLAMP", 1},
                                {"COMPUTE_PGM_RSRC1.IEEE_MODE", 1},
                                {"COMPUTE_PGM_RSRC2", 0x0001008C},
                                {"COMPUTE_PGM_RSRC2.USER_SGPR", 6},
                                {"COMPUTE_PGM_RSRC2.TGID_X_EN", 1},
                                {"COMPUTE_PGM_RSRC2.LDS_SIZE", 2}}));
  // gfx12 names bits 21 and 23 WG_RR_EN and DISABLE_PERF.
  ps = decode_pm4(words, Gen::Gfx12);
  EXPECT_EQ(ps[0].registers[4].first, "COMPUTE_PGM_RSRC1.WG_RR_EN");
}

// gfx10.3's COMPUTE_PGM_RSRC3 holds SHARED_VGPR_CNT alone (bits 4-11 are gfx11's
// INST_PREF_SIZE and TRAP_ON_*), and its COMPUTE_TMPRING_SIZE.WAVESIZE is 13 bits (gfx11: 15).
TEST(Decode, Gfx10RegisterFieldsDifferFromGfx11) {
  const uint32_t words[] = {0xC0017600, 0x228, 0x00000FF3};  // SET_SH_REG COMPUTE_PGM_RSRC3
  using R = std::vector<std::pair<std::string, uint32_t>>;
  EXPECT_EQ(decode_pm4(words, Gen::Gfx10)[0].registers,
            (R{{"COMPUTE_PGM_RSRC3", 0xFF3}, {"COMPUTE_PGM_RSRC3.SHARED_VGPR_CNT", 3}}));
  EXPECT_EQ(decode_pm4(words, Gen::Gfx11)[0].registers,
            (R{{"COMPUTE_PGM_RSRC3", 0xFF3},
               {"COMPUTE_PGM_RSRC3.SHARED_VGPR_CNT", 3},
               {"COMPUTE_PGM_RSRC3.INST_PREF_SIZE", 0x3F},
               {"COMPUTE_PGM_RSRC3.TRAP_ON_START", 1},
               {"COMPUTE_PGM_RSRC3.TRAP_ON_END", 1}}));
  const uint32_t tmpring[] = {0xC0017600, 0x218, 0x07FFF001};  // WAVESIZE all ones (15 bits)
  EXPECT_EQ(decode_pm4(tmpring, Gen::Gfx10)[0].registers[2],
            (std::pair<std::string, uint32_t>{"COMPUTE_TMPRING_SIZE.WAVESIZE", 0x1FFF}));
  EXPECT_EQ(decode_pm4(tmpring, Gen::Gfx11)[0].registers[2],
            (std::pair<std::string, uint32_t>{"COMPUTE_TMPRING_SIZE.WAVESIZE", 0x7FFF}));
  Gen g{};
  ASSERT_TRUE(parse_gen("gfx1030", g));
  EXPECT_EQ(g, Gen::Gfx10);
  ASSERT_TRUE(parse_gen("gfx10", g));
  EXPECT_EQ(g, Gen::Gfx10);
}

// gfx9 ACQUIRE_MEM's CP_COHER_CNTL as Linux soc15d.h defines it: CB_ACTION_ENA bit 25,
// DB_ACTION_ENA bit 26, SH_KCACHE_WB_ACTION_ENA bit 30 (hcq once had the last at 26).
TEST(Decode, Gfx9AcquireMemCoherCntlBitsAreLinuxs) {
  const uint32_t words[] = {0xC0055800, (1u << 25), 0, 0, 0, 0, 0xA};
  EXPECT_EQ(field(decode_pm4(words, Gen::Gfx9)[0], "COHER_CB_ACTION_ENA"), 1u);
  const uint32_t db[] = {0xC0055800, (1u << 26), 0, 0, 0, 0, 0xA};
  auto p = decode_pm4(db, Gen::Gfx9)[0];
  EXPECT_EQ(field(p, "COHER_DB_ACTION_ENA"), 1u);
  EXPECT_EQ(field(p, "COHER_SH_KCACHE_WB_ACTION_ENA"), 0u);
  const uint32_t wb[] = {0xC0055800, (1u << 30), 0, 0, 0, 0, 0xA};
  p = decode_pm4(wb, Gen::Gfx9)[0];
  EXPECT_EQ(field(p, "COHER_SH_KCACHE_WB_ACTION_ENA"), 1u);
  EXPECT_EQ(field(p, "COHER_DB_ACTION_ENA"), 0u);
  EXPECT_EQ(field(p, "ENGINE"), 0u);
}

// gfx12's COMPUTE_NUM_THREAD_X/Y keep NUM_THREAD_FULL in bits 12:0 and INTERLEAVE_BITS in
// 15:13 (Linux gc_12_0_0_sh_mask.h); gfx11's is bits 15:0. COMPUTE_PGM_RSRC1 has no field at
// bits 22 and 25 on gfx11 (gc_11_0_0_sh_mask.h); gfx12 names them DEBUG_MODE and CDBG_USER.
TEST(Decode, Gfx12NumThreadAndGfx11PgmRsrc1FieldsAreLinuxs) {
  const uint32_t threads[] = {0xC0027600, 0x207, 0x0000E040, 0x0000A041};
  using R = std::vector<std::pair<std::string, uint32_t>>;
  EXPECT_EQ(decode_pm4(threads, Gen::Gfx12)[0].registers,
            (R{{"COMPUTE_NUM_THREAD_X", 0xE040},
               {"COMPUTE_NUM_THREAD_X.NUM_THREAD_FULL", 0x40},
               {"COMPUTE_NUM_THREAD_X.INTERLEAVE_BITS_X", 7},
               {"COMPUTE_NUM_THREAD_Y", 0xA041},
               {"COMPUTE_NUM_THREAD_Y.NUM_THREAD_FULL", 0x41},
               {"COMPUTE_NUM_THREAD_Y.INTERLEAVE_BITS_Y", 5}}));
  EXPECT_EQ(decode_pm4(threads, Gen::Gfx11)[0].registers,
            (R{{"COMPUTE_NUM_THREAD_X", 0xE040},
               {"COMPUTE_NUM_THREAD_X.NUM_THREAD_FULL", 0xE040},
               {"COMPUTE_NUM_THREAD_Y", 0xA041},
               {"COMPUTE_NUM_THREAD_Y.NUM_THREAD_FULL", 0xA041}}));
  const uint32_t rsrc1[] = {0xC0017600, 0x212, (1u << 22) | (1u << 25)};
  EXPECT_EQ(decode_pm4(rsrc1, Gen::Gfx11)[0].registers, (R{{"COMPUTE_PGM_RSRC1", 0x02400000}}));
  EXPECT_EQ(decode_pm4(rsrc1, Gen::Gfx12)[0].registers,
            (R{{"COMPUTE_PGM_RSRC1", 0x02400000},
               {"COMPUTE_PGM_RSRC1.DEBUG_MODE", 1},
               {"COMPUTE_PGM_RSRC1.CDBG_USER", 1}}));
}

TEST(Decode, SdmaReadsBackWhatTheEncoderWrote) {
  SdmaEncoder e(Gen::Gfx9, {0x7f0000001008, 7});
  CommandStream cs;
  std::vector<PatchSite> s;
  e.wait(cs, 0x5000, 0x100000002, s);
  e.copy(cs, 0x2000, 0x1000, 0x500000, s);  // two packets on gfx9
  e.timestamp(cs, 0x3000, s);
  e.signal(cs, 0x5000, 3, true, s);
  const uint32_t write[] = {2, 0x6000, 0, 1, 0xAA, 0xBB, 0};  // WRITE_LINEAR of 2 dwords + NOP
  for (uint32_t w : write) *cs.grow(1) = w;
  auto ps = decode_sdma({cs.data(), cs.size()}, Gen::Gfx9);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"POLL_REGMEM", "COND_EXE", "POLL_REGMEM",
                                                 "COPY_LINEAR", "COPY_LINEAR", "TIMESTAMP",
                                                 "FENCE", "FENCE", "FENCE", "TRAP",
                                                 "WRITE_LINEAR", "NOP"}));
  for (auto& p : ps) EXPECT_TRUE(p.ok) << p.name << ": " << p.problem;
  EXPECT_EQ(field(ps[3], "COUNT"), 0x3FFEFFu);
  EXPECT_EQ(field(ps[4], "SRC_ADDR_LO"), 0x1000u + 0x3FFF00u);
  EXPECT_EQ(ps[10].dwords, 6u);
  const uint32_t unknown[] = {0x000000FF, 5, 0x5000, 0, 1};
  ps = decode_sdma(unknown, Gen::Gfx11);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"UNKNOWN", "FENCE"}));
  EXPECT_EQ(ps[0].problem, "unknown op 0xff sub-op 0x0 (skipped one dword)");
}

// Random dwords: every decode ends, accounts for every dword and never reads past the input
// (checked under ASan in CI).
TEST(Decode, SurvivesRandomInput) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; i++) {
    std::vector<uint32_t> w(rng() % 64);
    for (auto& x : w) {
      x = rng();
      if (rng() % 2) x = (x & 0xC0FFFF00) | 0xC0000000;  // plausible PM4 headers
      if (rng() % 4 == 0) x &= 0xFF;                     // plausible SDMA headers
    }
    for (Gen g : {Gen::Gfx9, Gen::Gfx11, Gen::Gfx12})
      for (bool copy : {false, true}) {
        auto ps = copy ? decode_sdma(w, g) : decode_pm4(w, g);
        uint32_t total = 0;
        for (auto& p : ps) {
          ASSERT_EQ(p.offset, total);
          ASSERT_GE(p.dwords, 1u);
          total += p.dwords;
        }
        ASSERT_EQ(total, w.size());
      }
  }
}

}  // namespace
}  // namespace hcq::amd
