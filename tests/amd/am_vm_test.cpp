// AM memory (issue 17 items 5 and 8): the gfx11 PTE/PDE encodings against numbers worked out by
// hand from Linux amdgpu_vm.h / gmc_v11_0.c, the VRAM allocator, the page-table builder, and
// the emulated MMU walking what the builder wrote (written from pte.def alone), faults and the
// stale TLB entry a missing invalidation leaves.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "amd/am/page_tables.hpp"
#include "amd/am/pte.hpp"
#include "amd/am/vram_allocator.hpp"
#include "amd/emu/am_mmu.hpp"
#include "core/error.hpp"
#include "common/error_of.hpp"

namespace hcq::amd::am {
namespace {

using emu::AmMmu;
using emu::MmuAccess;
using emu::MmuFaultReason;

constexpr uint64_t k4K = 4096, k2M = 2ull << 20, k1G = 1ull << 30;

using testing_support::error_of;

// ---- the format ----

TEST(AmPte, FieldsAreLinuxBits) {
  // amdgpu_vm.h: AMDGPU_PTE_VALID (1 << 0) ... AMDGPU_PDE_BFS(a) (a << 59).
  EXPECT_EQ(pte::VALID(1), 0x1ull);
  EXPECT_EQ(pte::SYSTEM(1), 0x2ull);
  EXPECT_EQ(pte::SNOOPED(1), 0x4ull);
  EXPECT_EQ(pte::TMZ(1), 0x8ull);
  EXPECT_EQ(pte::EXECUTABLE(1), 0x10ull);
  EXPECT_EQ(pte::READABLE(1), 0x20ull);
  EXPECT_EQ(pte::WRITEABLE(1), 0x40ull);
  EXPECT_EQ(pte::FRAGMENT(9), 0x480ull);                  // AMDGPU_PTE_FRAG(9)
  EXPECT_EQ(pte::FRAGMENT(0x1f), 0xf80ull);
  EXPECT_EQ(pte::ADDRESS(~0ull), 0x0000fffffffff000ull);  // 47:12
  EXPECT_EQ(pte::MTYPE(pte::MTYPE_UC), 0x0003000000000000ull);  // AMDGPU_PTE_MTYPE_NV10(3)
  EXPECT_EQ(pte::MTYPE(7), 0x0007000000000000ull);        // AMDGPU_PTE_MTYPE_NV10_MASK
  EXPECT_EQ(pte::PRT(1), 0x0008000000000000ull);          // 1 << 51
  EXPECT_EQ(pte::PDE_PTE(1), 0x0040000000000000ull);      // 1 << 54
  EXPECT_EQ(pte::TF(1), 0x0100000000000000ull);           // 1 << 56
  EXPECT_EQ(pte::NOALLOC(1), 0x0400000000000000ull);      // 1 << 58
  EXPECT_EQ(pde::ADDRESS(~0ull), 0x0000ffffffffffc0ull);  // 47:6 (BUG_ON 0xFFFF00000000003F)
  EXPECT_EQ(pde::BFS(9), 0x4800000000000000ull);          // AMDGPU_PDE_BFS(0x9)
  EXPECT_EQ(pde::PTE(1), pte::PDE_PTE(1));
  // GCVM_L2_PROTECTION_FAULT_STATUS masks (gc_11_0_0_sh_mask.h).
  EXPECT_EQ(fault_status::PERMISSION_FAULTS(0xf), 0xf0ull);
  EXPECT_EQ(fault_status::CID(0x1ff), 0x3fe00ull);
  EXPECT_EQ(fault_status::RW(1), 0x40000ull);
  EXPECT_EQ(fault_status::VMID(0xf), 0xf00000ull);
  EXPECT_EQ(kLevels[0].entry_bytes(), 512 * k1G);
  EXPECT_EQ(kLevels[1].entry_bytes(), k1G);
  EXPECT_EQ(kLevels[2].entry_bytes(), k2M);
  EXPECT_EQ(kLevels[3].entry_bytes(), k4K);
  EXPECT_EQ(kLevels[3].index(0x1ff000), 0x1ffu);
  EXPECT_EQ(kLevels[0].index(0xff8000000000), 0x1ffu);
}

TEST(AmPte, EntriesByteExact) {
  MapFlags rw;  // VRAM, readable, writable, MTYPE NC
  // VALID | READABLE | WRITEABLE = 0x61 over the page address.
  EXPECT_EQ(page_entry(0x200000, rw, 3), 0x0000000000200061ull);
  MapFlags rx = rw;
  rx.writable = false;
  rx.executable = true;
  EXPECT_EQ(page_entry(0x200000, rx, 3), 0x0000000000200031ull);
  MapFlags host = rw;
  host.memory = Memory::System;
  host.snooped = true;  // SYSTEM 0x2 | SNOOPED 0x4
  EXPECT_EQ(page_entry(0x12345000, host, 3), 0x0000000012345067ull);
  MapFlags uc = rw;
  uc.uncached = true;
  EXPECT_EQ(page_entry(0x200000, uc, 3), 0x0003000000200061ull);
  // A 2 MiB page in a PDB0 entry and a 1 GiB page in a PDB1 entry: PDE_PTE (1 << 54).
  EXPECT_EQ(page_entry(0x40000000, rw, 2), 0x0040000040000061ull);
  EXPECT_EQ(page_entry(0x80000000, rw, 1), 0x0040000080000061ull);
  EXPECT_EQ(page_entry(0xfffffffff000, rw, 3), 0x0000fffffffff061ull);
  // A directory entry: the table's address | VALID.
  EXPECT_EQ(table_entry(0x7000), 0x0000000000007001ull);
  EXPECT_EQ(table_entry(0xfffffffff000), 0x0000fffffffff001ull);
}

// ---- the VRAM allocator ----

TEST(AmVram, AlignedRangesFreeAndCoalesce) {
  VramAllocator vram(0x100000, 0x1000000);  // 16 MiB at 1 MiB
  const uint64_t a = vram.alloc(0x1000);
  EXPECT_EQ(a, 0x100000u);
  const uint64_t b = vram.alloc(0x10, 0x200000);  // rounded to 4 KiB, 2 MiB aligned
  EXPECT_EQ(b % 0x200000, 0u);
  const uint64_t c = vram.alloc(0x3000, 16);  // alignment below 4 KiB: 4 KiB
  EXPECT_EQ(c % 0x1000, 0u);
  EXPECT_EQ(vram.live_allocations(), 3u);
  EXPECT_EQ(vram.bytes_free(), 0x1000000u - 0x5000u);
  vram.free(b);
  vram.free(a);
  vram.free(c);
  EXPECT_EQ(vram.bytes_free(), 0x1000000u);
  EXPECT_EQ(vram.largest_free(), 0x1000000u);  // one range again
  EXPECT_EQ(vram.alloc(0x1000000), 0x100000u);
}

TEST(AmVram, ExactErrors) {
  VramAllocator vram(0, 0x10000);
  vram.alloc(0x8000);
  EXPECT_EQ(error_of<Error>([&] { vram.alloc(0x9000); }),
            "VRAM: out of memory: 0x9000 bytes aligned to 0x1000 requested, 0x8000 bytes free, "
            "largest free range 0x8000 bytes");
  EXPECT_EQ(error_of<Error>([&] { vram.alloc(0x1001, 0x10000); }),
            "VRAM: out of memory: 0x2000 bytes aligned to 0x10000 requested, 0x8000 bytes free, "
            "largest free range 0x8000 bytes");
  EXPECT_EQ(error_of<Error>([&] { vram.alloc(~0ull); }),
            "VRAM: out of memory: 0xffffffffffffffff bytes aligned to 0x1000 requested, 0x8000 "
            "bytes free, largest free range 0x8000 bytes");
  EXPECT_EQ(error_of<InvalidInput>([&] { vram.alloc(0); }), "VRAM: cannot allocate 0 bytes");
  EXPECT_EQ(error_of<InvalidInput>([&] { vram.alloc(0x1000, 0x3000); }),
            "VRAM: alignment 0x3000 is not a power of two");
  EXPECT_EQ(error_of<InvalidInput>([&] { vram.free(0x9000); }),
            "VRAM: free of 0x9000, which is not an allocation");
  EXPECT_EQ(error_of<InvalidInput>([&] { vram.free(0x10000); }),
            "VRAM: free of 0x10000, outside VRAM [0x0, 0x10000)");
  EXPECT_EQ(error_of<InvalidInput>([] { VramAllocator bad(0x800, 0x1000); }),
            "VRAM: range 0x800 + 0x1000 is not a multiple of 4 KiB");
}

TEST(AmVram, ThreadsNeverShareARange) {
  constexpr uint64_t kSize = 0x400000;
  VramAllocator vram(0, kSize);
  std::vector<std::atomic<int>> owner(kSize / 4096);
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int id = 1; id <= 4; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937_64 rng(uint64_t(id) * 1000 + 17);
      std::vector<std::pair<uint64_t, uint64_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.empty() || rng() % 2) {
          const uint64_t pages = 1 + rng() % 8;
          uint64_t addr;
          try {
            addr = vram.alloc(pages * 4096, 4096ull << (rng() % 4));
          } catch (const Error&) {
            continue;  // full for now
          }
          for (uint64_t p = 0; p < pages; ++p) {
            int expected = 0;
            if (!owner[addr / 4096 + p].compare_exchange_strong(expected, id)) ++clashes;
          }
          live.emplace_back(addr, pages);
        } else {
          const size_t k = rng() % live.size();
          for (uint64_t p = 0; p < live[k].second; ++p) owner[live[k].first / 4096 + p] = 0;
          vram.free(live[k].first);
          live.erase(live.begin() + long(k));
        }
      }
      for (auto& [addr, pages] : live) {
        for (uint64_t p = 0; p < pages; ++p) owner[addr / 4096 + p] = 0;
        vram.free(addr);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_EQ(vram.live_allocations(), 0u);
  EXPECT_EQ(vram.largest_free(), kSize);
}

// ---- the builder ----

struct Vm {
  explicit Vm(uint64_t bytes = 16 << 20) : vram(0, bytes), alloc(0, bytes), pt(vram, alloc) {}
  HostVram vram;
  VramAllocator alloc;
  PageTables pt;
};

TEST(AmPageTables, FourKiBPageWritesEveryLevel) {
  Vm vm;
  EXPECT_EQ(vm.pt.root_address(), 0u);
  EXPECT_EQ(vm.pt.page_table_base(), 0x1u);
  vm.pt.map(0x1000, 0x200000, 0x1000, {});
  // Tables in allocation order: PDB2 0x0, PDB1 0x1000, PDB0 0x2000, PTB 0x3000.
  EXPECT_EQ(vm.vram.read64(0x0), 0x1001u);
  EXPECT_EQ(vm.vram.read64(0x1000), 0x2001u);
  EXPECT_EQ(vm.vram.read64(0x2000), 0x3001u);
  EXPECT_EQ(vm.vram.read64(0x3000), 0u);
  EXPECT_EQ(vm.vram.read64(0x3008), 0x200061u);
  EXPECT_EQ(vm.pt.table_pages(), 4u);
  EXPECT_FALSE(vm.pt.needs_invalidate());  // nothing was translatable before
}

TEST(AmPageTables, TwoMiBAndOneGiBPagesAreDirectoryEntries) {
  Vm vm;
  vm.pt.map(0x200000, 0x40000000, k2M, {});
  EXPECT_EQ(vm.vram.read64(0x2000 + 8), 0x0040000040000061u);  // PDB0[1]
  EXPECT_EQ(vm.pt.table_pages(), 3u);
  vm.pt.map(k1G, 2 * k1G, k1G, {});
  EXPECT_EQ(vm.vram.read64(0x1000 + 8), 0x0040000080000061u);  // PDB1[1]
  EXPECT_EQ(vm.pt.table_pages(), 3u);
}

TEST(AmPageTables, PageSizesFollowAlignmentAndTheLimit) {
  Vm vm;
  // 4 KiB, then two 2 MiB pages, then 4 KiB: 0x1ff000 .. 0x601000.
  vm.pt.map(0x1ff000, 0x1ff000, 0x402000, {});
  EXPECT_EQ(vm.pt.table_pages(), 5u);  // PDB2, PDB1, PDB0, two PTBs
  EXPECT_EQ(vm.vram.read64(0x2000 + 1 * 8), 0x0040000000200061u);
  EXPECT_EQ(vm.vram.read64(0x2000 + 2 * 8), 0x0040000000400061u);
  EXPECT_EQ(vm.vram.read64(0x3000 + 0x1ff * 8), 0x1ff061u);
  EXPECT_EQ(vm.vram.read64(0x4000), 0x600061u);
  // VA and PA aligned differently: 4 KiB pages only.
  vm.pt.map(0x40000000, 0x1001000, k2M, {});
  EXPECT_EQ(vm.pt.table_pages(), 7u);  // a PDB0 and a PTB more
  // The limit: 2 MiB aligned, 4 KiB pages asked for.
  MapFlags small;
  small.largest_page = k4K;
  vm.pt.map(0x80000000, 0x80000000, k2M, small);
  EXPECT_EQ(vm.pt.table_pages(), 9u);
}

TEST(AmPageTables, UnmapFreesEmptyTablesAndAsksForAnInvalidation) {
  Vm vm;
  vm.pt.map(0x1000, 0x200000, 0x1000, {});
  vm.pt.map(0x200000, 0x400000, k2M, {});
  vm.pt.unmap(0x1000, 0x1000);
  EXPECT_EQ(vm.pt.table_pages(), 3u);           // the PTB went, PDB0 holds the 2 MiB page
  EXPECT_EQ(vm.vram.read64(0x2000), 0u);        // PDB0[0] cleared
  EXPECT_TRUE(vm.pt.needs_invalidate());
  vm.pt.unmap(0x200000, k2M);
  EXPECT_EQ(vm.pt.table_pages(), 1u);
  EXPECT_EQ(vm.vram.read64(0x0), 0u);
  EXPECT_EQ(vm.alloc.live_allocations(), 1u);  // the root
  EXPECT_EQ(vm.pt.take_invalidations(),
            (std::vector<VaRange>{{0x1000, 0x1000}, {0x200000, k2M}}));
  EXPECT_FALSE(vm.pt.needs_invalidate());
}

TEST(AmPageTables, ExactErrors) {
  Vm vm;
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1234, 0x200000, 0x1000, {}); }),
            "map 0x1000 bytes at 0x1234 to 0x200000: the VA is not 4 KiB aligned");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1000, 0x200800, 0x1000, {}); }),
            "map 0x1000 bytes at 0x1000 to 0x200800: the physical address is not 4 KiB aligned");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1000, 0x200000, 0x1800, {}); }),
            "map 0x1800 bytes at 0x1000 to 0x200000: the size is not a multiple of 4 KiB");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1000, 0x200000, 0, {}); }),
            "map 0x0 bytes at 0x1000 to 0x200000: the size is 0");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0xfffffffff000, 0, 0x2000, {}); }),
            "map 0x2000 bytes at 0xfffffffff000 to 0x0: the range ends beyond the 48-bit VA "
            "space (0x1000000000000)");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1000000000000, 0, 0x1000, {}); }),
            "map 0x1000 bytes at 0x1000000000000 to 0x0: the range ends beyond the 48-bit VA "
            "space (0x1000000000000)");
  MapFlags odd;
  odd.largest_page = 0x10000;
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0, 0, 0x1000, odd); }),
            "map 0x1000 bytes at 0x0 to 0x0: largest page 0x10000 is not 4 KiB, 2 MiB or 1 GiB");

  vm.pt.map(0x200000, 0x200000, k2M, {});
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.map(0x1fe000, 0, 0x4000, {}); }),
            "map 0x4000 bytes at 0x1fe000 to 0x0: 0x200000 is already mapped");
  EXPECT_EQ(vm.pt.table_pages(), 3u);  // the refused map left nothing behind
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.unmap(0x5000, 0x1000); }),
            "unmap 0x1000 bytes at 0x5000: 0x5000 is not mapped");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.unmap(0x201000, 0x1000); }),
            "unmap 0x1000 bytes at 0x201000: 0x201000 lies in the 2 MiB page at 0x200000, "
            "which is unmapped whole");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.unmap(0x200000, 0x201000); }),
            "unmap 0x201000 bytes at 0x200000: 0x400000 is not mapped");
  EXPECT_EQ(error_of<InvalidInput>([&] { vm.pt.unmap(0xfffffffff000, 0x2000); }),
            "unmap 0x2000 bytes at 0xfffffffff000: the range ends beyond the 48-bit VA space "
            "(0x1000000000000)");
  EXPECT_FALSE(vm.pt.needs_invalidate());  // refused unmaps changed nothing
  EXPECT_EQ(vm.vram.read64(0x2000 + 8), 0x0040000000200061u);
}

