// The emulated register-level RX 7900 XTX (emu/am_gpu, emu/am_system) as a driver reaches it:
// through the emulated PCI system's sysfs and VFIO, the register BAR through pread/pwrite
// (os::open_register_window), VRAM through the mapped BAR0. Expected values are worked out
// from the public sources: RCC_CONFIG_MEMSIZE is VRAM in MiB (Linux amdgpu_discovery.c), the
// table sits 64 KiB below the end of VRAM and starts with BINARY_SIGNATURE 0x28211407
// (discovery.h), the RX 7900 XTX's segment bases are those of its real table (GC segment 0 at
// dword 0x1260, MP1 at 0x16000, NBIO segment 1 at 0x14), FB_LOCATION_BASE/TOP count 16 MiB
// (mmhub_v3_0.c).
#include "amd/emu/am_gpu.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/index_pairs.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am/smu.hpp"
#include "amd/emu/am_system.hpp"
#include "amd/span_vram.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "emu/kernels.hpp"
#include "os/emulated_vfio.hpp"
#include "os/mmio.hpp"
#include "os/pci.hpp"
#include "os/vfio.hpp"

namespace hcq::amd::emu {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;
constexpr uint64_t MiB = 1 << 20;

AmSystemOptions with_vram(uint64_t bytes) {
  AmSystemOptions o;
  o.vram_bytes = bytes;
  return o;
}

// A block owning one register: reads return what was written; reset() clears and counts.
class OneRegisterBlock final : public AmBlock {
 public:
  static constexpr uint64_t kOffset = 0x40000;
  bool handles(uint64_t offset) const override { return offset == kOffset; }
  uint32_t read32(uint64_t) override { return value; }
  void write32(uint64_t, uint32_t v) override { value = v; }
  void reset() override {
    value = 0;
    ++resets;
  }
  std::atomic<uint32_t> value{0};
  std::atomic<int> resets{0};
};

// The GPU opened as the am: driver opens it: VFIO, the register window, the VRAM BAR mapped.
struct Opened {
  explicit Opened(uint64_t vram = 64 * MiB) : sys(make_am_emulated_system(with_vram(vram))) {}
  std::unique_ptr<AmEmulatedSystem> sys;
  std::shared_ptr<os::EmulatedKernel> k = sys->kernel();
  os::PciFunction fn = os::pci_function(*k, AmEmulatedSystem::kAddress);
  os::VfioDevice dev{k, fn};
  std::unique_ptr<os::Mmio> regs = os::open_register_window(dev, 5);
  os::VfioRegionMmio vram{dev, 0};
  // The discovery table read through the VRAM BAR, as the driver's boot reads it.
  am::IpSegmentBases bases() {
    std::vector<uint32_t> dwords(am::kDiscoveryTmrSize / 4);
    vram.read(am::discovery_table_offset(vram.size()), dwords);
    std::vector<std::byte> table(am::kDiscoveryTmrSize);
    std::memcpy(table.data(), dwords.data(), table.size());
    return am::segment_bases(am::parse_discovery(table));
  }
  void* vram_base() { return sys->gpu().bus().vram.data(); }
};

TEST(AmGpu, ThePciFunctionIsAnRx7900XtxOnVfio) {
  auto sys = make_am_emulated_system(with_vram(64 * MiB));
  os::PciFunction fn = os::pci_function(*sys->kernel(), "0000:03:00.0");
  EXPECT_EQ(fn.vendor, 0x1002);
  EXPECT_EQ(fn.device, 0x744c);
  EXPECT_EQ(fn.class_code, 0x030000u);
  EXPECT_EQ(fn.driver, "vfio-pci");
  EXPECT_EQ(fn.iommu_group, 2);
  ASSERT_NE(fn.bar(0), nullptr);
  EXPECT_EQ(fn.bar(0)->size, 64 * MiB);
  EXPECT_TRUE(fn.bar(0)->prefetchable);
  EXPECT_EQ(fn.bar(2)->size, 2 * MiB);
  EXPECT_EQ(fn.bar(5)->size, 1 * MiB);
  EXPECT_EQ(sys->kernel()->list_dir("/sys/kernel/iommu_groups/2/devices"),
            std::vector<std::string>{"0000:03:00.0"});

  os::VfioDevice dev(sys->kernel(), fn);
  EXPECT_FALSE(dev.region(5).mappable);
  EXPECT_TRUE(dev.region(0).mappable);
  EXPECT_TRUE(dev.region(2).mappable);
  std::unique_ptr<os::Mmio> regs = os::open_register_window(dev, 5);
  EXPECT_NE(dynamic_cast<os::VfioRegionRwMmio*>(regs.get()), nullptr);
  EXPECT_EQ(regs->size(), 1 * MiB);
}

TEST(AmGpu, MemsizeAnswersTheVramSizeInMiB) {
  Opened full(AmGpu::kDefaultVramBytes);  // 24 GiB, sparse
  // RCC_CONFIG_MEMSIZE: absolute dword 0xde3.
  EXPECT_EQ(full.regs->read32(0xde3 * 4), 24576u);
  full.regs->write32(0xde3 * 4, 5);  // the strap is read-only
  EXPECT_EQ(full.regs->read32(0xde3 * 4), 24576u);
  Opened small;
  EXPECT_EQ(small.regs->read32(0xde3 * 4), 64u);
  EXPECT_EQ(error_of([] { make_am_emulated_system(with_vram(MiB + 4096)); }),
            "AM GPU model: VRAM of 0x101000 bytes is not a whole number of MiB (at least 1)");
}

TEST(AmGpu, TheDiscoveryTableIsReadThroughTheVramBar) {
  Opened o;
  EXPECT_EQ(o.sys->gpu().discovery_offset(), 64 * MiB - 64 * 1024);
  EXPECT_EQ(o.vram.read32(64 * MiB - 64 * 1024), am::kBinarySignature);
  am::IpSegmentBases b = o.bases();
  EXPECT_EQ(b[am::Ip::GC], (std::vector<uint32_t>{0x1260, 0xa000, 0x1c000, 0x2402c00}));
  EXPECT_EQ(b[am::Ip::MP1][0], 0x16000u);
  EXPECT_EQ(b[am::Ip::NBIO][1], 0x14u);
  EXPECT_EQ(b.dwords, o.sys->gpu().bases().dwords);

  // And through MM_INDEX/MM_DATA (bit 31: VRAM), as amdgpu_device_mm_access reads it.
  os::IndexDataRegs mm(*o.regs, am::mm_index_layout());
  EXPECT_EQ(mm.read_vram32(64 * MiB - 64 * 1024), am::kBinarySignature);
  mm.write_vram32(0x123400, 0xfeedf00d);
  EXPECT_EQ(o.vram.read32(0x123400), 0xfeedf00du);
  // Bit 31 clear: a register by byte address (here one beyond the 1 MiB BAR).
  mm.write32(0x200000, 0x77);
  EXPECT_EQ(mm.read32(0x200000), 0x77u);
  EXPECT_EQ(o.regs->read32(0), 0x200000u);  // MM_INDEX reads back
}

TEST(AmGpu, UnhandledRegistersAreAPlainRegisterFileWithResetValues) {
  Opened o;
  am::IpSegmentBases b = o.bases();
  am::RegisterIo io(*o.regs, b);
  EXPECT_EQ(io.read(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE), 0x8000u);  // 0x8000000000 >> 24
  EXPECT_EQ(io.read(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_TOP), 0x8003u);   // + 64 MiB - 1
  EXPECT_EQ(io.read(am::gc_11_0_0::GCMC_VM_FB_LOCATION_BASE), 0x8000u);
  EXPECT_EQ(io.read(am::gc_11_0_0::GCMC_VM_FB_LOCATION_TOP), 0x8003u);
  EXPECT_EQ(io.read(am::gc_11_0_0::SCRATCH_REG7), 0u);
  io.write(am::gc_11_0_0::SCRATCH_REG7, 0x1);
  EXPECT_EQ(io.read(am::gc_11_0_0::SCRATCH_REG7), 0x1u);
  io.write(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE, 0x1234);
  EXPECT_EQ(io.read(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE), 0x1234u);

  Opened full(AmGpu::kDefaultVramBytes);
  am::RegisterIo full_io(*full.regs, b);
  EXPECT_EQ(full_io.read(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_TOP), 0x85ffu);  // + 24 GiB - 1
}

TEST(AmGpu, AddedBlocksOwnTheirRegisters) {
  Opened o;
  auto block = std::make_shared<OneRegisterBlock>();
  o.sys->gpu().add_block(block);
  o.regs->write32(OneRegisterBlock::kOffset, 0x42);
  EXPECT_EQ(block->value.load(), 0x42u);
  block->value = 0x43;
  EXPECT_EQ(o.regs->read32(OneRegisterBlock::kOffset), 0x43u);
  o.regs->write32(OneRegisterBlock::kOffset + 4, 9);  // the neighbour is the register file's
  EXPECT_EQ(block->value.load(), 0x43u);
  EXPECT_EQ(o.regs->read32(OneRegisterBlock::kOffset + 4), 9u);
}

TEST(AmGpu, SmuMessagesThroughTheRegisterWindow) {
  Opened o;
  am::RegisterIo io(*o.regs, o.bases());
  am::Smu smu(io, 1s);
  EXPECT_EQ(smu.version(), AmSmu::kVersion);
  smu.set_driver_dram_address(0x8000123000);
  smu.enable_all_features();
  EXPECT_TRUE(o.sys->gpu().smu().features_enabled());
  EXPECT_EQ(o.sys->gpu().smu().driver_dram_address(), 0x8000123000u);
  EXPECT_EQ(error_of<Error>([&] { smu.send(0x55, 7); }),
            "SMU message 0x55 with argument 0x7: response 0xfe SMU_RESP_CMD_UNKNOWN (the SMU "
            "does not know the message)");
}

TEST(AmGpu, Mode1ResetResetsEveryBlockAndRegisterAndKeepsVram) {
  Opened o;
  AmGpu& gpu = o.sys->gpu();
  auto block = std::make_shared<OneRegisterBlock>();
  gpu.add_block(block);
  am::IpSegmentBases b = o.bases();
  am::RegisterIo io(*o.regs, b);
  am::Smu smu(io, 1s);
  smu.enable_all_features();
  io.write(am::gc_11_0_0::SCRATCH_REG7, 1);
  io.write(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE, 0x1234);
  o.regs->write32(OneRegisterBlock::kOffset, 5);
  o.vram.write32(0x1000, 0xabcd);
  const uint64_t table = gpu.discovery_offset();
  o.vram.write32(table, 0);  // a corrupted table: the firmware writes it again

  smu.mode1_reset();  // waits for the debug response: 0x1 after the reset
  EXPECT_EQ(gpu.mode1_resets(), 1u);
  EXPECT_EQ(gpu.smu().mode1_resets(), 1u);
  EXPECT_EQ(gpu.function_resets(), 0u);
  EXPECT_FALSE(gpu.smu().features_enabled());
  EXPECT_EQ(io.read(am::gc_11_0_0::SCRATCH_REG7), 0u);
  EXPECT_EQ(io.read(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE), 0x8000u);
  EXPECT_EQ(block->resets.load(), 1);
  EXPECT_EQ(o.regs->read32(OneRegisterBlock::kOffset), 0u);
  EXPECT_EQ(o.vram.read32(0x1000), 0xabcdu);
  EXPECT_EQ(o.vram.read32(table), am::kBinarySignature);
  EXPECT_EQ(smu.version(), AmSmu::kVersion);  // the SMU answers again
}

TEST(AmGpu, FunctionLevelResetThroughVfio) {
  Opened o;
  AmGpu& gpu = o.sys->gpu();
  auto block = std::make_shared<OneRegisterBlock>();
  gpu.add_block(block);
  am::RegisterIo io(*o.regs, o.bases());
  io.write(am::gc_11_0_0::SCRATCH_REG7, 1);
  o.regs->write32(OneRegisterBlock::kOffset, 5);
  am::Smu(io, 1s).enable_all_features();
  o.vram.write32(0x2000, 0x5a5a);

  o.dev.reset();
  EXPECT_EQ(o.sys->bus().vfio().resets(AmEmulatedSystem::kAddress), 1);
  EXPECT_EQ(gpu.function_resets(), 1u);
  EXPECT_EQ(gpu.mode1_resets(), 0u);
  EXPECT_EQ(io.read(am::gc_11_0_0::SCRATCH_REG7), 0u);
  EXPECT_EQ(block->resets.load(), 1);
  EXPECT_FALSE(gpu.smu().features_enabled());
  EXPECT_EQ(o.vram.read32(0x2000), 0x5a5au);  // VRAM is kept
  EXPECT_EQ(o.regs->read32(0xde3 * 4), 64u);
}

TEST(AmGpu, InterruptsGoToTheHookOnceSet) {
  Opened o;
  AmGpu& gpu = o.sys->gpu();
  const std::array<uint32_t, 8> entry{1, 2, 3, 4, 5, 6, 7, 8};
  // The assembled system sends interrupts to its IH block, which drops them while its ring is
  // off; a hook set afterwards takes them instead.
  gpu.bus().interrupt(entry);
  EXPECT_EQ(gpu.dropped_interrupts(), 0u);
  EXPECT_EQ(o.sys->ih().dropped(), 1u);
  std::vector<std::array<uint32_t, 8>> got;
  gpu.set_interrupt([&](const std::array<uint32_t, 8>& e) { got.push_back(e); });
  gpu.bus().interrupt(entry);
  EXPECT_EQ(got, (std::vector<std::array<uint32_t, 8>>{entry}));
  EXPECT_EQ(o.sys->ih().dropped(), 1u);
  EXPECT_EQ(gpu.bus().fb_base, 0x8000000000u);
  EXPECT_EQ(gpu.bus().doorbells.size(), 2 * MiB);
}

// Several threads on the register window at once: each sees its own registers, and the SMU's
// messages (under am::Smu's lock) keep answering.
TEST(AmGpu, RegisterAccessesFromSeveralThreads) {
  Opened o;
  am::RegisterIo io(*o.regs, o.bases());
  am::Smu smu(io, 1s);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 200; ++i) {
        const uint64_t reg = 0x80000 + 0x100 * t;
        o.regs->write32(reg, t << 16 | i);
        if (o.regs->read32(reg) != (t << 16 | i)) ++wrong;
        if (t == 0 && i % 20 == 0 && smu.version() != AmSmu::kVersion) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ---- AmAddressSpace ----

struct Space : Opened {
  static constexpr uint64_t kVramVa = 0x10000000, kSysVa = 0x20000000, kIova = 0x50000000;
  Space() {
    am::MapFlags vram_flags;
    pt.map(kVramVa, 0x1000000, 0x2000, vram_flags);           // two pages, contiguous
    pt.map(kVramVa + 0x2000, 0x1800000, 0x1000, vram_flags);  // the next VA, elsewhere in VRAM
    am::MapFlags sys_flags;
    sys_flags.memory = am::Memory::System;
    pt.map(kSysVa, kIova, 0x2000, sys_flags);
    mmu.set_context(pt.page_table_base(), 0, (1ull << 48) - 1);
    host = static_cast<uint8_t*>(::aligned_alloc(4096, 0x2000));
    dev.map_dma(host, kIova, 0x2000);
  }
  ~Space() {
    dev.unmap_dma(kIova, 0x2000);
    ::free(host);
  }
  testing_support::SpanVram vram_access{sys->gpu().bus().vram};  // as BAR0 would reach it
  am::VramAllocator alloc{0, 32 * MiB};
  am::PageTables pt{vram_access, alloc};
  AmMmu mmu{sys->gpu().bus().vram};
  std::vector<MmuFault> faults;
  std::mutex faults_mu;
  AmAddressSpace space{mmu, sys->gpu().bus(), kClientCpc, [this](const MmuFault& f) {
                         std::lock_guard lock(faults_mu);
                         faults.push_back(f);
                       }};
  uint8_t* host = nullptr;
  uint8_t* vram_at(uint64_t pa) { return static_cast<uint8_t*>(vram_base()) + pa; }
};

TEST(AmAddressSpace, VramPagesByPhysicalAddress) {
  Space s;
  EXPECT_EQ(s.space.translate(Space::kVramVa + 0x10, 16), s.vram_at(0x1000010));
  // Across the two contiguous pages.
  EXPECT_EQ(s.space.translate(Space::kVramVa + 0xff0, 0x20), s.vram_at(0x1000ff0));
  EXPECT_EQ(s.space.translate(Space::kVramVa + 0x2008, 8), s.vram_at(0x1800008));
  EXPECT_TRUE(s.faults.empty());
}

TEST(AmAddressSpace, SystemPagesThroughDmaWithBusMastering) {
  Space s;
  // vfio-pci leaves bus mastering off: the device's DMA reaches nothing yet.
  EXPECT_EQ(error_of<hcq::emu::Fault>([&] { s.space.translate(Space::kSysVa + 8, 8); }),
            "GPU VA 0x20000008: IOVA 0x50000008 (system page) has no DMA mapping (or bus "
            "mastering is off)");
  s.dev.enable_bus_master();
  EXPECT_EQ(s.space.translate(Space::kSysVa + 8, 8), s.host + 8);
  EXPECT_EQ(s.space.translate(Space::kSysVa + 0xffc, 8), s.host + 0xffc);
  EXPECT_TRUE(s.faults.empty());
}

TEST(AmAddressSpace, ARangeOverPagesApartInHostMemoryIsRefused) {
  Space s;
  EXPECT_EQ(error_of<hcq::emu::Fault>([&] { s.space.translate(Space::kVramVa + 0x1ff0, 0x20); }),
            "GPU access [0x10001ff0, +0x20) crosses from one page to another at 0x10002000 that "
            "is not next to it in host memory (the emulator reaches one host-contiguous run per "
            "access)");
  try {
    s.space.translate(Space::kVramVa + 0x1ff0, 0x20);
  } catch (const hcq::emu::Fault& f) {
    EXPECT_EQ(f.address(), Space::kVramVa + 0x2000);
  }
  EXPECT_TRUE(s.faults.empty());  // an emulator limit, not a GPU fault
}

TEST(AmAddressSpace, AnMmuFaultCallsTheCallbackAndThrows) {
  Space s;
  std::string what;
  uint64_t address = 0;
  try {
    s.space.translate(0x30000000, 4);
  } catch (const hcq::emu::Fault& f) {
    what = f.what();
    address = f.address();
  }
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].address, 0x30000000u);
  EXPECT_EQ(s.faults[0].client, kClientCpc);
  EXPECT_EQ(s.faults[0].reason, MmuFaultReason::NotValid);
  EXPECT_EQ(what, s.faults[0].describe());
  EXPECT_EQ(address, 0x30000000u);
  // A range that runs from a mapped page into an unmapped one faults at the unmapped page.
  s.dev.enable_bus_master();
  EXPECT_THROW(s.space.translate(Space::kSysVa + 0x1ff0, 0x20), hcq::emu::Fault);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[1].address, Space::kSysVa + 0x2000);
}

