// The AM register descriptions (drivers/amd/am/*.def): offsets, segments and fields of a sample
// checked against the numbers in Linux's include/asic_reg headers (written here from the
// headers), the resolver's arithmetic with Navi 31's segment bases, and exact lookup errors.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/regs.hpp"
#include "amd/am/sdma.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/packets.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

using testing_support::error_of;

struct Expected {
  const char* name;
  Ip ip;
  uint8_t base_idx;
  uint32_t offset;
};

TEST(AmRegs, OffsetsAndSegmentsMatchTheLinuxHeaders) {
  // regNAME / regNAME_BASE_IDX from Linux drivers/gpu/drm/amd/include/asic_reg/.
  const Expected expected[] = {
      {"GRBM_GFX_CNTL", Ip::GC, 1, 0x0900},  // gc_11_0_0_offset.h
      {"RLC_SAFE_MODE", Ip::GC, 1, 0x0980},
      {"RLC_CNTL", Ip::GC, 1, 0x4c00},
      {"CP_MEC_CNTL", Ip::GC, 1, 0x0802},
      {"CP_HQD_ACTIVE", Ip::GC, 0, 0x1fab},
      {"CP_HQD_PQ_CONTROL", Ip::GC, 0, 0x1fba},
      {"GCVM_CONTEXT0_CNTL", Ip::GC, 0, 0x1688},
      {"GCVM_INVALIDATE_ENG17_REQ", Ip::GC, 0, 0x16bc},
      {"GCVM_INVALIDATE_ENG17_ACK", Ip::GC, 0, 0x16ce},
      {"SDMA0_QUEUE0_RB_CNTL", Ip::GC, 0, 0x0080},  // SDMA 6.0 in the GC header
      {"SDMA1_QUEUE0_RB_CNTL", Ip::GC, 0, 0x0680},  // regSDMA1_*: SDMA0's + 0x600
      {"SDMA1_WATCHDOG_CNTL", Ip::GC, 0, 0x062e},
      {"SDMA1_UTCL1_CNTL", Ip::GC, 0, 0x063c},
      {"SDMA1_UTCL1_PAGE", Ip::GC, 0, 0x063f},
      {"MMVM_CONTEXT0_CNTL", Ip::MMHUB, 0, 0x0740},  // mmhub_3_0_0_offset.h
      {"MMVM_INVALIDATE_ENG17_REQ", Ip::MMHUB, 0, 0x0774},
      {"MMVM_INVALIDATE_ENG17_ACK", Ip::MMHUB, 0, 0x0786},
      {"MMMC_VM_FB_LOCATION_BASE", Ip::MMHUB, 0, 0x08ec},
      {"BIF_BX0_PCIE_INDEX2", Ip::NBIO, 0, 0x000e},  // nbio_4_3_0_offset.h
      {"BIF_BX0_PCIE_DATA2", Ip::NBIO, 0, 0x000f},
      {"BIF_BX0_PCIE_INDEX2_HI", Ip::NBIO, 0, 0x0011},
      {"BIF_BX_PF0_RSMU_INDEX", Ip::NBIO, 1, 0x0000},
      {"RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", Ip::NBIO, 2, 0x00c0},
      {"MP0_SMN_C2PMSG_35", Ip::MP0, 0, 0x0063},  // mp_13_0_0_offset.h
      {"MP0_SMN_C2PMSG_64", Ip::MP0, 0, 0x0080},
      {"MP0_SMN_C2PMSG_81", Ip::MP0, 0, 0x0091},
      {"MP1_SMN_C2PMSG_66", Ip::MP1, 0, 0x0282},
      {"MP1_SMN_C2PMSG_82", Ip::MP1, 0, 0x0292},
      {"MP1_SMN_C2PMSG_90", Ip::MP1, 0, 0x029a},
      {"IH_RB_CNTL", Ip::OSSSYS, 0, 0x0080},  // osssys_6_0_0_offset.h
      {"IH_RB_BASE", Ip::OSSSYS, 0, 0x0081},
      {"IH_RB_RPTR", Ip::OSSSYS, 0, 0x0083},
      {"IH_RB_WPTR", Ip::OSSSYS, 0, 0x0084},
      {"HDP_MEM_POWER_CTRL", Ip::HDP, 0, 0x00d4},  // hdp_6_0_0_offset.h
      {"HDP_MISC_CNTL", Ip::HDP, 0, 0x00d3},
      // Fixed dwords of amdgpu_discovery.c (mmMM_INDEX, mmMM_INDEX_HI, mmRCC_CONFIG_MEMSIZE).
      {"MM_INDEX", Ip::NBIO, kAbsolute, 0x0},
      {"MM_INDEX_HI", Ip::NBIO, kAbsolute, 0x6},
      {"RCC_CONFIG_MEMSIZE", Ip::NBIO, kAbsolute, 0xde3},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const RegDesc& r = find_register(e.name);
    EXPECT_EQ(r.name, e.name);
    EXPECT_EQ(r.reg.ip, e.ip);
    EXPECT_EQ(r.reg.base_idx, e.base_idx);
    EXPECT_EQ(r.reg.offset, e.offset);
  }
  // The compile-time names carry the same numbers.
  static_assert(gc_11_0_0::CP_HQD_PQ_CONTROL.offset == 0x1fba && gc_11_0_0::CP_HQD_PQ_CONTROL.base_idx == 0);
  static_assert(mp_13_0_0::MP1_SMN_C2PMSG_90.ip == Ip::MP1 && mp_13_0_0::MP1_SMN_C2PMSG_90.offset == 0x29a);
  static_assert(nbio_4_3_0::RCC_CONFIG_MEMSIZE.base_idx == kAbsolute);
  EXPECT_EQ(find_register("mp1_smn_c2pmsg_66").file, "mp_13_0_0");
  EXPECT_EQ(find_register("SDMA0_QUEUE0_RB_CNTL").file, "gc_11_0_0");
}

