// The AM HDP flush and the HQD's indirect-buffer registers: the driver's writes (am::Hdp,
// ComputeQueue::read_ib) through a recording register window at the emulated RX 7900 XTX's
// addresses, the decode of the IB registers, and the emulated GPU's flush counting.
// Expected values are worked out here: Linux soc21.c puts the MMIO remap page at
// 0x80000 - 4096 = 0x7f000, kfd_ioctl.h the two flush registers at +0 and +4 in it;
// nbio_4_3_0.def's ADDRESS field is bits 18:2; gc_11_0_0.def's CP_HQD_IB_* fields.
#include "amd/am/hdp.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "amd/am/gfx.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am_block_harness.hpp"
#include "amd/emu/am_gpu.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

class AmHdpTest : public ::testing::Test {
 protected:
  IpSegmentBases bases = test::gfx1100_bases();
  test::Router router{bases};
  os::EmulatedMmio mmio{"BAR5 of emu:gfx1100_am", 1 << 20, router};
  RegisterIo regs{mmio, bases};
};

// nbio_v4_3_remap_hdp_registers, then amdgpu_hdp_generic_flush's write and read-back, then
// the doorbell path's write alone.
TEST_F(AmHdpTest, RemapThenFlushWritesTheRemappedRegister) {
  Hdp hdp(regs, mmio);
  router.record(true);
  hdp.remap();
  hdp.flush();
  hdp.post_flush();
  EXPECT_EQ(router.take_writes(),
            (std::vector<std::string>{"BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL=0x7f000",
                                      "BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL=0x7f004", "0x7f000=0x0",
                                      "0x7f000=0x0"}));
}

TEST(AmHqdIb, DecodeGivesTheIbAndTheDwordTheEngineIsAt) {
  // IB_BASE_ADDR 0x12345678 (bits 31:2), _HI 0x7fff, CONSUMED_OFFSET 0x10, IB_SIZE 0x40 with
  // MIN_IB_AVAIL_SIZE 3 (bits 21:20) and PROCESSING_IB (bit 31).
  const std::optional<IbPosition> p =
      decode_hqd_ib({0x12345678, 0x7fff, 0x10, 0x80000000 | 0x300000 | 0x40});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->va, 0x7fff12345678u);
  EXPECT_EQ(p->dwords, 0x40u);
  EXPECT_EQ(p->at, 0x10u);
  // Bits outside the fields are dropped: base bits 1:0, _HI bits 31:16, RPTR bits 31:20.
  const std::optional<IbPosition> q = decode_hqd_ib({0x1003, 0xffff0001, 0xfff00005, 0x80000008});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->va, 0x100001000u);
  EXPECT_EQ(q->dwords, 8u);
  EXPECT_EQ(q->at, 5u);
  // Not inside an IB: nothing, whatever the other registers hold.
  EXPECT_FALSE(decode_hqd_ib({0x12345678, 0x7fff, 0x10, 0x40}));
}

// read_ib selects the queue's HQD through GRBM_GFX_CNTL (ME 1 pipe 2 queue 1: MEID 1 << 2,
// PIPEID 2, QUEUEID 1 << 8 = 0x106), reads the four registers, selects ME 0 pipe 0 queue 0.
TEST_F(AmHdpTest, ReadIbSelectsTheQueueReadsItsRegistersAndDeselects) {
  test::TestVram vram{1 << 20};
  Gfx gfx(regs);
  const ComputeQueueConfig c{.me = 1, .pipe = 2, .queue = 1, .ring_va = 0x100000,
                             .ring_bytes = 0x1000, .rptr_va = 0x200000, .wptr_va = 0x200040,
                             .eop_va = 0x300000, .doorbell_dword = 0x10};
  ComputeQueue q(gfx, vram, c);  // CP_HQD_ACTIVE is plain storage here: reads back 1
  router.set_plain("CP_HQD_IB_BASE_ADDR", 0x7f001000);
  router.set_plain("CP_HQD_IB_BASE_ADDR_HI", 0x7ffd);
  router.set_plain("CP_HQD_IB_RPTR", 0x2a);
  router.set_plain("CP_HQD_IB_CONTROL", 0x80300100);
  router.record(true);
  const HqdIbRegisters r = q.read_ib();
  EXPECT_EQ(router.take_writes(),
            (std::vector<std::string>{"GRBM_GFX_CNTL=0x106", "GRBM_GFX_CNTL=0x0"}));
  EXPECT_EQ(r.base_lo, 0x7f001000u);
  EXPECT_EQ(r.base_hi, 0x7ffdu);
  EXPECT_EQ(r.rptr, 0x2au);
  EXPECT_EQ(r.control, 0x80300100u);
  const std::optional<IbPosition> p = decode_hqd_ib(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->va, 0x7ffd7f001000u);
  EXPECT_EQ(p->dwords, 0x100u);
  EXPECT_EQ(p->at, 0x2au);
  router.set_plain("CP_HQD_ACTIVE", 0);  // the dequeue on destruction finds it idle
}

// The emulated GPU: a write of the remapped registers counts only once they are remapped
// there, and a reset forgets the remap.
TEST(AmGpuHdp, CountsFlushesAtTheRemappedRegistersOnly) {
  std::vector<uint8_t> vram(64 << 20), doorbells(4096);
  emu::AmGpu gpu(vram, doorbells, {});
  os::EmulatedMmio bar("BAR5", 1 << 20, gpu);
  RegisterIo regs(bar, gpu.bases());
  bar.write32(0x7f000, 0);  // not remapped yet: a plain register
  EXPECT_EQ(gpu.hdp_mem_flushes(), 0u);
  Hdp hdp(regs, bar);
  hdp.remap();
  hdp.flush();
  hdp.flush();
  bar.write32(0x7f004, 0);
  EXPECT_EQ(gpu.hdp_mem_flushes(), 2u);
  EXPECT_EQ(gpu.hdp_reg_flushes(), 1u);
  EXPECT_EQ(gpu.bus().hdp_flushes(), 2u);
  gpu.function_reset();
  bar.write32(0x7f000, 0);
  EXPECT_EQ(gpu.hdp_mem_flushes(), 2u);
}

}  // namespace
}  // namespace hcq::amd::am