TEST(AmAddressSpace, MappingOfIsTheHostContiguousRunAroundAnAddress) {
  Space s;
  using Run = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(s.space.mapping_of(Space::kVramVa + 0x1234), (Run{Space::kVramVa, 0x2000}));
  EXPECT_EQ(s.space.mapping_of(Space::kVramVa), (Run{Space::kVramVa, 0x2000}));
  EXPECT_EQ(s.space.mapping_of(Space::kVramVa + 0x2fff), (Run{Space::kVramVa + 0x2000, 0x1000}));
  EXPECT_EQ(s.space.mapping_of(0x30000000), (Run{0, 0}));
  EXPECT_EQ(s.space.mapping_of(Space::kSysVa + 0x1000), (Run{0, 0}));  // no bus mastering yet
  s.dev.enable_bus_master();
  EXPECT_EQ(s.space.mapping_of(Space::kSysVa + 0x1000), (Run{Space::kSysVa, 0x2000}));
  EXPECT_TRUE(s.faults.empty());  // probing never reports
}

// The engine thread translates while the driver writes registers and the hub invalidates.
TEST(AmAddressSpace, TranslatesWhileTheDriverWritesRegisters) {
  Space s;
  s.dev.enable_bus_master();
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread engine([&] {
    while (!stop) {
      if (s.space.translate(Space::kVramVa + 0x100, 4) != s.vram_at(0x1000100)) ++wrong;
      if (s.space.translate(Space::kSysVa + 0x100, 4) != s.host + 0x100) ++wrong;
      if (s.space.mapping_of(Space::kVramVa).second != 0x2000) ++wrong;
    }
  });
  am::RegisterIo io(*s.regs, s.bases());
  for (uint32_t i = 0; i < 300; ++i) {
    io.write(am::gc_11_0_0::SCRATCH_REG7, i);
    EXPECT_EQ(io.read(am::gc_11_0_0::SCRATCH_REG7), i);
    s.mmu.invalidate();
  }
  stop = true;
  engine.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(s.faults.empty());
}

// read_discovery as `hcq reg` uses it: through the VRAM BAR when it reaches the table, else
// through MM_INDEX/MM_DATA, and not that way when a kernel driver owns the pair.
TEST(AmGpu, ReadDiscoveryThroughTheVramBarOrMmIndex) {
  Opened o;
  const am::IpSegmentBases want = o.bases();
  EXPECT_EQ(am::segment_bases(am::read_discovery(*o.regs, &o.vram, false)).dwords, want.dwords);
  EXPECT_EQ(am::segment_bases(am::read_discovery(*o.regs, nullptr, true)).dwords, want.dwords);
  EXPECT_EQ(want[am::Ip::GC].front(), 0x1260u);  // the real table's GC segment 0
  EXPECT_EQ(error_of<Error>([&] { am::read_discovery(*o.regs, nullptr, false); }),
            "BAR5 of 0000:03:00.0: the IP discovery table at VRAM 0x3ff0000 is beyond the VRAM "
            "BAR, and MM_INDEX/MM_DATA belong to the kernel driver bound to the GPU");
}

}  // namespace
}  // namespace hcq::amd::emu