struct ExpectedField {
  const char* reg;
  const char* field;
  uint32_t mask;  // NAME__FIELD_MASK
  uint8_t shift;  // NAME__FIELD__SHIFT
};

TEST(AmRegs, FieldMasksMatchTheLinuxHeaders) {
  const ExpectedField expected[] = {
      {"CP_HQD_PQ_CONTROL", "QUEUE_SIZE", 0x0000003f, 0x0},  // gc_11_0_0_sh_mask.h
      {"CP_HQD_PQ_CONTROL", "RPTR_BLOCK_SIZE", 0x00003f00, 0x8},
      {"CP_HQD_ACTIVE", "ACTIVE", 0x00000001, 0x0},
      {"GRBM_GFX_CNTL", "PIPEID", 0x00000003, 0x0},
      {"GRBM_GFX_CNTL", "MEID", 0x0000000c, 0x2},
      {"GRBM_GFX_CNTL", "VMID", 0x000000f0, 0x4},
      {"GRBM_GFX_CNTL", "QUEUEID", 0x00000700, 0x8},
      {"RLC_SAFE_MODE", "CMD", 0x00000001, 0x0},
      {"RLC_SAFE_MODE", "MESSAGE", 0x0000001e, 0x1},
      {"GCVM_INVALIDATE_ENG17_REQ", "PER_VMID_INVALIDATE_REQ", 0x0000ffff, 0x0},
      {"GCVM_INVALIDATE_ENG17_REQ", "FLUSH_TYPE", 0x00070000, 0x10},
      {"GCVM_INVALIDATE_ENG17_ACK", "PER_VMID_INVALIDATE_ACK", 0x0000ffff, 0x0},
      {"GCVM_CONTEXT0_CNTL", "ENABLE_CONTEXT", 0x00000001, 0x0},
      {"GCVM_CONTEXT0_CNTL", "PAGE_TABLE_DEPTH", 0x00000006, 0x1},
      {"SDMA0_QUEUE0_RB_CNTL", "RB_ENABLE", 0x00000001, 0x0},
      {"SDMA0_QUEUE0_RB_CNTL", "RB_SIZE", 0x0000003e, 0x1},
      {"SDMA0_QUEUE0_RB_CNTL", "RB_VMID", 0x0f000000, 0x18},
      {"RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", "BIF_DOORBELL_APER_EN", 0x00000001, 0x0},  // nbio
      {"BIF_BX0_PCIE_INDEX2_HI", "PCIE_INDEX2_HI", 0x000000ff, 0x0},
      {"MP1_SMN_C2PMSG_90", "CONTENT", 0xffffffff, 0x0},  // mp_13_0_0_sh_mask.h
      {"MM_INDEX", "MM_APER", 0x80000000, 0x1f},          // bif_4_1_sh_mask.h
  };
  for (const ExpectedField& e : expected) {
    SCOPED_TRACE(std::string(e.reg) + "." + e.field);
    const RegField& f = find_register(e.reg).field(e.field);
    EXPECT_EQ(f.mask(), e.mask);
    EXPECT_EQ(f.lo, e.shift);
  }
  const RegField& size = find_register("CP_HQD_PQ_CONTROL").field("rptr_block_size");
  EXPECT_EQ(size.set(0xffffffff, 5), 0xffffc5ffu);
  EXPECT_EQ(size.set(0, 0x45), 0x500u);  // beyond the width: dropped
  EXPECT_EQ(size.get(0x12345678), 0x16u);
}

