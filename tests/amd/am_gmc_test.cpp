// The AM GMC: the driver (am::Gmc) against the emulated hubs (emu::AmGmc) through an emulated
// register window at the emulated RX 7900 XTX's register addresses, with page tables the
// driver's builder (am::PageTables) writes into emulated VRAM and the hubs' MMUs walk. The
// expected register values are worked out here from Linux gfxhub_v3_0.c / mmhub_v3_0.c and
// the field layouts of the sh_mask headers, not taken from the driver.
#include "amd/emu/am_gmc.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "amd/am/gmc.hpp"
#include "amd/am/ih.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/am/pte.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am_block_harness.hpp"
#include "amd/emu/am_ih.hpp"
#include "amd/emu/am_mmu.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using namespace std::chrono_literals;
using emu::AmGmc;
using emu::MmuAccess;
using emu::MmuFaultReason;
using testing_support::error_of;

constexpr uint64_t kVramBytes = 8 << 20;
constexpr uint64_t kVaEnd = 0x7fffffffffff;  // context 0 covers [0, 2^47)

class AmGmcTest : public ::testing::Test {
 protected:
  AmGmcTest() {
    bus.interrupt = [this](const std::array<uint32_t, 8>& e) { ih_model.push(e); };
    router.add(gmc_model);
    router.add(ih_model);
  }

  // The driver's tables after the GMC's two pages (scratch at 0x0, dummy at 0x1000): root 0x2000.
  PageTables& tables() {
    if (!tables_) tables_ = std::make_unique<PageTables>(vram, vram.allocator());
    return *tables_;
  }
  void init_gc() { gmc.init_hub(Hub::Gc, {tables().page_table_base(), 0, kVaEnd}); }

  // The VRAM address of the PDB0 entry translating `va`.
  uint64_t pdb0_entry_address(uint64_t va) {
    uint64_t table = tables().root_address();
    for (unsigned level = 0; level < 2; ++level)
      table = pde_address(vram.read64(table + kLevels[level].index(va) * 8));
    return table + kLevels[2].index(va) * 8;
  }

  IpSegmentBases bases = test::gfx1100_bases();
  test::TestVram vram{kVramBytes};
  emu::AmBus bus = test::bus_over(vram);  // before the models: AmGmc's MMUs keep its VRAM
  AmGmc gmc_model{bases, bus};
  emu::AmIh ih_model{bases, bus};
  test::Router router{bases};
  os::EmulatedMmio mmio{"BAR5 of emu:gfx1100_am", 1 << 20, router};
  RegisterIo regs{mmio, bases};
  Gmc gmc{regs, vram, 2ms};
  std::unique_ptr<PageTables> tables_;
};

