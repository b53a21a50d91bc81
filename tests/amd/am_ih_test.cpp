// The AM IH: the driver (am::Ih) against the emulated IH (emu::AmIh) through an emulated
// register window at the emulated RX 7900 XTX's register addresses, rings in emulated VRAM.
// Expected register values and entries are worked out here from Linux ih_v6_0.c, the
// osssys_6_0_0 field layouts and amdgpu_ih_decode_iv_helper's entry layout.
#include "amd/emu/am_ih.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "amd/am/ih.hpp"
#include "amd/am/ih_entry.hpp"
#include "amd/am/ih_ids.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am_block_harness.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using testing_support::error_of;

constexpr uint64_t kRingBytes = 0x1000;  // 128 entries

// An entry as the hardware writes it (amdgpu_ih_decode_iv_helper's layout).
std::array<uint32_t, 8> entry(uint32_t client, uint32_t source, uint32_t ring_id, uint32_t seq) {
  return {client | (source << 8) | (ring_id << 16), 0x12345678, 0xabcd, 0x8001, seq, 0, 0, 0};
}

class AmIhTest : public ::testing::Test {
 protected:
  AmIhTest() {
    router.add(model);
  }
  IpSegmentBases bases = test::gfx1100_bases();
  test::TestVram vram{1 << 20};
  emu::AmBus bus = test::bus_over(vram);
  emu::AmIh model{bases, bus};
  test::Router router{bases};
  os::EmulatedMmio mmio{"BAR5 of emu:gfx1100_am", 1 << 20, router};
  RegisterIo regs{mmio, bases};
};

// Every register write of init, in Linux ih_v6_0_irq_init's order. Ring 0 at VRAM 0 (MC
// 0x8000000000), its write-back slot at 0x1000, ring 1 at 0x2000.
TEST_F(AmIhTest, InitWritesLinuxSequence) {
  Ih ih(regs, vram, kRingBytes);
  EXPECT_EQ(ih.ring(0).mc, 0x8000000000u);
  EXPECT_EQ(ih.writeback(0).mc, 0x8000001000u);
  EXPECT_EQ(ih.ring(1).mc, 0x8000002000u);
  router.record(true);
  ih.init();
  // IH_RB_CNTL: MC_SPACE 4 (30:28), WPTR_OVERFLOW_CLEAR (31), WPTR_OVERFLOW_ENABLE (16),
  // RB_SIZE 10 (5:1; 1024 dwords), WPTR_WRITEBACK_ENABLE (8), MC_SNOOP (20) = 0xc0110114.
  // Ring 1: no WPTR_OVERFLOW_ENABLE, RB_FULL_DRAIN_ENABLE (9) = 0xc0100314.
  const std::vector<std::string> expected = {
      "IH_RB_CNTL=0x0", "IH_RB_RPTR=0x0", "IH_RB_WPTR=0x0", "IH_RB_CNTL_RING1=0x0",
      "IH_RB_RPTR_RING1=0x0", "IH_RB_WPTR_RING1=0x0",
      "IH_RB_BASE=0x80000000",  // MC >> 8
      "IH_RB_BASE_HI=0x0", "IH_RB_CNTL=0xc0110114", "IH_RB_WPTR_ADDR_LO=0x1000",
      "IH_RB_WPTR_ADDR_HI=0x80", "IH_RB_WPTR=0x0", "IH_RB_RPTR=0x0", "IH_DOORBELL_RPTR=0x0",
      "IH_RB_BASE_RING1=0x80000020", "IH_RB_BASE_HI_RING1=0x0", "IH_RB_CNTL_RING1=0xc0100314",
      "IH_RB_WPTR_RING1=0x0", "IH_RB_RPTR_RING1=0x0", "IH_DOORBELL_RPTR_RING1=0x0",
      "IH_STORM_CLIENT_LIST_CNTL=0x40000",  // CLIENT18_IS_STORM_CLIENT
      "IH_INT_FLOOD_CNTL=0x8",              // FLOOD_CNTL_ENABLE
      "IH_MSI_STORM_CTRL=0x3",              // DELAY 3
      // RB_ENABLE with WPTR_OVERFLOW_CLEAR 0, 1, 0, then ENABLE_INTR (17) on ring 0.
      "IH_RB_CNTL=0x40110115", "IH_RB_CNTL=0xc0110115", "IH_RB_CNTL=0x40130115",
      "IH_RB_CNTL_RING1=0x40100315", "IH_RB_CNTL_RING1=0xc0100315", "IH_RB_CNTL_RING1=0x40100315",
      "IH_RB_CNTL_RING1=0x40100315",  // RB_USED_INT_THRESHOLD 0
      "IH_CNTL2=0x108",               // SELF_IV_FORCE_WPTR_UPDATE_TIMEOUT 8, _ENABLE (8)
  };
  EXPECT_EQ(router.take_writes(), expected);
  EXPECT_EQ(model.last_error(), "");
}