TEST(AmPageTables, RunningOutOfVramForATableLeavesNothingMapped) {
  HostVram vram(0, 0x3000);
  VramAllocator alloc(0, 0x3000);  // the root and two more tables: a PTB will not fit
  PageTables pt(vram, alloc);
  EXPECT_EQ(error_of<Error>([&] { pt.map(0x1000, 0x1000, 0x1000, {}); }),
            "VRAM: out of memory: 0x1000 bytes aligned to 0x1000 requested, 0x0 bytes free, "
            "largest free range 0x0 bytes");
  EXPECT_EQ(pt.table_pages(), 1u);
  EXPECT_EQ(alloc.live_allocations(), 1u);
  EXPECT_EQ(vram.read64(0), 0u);
  pt.map(0x200000, 0x200000, k2M, {});  // needs only PDB1 and PDB0
  EXPECT_EQ(pt.table_pages(), 3u);
}

TEST(AmPageTables, HostVramChecksEveryAccess) {
  HostVram vram(0x1000, 0x1000);
  EXPECT_EQ(error_of<Error>([&] { vram.write64(0x2000, 1); }),
            "VRAM write64 at 0x2000: not an aligned 8-byte word of [0x1000, 0x2000)");
  EXPECT_EQ(error_of<Error>([&] { vram.read64(0x1004); }),
            "VRAM read64 at 0x1004: not an aligned 8-byte word of [0x1000, 0x2000)");
}