// Every register write of the MM hub's init, in order, with the values Linux's
// mmhub_v3_0_gart_enable and set_fault_enable_default(true) give them (context 0 as tinygrad).
TEST_F(AmGmcTest, MmHubInitWritesLinuxSequence) {
  const uint64_t base = tables().page_table_base();
  ASSERT_EQ(base, 0x2001u);  // root at VRAM 0x2000 | VALID
  router.record(true);
  gmc.init_hub(Hub::Mm, {base, 0, kVaEnd});
  std::vector<std::string> expected = {
      "MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32=0x2001",
      "MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32=0x0",
      "MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32=0x0",
      "MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32=0x0",
      "MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32=0xffffffff",  // 0x7fffffffffff >> 12
      "MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32=0x7",         // >> 44
      "MMMC_VM_AGP_BASE=0x0",
      "MMMC_VM_AGP_BOT=0xffffff",
      "MMMC_VM_AGP_TOP=0x0",
      "MMMC_VM_SYSTEM_APERTURE_LOW_ADDR=0x200000",     // 0x8000000000 >> 18
      "MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR=0x20003f",  // 0x80007fffff >> 18 (8 MiB of VRAM)
      "MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB=0x0",  // scratch page at VRAM 0
      "MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB=0x0",
      "MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32=0x1",  // dummy page at VRAM 0x1000
      "MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32=0x0",
      "MMVM_L2_PROTECTION_FAULT_CNTL2=0x40000",  // ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY (18)
      // ENABLE_L1_TLB, SYSTEM_ACCESS_MODE 3 (4:3), ENABLE_ADVANCED_DRIVER_MODEL (6), MTYPE UC 3
      // (13:11).
      "MMMC_VM_MX_L1_TLB_CNTL=0x1859",
      // ENABLE_L2_CACHE, ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY (11),
      // CONTEXT1_IDENTITY_ACCESS_MODE 1 (20:19).
      "MMVM_L2_CNTL=0x80801",
      "MMVM_L2_CNTL2=0x3",
      "MMVM_L2_CNTL3=0x80130009",  // 0x80100007 with BANK_SELECT 9, BIGK_FRAGMENT_SIZE 6 (19:15)
      "MMVM_L2_CNTL4=0x1",         // 0xc1 without VMC_TAP_PDE/PTE_REQUEST_PHYSICAL
      "MMVM_L2_CNTL5=0x3fe0",
      // ENABLE_CONTEXT, PAGE_TABLE_DEPTH 3 (2:1), every *_PROTECTION_FAULT_ENABLE_* (22:9).
      "MMVM_CONTEXT0_CNTL=0x7ffe07",
      "MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32=0xffffffff",
      "MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32=0xf",
      "MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32=0x0",
      "MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32=0x0",
      "MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32=0x0",
      "MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32=0x0",
  };
  for (int e = 0; e < 18; ++e) {
    expected.push_back(std::string("MMVM_INVALIDATE_ENG") + std::to_string(e) +
                       "_ADDR_RANGE_LO32=0xffffffff");
    expected.push_back(std::string("MMVM_INVALIDATE_ENG") + std::to_string(e) +
                       "_ADDR_RANGE_HI32=0x1f");
  }
  // Every *_PROTECTION_FAULT_ENABLE_DEFAULT (12:2).
  expected.push_back("MMVM_L2_PROTECTION_FAULT_CNTL=0x1ffc");
  EXPECT_EQ(router.take_writes(), expected);
  EXPECT_TRUE(gmc.hub_ready(Hub::Mm));
  EXPECT_FALSE(gmc.hub_ready(Hub::Gc));
  EXPECT_EQ(gmc.fb_base(), 0x8000000000u);
  EXPECT_EQ(gmc_model.last_error(), "");
}

// The GC hub's registers are its own (GCVM_/GCMC_), and its MMU then walks the driver's tables:
// 4 KiB, 2 MiB and 1 GiB pages, VRAM and system memory.
TEST_F(AmGmcTest, GcHubTranslatesThroughDriverTables) {
  PageTables& pt = tables();
  pt.map(0x100000, 0x400000, 0x1000, {});
  pt.map(0x40000000, 0x600000, 0x200000, {});
  MapFlags host;
  host.memory = Memory::System;
  pt.map(0x80000000, 0x7f0000000000, 0x40000000, host);
  router.record(true);
  init_gc();
  const std::vector<std::string> writes = router.take_writes();
  ASSERT_GE(writes.size(), 6u);
  EXPECT_EQ(writes[0], "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32=0x2001");
  EXPECT_EQ(writes[5], "GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32=0x7");
  EXPECT_EQ(router.plain("GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR"), 0x20003fu);
  EXPECT_EQ(router.plain("GCVM_L2_CNTL3"), 0x80130009u);  // 0x80120007, BANK 9, BIGK fragment 6
  EXPECT_EQ(regs.read(find_register("GCVM_L2_PROTECTION_FAULT_CNTL")), 0x1ffcu);

  auto t = gmc_model.gfx_mmu().translate(0x100123, MmuAccess::Read, emu::kClientCpc);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_EQ(t.pa, 0x400123u);
  EXPECT_EQ(t.page_bytes, 0x1000u);
  t = gmc_model.gfx_mmu().translate(0x40123456, MmuAccess::Write, emu::kClientCpc);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_EQ(t.pa, 0x723456u);
  EXPECT_EQ(t.page_bytes, 0x200000u);
  t = gmc_model.gfx_mmu().translate(0x80000010, MmuAccess::Read, emu::kClientSdma0);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_TRUE(t.system);
  EXPECT_EQ(t.pa, 0x7f0000000010u);
  EXPECT_EQ(t.page_bytes, 0x40000000u);
  // The MM hub was not initialized: its MMU translates nothing.
  EXPECT_FALSE(gmc_model.mm_mmu().translate(0x100000, MmuAccess::Read, 0).ok());
}