// Every SDMA0 register has an SDMA1 twin with its fields, where Linux's sdma_v6_0_get_reg_offset
// puts instance 1 (sdma_engine_reg): + 0x600 dwords, or + 0x20 in segment 1's 0x5880..0x589a.
TEST(AmRegs, Sdma1RegistersAreSdma0sTwinsAtLinuxInstanceOffsets) {
  size_t twins = 0;
  for (const RegDesc& r : registers()) {
    if (!r.name.starts_with("SDMA0_")) continue;
    SCOPED_TRACE(r.name);
    const RegDesc& one = find_register("SDMA1_" + std::string(r.name.substr(6)));
    const Reg want = sdma_engine_reg(1, r.reg);
    EXPECT_EQ(one.reg.ip, Ip::GC);
    EXPECT_EQ(one.reg.base_idx, want.base_idx);
    EXPECT_EQ(one.reg.offset, want.offset);
    EXPECT_EQ(&describe(want), &one);
    ASSERT_EQ(one.fields.size(), r.fields.size());
    for (size_t i = 0; i < r.fields.size(); ++i) {
      EXPECT_EQ(one.fields[i].name, r.fields[i].name);
      EXPECT_EQ(one.fields[i].mask(), r.fields[i].mask());
    }
    ++twins;
  }
  EXPECT_EQ(twins, 49u);
  static_assert(gc_11_0_0::SDMA1_F32_CNTL.base_idx == 1 && gc_11_0_0::SDMA1_F32_CNTL.offset == 0x58ba);
  const Reg f32 = sdma_engine_reg(1, gc_11_0_0::SDMA0_F32_CNTL);
  EXPECT_EQ(f32.offset, 0x58bau);
  EXPECT_EQ(sdma_engine_reg(0, gc_11_0_0::SDMA0_F32_CNTL).offset, 0x589au);
  EXPECT_EQ(find_register("sdma1_f32_cntl").field("HALT").mask(), 0x1u);
  EXPECT_EQ(error_of([] { sdma_engine_reg(2, gc_11_0_0::SDMA0_QUEUE0_RB_CNTL); }),
            "SDMA2 queue 0: gfx1100 has SDMA engines 0 and 1");
}

TEST(AmRegs, ResolverAddsTheSegmentBase) {
  // Navi 31's bases as tinygrad test/mockgpu/am/amgpu.py IP_BASES gives them.
  IpSegmentBases b;
  b[Ip::GC] = {0x1260, 0xa000, 0x1c000, 0x2402c00};
  b[Ip::NBIO] = {0x0, 0x14, 0xd20, 0x10400, 0x241b000, 0x4040000};
  b[Ip::MP1] = {0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00};
  EXPECT_EQ(absolute_dword(find_register("GRBM_CNTL"), b), 0x1260u + 0xda0u);
  EXPECT_EQ(absolute_dword(find_register("RLC_SAFE_MODE"), b), 0xa000u + 0x980u);
  EXPECT_EQ(absolute_dword(find_register("MP1_SMN_C2PMSG_66"), b), 0x16282u);
  EXPECT_EQ(absolute_dword(find_register("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN"), b), 0xde0u);
  EXPECT_EQ(absolute_dword(find_register("BIF_BX_PF0_RSMU_DATA"), b), 0x15u);
  // Fixed dwords need no base; RCC_CONFIG_MEMSIZE's 0xde3 is NBIO segment 2 + 0xc3 on Navi 31.
  EXPECT_EQ(absolute_dword(find_register("RCC_CONFIG_MEMSIZE"), IpSegmentBases{}), 0xde3u);
  // GRBM_STATUS, described once in regs.def (the CP's dword address), is gc_11_0_0_offset.h's
  // regGRBM_STATUS 0x0da4 in GC segment 0.
  EXPECT_EQ(b[Ip::GC][0] + 0xda4u, regs::GRBM_STATUS_ALL.address);

  IpSegmentBases one;
  one[Ip::GC] = {0x1260};
  EXPECT_EQ(error_of([&] { absolute_dword(find_register("RLC_SAFE_MODE"), one); }),
            "RLC_SAFE_MODE (gc_11_0_0): GC has no segment 1 (IP discovery gave 1 base)");
  EXPECT_EQ(error_of([&] { absolute_dword(find_register("MP1_SMN_C2PMSG_66"), one); }),
            "MP1_SMN_C2PMSG_66 (mp_13_0_0): MP1 has no segment 0 (IP discovery gave 0 bases)");
}

