// The Adreno encoder, byte-exact against headers worked out by hand from freedreno's packet
// format (pkt7: type 7 in 31:28, opcode 22:16 with odd parity at 23, count 13:0 with odd parity
// at 15; pkt4: register 25:8 with parity at 27, count 6:0 with parity at 7) and the field
// layouts in cp.def / regs.def.
#include "qcom/encoders.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"

namespace hcq::qcom {
namespace {

using Words = std::vector<uint32_t>;
Words words(const CommandStream& cs) { return Words(cs.data(), cs.data() + cs.size()); }
constexpr EncoderMemory kMem{0x7f0000001000, 0x7f0000001040};

TEST(QcomEncoder, A64BitWaitIsTwoWaitsAndACondExec) {
  CommandStream cs;
  std::vector<PatchSite> s;
  CpEncoder(Gen::A6xx, kMem).wait(cs, 0x7f0000002000, 0x100000005, s);
  // CP_WAIT_REG_MEM (0x3c: four ones, parity 1; count 6: parity 1) = 0x70bc8006: WRITE_GE (5)
  // | POLL_MEMORY (1 << 4) on the high word at +4 for 1; CP_COND_EXEC (0x44: two ones, parity
  // 1) = 0x70c48006: while the high word < 2, the next 7 dwords; the low word for 5.
  EXPECT_EQ(words(cs), (Words{0x70bc8006, 0x15, 0x2004, 0x7f00, 1, 0xffffffff, 16,  //
                              0x70c48006, 0x1000, 0x7f00, 0x2004, 0x7f00, 2, 7,       //
                              0x70bc8006, 0x15, 0x2000, 0x7f00, 5, 0xffffffff, 16}));
  for (auto& site : s)
    if (site.role == PatchRole::WaitValue) cs.patch(site, 0x2ffffffff);
  EXPECT_EQ(cs.data()[4], 2u);
  EXPECT_EQ(cs.data()[12], 3u);  // the high word + 1
  EXPECT_EQ(cs.data()[18], 0xffffffffu);
}

TEST(QcomEncoder, ASignalFlushesThenWritesTheValue) {
  CommandStream a6, a7;
  std::vector<PatchSite> s;
  CpEncoder(Gen::A6xx, kMem).signal(a6, 0x7f0000003000, 0x500000007, true, s);
  // CP_WAIT_FOR_IDLE (0x26: three ones, parity 0; count 0: parity 1) = 0x70268000;
  // CP_EVENT_WRITE (0x46: three ones) of 4 = 0x70460004: CACHE_FLUSH_TS (4) with TIMESTAMP
  // (bit 30) into the scratch dword; CP_WAIT_MEM_WRITES (0x12: parity 1) = 0x70928000;
  // CP_MEM_WRITE (0x3d: five ones) of 4 = 0x703d0004.
  EXPECT_EQ(words(a6), (Words{0x70268000, 0x70460004, 0x40000004, 0x1040, 0x7f00, 0,
                              0x70268000, 0x70928000, 0x703d0004, 0x3000, 0x7f00, 7, 5}));
  CpEncoder(Gen::A7xx, kMem).signal(a7, 0x7f0000003000, 1, false, s);
  // a7xx: CP_EVENT_WRITE7 of 1 (0x70460001) with CACHE_CLEAN (0x31).
  EXPECT_EQ(Words(a7.data(), a7.data() + 3), (Words{0x70268000, 0x70460001, 0x31}));
}

TEST(QcomEncoder, TimestampsReadTheAlwaysOnCounter) {
  CommandStream cs;
  std::vector<PatchSite> s;
  CpEncoder(Gen::A7xx, kMem).timestamp(cs, 0x7f0000004000, s);
  // CP_REG_TO_MEM (0x3e: five ones; count 3: two ones, parity 1) = 0x703e8003: register
  // 0x980, CNT 2 (bits 29:18), 64B (bit 30), into the record's second half.
  EXPECT_EQ(words(cs), (Words{0x70268000, 0x703e8003, 0x40080980, 0x4008, 0x7f00}));
}

// A kernel at 0x7f0000010000 with the given shader, constant-file and argument sizes.
AdrenoKernel kernel(uint32_t instr_dwords, uint32_t const_dwords, uint32_t args_bytes) {
  AdrenoKernel k;
  k.name = std::string("k");  // not = "k": GCC 12 -O3 -Wrestrict false positive
  k.code_va = 0x7f0000010000;
  k.instr_dwords = instr_dwords;
  k.full_regs = 4;
  k.const_dwords = const_dwords;
  k.args_bytes = args_bytes;
  return k;
}

TEST(QcomEncoder, LaunchesLoadStateAndExecute) {
  const AdrenoKernel k = kernel(64, 16, 32);
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    CommandStream cs;
    std::vector<PatchSite> s;
    CpEncoder(g, kMem).exec(cs, k, 0x7f0000020000, {40, 1, 1}, {64, 1, 1}, s);
    const Words w = words(cs);
    auto has = [&](std::initializer_list<uint32_t> seq) {
      return std::search(w.begin(), w.end(), seq.begin(), seq.end()) != w.end();
    };
    // HLSQ_CS_NDRANGE_0..6: a6xx 0xb990 (seven ones: parity 0) = 0x40b99007, a7xx 0xa9d4
    // (eight ones: parity 1) = 0x48a9d407; KERNELDIM 3 | (64 - 1) << 2 = 0xff; global 2560.
    if (g == Gen::A6xx)
      EXPECT_TRUE(has({0x40b99007, 0xff, 2560, 0, 1, 0, 1, 0}));
    else
      EXPECT_TRUE(has({0x48a9d407, 0xff, 2560, 0, 1, 0, 1, 0}));
    // CP_EXEC_CS (0x33: four ones, parity 1) of 4 = 0x70b30004, then a wait for idle.
    EXPECT_TRUE(has({0x70b30004, 0, 40, 1, 1, 0x70268000}));
    // The arguments into the constant file: CP_LOAD_STATE6_FRAG (0x34: three ones, parity 0;
    // count 3: parity 1) = 0x70348003; ST6_CONSTANTS (1 << 14) | SS6_INDIRECT (2 << 16) | SB6_CS_SHADER (0xd << 18)
    // | two vec4s (2 << 22) = 0x00b64000.
    EXPECT_TRUE(has({0x70348003, 0x00b64000, 0x20000, 0x7f00}));
    for (auto& site : s) {
      if (site.role == PatchRole::GridX) cs.patch(site, 7);
      if (site.role == PatchRole::BlockX) cs.patch(site, 128);
      if (site.role == PatchRole::KernargAddress) cs.patch(site, 0x7e0000030000);
    }
    const Words p = words(cs);
    auto phas = [&](std::initializer_list<uint32_t> seq) {
      return std::search(p.begin(), p.end(), seq.begin(), seq.end()) != p.end();
    };
    EXPECT_TRUE(phas({0x70b30004, 0, 7, 1, 1}));
    EXPECT_TRUE(phas({3 | 127 << 2}));
    EXPECT_TRUE(phas({0x70348003, 0x00b64000, 0x30000, 0x7e00}));
  }
}

// SP_CS_INSTRLEN in 128-byte units (Mesa ir3_shader.h instrlen, turnip tu6_emit_xs): pkt4 of
// 0xa9bc (nine ones: parity 0; count 1) = 0x40a9bc01; 64 dwords (256 bytes) are 2 units, 66
// dwords (264 bytes) 3.
TEST(QcomEncoder, InstrlenCounts128ByteUnits) {
  for (Gen g : {Gen::A6xx, Gen::A7xx})
    for (auto [dwords, units] : {std::pair{64u, 2u}, std::pair{66u, 3u}}) {
      CommandStream cs;
      std::vector<PatchSite> s;
      CpEncoder(g, kMem).exec(cs, kernel(dwords, 16, 32), 0x7f0000020000, {1, 1, 1}, {64, 1, 1},
                              s);
      const Words w = words(cs);
      const Words seq = {0x40a9bc01, units};
      EXPECT_NE(std::search(w.begin(), w.end(), seq.begin(), seq.end()), w.end())
          << to_string(g) << " " << dwords;
    }
}

// a7xx writes HLSQ_CS_LAST_LOCAL_SIZE (0xa9df: eleven ones, parity 0; count 1 = 0x40a9df01)
// after HLSQ_CS_KERNEL_GROUP_X..Z (0xa9dc: nine ones, parity 0; count 3: parity 1 at bit 7 =
// 0x40a9dc83) as turnip's tu_dispatch does: block 8x4x2 minus one is 7 << 2 | 3 << 12 | 1 << 22
// = 0x40301c. a6xx (0xb999: 0x40b99983) has no such register.
TEST(QcomEncoder, A7xxWritesTheLastLocalSize) {
  const AdrenoKernel k = kernel(64, 16, 32);
  auto has = [](const Words& w, std::initializer_list<uint32_t> seq) {
    return std::search(w.begin(), w.end(), seq.begin(), seq.end()) != w.end();
  };
  for (bool prepared : {false, true}) {
    AdrenoKernel pk = k;
    if (prepared) CpEncoder(Gen::A7xx, kMem).prepare(pk);
    CommandStream cs;
    std::vector<PatchSite> s;
    CpEncoder(Gen::A7xx, kMem).exec(cs, pk, 0x7f0000020000, {5, 6, 7}, {8, 4, 2}, s);
    EXPECT_TRUE(has(words(cs), {0x40a9dc83, 1, 1, 1, 0x40a9df01, 0x40301c, 0x70b30004, 0, 5, 6,
                                7}))
        << prepared;
    // A patched block size moves it with HLSQ_CS_NDRANGE_0: 16x4x2 gives 15 << 2 | ... = 0x40303c.
    for (auto& site : s)
      if (site.role == PatchRole::BlockX) cs.patch(site, 16);
    EXPECT_TRUE(has(words(cs), {0x40a9df01, 0x40303c})) << prepared;
  }
  CommandStream a6;
  std::vector<PatchSite> s;
  CpEncoder(Gen::A6xx, kMem).exec(a6, k, 0x7f0000020000, {5, 6, 7}, {8, 4, 2}, s);
  EXPECT_TRUE(has(words(a6), {0x40b99983, 1, 1, 1, 0x70b30004}));
}

// The shader's workgroup id in r15.x (regid 15 * 4 = 0x3c) and local id in r0.x, 128-wide
// waves: a6xx writes HLSQ_CS_CNTL_0/1, a7xx SP_CS_CNTL_0/1 and HLSQ_CS_CNTL_1.
TEST(QcomEncoder, LaunchesTellTheShaderWhereItsIdsAre) {
  AdrenoKernel k = kernel(64, 16, 32);
  k.workgroup_id_regid = 0x3c;
  k.local_id_regid = 0;
  k.threadsize = 128;
  auto launch = [&](Gen g) {
    CommandStream cs;
    std::vector<PatchSite> s;
    CpEncoder(g, kMem).exec(cs, k, 0x7f0000020000, {1, 1, 1}, {64, 1, 1}, s);
    return words(cs);
  };
  auto has = [](const Words& w, std::initializer_list<uint32_t> seq) {
    return std::search(w.begin(), w.end(), seq.begin(), seq.end()) != w.end();
  };
  // CNTL_0: WGIDCONSTID 0x3c, WGSIZECONSTID and WGOFFSETCONSTID 0xfc (none), LOCALIDREGID 0.
  // a6xx: pkt4 of HLSQ_CS_CNTL_0 (0xb997: ten ones, parity 1 at bit 27) count 2 = 0x48b99702;
  // HLSQ_CS_CNTL_1: LINEARLOCALIDREGID 0xfc | THREADSIZE (bit 9) = 0x2fc.
  EXPECT_TRUE(has(launch(Gen::A6xx), {0x48b99702, 0x00fcfc3c, 0x2fc}));
  // a7xx: SP_CS_CNTL_0 (0xa9c2: seven ones, parity 0) count 2 = 0x40a9c202; SP_CS_CNTL_1:
  // 0xfc | THREADSIZE (bit 8 on a7xx) = 0x1fc. HLSQ_CS_CNTL_1 (0xa9db: ten ones, parity 1)
  // count 1 = 0x48a9db01: 0xfc | THREADSIZE (bit 9) 0x200 | UNK11 0x800 | UNK22 0x400000 |
  // UNK26 0x4000000 | YALIGN 8 << 27 = 0x44400afc.
  const Words a7 = launch(Gen::A7xx);
  EXPECT_TRUE(has(a7, {0x40a9c202, 0x00fcfc3c, 0x1fc, 0x48a9db01, 0x44400afc}));
  EXPECT_FALSE(has(a7, {0x48b99702}));  // a7xx has no HLSQ_CS_CNTL_0
}

// A kernel prepared at load encodes the same launch from its template, sites included.
TEST(QcomEncoder, PreparedLaunchesEqualFreshlyEncodedOnes) {
  const AdrenoKernel k = kernel(32, 4, 16);
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    AdrenoKernel prepared = k;
    CpEncoder(g, kMem).prepare(prepared);
    CommandStream a, b;
    std::vector<PatchSite> sa, sb;
    a.grow(3);  // not at the stream's start
    b.grow(3);
    CpEncoder(g, kMem).exec(a, k, 0x7f0000020000, {5, 6, 7}, {8, 4, 2}, sa);
    CpEncoder(g, kMem).exec(b, prepared, 0x7f0000020000, {5, 6, 7}, {8, 4, 2}, sb);
    EXPECT_EQ(Words(a.data() + 3, a.data() + a.size()), Words(b.data() + 3, b.data() + b.size()));
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); i++) {
      EXPECT_EQ(sa[i].dword, sb[i].dword);
      EXPECT_EQ(sa[i].role, sb[i].role);
    }
  }
}