// After an unmap the hub's TLB keeps translating the page until the driver invalidates that
// hub; invalidating the other hub does not help.
TEST_F(AmGmcTest, StaleTlbTranslatesUntilInvalidate) {
  PageTables& pt = tables();
  pt.map(0x100000, 0x400000, 0x1000, {});
  init_gc();
  gmc.init_hub(Hub::Mm, {pt.page_table_base(), 0, kVaEnd});
  auto& mmu = gmc_model.gfx_mmu();
  ASSERT_TRUE(mmu.translate(0x100000, MmuAccess::Read, emu::kClientCpc).ok());

  pt.unmap(0x100000, 0x1000);
  ASSERT_EQ(pt.take_invalidations(), (std::vector<VaRange>{{0x100000, 0x1000}}));
  auto stale = mmu.translate(0x100000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE(stale.from_tlb);

  gmc.invalidate(Hub::Mm);
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Mm), 1u);
  EXPECT_TRUE(mmu.translate(0x100000, MmuAccess::Read, emu::kClientCpc).ok());

  gmc.invalidate(Hub::Gc);
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Gfx), 1u);
  const auto after = mmu.translate(0x100000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.fault->reason, MmuFaultReason::NotValid);
  // The MM hub's semaphore was released again, and its private invalidation requested.
  EXPECT_EQ(regs.read(find_register("MMVM_INVALIDATE_ENG17_SEM")), 1u);
  EXPECT_EQ(router.plain("MMVM_L2_BANK_SELECT_RESERVED_CID2"), 1u << 25);
}

TEST_F(AmGmcTest, UnmappedAddressFaultReadBackAndInterrupt) {
  PageTables& pt = tables();
  pt.map(0x100000, 0x400000, 0x1000, {});
  Ih ih(regs, vram, 0x1000);
  ih.init();
  init_gc();
  EXPECT_EQ(gmc.read_fault(Hub::Gc), std::nullopt);

  // 0x300000 is in the next 2 MiB: its PDB0 entry is not valid. A write by the CPC.
  const auto t = gmc_model.gfx_mmu().translate(0x300000, MmuAccess::Write, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  gmc_model.report_fault(AmGmc::Hub::Gfx, *t.fault);

  const auto fault = gmc.read_fault(Hub::Gc);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->address, 0x300000u);
  EXPECT_EQ(fault->client, 5u);
  EXPECT_TRUE(fault->write);
  // PERMISSION_FAULTS 0x5 (not valid | write), CID 5 (17:9), RW (18).
  EXPECT_EQ(fault->describe(),
            "gfxhub page fault at 0x300000 by CPC (client 0x5), write: page not valid (status "
            "0x40a50: MORE_FAULTS 0, WALKER_ERROR 0, PERMISSION_FAULTS 0x5, MAPPING_ERROR 0)");

  // The IH entry: SOC21 client GFX (0xa), source UTCL2_FAULT (0), the page in src_data.
  const std::vector<IhEntry> entries = ih.drain();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].raw, (std::array<uint32_t, 8>{0xa, 0, 0, 0, 0x300, 0x20, 0, 0}));
  const auto vm = decode_vm_fault(entries[0]);
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->hub, Hub::Gc);
  EXPECT_EQ(vm->address, 0x300000u);
  EXPECT_TRUE(vm->write);
  EXPECT_EQ(vm->describe(), "gfxhub page fault (IH, client 0xa vmid 0) at 0x300000, write");
  EXPECT_EQ(entries[0].describe(), "client 0xa source 0x0 (VM_FAULT) ring 0 vmid 0");

  // A second fault before the clear: the first stays latched, MORE_FAULTS is set.
  const auto second = gmc_model.gfx_mmu().translate(0x500000, MmuAccess::Read, emu::kClientTcp);
  ASSERT_FALSE(second.ok());
  gmc_model.report_fault(AmGmc::Hub::Gfx, *second.fault);
  EXPECT_EQ(gmc.read_fault(Hub::Gc)->describe(),
            "gfxhub page fault at 0x300000 by CPC (client 0x5), write: page not valid (status "
            "0x40a51: MORE_FAULTS 1, WALKER_ERROR 0, PERMISSION_FAULTS 0x5, MAPPING_ERROR 0)");

  gmc.clear_fault(Hub::Gc);
  EXPECT_EQ(gmc.read_fault(Hub::Gc), std::nullopt);
  // The clear bit is an action: the control register keeps the fault defaults only.
  EXPECT_EQ(regs.read(find_register("GCVM_L2_PROTECTION_FAULT_CNTL")), 0x1ffcu);
  gmc_model.report_fault(AmGmc::Hub::Gfx, *second.fault);
  EXPECT_EQ(gmc.read_fault(Hub::Gc)->describe(),
            "gfxhub page fault at 0x500000 by TCP (client 0x8), read: page not valid (status "
            "0x1030: MORE_FAULTS 0, WALKER_ERROR 0, PERMISSION_FAULTS 0x3, MAPPING_ERROR 0)");
}

