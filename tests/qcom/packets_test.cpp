// Adreno CP headers, field placement and register addresses as freedreno documents them, and the
// decoder reading back what the descriptions encode and surviving anything else.
#include "qcom/packets.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "qcom/decode.hpp"

namespace hcq::qcom {
namespace {

uint64_t field(const DecodedPacket& p, const std::string& name) {
  for (auto& [n, v] : p.fields)
    if (n == name) return v;
  ADD_FAILURE() << p.name << " has no field " << name;
  return 0;
}

bool has_field(const DecodedPacket& p, const std::string& name) {
  for (auto& [n, v] : p.fields)
    if (n == name) return true;
  return false;
}

std::vector<std::string> names(const std::vector<DecodedPacket>& ps) {
  std::vector<std::string> n;
  for (auto& p : ps) n.push_back(p.name);
  return n;
}

// Every dword belongs to exactly one packet, in order.
void expect_covers(const std::vector<DecodedPacket>& ps, size_t size) {
  uint32_t total = 0;
  for (auto& p : ps) {
    EXPECT_EQ(p.offset, total) << p.name;
    EXPECT_GE(p.dwords, 1u) << p.name;
    total += p.dwords;
  }
  EXPECT_EQ(total, size);
}

// The parity bit is set when the value has an even number of set bits (odd parity overall).
TEST(QcomPackets, OddParity) {
  EXPECT_EQ(odd_parity(0), 1u);  // no bits set: even
  EXPECT_EQ(odd_parity(1), 0u);
  EXPECT_EQ(odd_parity(3), 1u);
  EXPECT_EQ(odd_parity(0x80000000), 0u);
  EXPECT_EQ(odd_parity(0x80000001), 1u);
  EXPECT_EQ(odd_parity(0xffffffff), 1u);  // 32 bits set
  EXPECT_EQ(odd_parity(0x7fffffff), 0u);  // 31
  for (uint32_t v : {0u, 1u, 0x26u, 0xbb08u, 0x12345678u, 0xdeadbeefu})
    EXPECT_EQ(odd_parity(v), uint32_t(__builtin_popcount(v) % 2 == 0)) << v;
}

// Headers worked out by hand; the ones marked "log" appear verbatim in Mesa's
// src/freedreno/.gitlab-ci/reference/dEQP-VK.draw.indirect_draw...triangle_list.log (an a640
// cffdump), the "xml" ones in the CP_REG_TEST doc of adreno_pm4.xml.
TEST(QcomPackets, HeadersByteExact) {
  // pkt7: 0x7 in 31:28, opcode 22:16 and its parity at 23, count 13:0 and its parity at 15.
  // CP_WAIT_FOR_IDLE 0x26 = 0b0100110: 3 bits, odd -> bit 23 clear; count 0: even -> bit 15.
  EXPECT_EQ(pkt7(CP_WAIT_FOR_IDLE, 0), 0x70268000u);  // log
  // CP_EVENT_WRITE 0x46 = 0b1000110: 3 bits -> 0; count 4 = 0b100: 1 bit -> 0; count 1 likewise.
  EXPECT_EQ(pkt7(CP_EVENT_WRITE, 4), 0x70460004u);  // log
  EXPECT_EQ(pkt7(CP_EVENT_WRITE, 1), 0x70460001u);  // log
  // CP_SET_MARKER 0x65 = 0b1100101: 4 bits, even -> bit 23 (0x00800000); count 1 -> 0.
  EXPECT_EQ(pkt7(CP_SET_MARKER, 1), 0x70e50001u);  // log
  // CP_REG_TEST 0x39 = 0b111001: 4 bits -> bit 23. CP_COND_REG_EXEC 0x47 = 0b1000111: 4 bits ->
  // bit 23; count 2 = 0b10: 1 bit -> 0.
  EXPECT_EQ(pkt7(0x39, 1), 0x70b90001u);  // xml
  EXPECT_EQ(pkt7(0x47, 2), 0x70c70002u);  // xml
  // CP_EXEC_CS 0x33 = 0b110011: 4 bits -> bit 23; count 4: 1 bit -> 0.
  EXPECT_EQ(pkt7(CP_EXEC_CS, 4), 0x70b30004u);
  // CP_LOAD_STATE6_FRAG 0x34 = 0b110100: 3 bits -> 0; count 3 = 0b11: 2 bits, even -> bit 15.
  EXPECT_EQ(pkt7(CP_LOAD_STATE6_FRAG, 3), 0x70348003u);
  // CP_WAIT_REG_MEM 0x3c = 0b111100: 4 bits -> bit 23; count 6 = 0b110: 2 bits -> bit 15.
  EXPECT_EQ(pkt7(CP_WAIT_REG_MEM, 6), 0x70bc8006u);
  // CP_REG_TO_MEM 0x3e = 0b111110: 5 bits -> 0; count 3 -> bit 15.
  EXPECT_EQ(pkt7(CP_REG_TO_MEM, 3), 0x703e8003u);
  // count 0x3fff (14 bits, even) -> bit 15; nothing spills into bit 14.
  EXPECT_EQ(pkt7(CP_NOP, 0x3fff), 0x7010bfffu);

  // pkt4: 0x4 in 31:28, register 25:8 and its parity at 27, count 6:0 and its parity at 7.
  // HLSQ_INVALIDATE_CMD (a6xx) 0xbb08: b+b+0+8 = 3+3+0+1 = 7 bits, odd -> bit 27 clear; count 1.
  EXPECT_EQ(pkt4(0xbb08, 1), 0x40bb0801u);  // log
  // 0xa982: a+9+8+2 = 2+2+1+1 = 6 bits, even -> bit 27 (0x08000000).
  EXPECT_EQ(pkt4(0xa982, 1), 0x48a98201u);  // log
  // 0x80f0: 1+0+4+0 = 5 bits -> 0; count 2: 1 bit -> 0.
  EXPECT_EQ(pkt4(0x80f0, 2), 0x4080f002u);  // log
  // HLSQ_CS_NDRANGE_0: a6xx 0xb990 = 3+2+2+0 = 7 bits -> 0; count 10 = 0b1010: 2 bits -> bit 7.
  EXPECT_EQ(pkt4(reg_address(RegId::HLSQ_CS_NDRANGE_0, Gen::A6xx), 10), 0x40b9908au);
  // a7xx 0xa9d4 = 2+2+3+1 = 8 bits, even -> bit 27.
  EXPECT_EQ(pkt4(reg_address(RegId::HLSQ_CS_NDRANGE_0, Gen::A7xx), 10), 0x48a9d48au);
  // CP_ALWAYS_ON_COUNTER 0x980: 9+8+0 = 2+1+0 = 3 bits -> 0; count 0: no bits, even -> bit 7.
  EXPECT_EQ(pkt4(0x980, 0), 0x40098080u);

  // And the parse side takes them apart again.
  for (uint32_t op = 0; op < 0x80; op++)
    for (uint32_t n : {0u, 1u, 2u, 7u, 0x100u, 0x3fffu}) {
      const uint32_t h = pkt7(op, n);
      ASSERT_EQ(header_type(h), 7u);
      ASSERT_EQ(pkt7_opcode(h), op);
      ASSERT_EQ(pkt7_count(h), n);
      ASSERT_TRUE(pkt7_parity_ok(h));
      ASSERT_FALSE(pkt7_parity_ok(h ^ 0x8000)) << std::hex << h;
      ASSERT_FALSE(pkt7_parity_ok(h ^ 0x800000)) << std::hex << h;
    }
  for (uint32_t reg : {0x1u, 0x980u, 0xa9b0u, 0xbb08u, 0x3ffffu})
    for (uint32_t n = 0; n < 0x80; n++) {
      const uint32_t h = pkt4(reg, n);
      ASSERT_EQ(header_type(h), 4u);
      ASSERT_EQ(pkt4_reg(h), reg);
      ASSERT_EQ(pkt4_count(h), n);
      ASSERT_TRUE(pkt4_parity_ok(h));
      ASSERT_FALSE(pkt4_parity_ok(h ^ 0x80));
      ASSERT_FALSE(pkt4_parity_ok(h ^ 0x08000000));
    }
}

TEST(QcomPackets, OpcodesAndTable) {
  EXPECT_EQ(CP_NOP, 0x10);
  EXPECT_EQ(CP_WAIT_FOR_ME, 0x13);
  EXPECT_EQ(CP_WAIT_MEM_WRITES, 0x12);
  EXPECT_EQ(CP_MEM_WRITE, 0x3d);
  EXPECT_EQ(CP_INDIRECT_BUFFER, 0x3f);
  EXPECT_EQ(CP_LOAD_STATE6, 0x36);
  EXPECT_EQ(CP_EXEC_CS_INDIRECT, 0x41);
  EXPECT_EQ(CP_MEM_TO_MEM, 0x73);
  EXPECT_EQ(CP_THREAD_CONTROL, 0x17);
  // One opcode, two layouts.
  EXPECT_EQ(CP_EVENT_WRITE, CP_EVENT_WRITE7);
  EXPECT_STREQ(find_packet(0x46, Gen::A6xx)->name, "CP_EVENT_WRITE");
  EXPECT_STREQ(find_packet(0x46, Gen::A7xx)->name, "CP_EVENT_WRITE7");
  EXPECT_EQ(find_packet(CP_THREAD_CONTROL, Gen::A6xx), nullptr);
  ASSERT_NE(find_packet(CP_THREAD_CONTROL, Gen::A7xx), nullptr);
  EXPECT_EQ(find_packet(CP_EXEC_CS, Gen::A7xx)->dwords, 5);
  EXPECT_EQ(find_packet(CP_WAIT_FOR_IDLE, Gen::A6xx)->dwords, 1);
  EXPECT_EQ(find_packet(CP_MEM_WRITE, Gen::A6xx)->dwords, 0);  // variable
  EXPECT_EQ(find_packet(0x7f, Gen::A6xx), nullptr);
  // Events and their a7xx replacements.
  EXPECT_EQ(CACHE_FLUSH_TS, 0x04u);
  EXPECT_EQ(RB_DONE_TS, 0x16u);
  EXPECT_EQ(CACHE_INVALIDATE, 0x31u);
  EXPECT_EQ(CACHE_CLEAN, 0x31u);
  EXPECT_EQ(CACHE_FLUSH7, 0x32u);
  EXPECT_EQ(CACHE_INVALIDATE7, 0x33u);
  EXPECT_STREQ(event_name(0x31, Gen::A6xx), "CACHE_INVALIDATE");
  EXPECT_STREQ(event_name(0x31, Gen::A7xx), "CACHE_CLEAN");
  EXPECT_STREQ(event_name(0x1d, Gen::A6xx), "PC_CCU_FLUSH_COLOR_TS");
  EXPECT_STREQ(event_name(0x1d, Gen::A7xx), "CCU_FLUSH_COLOR");
  EXPECT_EQ(event_name(0x33, Gen::A6xx), nullptr);
  EXPECT_EQ(WRITE_GE, 5u);
  EXPECT_EQ(POLL_MEMORY, 1u);
  EXPECT_EQ(RM6_COMPUTE, 8u);
}

TEST(QcomPackets, ExecCsFields) {
  const uint32_t p[] = {pkt7(CP_EXEC_CS, 4), 0, CP_EXEC_CS_NGROUPS_X(10),
                        CP_EXEC_CS_NGROUPS_Y(2), CP_EXEC_CS_NGROUPS_Z(1)};
  EXPECT_EQ(CP_EXEC_CS_NGROUPS_X.dword, 2);  // freedreno's CP_EXEC_CS_1
  EXPECT_EQ(CP_EXEC_CS_NGROUPS_Z.dword, 4);
  EXPECT_EQ(p[2], 10u);
  EXPECT_EQ(CP_EXEC_CS_NGROUPS_Y.get(p), 2u);
  // Indirect: group counts from memory, local size minus one at 2/12/22.
  EXPECT_EQ(CP_EXEC_CS_INDIRECT_LOCALSIZEX(63) | CP_EXEC_CS_INDIRECT_LOCALSIZEY(1) |
                CP_EXEC_CS_INDIRECT_LOCALSIZEZ(0),
            0xfcu | 0x1000u);
}

TEST(QcomPackets, LoadState6Fields) {
  // tinygrad: constants from memory into the compute shader's constant file, 1024 bytes.
  const uint32_t d1 = CP_LOAD_STATE6_STATE_TYPE(ST6_CONSTANTS) |
                      CP_LOAD_STATE6_STATE_SRC(SS6_INDIRECT) |
                      CP_LOAD_STATE6_STATE_BLOCK(SB6_CS_SHADER) |
                      CP_LOAD_STATE6_NUM_UNIT(1024 / 16);
  // ST6_CONSTANTS 1 << 14 = 0x4000, SS6_INDIRECT 2 << 16 = 0x20000, SB6_CS_SHADER 0xd << 18 =
  // 0x340000, 64 << 22 = 0x10000000.
  EXPECT_EQ(d1, 0x10364000u);
  EXPECT_EQ(CP_LOAD_STATE6_DST_OFF(0x3fff), 0x3fffu);
  EXPECT_EQ(CP_LOAD_STATE6_NUM_UNIT(0x3ff), 0xffc00000u);
  EXPECT_EQ(CP_LOAD_STATE6_EXT_SRC_ADDR_HI.dword, 3);
  EXPECT_EQ(SB6_CS_TEX, 5u);
}

TEST(QcomPackets, EventWriteFieldsPerGeneration) {
  // a6xx: the event in 7:0, TIMESTAMP writes the GPU timestamp instead of the value.
  EXPECT_EQ(CP_EVENT_WRITE_EVENT(CACHE_FLUSH_TS) | CP_EVENT_WRITE_TIMESTAMP(1), 0x40000004u);
  EXPECT_EQ(CP_EVENT_WRITE_IRQ(1), 0x80000000u);
  EXPECT_EQ(CP_EVENT_WRITE_VALUE.dword, 4);
  EXPECT_EQ(CP_EVENT_WRITE_EVENT.gens, A6XX);
  // a7xx (turnip's RB_DONE_TS write): WRITE_SRC 22:20, WRITE_DST 24, WRITE_ENABLED 27.
  EXPECT_EQ(CP_EVENT_WRITE7_EVENT(RB_DONE_TS) | CP_EVENT_WRITE7_WRITE_SRC(EV_WRITE_USER_32B) |
                CP_EVENT_WRITE7_WRITE_DST(EV_DST_RAM) | CP_EVENT_WRITE7_WRITE_ENABLED(1),
            0x08000016u);
  EXPECT_EQ(CP_EVENT_WRITE7_WRITE_SRC(EV_WRITE_ALWAYSON), 0x300000u);
  EXPECT_EQ(CP_EVENT_WRITE7_PAYLOAD_0.dword, 4);
  EXPECT_EQ(CP_EVENT_WRITE7_EVENT.gens, A7XX);
}

TEST(QcomPackets, WaitRegMemAndRegToMemFields) {
  // tinygrad's wait: function WRITE_GE, poll memory.
  EXPECT_EQ(CP_WAIT_REG_MEM_FUNCTION(WRITE_GE) | CP_WAIT_REG_MEM_POLL(POLL_MEMORY), 0x15u);
  EXPECT_EQ(CP_WAIT_REG_MEM_POLL_ADDR_LO.dword, 2);
  EXPECT_EQ(CP_WAIT_REG_MEM_REF.dword, 4);
  EXPECT_EQ(CP_WAIT_REG_MEM_MASK.dword, 5);
  EXPECT_EQ(CP_WAIT_REG_MEM_DELAY_LOOP_CYCLES.dword, 6);
  // The 64-bit always-on counter: REG 0x980, CNT 2, 64B.
  EXPECT_EQ(CP_REG_TO_MEM_REG(reg_address(RegId::CP_ALWAYS_ON_COUNTER_LO, Gen::A6xx)) |
                CP_REG_TO_MEM_CNT(2) | CP_REG_TO_MEM_64B(1),
            0x40080980u);
}

TEST(QcomPackets, RegisterAddressesPerGeneration) {
  struct Expect {
    RegId r;
    uint32_t a6, a7;
  };
  const Expect moved[] = {
      {RegId::HLSQ_CS_NDRANGE_0, 0xb990, 0xa9d4}, {RegId::HLSQ_CS_NDRANGE_6, 0xb996, 0xa9da},
      {RegId::HLSQ_CS_CNTL, 0xb987, 0xa9cd},      {RegId::HLSQ_CS_CNTL_1, 0xb998, 0xa9db},
      {RegId::HLSQ_CS_KERNEL_GROUP_X, 0xb999, 0xa9dc},
      {RegId::HLSQ_INVALIDATE_CMD, 0xbb08, 0xab1f},
      {RegId::HLSQ_CONTROL_2_REG, 0xb983, 0xa9c8},
      // Unmoved SP registers, and ones only one generation has.
      {RegId::SP_CS_CTRL_REG0, 0xa9b0, 0xa9b0},   {RegId::SP_CS_OBJ_START_LO, 0xa9b4, 0xa9b4},
      {RegId::SP_CS_CONFIG, 0xa9bb, 0xa9bb},      {RegId::SP_CS_INSTRLEN, 0xa9bc, 0xa9bc},
      {RegId::SP_CS_CNTL_0, 0xa9c2, 0xa9c2},      {RegId::CP_ALWAYS_ON_COUNTER_LO, 0x980, 0x980},
      {RegId::HLSQ_CS_CNTL_0, 0xb997, 0},         {RegId::HLSQ_CS_LAST_LOCAL_SIZE, 0, 0xa9df},
      {RegId::SP_CS_UNKNOWN_A9BE, 0, 0xa9be},
  };
  for (const Expect& e : moved) {
    SCOPED_TRACE(to_string(e.r));
    EXPECT_EQ(reg_address(e.r, Gen::A6xx), e.a6);
    EXPECT_EQ(reg_address(e.r, Gen::A7xx), e.a7);
    if (e.a6) {
      EXPECT_EQ(reg_at(e.a6, Gen::A6xx)->id, e.r);
    }
    if (e.a7) {
      EXPECT_EQ(reg_at(e.a7, Gen::A7xx)->id, e.r);
    }
  }
  static_assert(reg_address(RegId::HLSQ_CS_NDRANGE_1, Gen::A7xx) == 0xa9d5);
  // 0xa9d4 is NDRANGE_0 on a7xx and nothing hcq knows on a6xx.
  EXPECT_EQ(reg_at(0xa9d4, Gen::A6xx), nullptr);
  EXPECT_EQ(reg_at(0, Gen::A7xx), nullptr);
}

TEST(QcomPackets, RegisterFields) {
  // a630 crash dump (Mesa .gitlab-ci/reference/crash.log): SP_CS_CTRL_REG0 0x00421800 is
  // FULLREGFOOTPRINT 48, BRANCHSTACK 8, UNK22; SP_CS_CONFIG 0x00200100 is ENABLED, NSAMP 16;
  // HLSQ_CS_NDRANGE_0 0x3fd is KERNELDIM 1, LOCALSIZEX 255.
  const Gen g = Gen::A6xx;
  EXPECT_EQ(SP_CS_CTRL_REG0_FULLREGFOOTPRINT(g, 48) | SP_CS_CTRL_REG0_BRANCHSTACK(g, 8) |
                (1u << 22),
            0x00421800u);
  EXPECT_EQ(SP_CS_CONFIG_ENABLED(g, 1) | SP_CS_CONFIG_NSAMP(g, 16), 0x00200100u);
  EXPECT_EQ(HLSQ_CS_NDRANGE_0_KERNELDIM(g, 1) | HLSQ_CS_NDRANGE_0_LOCALSIZEX(g, 255), 0x3fdu);
  EXPECT_EQ(HLSQ_CS_NDRANGE_0_LOCALSIZEZ.get(g, 0xffc00000u), 0x3ffu);
  // THREADSIZE moved down a bit in SP_CS_CNTL_1 on a7xx; some fields are one generation's only.
  EXPECT_EQ(SP_CS_CNTL_1_THREADSIZE(Gen::A6xx, 1), 0x200u);
  EXPECT_EQ(SP_CS_CNTL_1_THREADSIZE(Gen::A7xx, 1), 0x100u);
  EXPECT_TRUE(SP_CS_CNTL_1_SINGLE_SP_CORE.on(Gen::A6xx));
  EXPECT_FALSE(SP_CS_CNTL_1_SINGLE_SP_CORE.on(Gen::A7xx));
  EXPECT_EQ(HLSQ_CS_CNTL_1_YALIGN(Gen::A6xx, 1), 0u);
  EXPECT_EQ(HLSQ_CS_CNTL_1_YALIGN(Gen::A7xx, 1), 1u << 27);
  EXPECT_EQ(HLSQ_INVALIDATE_CMD_CS_STATE(g, 1) | HLSQ_INVALIDATE_CMD_CS_IBO(g, 1), 0x60u);
  EXPECT_EQ(HLSQ_INVALIDATE_CMD_GFX_BINDLESS(Gen::A7xx, 0xff), 0xffu << 17);
  EXPECT_EQ(HLSQ_CS_NDRANGE_1_GLOBALSIZE_X(g, 0xffffffff), 0xffffffffu);
}

TEST(QcomPackets, ParseGen) {
  Gen g;
  for (const char* n : {"a6xx", "a630", "a640", "a650", "a660"}) {
    ASSERT_TRUE(parse_gen(n, g)) << n;
    EXPECT_EQ(g, Gen::A6xx);
  }
  for (const char* n : {"a7xx", "a730", "a740"}) {
    ASSERT_TRUE(parse_gen(n, g)) << n;
    EXPECT_EQ(g, Gen::A7xx);
  }
  EXPECT_FALSE(parse_gen("a540", g));
  EXPECT_FALSE(parse_gen("gfx1100", g));
  EXPECT_FALSE(parse_gen("", g));
  EXPECT_STREQ(to_string(Gen::A7xx), "a7xx");
}

// A dispatch the way tinygrad (a6xx) and turnip (a7xx) lay it out, decoded back.
std::vector<uint32_t> dispatch(Gen g) {
  auto addr = [g](RegId r) { return reg_address(r, g); };
  std::vector<uint32_t> s;
  auto put = [&s](std::initializer_list<uint32_t> w) { s.insert(s.end(), w); };
  put({pkt7(CP_WAIT_REG_MEM, 6),
       CP_WAIT_REG_MEM_FUNCTION(WRITE_GE) | CP_WAIT_REG_MEM_POLL(POLL_MEMORY), 0x1000, 0x7f,
       0x29, 0xffffffff, 32});
  put({pkt7(CP_SET_MARKER, 1), CP_SET_MARKER_MODE(RM6_COMPUTE)});
  put({pkt4(addr(RegId::HLSQ_INVALIDATE_CMD), 1),
       HLSQ_INVALIDATE_CMD_CS_STATE(g, 1) | HLSQ_INVALIDATE_CMD_CS_IBO(g, 1)});
  put({pkt4(addr(RegId::HLSQ_CS_NDRANGE_0), 7),
       HLSQ_CS_NDRANGE_0_KERNELDIM(g, 3) | HLSQ_CS_NDRANGE_0_LOCALSIZEX(g, 63), 640, 0, 2, 0, 1,
       0});
  put({pkt4(addr(RegId::SP_CS_CTRL_REG0), 1),
       SP_CS_CTRL_REG0_FULLREGFOOTPRINT(g, 4) | SP_CS_CTRL_REG0_BRANCHSTACK(g, 1)});
  put({pkt7(CP_LOAD_STATE6_FRAG, 3),
       CP_LOAD_STATE6_STATE_TYPE(ST6_SHADER) | CP_LOAD_STATE6_STATE_SRC(SS6_INDIRECT) |
           CP_LOAD_STATE6_STATE_BLOCK(SB6_CS_SHADER) | CP_LOAD_STATE6_NUM_UNIT(2),
       0x20000, 0x7f});
  put({pkt7(CP_EXEC_CS, 4), 0, 10, 2, 1});
  if (g == Gen::A6xx)
    put({pkt7(CP_EVENT_WRITE, 4), CP_EVENT_WRITE_EVENT(CACHE_FLUSH_TS), 0x1000, 0x7f, 42});
  else
    put({pkt7(CP_EVENT_WRITE7, 4),
         CP_EVENT_WRITE7_EVENT(RB_DONE_TS) | CP_EVENT_WRITE7_WRITE_ENABLED(1), 0x1000, 0x7f, 42});
  put({pkt7(CP_WAIT_FOR_IDLE, 0)});
  put({pkt7(CP_REG_TO_MEM, 3),
       CP_REG_TO_MEM_REG(addr(RegId::CP_ALWAYS_ON_COUNTER_LO)) | CP_REG_TO_MEM_CNT(2) |
           CP_REG_TO_MEM_64B(1),
       0x3008, 0x7f});
  put({pkt7(CP_MEM_WRITE, 4), 0x2000, 0x7f, 0xaa, 0xbb});
  put({kType2Filler});
  put({pkt7(CP_INDIRECT_BUFFER, 3), 0x50000, 0x7f, 64});
  return s;
}

TEST(QcomPackets, DecoderReadsBackADispatch) {
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    SCOPED_TRACE(to_string(g));
    const auto s = dispatch(g);
    const auto ps = decode_cp(s, g);
    EXPECT_EQ(names(ps), (std::vector<std::string>{
                             "CP_WAIT_REG_MEM", "CP_SET_MARKER", "PKT4", "PKT4", "PKT4",
                             "CP_LOAD_STATE6_FRAG", "CP_EXEC_CS",
                             g == Gen::A6xx ? "CP_EVENT_WRITE" : "CP_EVENT_WRITE7",
                             "CP_WAIT_FOR_IDLE", "CP_REG_TO_MEM", "CP_MEM_WRITE", "TYPE2_FILLER",
                             "CP_INDIRECT_BUFFER"}));
    for (auto& p : ps) EXPECT_TRUE(p.ok) << p.name << ": " << p.problem;
    expect_covers(ps, s.size());
    EXPECT_EQ(field(ps[0], "FUNCTION"), WRITE_GE);
    EXPECT_EQ(field(ps[0], "REF"), 0x29u);
    EXPECT_EQ(field(ps[0], "DELAY_LOOP_CYCLES"), 32u);
    EXPECT_EQ(field(ps[1], "MODE"), RM6_COMPUTE);
    EXPECT_EQ(field(ps[2], "REG"), reg_address(RegId::HLSQ_INVALIDATE_CMD, g));
    EXPECT_EQ(ps[2].registers[0], (std::pair<std::string, uint32_t>{"HLSQ_INVALIDATE_CMD", 0x60}));
    EXPECT_EQ(field(ps[2], "HLSQ_INVALIDATE_CMD.CS_IBO"), 1u);
    ASSERT_EQ(ps[3].registers.size(), 7u);
    EXPECT_EQ(ps[3].registers[1], (std::pair<std::string, uint32_t>{"HLSQ_CS_NDRANGE_1", 640}));
    EXPECT_EQ(ps[3].registers[6].first, "HLSQ_CS_NDRANGE_6");
    EXPECT_EQ(field(ps[3], "HLSQ_CS_NDRANGE_0.LOCALSIZEX"), 63u);
    EXPECT_EQ(field(ps[3], "HLSQ_CS_NDRANGE_0.KERNELDIM"), 3u);
    EXPECT_EQ(field(ps[3], "HLSQ_CS_NDRANGE_5.GLOBALSIZE_Z"), 1u);
    EXPECT_EQ(field(ps[4], "SP_CS_CTRL_REG0.FULLREGFOOTPRINT"), 4u);
    EXPECT_EQ(field(ps[5], "STATE_BLOCK"), SB6_CS_SHADER);
    EXPECT_EQ(field(ps[5], "NUM_UNIT"), 2u);
    EXPECT_EQ(field(ps[5], "EXT_SRC_ADDR_HI"), 0x7fu);
    EXPECT_EQ(field(ps[6], "NGROUPS_X"), 10u);
    EXPECT_EQ(field(ps[6], "NGROUPS_Y"), 2u);
    if (g == Gen::A6xx) {
      EXPECT_EQ(field(ps[7], "EVENT"), CACHE_FLUSH_TS);
      EXPECT_EQ(field(ps[7], "VALUE"), 42u);
    } else {
      EXPECT_EQ(field(ps[7], "EVENT"), RB_DONE_TS);
      EXPECT_EQ(field(ps[7], "WRITE_ENABLED"), 1u);
      EXPECT_EQ(field(ps[7], "PAYLOAD_0"), 42u);
      EXPECT_FALSE(has_field(ps[7], "PAYLOAD_1"));  // a 5-dword packet has no 6th dword
    }
    EXPECT_EQ(field(ps[9], "REG"), 0x980u);
    EXPECT_EQ(field(ps[9], "64B"), 1u);
    EXPECT_EQ(field(ps[9], "DEST_LO"), 0x3008u);
    EXPECT_EQ(field(ps[10], "DATA_1"), 0xbbu);
    EXPECT_EQ(ps[12].ib_address, 0x7f00050000u);
    EXPECT_EQ(ps[12].ib_dwords, 64u);
  }
}

TEST(QcomPackets, DecoderNamesRegistersForItsGeneration) {
  // The a7xx NDRANGE address means nothing on a6xx: decoded by address, still ok.
  const uint32_t s[] = {pkt4(0xa9d4, 1), 0xff};
  auto ps = decode_cp(s, Gen::A6xx);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].ok);
  EXPECT_EQ(ps[0].registers[0].first, "0xa9d4");
  ps = decode_cp(s, Gen::A7xx);
  EXPECT_EQ(ps[0].registers[0].first, "HLSQ_CS_NDRANGE_0");
  // A packet of no registers is one dword.
  const uint32_t empty[] = {pkt4(0xa9b0, 0)};
  ps = decode_cp(empty, Gen::A6xx);
  EXPECT_EQ(ps[0].dwords, 1u);
  EXPECT_TRUE(ps[0].ok);
}