// The entry description (ih_entry.def) against amdgpu_ih_decode_iv_helper's shifts, worked
// out by hand: every field at its place, made and read back, and a value too wide refused.
TEST(IhEntryDescription, FieldsSitWhereLinuxDecodesThem) {
  namespace f = ih_entry;
  // CP end of pipe of ME 1 pipe 2 queue 3 (ring_id 0x36), VMID 5 of the MM hub, timestamp
  // 0xabcd12345678, PASID 0x8001, node 2, context id 0x77.
  const f::Words w = f::make({{f::CLIENT_ID, 0x14}, {f::SOURCE_ID, 0xb5}, {f::RING_ID, 0x36},
                              {f::VMID, 5}, {f::VMID_SRC, 1}, {f::TIMESTAMP_LO, 0x12345678},
                              {f::TIMESTAMP_HI, 0xabcd}, {f::TIMESTAMP_SRC, 1}, {f::PASID, 0x8001},
                              {f::NODE_ID, 2}, {f::SRC_DATA0, 0x77}, {f::SRC_DATA3, 0xffffffff}});
  EXPECT_EQ(w, (f::Words{0x8536b514, 0x12345678, 0x8000abcd, 0x00028001, 0x77, 0, 0, 0xffffffff}));
  const IhEntry e = IhEntry::decode(w);
  EXPECT_EQ(e.client_id, 0x14u);
  EXPECT_EQ(e.source_id, 0xb5u);
  EXPECT_EQ(e.ring_id, 0x36u);
  EXPECT_EQ(e.vmid, 5u);
  EXPECT_TRUE(e.vmid_src);
  EXPECT_EQ(e.timestamp, 0xabcd12345678u);
  EXPECT_EQ(e.pasid, 0x8001u);
  EXPECT_EQ(e.node_id, 2u);
  EXPECT_EQ(e.src_data, (std::array<uint32_t, 4>{0x77, 0, 0, 0xffffffff}));
  EXPECT_EQ(f::kBytes, 32u);
  EXPECT_EQ(error_of<InvalidInput>([] { f::make({{f::VMID, 16}}); }),
            "IH entry.VMID: 16 does not fit in 4 bits (at most 15)");
}

TEST_F(AmIhTest, EntriesRoundTripAndClassify) {
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  EXPECT_EQ(ih.drain().size(), 0u);
  // CP end of pipe for ME 1 (ring_id 0x4: gfx_v11_0_eop_irq's me_id = ring_id 3:2), an SDMA
  // trap, a CP bad opcode, something else.
  ASSERT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0x4, 1)));
  ASSERT_TRUE(model.push(entry(ih::kClientGfx, ih::kSrcSdmaTrap, 0, 2)));
  ASSERT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpBadOpcode, 0, 3)));
  ASSERT_TRUE(model.push(entry(0x1f, 0x7, 0, 4)));
  // The write pointer in bytes, in the register and the write-back slot.
  EXPECT_EQ(regs.read(find_register("IH_RB_WPTR")), 0x80u);
  uint32_t wb;
  std::memcpy(&wb, ih.writeback(0).cpu, 4);
  EXPECT_EQ(wb, 0x80u);

  const std::vector<IhEntry> e = ih.drain();
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].client_id, 0x14u);
  EXPECT_EQ(e[0].source_id, 181u);
  EXPECT_EQ(e[0].ring_id, 4u);
  EXPECT_EQ(e[0].timestamp, 0xabcd12345678u);
  EXPECT_EQ(e[0].pasid, 0x8001u);
  EXPECT_EQ(e[0].src_data[0], 1u);
  EXPECT_EQ(classify(e[0]), IhSource::CpEndOfPipe);
  EXPECT_EQ(e[0].describe(), "client 0x14 source 0xb5 (CP_EOP) ring 4 vmid 0");
  EXPECT_EQ(e[1].describe(), "client 0xa source 0x31 (SDMA_TRAP) ring 0 vmid 0");
  EXPECT_EQ(e[2].describe(), "client 0x14 source 0xb7 (CP_BAD_OPCODE) ring 0 vmid 0");
  EXPECT_EQ(e[3].describe(), "client 0x1f source 0x7 (OTHER) ring 0 vmid 0");
  EXPECT_EQ(decode_vm_fault(e[0]), std::nullopt);
  // The read pointer went back to the IH in bytes.
  EXPECT_EQ(regs.read(find_register("IH_RB_RPTR")), 0x80u);
  EXPECT_EQ(ih.drain().size(), 0u);
}