// ---- the emulated MMU on the builder's tables ----

TEST(AmMmu, WalkerAgreesWithTheBuilderForRandomMappings) {
  Vm vm(64 << 20);  // 1 GiB ranges off 2 MiB alignment take 2 MiB of PTBs each
  AmMmu mmu(vm.vram.bytes());
  constexpr uint64_t kStart = 0x7f0000000000;  // the context's first VA, as a hub's START_ADDR
  mmu.set_context(vm.pt.page_table_base(), kStart, kStart + (1ull << 40) - 1);
  std::mt19937_64 rng(17);
  struct Mapping {
    uint64_t va, pa, size;
    MapFlags flags;
  };
  std::vector<Mapping> maps;
  std::map<uint64_t, uint64_t> used;  // va -> end, to pick free ranges
  auto is_free = [&](uint64_t va, uint64_t size) {
    auto it = used.upper_bound(va + size - 1);
    return it == used.begin() || std::prev(it)->second <= va;
  };
  const uint64_t units[] = {k4K, k2M, k1G};
  while (maps.size() < 40) {
    const uint64_t unit = units[rng() % 3];
    const uint64_t size = unit == k1G ? k1G : unit * (1 + rng() % 3) + (rng() % 2) * k4K;
    const uint64_t va = (rng() % (64 * k1G / unit)) * unit + (rng() % 2) * k4K * (unit != k1G);
    const uint64_t pa = (rng() % (16 * k1G / unit)) * unit + (rng() % 4 == 0) * k4K;
    if (!is_free(va, size)) continue;
    MapFlags f;
    f.writable = rng() % 2;
    f.executable = rng() % 2;
    f.memory = rng() % 3 == 0 ? Memory::System : Memory::Vram;
    vm.pt.map(va, pa, size, f);
    used[va] = va + size;
    maps.push_back({va, pa, size, f});
  }
  auto check = [&](const Mapping& m, uint64_t off) {
    const auto t = mmu.translate(kStart + m.va + off, MmuAccess::Read, emu::kClientTcp);
    ASSERT_TRUE(t.ok()) << t.fault->describe();
    EXPECT_EQ(t.pa, m.pa + off);
    EXPECT_EQ(t.system, m.flags.memory == Memory::System);
    const auto w = mmu.translate(kStart + m.va + off, MmuAccess::Write, emu::kClientTcp);
    EXPECT_EQ(w.ok(), m.flags.writable);
    const auto x = mmu.translate(kStart + m.va + off, MmuAccess::Execute, emu::kClientTcp);
    EXPECT_EQ(x.ok(), m.flags.executable);
  };
  for (const Mapping& m : maps) {
    check(m, 0);
    check(m, m.size - 8);
    check(m, (rng() % m.size) & ~7ull);
    // The page after the mapping, where it is free, faults as not valid.
    if (is_free(m.va + m.size, k4K)) {
      const auto t = mmu.translate(kStart + m.va + m.size, MmuAccess::Read, emu::kClientTcp);
      ASSERT_FALSE(t.ok());
      EXPECT_EQ(t.fault->reason, MmuFaultReason::NotValid);
    }
  }
  // Unmap every other mapping; after the invalidation those fault and the rest still translate.
  for (size_t i = 0; i < maps.size(); i += 2) vm.pt.unmap(maps[i].va, maps[i].size);
  EXPECT_EQ(vm.pt.take_invalidations().size(), (maps.size() + 1) / 2);
  mmu.invalidate();
  for (size_t i = 0; i < maps.size(); ++i) {
    const auto t = mmu.translate(kStart + maps[i].va, MmuAccess::Read, emu::kClientTcp);
    EXPECT_EQ(t.ok(), i % 2 == 1) << i;
    if (i % 2 == 1) {
      EXPECT_EQ(t.pa, maps[i].pa);
    }
  }
  for (size_t i = 1; i < maps.size(); i += 2) vm.pt.unmap(maps[i].va, maps[i].size);
  EXPECT_EQ(vm.pt.table_pages(), 1u);
}