// A PDE pointing outside VRAM: the walker cannot read the table.
TEST_F(AmGmcTest, BadPdeFaultsAsWalkerError) {
  PageTables& pt = tables();
  pt.map(0x100000, 0x400000, 0x1000, {});
  init_gc();
  vram.write64(pdb0_entry_address(0x100000), table_entry(0x100000000));
  const auto t = gmc_model.gfx_mmu().translate(0x100000, MmuAccess::Read, emu::kClientTcp);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::BadTable);
  gmc_model.report_fault(AmGmc::Hub::Gfx, *t.fault);
  EXPECT_EQ(gmc.read_fault(Hub::Gc)->describe(),
            "gfxhub page fault at 0x100000 by TCP (client 0x8), read: page-table walker error 1 "
            "(status 0x1002: MORE_FAULTS 0, WALKER_ERROR 1, PERMISSION_FAULTS 0x0, "
            "MAPPING_ERROR 0)");
}

// A PTE without WRITEABLE, written: a permission fault; the MM hub's client names.
TEST_F(AmGmcTest, ReadOnlyPageWriteFaultsOnTheMmHub) {
  PageTables& pt = tables();
  MapFlags read_only;
  read_only.writable = false;
  pt.map(0x200000, 0x400000, 0x1000, read_only);
  gmc.init_hub(Hub::Mm, {pt.page_table_base(), 0, kVaEnd});
  Ih ih(regs, vram, 0x1000);
  ih.init();
  // MMHUB client 15 writing is OSSSYS (mmhub_client_ids_v3_0_0[15][1]).
  const auto t = gmc_model.mm_mmu().translate(0x200000, MmuAccess::Write, 15);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::NotWritable);
  gmc_model.report_fault(AmGmc::Hub::Mm, *t.fault);
  EXPECT_EQ(gmc.read_fault(Hub::Mm)->describe(),
            "mmhub page fault at 0x200000 by OSSSYS (client 0xf), write: page not writable "
            "(status 0x41e40: MORE_FAULTS 0, WALKER_ERROR 0, PERMISSION_FAULTS 0x4, "
            "MAPPING_ERROR 0)");
  EXPECT_EQ(gmc.read_fault(Hub::Gc), std::nullopt);
  // The MM hub's entry: client VMC (0x12), source VM_FAULT (0), VMID source bit 31.
  const std::vector<IhEntry> entries = ih.drain();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].raw[0], 0x80000012u);
  EXPECT_EQ(decode_vm_fault(entries[0])->describe(),
            "mmhub page fault (IH, client 0x12 vmid 0) at 0x200000, write");
}

TEST_F(AmGmcTest, InterruptOnlyWhenContextEnablesIt) {
  init_gc();
  Ih ih(regs, vram, 0x1000);
  ih.init();
  // Clear VALID_PROTECTION_FAULT_ENABLE_INTERRUPT (15) of GCVM_CONTEXT0_CNTL.
  const RegDesc& cntl = find_register("GCVM_CONTEXT0_CNTL");
  regs.write(cntl, regs.read(cntl) & ~(1u << 15));
  const auto t = gmc_model.gfx_mmu().translate(0x100000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  gmc_model.report_fault(AmGmc::Hub::Gfx, *t.fault);
  EXPECT_TRUE(gmc.read_fault(Hub::Gc));
  EXPECT_EQ(ih.drain().size(), 0u);
  EXPECT_EQ(gmc_model.interrupts_raised(), 0u);
}

TEST_F(AmGmcTest, InvalidateTimesOutWithoutAck) {
  init_gc();
  gmc.init_hub(Hub::Mm, {tables().page_table_base(), 0, kVaEnd});
  gmc_model.withhold_ack(true);
  EXPECT_EQ(error_of<TimeoutError>([&] { gmc.invalidate(Hub::Gc); }),
            "GCVM_INVALIDATE_ENG17_ACK: waited 2 ms for 0x1 (mask 0x1), last read 0x0");
  EXPECT_EQ(error_of<TimeoutError>([&] { gmc.invalidate(Hub::Mm); }),
            "MMVM_INVALIDATE_ENG17_ACK: waited 2 ms for 0x1 (mask 0x1), last read 0x0");
  // The semaphore was released after the timeout: the next invalidation gets it.
  gmc_model.withhold_ack(false);
  gmc.invalidate(Hub::Mm);
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Mm), 2u);
}