TEST(QcomPackets, DecoderReportsCorruptInput) {
  const uint32_t exec = pkt7(CP_EXEC_CS, 4);
  // Bad parity (count parity flipped): reported, one dword skipped, the next packet decodes.
  const uint32_t bad_parity[] = {exec ^ 0x8000, pkt7(CP_WAIT_FOR_IDLE, 0)};
  auto ps = decode_cp(bad_parity, Gen::A6xx);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"INVALID", "CP_WAIT_FOR_IDLE"}));
  EXPECT_EQ(ps[0].problem, "type-7 header with bad parity bits");
  EXPECT_TRUE(ps[1].ok);
  // Register parity flipped. Its payload dword 5 then reads as freedreno's type 0 (one
  // register), which takes the next dword with it, as cffdec would.
  const uint32_t bad_pkt4[] = {pkt4(0xa9b0, 1) ^ 0x08000000, 5, 6, pkt7(CP_WAIT_FOR_ME, 0)};
  ps = decode_cp(bad_pkt4, Gen::A6xx);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"INVALID", "TYPE0", "CP_WAIT_FOR_ME"}));
  EXPECT_EQ(ps[0].problem, "type-4 header with bad parity bits");
  EXPECT_EQ(ps[1].dwords, 2u);
  expect_covers(ps, 4);

  // Truncated: the packet keeps its name, spans what is left, and reads no field past the end.
  const uint32_t truncated[] = {pkt7(CP_WAIT_FOR_IDLE, 0), exec, 0, 10};
  ps = decode_cp(truncated, Gen::A7xx);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[1].name, "CP_EXEC_CS");
  EXPECT_FALSE(ps[1].ok);
  EXPECT_EQ(ps[1].problem, "truncated: needs 5 dwords, 3 left");
  EXPECT_EQ(ps[1].dwords, 3u);
  EXPECT_EQ(field(ps[1], "NGROUPS_X"), 10u);
  EXPECT_FALSE(has_field(ps[1], "NGROUPS_Y"));
  const uint32_t truncated4[] = {pkt4(0xb990, 7), 1, 2};
  ps = decode_cp(truncated4, Gen::A6xx);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].problem, "truncated: 7 registers, 2 dwords left");
  EXPECT_EQ(ps[0].registers.size(), 2u);

  // Unknown opcode with a good header: skipped by its length. CP_THREAD_CONTROL is a7xx only.
  const uint32_t unknown[] = {pkt7(0x7e, 2), 1, 2, pkt7(CP_THREAD_CONTROL, 1), 1,
                              pkt7(CP_WAIT_FOR_IDLE, 0)};
  ps = decode_cp(unknown, Gen::A6xx);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"UNKNOWN", "UNKNOWN", "CP_WAIT_FOR_IDLE"}));
  EXPECT_EQ(ps[0].problem, "unknown opcode 0x7e on a6xx (skipped by its length)");
  EXPECT_EQ(ps[0].dwords, 3u);
  ps = decode_cp(unknown, Gen::A7xx);
  EXPECT_EQ(names(ps),
            (std::vector<std::string>{"UNKNOWN", "CP_THREAD_CONTROL", "CP_WAIT_FOR_IDLE"}));
  EXPECT_TRUE(ps[1].ok);

  // A fixed-size packet with the wrong length.
  const uint32_t wrong_length[] = {pkt7(CP_EXEC_CS, 3), 0, 1, 1};
  ps = decode_cp(wrong_length, Gen::A6xx);
  EXPECT_EQ(ps[0].problem, "length 4 dwords, the description says 5");

  // Not headers: type 3, stray bits in a type-7 header, the 5/6 nibbles; type 0 per freedreno.
  const uint32_t junk[] = {0xc0004600, exec | 0x01000000, 0x50000000, 0x00021234, 7, 8, 9};
  ps = decode_cp(junk, Gen::A6xx);
  EXPECT_EQ(names(ps), (std::vector<std::string>{"INVALID", "INVALID", "INVALID", "TYPE0"}));
  EXPECT_EQ(ps[0].problem, "type-3 header (pre-a5xx; a6xx/a7xx take type 7)");
  EXPECT_EQ(ps[1].problem, "type-7 header with bits 27:24 set");
  EXPECT_EQ(ps[2].problem, "not a packet header");
  EXPECT_EQ(ps[3].dwords, 4u);  // header + 3 registers
  EXPECT_EQ(field(ps[3], "REG"), 0x1234u);
  for (auto& p : ps) EXPECT_FALSE(p.ok);
  expect_covers(ps, std::size(junk));
}