// The bases come from the GPU's own discovery table: the emulated RX 7900 XTX's, written from
// a real one's, resolves the registers where the hand-written bases above put them.
TEST(AmRegs, SegmentBasesFromTheDiscoveryTable) {
  std::vector<std::byte> vram_tail(kDiscoveryTmrSize);
  const std::vector<std::byte> t = emu::gfx1100_discovery_table();
  std::copy(t.begin(), t.end(), vram_tail.begin());
  const IpSegmentBases b = segment_bases(parse_discovery(vram_tail));
  EXPECT_EQ(b[Ip::GC], (std::vector<uint32_t>{0x1260, 0xa000, 0x1c000, 0x2402c00}));
  EXPECT_EQ(b[Ip::GC][0] + 0xda4u, regs::GRBM_STATUS_ALL.address);  // regGRBM_STATUS
  EXPECT_EQ(absolute_dword(find_register("MP1_SMN_C2PMSG_66"), b), 0x16282u);
  EXPECT_EQ(absolute_dword(find_register("BIF_BX_PF0_RSMU_DATA"), b), 0x15u);
  for (Ip ip : {Ip::GC, Ip::MMHUB, Ip::NBIO, Ip::MP0, Ip::MP1, Ip::OSSSYS, Ip::HDP})
    EXPECT_FALSE(b[ip].empty()) << ip_name(ip);
}

TEST(AmRegs, LookupByNameAndItsErrors) {
  EXPECT_EQ(&describe(mp_13_0_0::MP1_SMN_C2PMSG_66), &find_register("MP1_SMN_C2PMSG_66"));
  EXPECT_EQ(error_of([] { describe(Reg{Ip::MP1, 0, 0x999}); }),
            "no AM register description for MP1 segment 0 offset 0x999");
  EXPECT_EQ(&find_register("cp_hqd_active"), &find_register("CP_HQD_ACTIVE"));
  EXPECT_EQ(&find_register("regCP_HQD_ACTIVE"), &find_register("CP_HQD_ACTIVE"));  // Linux's name
  EXPECT_EQ(error_of([] { find_register("CP_HQD_FOO"); }),
            "unknown AM register CP_HQD_FOO (gc_11_0_0, mmhub_3_0_0, nbio_4_3_0, mp_13_0_0, "
            "osssys_6_0_0, hdp_6_0_0 describe " + std::to_string(registers().size()) + ")");
  EXPECT_EQ(error_of([] { find_register("CP_HQD_PQ_CONTROL").field("queue"); }),
            "CP_HQD_PQ_CONTROL (gc_11_0_0) has no field queue");
}

// describe(Reg) answers by address from an index: for every register, the first one described
// at its address, as the search it replaced found.
TEST(AmRegs, DescribeFindsEveryRegisterByItsAddress) {
  for (const RegDesc& r : registers()) {
    const RegDesc* first = nullptr;
    for (const RegDesc& d : registers())
      if (d.reg.ip == r.reg.ip && d.reg.base_idx == r.reg.base_idx && d.reg.offset == r.reg.offset) {
        first = &d;
        break;
      }
    EXPECT_EQ(&describe(r.reg), first) << r.name;
  }
}

TEST(AmRegs, EveryRegisterSitsInItsFileAndIpOnce) {
  std::set<std::string_view> names;
  size_t with_fields = 0;
  for (const RegDesc& r : registers()) {
    SCOPED_TRACE(std::string(r.name));
    EXPECT_TRUE(names.insert(r.name).second);
    if (r.file == "mp_13_0_0" && r.reg.base_idx != kAbsolute) {
      EXPECT_EQ(r.reg.ip, r.name.starts_with("MP0") ? Ip::MP0 : Ip::MP1);
    }
    const std::map<std::string_view, std::string_view> ip_of_file = {
        {"gc_11_0_0", "GC"},     {"mmhub_3_0_0", "MMHUB"},   {"nbio_4_3_0", "NBIO"},
        {"mp_13_0_0", "MP0 MP1"}, {"osssys_6_0_0", "OSSSYS"}, {"hdp_6_0_0", "HDP"}};
    EXPECT_NE(ip_of_file.at(r.file).find(ip_name(r.reg.ip)), std::string_view::npos);
    uint32_t seen = 0;
    for (const RegField& f : r.fields) {
      EXPECT_EQ(seen & f.mask(), 0u) << f.name << " overlaps another field";
      seen |= f.mask();
    }
    with_fields += !r.fields.empty();
  }
  EXPECT_GT(registers().size(), 500u);
  EXPECT_GT(with_fields, 400u);
}