// A kernel with UAV 0 on the argument at byte 0 and UAV 1 on the one at byte 16, its two
// descriptors at byte 64 of the kernarg area.
AdrenoKernel uav_kernel() {
  AdrenoKernel k = kernel(64, 16, 32);
  k.uav_count = 2;
  k.uav_arg_offsets = {0, 16};
  k.uav_table_offset = 64;
  return k;
}

// The UAV part of a launch with its kernarg area at 0x7f0000020000, and at 0x7e0000030000 once
// patched, on both generations (computerator emits the same packets for a6xx and a7xx).
TEST(QcomEncoder, UavLaunchesCopyTheAddressesAndLoadTheDescriptors) {
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    SCOPED_TRACE(to_string(g));
    AdrenoKernel k = uav_kernel();
    CpEncoder(g, kMem).prepare(k);
    CommandStream cs;
    std::vector<PatchSite> s;
    CpEncoder(g, kMem).exec(cs, k, 0x7f0000020000, {40, 1, 1}, {64, 1, 1}, s);
    auto uav_block = [&](uint32_t lo, uint32_t hi) {
      return Words{
          // The arguments into the constant file (as LaunchesLoadStateAndExecute says).
          0x70348003, 0x00b64000, lo, hi,
          // CP_MEM_TO_MEM (0x73: five ones, parity 0; count 5: two ones, parity 1) =
          // 0x70738005, DOUBLE (bit 29): UAV 0's BASE (area + 64 + 16) from argument 0 ...
          0x70738005, 0x20000000, lo + 0x50, hi, lo, hi,
          // ... UAV 1's BASE (area + 128 + 16) from the argument at 16.
          0x70738005, 0x20000000, lo + 0x90, hi, lo + 0x10, hi,
          // CP_WAIT_MEM_WRITES (0x12: parity 1) = 0x70928000; CP_WAIT_FOR_ME (0x13: three
          // ones, parity 0) = 0x70138000.
          0x70928000, 0x70138000,
          // CP_LOAD_STATE6_FRAG: ST6_UAV (3 << 14) | SS6_INDIRECT (2 << 16) | SB6_CS_SHADER
          // (0xd << 18) | two descriptors (2 << 22) = 0x00b6c000, from area + 64.
          0x70348003, 0x00b6c000, lo + 0x40, hi,
          // SP_CS_IBO (0xa9f2: nine ones, parity 0; count 2: parity 0) = 0x40a9f202.
          0x40a9f202, lo + 0x40, hi,
          // SP_CS_IBO_COUNT (0xaa00: four ones, parity 1 at bit 27; count 1) = 0x48aa0001.
          0x48aa0001, 2,
          // Then HLSQ_CS_NDRANGE_0..6 (a6xx 0x40b99007, a7xx 0x48a9d407).
          g == Gen::A6xx ? 0x40b99007u : 0x48a9d407u};
    };
    auto has = [](const Words& w, const Words& seq) {
      return std::search(w.begin(), w.end(), seq.begin(), seq.end()) != w.end();
    };
    EXPECT_TRUE(has(words(cs), uav_block(0x20000, 0x7f00)));
    // SP_CS_CONFIG (0xa9bb: ten ones, parity 1; count 1) = 0x48a9bb01: ENABLED (bit 8) |
    // NIBO 2 (bits 28:22) = 0x800100.
    EXPECT_TRUE(has(words(cs), {0x48a9bb01, 0x800100}));
    for (auto& site : s)
      if (site.role == PatchRole::KernargAddress) cs.patch(site, 0x7e0000030000);
    EXPECT_TRUE(has(words(cs), uav_block(0x30000, 0x7e00)));

    // Encoded afresh (no template), the same words and the same sites.
    CommandStream fresh;
    std::vector<PatchSite> fs;
    AdrenoKernel unprepared = uav_kernel();
    CpEncoder(g, kMem).exec(fresh, unprepared, 0x7e0000030000, {40, 1, 1}, {64, 1, 1}, fs);
    EXPECT_EQ(words(fresh), words(cs));
    ASSERT_EQ(fs.size(), s.size());
    for (size_t i = 0; i < s.size(); i++) {
      EXPECT_EQ(fs[i].dword, s[i].dword) << i;
      EXPECT_EQ(fs[i].role, s[i].role) << i;
      EXPECT_EQ(fs[i].add, s[i].add) << i;
    }
  }
}