// Random dwords (and plausible headers): every decode ends, accounts for every dword and never
// reads past the input (checked under ASan in CI).
TEST(QcomPackets, DecoderSurvivesRandomInput) {
  std::mt19937 rng(11);
  for (int i = 0; i < 4000; i++) {
    std::vector<uint32_t> w(rng() % 48);
    for (auto& x : w) {
      switch (rng() % 4) {
        case 0: x = rng(); break;
        case 1: x = pkt7(rng() & 0x7f, rng() % 12); break;
        case 2: x = pkt4(0xa9b0 + rng() % 0x1200, rng() % 12); break;
        default: x = rng() % 16; break;
      }
    }
    for (Gen g : {Gen::A6xx, Gen::A7xx}) {
      const auto ps = decode_cp(w, g);
      uint32_t total = 0;
      for (auto& p : ps) {
        ASSERT_EQ(p.offset, total);
        ASSERT_GE(p.dwords, 1u);
        ASSERT_LE(p.offset + p.dwords, w.size());
        if (p.name == "PKT4") {
          ASSERT_LE(p.registers.size() + 1, p.dwords);
        }
        total += p.dwords;
      }
      ASSERT_EQ(total, w.size());
    }
  }
}

// One framing of CP headers for the decoder, the emulated CP and the hang reports: what each
// header is and how many dwords its packet spans.
TEST(QcomPackets, FramingReadsEveryKindOfHeader) {
  CpFrame f = frame_cp(pkt7(CP_EXEC_CS, 4));
  EXPECT_EQ(f.kind, CpKind::Pkt7);
  EXPECT_EQ(f.dwords, 5u);
  EXPECT_EQ(f.problem, nullptr);
  f = frame_cp(pkt4(0xb990, 7));
  EXPECT_EQ(f.kind, CpKind::Pkt4);
  EXPECT_EQ(f.dwords, 8u);
  f = frame_cp(kType2Filler);
  EXPECT_EQ(f.kind, CpKind::Type2Filler);
  EXPECT_EQ(f.dwords, 1u);
  f = frame_cp(0x00010005);  // type 0: two registers from 5
  EXPECT_EQ(f.kind, CpKind::Pkt0);
  EXPECT_EQ(f.dwords, 3u);
  EXPECT_STREQ(f.problem, "type-0 packet (a pre-a5xx register write; a6xx/a7xx take type 4)");
  f = frame_cp(pkt7(CP_EXEC_CS, 4) | 0x01000000);
  EXPECT_EQ(f.kind, CpKind::Invalid);
  EXPECT_EQ(f.dwords, 1u);
  EXPECT_STREQ(f.problem, "type-7 header with bits 27:24 set");
  EXPECT_STREQ(frame_cp(pkt7(CP_EXEC_CS, 4) ^ 0x800000).problem,
               "type-7 header with bad parity bits");
  EXPECT_STREQ(frame_cp(pkt4(0xb990, 7) ^ 0x80).problem, "type-4 header with bad parity bits");
  EXPECT_STREQ(frame_cp(0xc0000000).problem, "type-3 header (pre-a5xx; a6xx/a7xx take type 7)");
  EXPECT_STREQ(frame_cp(0x90000000).problem, "not a packet header");
}