TEST_F(AmGmcTest, InvalidateTimesOutWhenTheSemaphoreIsHeld) {
  gmc.init_hub(Hub::Mm, {tables().page_table_base(), 0, kVaEnd});
  gmc_model.hold_semaphore(AmGmc::Hub::Mm, true);
  router.record(true);
  EXPECT_EQ(error_of<TimeoutError>([&] { gmc.invalidate(Hub::Mm); }),
            "MMVM_INVALIDATE_ENG17_SEM: waited 2 ms for 0x1 (mask 0x1), last read 0x0");
  // No request was sent without the semaphore.
  EXPECT_EQ(router.take_writes(), std::vector<std::string>{});
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Mm), 0u);
}

TEST_F(AmGmcTest, InvalidateBeforeInitIsRefused) {
  EXPECT_EQ(error_of<Error>([&] { gmc.invalidate(Hub::Gc); }),
            "GC hub invalidation before the hub was initialized");
}

TEST_F(AmGmcTest, ModelRefusesAnotherPageTableDepth) {
  const RegDesc& cntl = find_register("GCVM_CONTEXT0_CNTL");
  init_gc();
  regs.write(cntl, 0x1);  // ENABLE_CONTEXT with depth 0 (Linux's flat GART)
  EXPECT_EQ(gmc_model.last_error(),
            "GCVM_CONTEXT0_CNTL: PAGE_TABLE_DEPTH 0 is not modelled (the model walks 4 levels, "
            "depth 3); the context translates nothing");
  gmc_model.reset();
  EXPECT_EQ(gmc_model.last_error(), "");
  EXPECT_EQ(regs.read(find_register("GCMC_VM_FB_LOCATION_BASE")), 0x8000u);
  EXPECT_EQ(regs.read(find_register("MMMC_VM_FB_LOCATION_TOP")), 0x8000u);
}

// Invalidations from several threads (the header allows it): each one's semaphore, request and
// acknowledge stay together, every request reaches the model.
TEST_F(AmGmcTest, ConcurrentInvalidations) {
  init_gc();
  gmc.init_hub(Hub::Mm, {tables().page_table_base(), 0, kVaEnd});
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int n = 0; n < kEach; ++n) {
        try {
          gmc.invalidate(i % 2 ? Hub::Mm : Hub::Gc);
          gmc.read_fault(Hub::Gc);
        } catch (...) {
          ++failures;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Gfx), unsigned(kThreads / 2 * kEach));
  EXPECT_EQ(gmc_model.invalidations(AmGmc::Hub::Mm), unsigned(kThreads / 2 * kEach));
}

// Each hub's L2_CNTL3 starts from its own default (the GC hub once took MMHUB's); the
// fields init_hub sets then give both 0x80130009.
TEST(AmGmcNames, EachHubsL2Cntl3StartsFromItsOwnDefault) {
  EXPECT_EQ(l2_cntl3_default(Hub::Gc), 0x80120007u);  // gc_11_0_0_default.h
  EXPECT_EQ(l2_cntl3_default(Hub::Mm), 0x80100007u);  // mmhub_v3_0.c
}

TEST(AmGmcNames, ClientNames) {
  EXPECT_STREQ(fault_client_name(Hub::Gc, 0, false), "CB/DB");
  EXPECT_STREQ(fault_client_name(Hub::Gc, 13, true), "SDMA0");
  EXPECT_STREQ(fault_client_name(Hub::Gc, 17, false), "SDMA3");
  EXPECT_STREQ(fault_client_name(Hub::Gc, 18, false), "unknown");
  EXPECT_STREQ(fault_client_name(Hub::Mm, 52, false), "VCN0");
  EXPECT_STREQ(fault_client_name(Hub::Mm, 20, true), "VCN0");
  EXPECT_STREQ(fault_client_name(Hub::Mm, 2, false), "unknown");
}

}  // namespace
}  // namespace hcq::amd::am