// The descriptor's fixed words (descriptors.def TEX_MEMOBJ): dword 0 TILE6_LINEAR (0) | FMT in
// 29:22; dword 1 WIDTH 0x7fff | HEIGHT 0x7fff << 15 = 0x3fffffff (2^30 - 1 elements); dword 2
// STRUCTSIZETEXELS 1 << 4 | A6XX_TEX_BUFFER (4) << 29 = 0x80000010; the rest 0.
TEST(QcomEncoder, UavDescriptorsAreLinearTypedBuffers) {
  const std::pair<Ir3UavFormat, uint32_t> formats[] = {
      {Ir3UavFormat::U32, 0x12c00000},  // FMT6_32_UINT 0x4b << 22
      {Ir3UavFormat::U16, 0x06000000},  // FMT6_16_UINT 0x18 << 22
      {Ir3UavFormat::U8, 0x01400000}};  // FMT6_8_UINT 0x05 << 22
  for (auto [format, dword0] : formats) {
    Words d(kTEX_MEMOBJ_DWORDS, 0xdeadbeef);
    CpEncoder::uav_descriptor(d.data(), format);
    EXPECT_EQ(d, (Words{dword0, 0x3fffffff, 0x80000010, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  }
}

TEST(QcomEncoder, BadLaunchesAndCopiesAreClearErrors) {
  AdrenoKernel k;
  k.name = "k";
  CommandStream cs;
  std::vector<PatchSite> s;
  try {
    CpEncoder(Gen::A6xx, kMem).exec(cs, k, 0, {1, 1, 1}, {2048, 1, 1}, s);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "kernel 'k': a workgroup of 2048x1x1 (each at least 1, at most 1024 invocations)");
  }
  EXPECT_THROW(CpEncoder(Gen::A6xx, kMem).copy(cs, 0, 0, 4, s), InvalidInput);
}

// The error a call gives, or "" when it succeeds.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

// A grid's threads in one dimension go into a 32-bit HLSQ_CS_NDRANGE_1/3/5 GLOBALSIZE field: at
// its limit the launch encodes, one past it is the exact error (the product used to wrap).
TEST(QcomEncoder, GlobalSizesMustFitTheirFields) {
  const AdrenoKernel k = kernel(64, 16, 32);
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    CpEncoder enc(g, kMem);
    auto launch = [&](Dim3 grid, Dim3 block) {
      return error_of([&] {
        CommandStream cs;
        std::vector<PatchSite> s;
        enc.exec(cs, k, 0x7f0000020000, grid, block, s);
      });
    };
    EXPECT_EQ(launch({0xffffffff, 1, 1}, {1, 1, 1}), "");  // 2^32 - 1 threads
    EXPECT_EQ(launch({0x7fffffff, 1, 1}, {2, 1, 1}), "");  // 2^32 - 2
    EXPECT_EQ(launch({0x80000000, 1, 1}, {2, 1, 1}),
              "kernel 'k': HLSQ_CS_NDRANGE_1.GLOBALSIZE_X: 4294967296 does not fit in 32 bits (at "
              "most 4294967295)");
    EXPECT_EQ(launch({1, 0x80000000, 1}, {1, 2, 1}),
              "kernel 'k': HLSQ_CS_NDRANGE_3.GLOBALSIZE_Y: 4294967296 does not fit in 32 bits (at "
              "most 4294967295)");
    EXPECT_EQ(launch({1, 1, 0x40000000}, {1, 1, 4}),
              "kernel 'k': HLSQ_CS_NDRANGE_5.GLOBALSIZE_Z: 4294967296 does not fit in 32 bits (at "
              "most 4294967295)");
  }
}

// The shader is loaded by CP_LOAD_STATE6_FRAG in 128-byte units, NUM_UNIT 10 bits wide: 1023
// units (32736 dwords) load, a dword more is the exact error at program load (prepare).
TEST(QcomEncoder, ShaderLengthMustFitTheStateLoad) {
  for (Gen g : {Gen::A6xx, Gen::A7xx}) {
    AdrenoKernel ok = kernel(1023 * 32, 16, 32), over = kernel(1023 * 32 + 1, 16, 32);
    EXPECT_EQ(error_of([&] { CpEncoder(g, kMem).prepare(ok); }), "");
    EXPECT_EQ(error_of([&] { CpEncoder(g, kMem).prepare(over); }),
              "kernel 'k': CP_LOAD_STATE6_FRAG.NUM_UNIT: 1024 does not fit in 10 bits (at most "
              "1023)");
  }
}

// CP_INDIRECT_BUFFER's IB_SIZE is 20 bits of dwords (cp.def): at the limit the packet is
// written, one past it is refused rather than truncated.
TEST(QcomEncoder, IndirectBufferSizeMustFit) {
  EXPECT_EQ(kMaxIbDwords, 0xfffffu);
  Words p(4, 0);
  CpEncoder::indirect_buffer(p.data(), 0x7f0000050000, kMaxIbDwords);
  // CP_INDIRECT_BUFFER (0x3f: six ones, parity 1; count 3: parity 1) = 0x70bf8003.
  EXPECT_EQ(p, (Words{0x70bf8003, 0x50000, 0x7f00, 0xfffff}));
  CpEncoder::indirect_buffer(p.data(), 0x7f0000050000, kMaxIbDwords - 1);
  EXPECT_EQ(p[3], 0xffffeu);
  EXPECT_EQ(error_of([&] { CpEncoder::indirect_buffer(p.data(), 0, kMaxIbDwords + 1); }),
            "CP_INDIRECT_BUFFER.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
}

}  // namespace
}  // namespace hcq::qcom