// Each enum is defined once in cp.def (CP_ENUM); the C++ constants and the decoder's names come
// from the same line, and CP_LOAD_STATE6_GEOM/_FRAG take CP_LOAD_STATE6's fields and names.
TEST(QcomPackets, EnumsAndSharedLayoutsComeFromOneDescription) {
  const PacketInfo* frag = find_packet(CP_LOAD_STATE6_FRAG, Gen::A6xx);
  const PacketInfo* geom = find_packet(CP_LOAD_STATE6_GEOM, Gen::A7xx);
  const PacketInfo* plain = find_packet(CP_LOAD_STATE6, Gen::A6xx);
  ASSERT_TRUE(frag && geom && plain);
  ASSERT_EQ(frag->fields.size(), plain->fields.size());
  ASSERT_EQ(geom->fields.size(), plain->fields.size());
  for (size_t i = 0; i < plain->fields.size(); i++) {
    EXPECT_STREQ(frag->fields[i].name, plain->fields[i].name);
    EXPECT_EQ(frag->fields[i].lo, plain->fields[i].lo);
    EXPECT_EQ(geom->fields[i].dword, plain->fields[i].dword);
  }
  EXPECT_EQ(frag->tail.dword, CP_LOAD_STATE6_INLINE.dword);
  EXPECT_STREQ(value_name(*frag, CP_LOAD_STATE6_STATE_SRC, SS6_INDIRECT, Gen::A6xx),
               "SS6_INDIRECT");
  EXPECT_STREQ(value_name(*geom, CP_LOAD_STATE6_STATE_BLOCK, SB6_CS_SHADER, Gen::A7xx),
               "SB6_CS_SHADER");
  // Names follow the generation: a7xx's event_write_src has no a6xx meaning.
  const PacketInfo* ev7 = find_packet(0x46, Gen::A7xx);
  EXPECT_STREQ(value_name(*ev7, CP_EVENT_WRITE7_WRITE_SRC, EV_WRITE_ALWAYSON, Gen::A7xx),
               "EV_WRITE_ALWAYSON");
  EXPECT_STREQ(value_name(*ev7, CP_EVENT_WRITE7_EVENT, CACHE_CLEAN, Gen::A7xx), "CACHE_CLEAN");
  EXPECT_EQ(value_name(*plain, CP_LOAD_STATE6_NUM_UNIT, 1, Gen::A6xx), nullptr);
  // The decoder prints them.
  const uint32_t w[] = {pkt7(CP_EVENT_WRITE7, 3),
                        CP_EVENT_WRITE7_EVENT(RB_DONE_TS) |
                            CP_EVENT_WRITE7_WRITE_SRC(EV_WRITE_ALWAYSON) |
                            CP_EVENT_WRITE7_WRITE_ENABLED(1),
                        0x1000, 0x7f};
  const auto ps = decode_cp(w, Gen::A7xx);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(to_text(ps[0]),
            "0x0000  0x70468003  CP_EVENT_WRITE7  EVENT=0x16(RB_DONE_TS)  "
            "CLEAR_RENDER_RESOURCE=0  WRITE_SRC=3(EV_WRITE_ALWAYSON)  WRITE_DST=0(EV_DST_RAM)  "
            "WRITE_ENABLED=1  IRQ=0  ADDR_LO=0x1000  ADDR_HI=0x7f");
}

}  // namespace
}  // namespace hcq::qcom