// The compile-time field constants the driver uses (regs.hpp's AM_FIELD) are the table's own
// fields: the same bits as Linux's gc_11_0_0_sh_mask.h, and a register described LIKE its twin
// (SDMA1 as SDMA0) has the twin's fields under its own name.
TEST(AmRegs, FieldConstantsAreTheDescribedFields) {
  namespace gcf = gc_11_0_0::fields;
  constexpr RegField queue_size = gcf::CP_HQD_PQ_CONTROL::QUEUE_SIZE;
  static_assert(queue_size.mask() == 0x3f && queue_size.lo == 0);  // CP_HQD_PQ_CONTROL__QUEUE_SIZE
  static_assert(gcf::GRBM_GFX_CNTL::QUEUEID.mask() == 0x700);      // GRBM_GFX_CNTL__QUEUEID_MASK
  static_assert(gcf::SDMA1_QUEUE0_RB_CNTL::RB_SIZE.mask() == 0x3e);  // SDMA1 like SDMA0
  const RegField& described = find_register("CP_HQD_PQ_CONTROL").field("QUEUE_SIZE");
  EXPECT_EQ(queue_size.name, described.name);
  EXPECT_EQ(queue_size.mask(), described.mask());
  EXPECT_EQ(with_fields(0xffffffff, {{gcf::GRBM_GFX_CNTL::MEID, 1}, {gcf::GRBM_GFX_CNTL::VMID, 0}}),
            0xffffff07u);
}

// The GMC programs both hubs from one list with the GC hub's fields (hub_regs.hpp HubRegs): every
// GC hub register (GCVM_*, GCMC_VM_*) whose MM twin (MMVM_*, MMMC_VM_*) is described must have
// the same fields at the same bits (mmhub_3_0_0_sh_mask.h and gc_11_0_0_sh_mask.h agree but
// for one field, which gmc.cpp does not set).
TEST(AmRegs, BothHubsDescribeTheirFieldsAlike) {
  int pairs = 0;
  std::vector<std::string> differ;
  for (const RegDesc& gc : registers()) {
    if (gc.file != "gc_11_0_0" ||
        !(gc.name.starts_with("GCVM_") || gc.name.starts_with("GCMC_VM_")))
      continue;
    const std::string mm_name = "MM" + std::string(gc.name.substr(2));
    const RegDesc* mm = nullptr;
    for (const RegDesc& r : registers())
      if (r.name == mm_name) mm = &r;
    if (!mm) continue;
    ++pairs;
    for (const RegField& f : gc.fields) {
      const RegField* twin = nullptr;
      for (const RegField& m : mm->fields)
        if (m.name == f.name) twin = &m;
      if (!twin || twin->lo != f.lo || twin->width != f.width)
        differ.push_back(std::string(gc.name.substr(2)) + "." + std::string(f.name));
    }
  }
  EXPECT_GE(pairs, 40);  // every register hub_regs.hpp lists, and more
  // The one difference: MMVM_L2_CNTL5 has MM_CLIENT_RET_FGCG_OFF at bit 16, which moves
  // UTCL2_ATC_REQ_FGCG_OFF to bit 17 (GC: bit 16). gmc.cpp sets neither.
  EXPECT_EQ(differ, std::vector<std::string>{"VM_L2_CNTL5.UTCL2_ATC_REQ_FGCG_OFF"});
}

// One description per register: none of regs.def's (the CP-visible registers of every
// generation) is described again by an IP version's .def.
TEST(AmRegs, NoRegisterIsDescribedInBothRegisterFiles) {
  std::vector<std::string> both;
  for (const regs::Reg& r : regs::all())
    for (const RegDesc& d : registers())
      if (d.name == r.name) both.push_back(r.name);
  EXPECT_EQ(both, std::vector<std::string>{});
  EXPECT_EQ(error_of<InvalidInput>([] { find_register("GRBM_STATUS"); }).substr(0, 31),
            "unknown AM register GRBM_STATUS");
}

}  // namespace
}  // namespace hcq::amd::am