TEST(AmMmu, FaultRecordsAsTheHubLatchesThem) {
  Vm vm;
  AmMmu mmu(vm.vram.bytes());
  mmu.set_context(vm.pt.page_table_base(), 0, (1ull << 48) - 1);
  // An address in no table: the root's entry is not valid. A read by the CPC (CID 5):
  // PERMISSION_FAULTS 0x3 << 4, CID 5 << 9, RW 0 = 0xa30.
  auto t = mmu.translate(0x5000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::NotValid);
  EXPECT_EQ(t.fault->level, 0);
  EXPECT_EQ(t.fault->status, 0xa30u);
  EXPECT_EQ(t.fault->addr_lo32(), 0x5u);
  EXPECT_EQ(t.fault->describe(),
            "GPU page fault at 0x5000 (client 5, read): the PDE (PDB2) is not valid, status 0xa30");

  // A hole beside a mapped page: the PTE is not valid. A write by SDMA0 (CID 13):
  // PERMISSION_FAULTS 0x5 << 4, CID 13 << 9, RW 1 << 18 = 0x41a50.
  vm.pt.map(0x1000, 0x200000, 0x1000, {});
  t = mmu.translate(0x2010, MmuAccess::Write, emu::kClientSdma0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->level, 3);
  EXPECT_EQ(t.fault->status, 0x41a50u);
  EXPECT_EQ(t.fault->describe(),
            "GPU page fault at 0x2010 (client 13, write): the PTE (PTB) is not valid, status "
            "0x41a50");

  // A bad PTE: the builder's entry with VALID cleared by a corruption.
  vm.vram.write64(0x3008, 0x200060);
  t = mmu.translate(0x1000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::NotValid);
  EXPECT_EQ(t.fault->entry, 0x200060u);

  // A write to a read-only page: PERMISSION_FAULTS 0x4 << 4 | CID 5 << 9 | RW = 0x40a40.
  MapFlags ro;
  ro.writable = false;
  vm.pt.map(0x400000, 0x400000, k2M, ro);
  EXPECT_TRUE(mmu.translate(0x400010, MmuAccess::Read, emu::kClientCpc).ok());
  t = mmu.translate(0x400010, MmuAccess::Write, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::NotWritable);
  EXPECT_EQ(t.fault->level, 2);
  EXPECT_EQ(t.fault->status, 0x40a40u);
  EXPECT_EQ(t.fault->describe(),
            "GPU page fault at 0x400010 (client 5, write): the page is not writable, status "
            "0x40a40");
  // Not executable: PERMISSION_FAULTS 0x8 << 4.
  t = mmu.translate(0x400010, MmuAccess::Execute, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->status, 0xa80u);

  // A PDE pointing beyond VRAM: a walker error (WALKER_ERROR 1 << 1).
  vm.vram.write64(0x0 + 8 * 1, table_entry(1ull << 40));  // PDB2[1]
  t = mmu.translate(512 * k1G, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::BadTable);
  EXPECT_EQ(t.fault->status, 0xa02u);

  // Outside the context and with no valid base.
  mmu.set_context(vm.pt.page_table_base(), 0x100000, 0x1fffff);
  t = mmu.translate(0x1000, MmuAccess::Read, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::OutsideContext);
  mmu.set_context(0, 0, (1ull << 48) - 1);
  EXPECT_EQ(mmu.translate(0x400000, MmuAccess::Read, emu::kClientCpc).fault->describe(),
            "GPU page fault at 0x400000 (client 5, read): the page-table base is not valid, "
            "status 0xa30");
}