// A retry fault with the high address bits (gmc_v11_0_process_interrupt's decoding).
// pending() looks at the write-back slot only: no register read or write, whatever it answers.
TEST_F(AmIhTest, PendingTouchesNoRegister) {
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  router.record(true);
  const uint64_t reads = router.reads();
  EXPECT_FALSE(ih.pending());
  ASSERT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 1)));
  EXPECT_TRUE(ih.pending());
  EXPECT_TRUE(ih.pending());  // asking again takes nothing
  EXPECT_EQ(router.reads(), reads);
  EXPECT_EQ(router.take_writes(), std::vector<std::string>{});
  EXPECT_EQ(ih.drain().size(), 1u);
  EXPECT_FALSE(ih.pending());
  // The overflow flag in the write-back copy counts as pending: drain must look at it.
  for (int i = 0; i < 200; ++i) model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, uint32_t(i)));
  EXPECT_TRUE(ih.pending());
  EXPECT_EQ(ih.drain().size(), 127u);
  EXPECT_EQ(ih.overflows(), 1u);
  EXPECT_FALSE(ih.pending());
}

TEST_F(AmIhTest, DecodesVmFaultAddressBits) {
  IhEntry e = IhEntry::decode({0x80000012u, 0, 0, 0, 0x89abc, 0xa5, 0, 0});
  const auto f = decode_vm_fault(e);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->hub, Hub::Mm);
  EXPECT_EQ(f->address, 0x500089abc000u);
  EXPECT_TRUE(f->write);
  EXPECT_TRUE(f->retry);
  EXPECT_EQ(f->describe(),
            "mmhub page fault (IH, client 0x12 vmid 0) at 0x500089abc000, write, retry");
}

TEST_F(AmIhTest, DropsWhileOff) {
  EXPECT_FALSE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 1)));
  EXPECT_EQ(model.dropped(), 1u);
  EXPECT_EQ(model.last_error(), "IH entry dropped: ring 0 is off");
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  EXPECT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 2)));
  EXPECT_EQ(ih.drain().size(), 1u);
}

// 130 entries into a ring of 128 slots (127 usable): 3 dropped, RB_OVERFLOW set; the driver
// counts the overflow, reads the 127 kept in order, clears the flag, and the ring works again.
TEST_F(AmIhTest, OverflowIsCountedAndRecovered) {
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  for (uint32_t i = 0; i < 130; ++i) model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, i));
  EXPECT_EQ(model.written(), 127u);
  EXPECT_EQ(model.overflows(), 3u);
  EXPECT_EQ(model.dropped(), 3u);
  EXPECT_EQ(model.last_error(), "IH entry dropped: ring 0 is full (rptr 0x0, wptr 0xfe0)");
  EXPECT_EQ(regs.read(find_register("IH_RB_WPTR")), 0xfe1u);  // offset | RB_OVERFLOW

  const std::vector<IhEntry> e = ih.drain();
  ASSERT_EQ(e.size(), 127u);
  for (uint32_t i = 0; i < 127; ++i) ASSERT_EQ(e[i].src_data[0], i);
  EXPECT_EQ(ih.overflows(), 1u);
  EXPECT_EQ(regs.read(find_register("IH_RB_WPTR")), 0xfe0u);
  EXPECT_EQ(regs.read(find_register("IH_RB_RPTR")), 0xfe0u);

  ASSERT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 500)));
  ASSERT_TRUE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 501)));  // wraps
  const std::vector<IhEntry> more = ih.drain();
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0].src_data[0], 500u);
  EXPECT_EQ(more[1].src_data[0], 501u);
  EXPECT_EQ(regs.read(find_register("IH_RB_RPTR")), 0x20u);
  EXPECT_EQ(ih.overflows(), 1u);
}

TEST_F(AmIhTest, ModelResetTurnsTheRingOff) {
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  model.reset();
  EXPECT_EQ(regs.read(find_register("IH_RB_CNTL")), 0u);
  EXPECT_FALSE(model.push(entry(ih::kClientGrbmCp, ih::kSrcCpEop, 0, 1)));
}

