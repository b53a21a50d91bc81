// SDMA 6.0.0 (gfx1100) queue 0 of engine 0 or 1 through its ring-buffer registers (issue 17
// item 6). SDMA 6.0's registers live in the GC register header and resolve against GC's segment
// bases; engine 1's are engine 0's moved by Linux's sdma_v6_0_get_reg_offset (SDMA1_REG_OFFSET
// 0x600 dwords in segment 0; SDMA1_HYP_DEC_REG_OFFSET 0x20 inside segment 1's 0x5880..0x589a,
// where F32_CNTL sits), which gc_11_0_0.def describes as SDMA1_*.
//
// Sources (facts only): Linux drivers/gpu/drm/amd/amdgpu/sdma_v6_0.c
//   sdma_v6_0_gfx_resume_instance   the order: RB_CNTL (size, privileged), RB_RPTR/_HI and
//                                   RB_WPTR/_HI 0, WPTR_POLL_ADDR, RPTR_ADDR (HI first), RB_BASE
//                                   (>> 8) / _HI (>> 40), MINOR_PTR_UPDATE 1, RB_WPTR 0,
//                                   DOORBELL.ENABLE and DOORBELL_OFFSET, MINOR_PTR_UPDATE 0,
//                                   WATCHDOG_CNTL, UTCL1_CNTL, UTCL1_PAGE, F32_CNTL unhalted, then
//                                   RB_CNTL with RPTR_WRITEBACK_ENABLE, F32_WPTR_POLL_ENABLE and
//                                   RB_ENABLE, then IB_CNTL.IB_ENABLE
//   sdma_v6_0_gfx_stop              RB_ENABLE 0, IB_ENABLE 0
//   sdma_v6_0_ring_set_wptr         the doorbell takes the write pointer in bytes
// and tinygrad tinygrad/runtime/support/am/ip.py AM_SDMA (setup_ring, init_hw's values:
// QUEUE_HANG_COUNT 100, RESP_MODE 3, REDO_DELAY 9, RD_L2_POLICY 2, WR_L2_POLICY 3,
// LLC_NOALLOC 1, RPTR_WRITEBACK_TIMER 4; fini_hw: DOORBELL and DOORBELL_OFFSET cleared).
//
// Threads: one SdmaQueue is used from one thread at a time; queues of the two engines may be
// used from different threads (their registers are apart); two queues of the same engine do not
// exist (queue 0 only). sdma_engine_reg may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "amd/am/register_io.hpp"

namespace hcq::amd::am {

inline constexpr uint32_t kSdmaEngines = 2;  // gfx1100: SDMA0 and SDMA1 (sdma_v6_0 instances)

// Engine `engine`'s copy of the SDMA0 register `sdma0` (Linux sdma_v6_0_get_reg_offset):
// SDMA1_QUEUE0_RB_CNTL for (1, SDMA0_QUEUE0_RB_CNTL). InvalidInput for an engine past 1.
Reg sdma_engine_reg(uint32_t engine, const Reg& sdma0);

struct SdmaQueueConfig {
  uint32_t engine = 0;       // 0 or 1
  uint64_t ring_va = 0;      // 256-byte aligned
  uint64_t ring_bytes = 0;   // power of two, 256 bytes .. 1 GiB (RB_SIZE: log2 of dwords)
  uint64_t rptr_va = 0;      // where the engine writes its read pointer back (bytes, 64-bit)
  uint64_t wptr_va = 0;      // where the engine may poll the write pointer (bytes, 64-bit)
  uint32_t doorbell_dword = 0;  // doorbell offset in the doorbell BAR in dwords (even)
};

class SdmaQueue {
 public:
  // Programs and enables queue 0 of the configured engine. InvalidInput for a bad config
  // ("SDMA1 queue 0: ring size 0x300 is not a power of two from 0x100 to 0x40000000", "SDMA2
  // queue 0: gfx1100 has SDMA engines 0 and 1"); hcq::Error when the engine does not take the
  // ring: "SDMA1 queue 0: SDMA1_QUEUE0_RB_CNTL.RB_ENABLE reads 0 after enabling (register
  // 0x...)".
  SdmaQueue(RegisterIo& io, const SdmaQueueConfig& config);
  // stop(), errors swallowed.
  ~SdmaQueue();
  SdmaQueue(const SdmaQueue&) = delete;
  SdmaQueue& operator=(const SdmaQueue&) = delete;

  // Ring and IBs off, doorbell off (sdma_v6_0_gfx_stop, tinygrad fini_hw). Idempotent.
  void stop();
  const SdmaQueueConfig& config() const { return config_; }

 private:
  Reg reg(const Reg& sdma0) const { return sdma_engine_reg(config_.engine, sdma0); }
  // Read, set the fields, write back: this engine's copy of `sdma0`.
  void update(const Reg& sdma0, FieldValues fields);

  RegisterIo& io_;
  SdmaQueueConfig config_;
  bool running_ = false;
};

}  // namespace hcq::amd::am