TEST(AmMmu, AStaleTlbEntryTranslatesUntilTheInvalidation) {
  Vm vm;
  AmMmu mmu(vm.vram.bytes());
  mmu.set_context(vm.pt.page_table_base(), 0, (1ull << 48) - 1);
  vm.pt.map(0x10000, 0x300000, 0x1000, {});
  auto t = mmu.translate(0x10008, MmuAccess::Write, emu::kClientCpc);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t.from_tlb);
  EXPECT_EQ(t.pa, 0x300008u);

  vm.pt.unmap(0x10000, 0x1000);
  ASSERT_TRUE(vm.pt.needs_invalidate());
  // A driver that forgets the invalidation: the model still translates the stale entry, which
  // is how a test sees the missing invalidation.
  t = mmu.translate(0x10008, MmuAccess::Write, emu::kClientCpc);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t.from_tlb);
  EXPECT_EQ(t.pa, 0x300008u);

  // The driver does its duty: the hub forgets, the access faults.
  EXPECT_EQ(vm.pt.take_invalidations(), (std::vector<VaRange>{{0x10000, 0x1000}}));
  mmu.invalidate();
  t = mmu.translate(0x10008, MmuAccess::Write, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, MmuFaultReason::NotValid);
  EXPECT_EQ(t.fault->level, 0);  // the emptied tables were freed: the root entry is cleared
}

TEST(AmMmu, TheTlbHoldsSixteenEntries) {
  Vm vm;
  AmMmu mmu(vm.vram.bytes());
  mmu.set_context(vm.pt.page_table_base(), 0, (1ull << 48) - 1);
  vm.pt.map(0, 0x1000000, 17 * k4K, {});
  for (uint64_t p = 0; p < 17; ++p) mmu.translate(p * k4K, MmuAccess::Read, 0);
  EXPECT_EQ(mmu.walks(), 17u);
  // The 17th walk replaced the first entry; pages 1..16 are still held.
  for (uint64_t p = 1; p < 17; ++p) EXPECT_TRUE(mmu.translate(p * k4K, MmuAccess::Read, 0).from_tlb);
  EXPECT_FALSE(mmu.translate(0, MmuAccess::Read, 0).from_tlb);
  EXPECT_EQ(mmu.tlb_hits(), 16u);
}

}  // namespace
}  // namespace hcq::amd::am