// VRAM the CPU does not map (behind a USB bridge): the same buffers without a `cpu` pointer,
// read through a port that records its reads.
class UnmappedVram final : public BootMemory, public VramPort {
 public:
  explicit UnmappedVram(test::TestVram& vram) : vram_(vram) {}
  VramBuffer alloc(uint64_t size, uint64_t align, const char* what) override {
    VramBuffer b = vram_.alloc(size, align, what);
    b.cpu = nullptr;
    return b;
  }
  uint64_t mc(uint64_t pa) const override { return vram_.mc(pa); }
  uint64_t read64(uint64_t pa) override { return vram_.read64(pa); }
  void write64(uint64_t pa, uint64_t value) override { vram_.write64(pa, value); }
  uint64_t size() const override { return vram_.span().size(); }
  void write(uint64_t pa, std::span<const std::byte> data) override {
    std::memcpy(vram_.span().data() + pa, data.data(), data.size());
  }
  void read(uint64_t pa, std::span<std::byte> out) override {
    reads.push_back({pa, out.size()});
    std::memcpy(out.data(), vram_.span().data() + pa, out.size());
  }
  std::byte* mapping() const override { return nullptr; }
  std::vector<std::pair<uint64_t, uint64_t>> reads;  // (pa, bytes)

 private:
  test::TestVram& vram_;
};

TEST_F(AmIhTest, UnmappedRingIsReadThroughThePortInOneReadOrTwoWhereItWraps) {
  UnmappedVram port(vram);
  Ih ih(regs, port, kRingBytes, &port);
  ih.init();
  using Reads = std::vector<std::pair<uint64_t, uint64_t>>;
  port.reads.clear();
  EXPECT_FALSE(ih.pending());
  EXPECT_EQ(port.reads, (Reads{{0x1000, 4}}));  // the write-back slot only
  for (uint32_t i = 0; i < 3; ++i) model.push(entry(ih::kClientGfx, ih::kSrcSdmaTrap, 0, i));
  EXPECT_TRUE(ih.pending());
  port.reads.clear();
  std::vector<IhEntry> e = ih.drain();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[2].src_data[0], 2u);
  EXPECT_EQ(port.reads, (Reads{{0x1000, 4}, {0x0, 0x60}}));
  for (uint32_t i = 3; i < 127; ++i) model.push(entry(ih::kClientGfx, ih::kSrcSdmaTrap, 0, i));
  EXPECT_EQ(ih.drain().size(), 124u);  // up to the ring's last entry, at 0xfe0
  for (uint32_t i = 127; i < 130; ++i) model.push(entry(ih::kClientGfx, ih::kSrcSdmaTrap, 0, i));
  port.reads.clear();
  e = ih.drain();
  ASSERT_EQ(e.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(e[i].src_data[0], 127 + i);
  EXPECT_EQ(port.reads, (Reads{{0x1000, 4}, {0xfe0, 0x20}, {0x0, 0x40}}));
  port.reads.clear();
  EXPECT_EQ(ih.drain().size(), 0u);
  EXPECT_EQ(port.reads, (Reads{{0x1000, 4}}));  // nothing new: no ring read
}

TEST_F(AmIhTest, RingSizeIsChecked) {
  EXPECT_EQ(error_of([&] { Ih ih(regs, vram, 0x3000); }),
            "IH ring of 0x3000 bytes: a power of two from 0x1000 to 0x40000 expected");
  EXPECT_EQ(error_of([&] { Ih ih(regs, vram, 0x80000); }),
            "IH ring of 0x80000 bytes: a power of two from 0x1000 to 0x40000 expected");
}

// drain from several threads (the header allows it): every entry comes out exactly once, each
// call's entries in ring order.
TEST_F(AmIhTest, ConcurrentDrains) {
  Ih ih(regs, vram, kRingBytes);
  ih.init();
  constexpr uint32_t kEntries = 120;
  for (uint32_t i = 0; i < kEntries; ++i) model.push(entry(ih::kClientGfx, ih::kSrcSdmaTrap, 0, i));
  std::mutex mu;
  std::vector<uint32_t> seen;
  bool ordered = true;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int n = 0; n < 20; ++n) {
        const std::vector<IhEntry> e = ih.drain();
        std::lock_guard lock(mu);
        for (size_t i = 0; i < e.size(); ++i) {
          seen.push_back(e[i].src_data[0]);
          if (i && e[i].src_data[0] != e[i - 1].src_data[0] + 1) ordered = false;
        }
      }
    });
  for (auto& t : threads) t.join();
  std::sort(seen.begin(), seen.end());
  std::vector<uint32_t> all(kEntries);
  for (uint32_t i = 0; i < kEntries; ++i) all[i] = i;
  EXPECT_EQ(seen, all);
  EXPECT_TRUE(ordered);
}

}  // namespace
}  // namespace hcq::amd::am
