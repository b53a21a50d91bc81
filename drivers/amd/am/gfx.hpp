// GC 11.0.0 (gfx1100) compute bring-up after the PSP's RLC autoload (issue 17 item 6): wait for
// the autoload, point the MEC's RS64 cores at their firmware, per-VMID shader memory apertures,
// the MEC doorbell range, MEC unhalted; then compute queues programmed straight into the HQD
// registers (no KIQ), as tinygrad's AM driver does.
//
// Sources (facts only): Linux drivers/gpu/drm/amd/amdgpu/gfx_v11_0.c
//   gfx_v11_0_wait_for_rlc_autoload_complete  CP_STAT == 0 and RLC_RLCS_BOOTLOAD_STATUS
//                                             .BOOTLOAD_COMPLETE == 1
//   gfx_v11_0_config_gfx_rs64 (MEC part)      per pipe 0..3 of ME 1: CP_MEC_RS64_PRGRM_CNTR_START
//                                             = ucode_start_addr_lo >> 2 | hi << 30, _HI =
//                                             hi >> 2; then MEC_PIPE0..3_RESET set and cleared
//   gfx_v11_0_cp_set_doorbell_range           CP_MEC_DOORBELL_RANGE_LOWER/UPPER (byte offsets)
//   gfx_v11_0_cp_compute_enable               CP_MEC_RS64_CNTL: pipes out of reset, active,
//                                             MEC_HALT 0 (enable) or the opposite (disable)
//   gfx_v11_0_compute_mqd_init                the MQD's values
//   gfx_v11_0_kiq_init_register               the order the HQD registers are written in
// and tinygrad tinygrad/runtime/support/am/ip.py AM_GFX (init_hw: SH_MEM_CONFIG with 64-bit
// addressing, unaligned mode, INITIAL_INST_PREFETCH 3 and SH_MEM_BASES shared 1 / private 2
// for VMIDs 0..15, selected through GRBM_GFX_CNTL; setup_ring; _dequeue_hqds: DEQUEUE_REQUEST
// 2, SPI_COMPUTE_QUEUE_RESET 1, wait CP_HQD_ACTIVE 0).
//
// Not done (both public drivers differ): Linux's KIQ path also clears CP_PQ_WPTR_POLL_CNTL.EN
// and sets CP_PQ_STATUS.DOORBELL_ENABLE; tinygrad writes neither and its queues run, so neither
// is written here (they are not in the register descriptions).
//
// Threads: one Gfx serialises its own GRBM_GFX_CNTL selections (Linux's srbm_mutex); queues
// created from it take the same lock, so queues may be created and destroyed from several
// threads. Nothing else may write GRBM_GFX_CNTL meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include "amd/am/boot_memory.hpp"
#include "amd/am/firmware.hpp"
#include "amd/am/register_io.hpp"
#include "amd/ring_queue.hpp"

namespace hcq::amd::am {

// GFX11_MEC_HPD_SIZE (gfx_v11_0.c): each compute queue's EOP buffer.
inline constexpr uint64_t kGfx11MecHpdSize = 2048;

class Gfx {
 public:
  // Linux polls adev->usec_timeout (100 ms) for the autoload; tinygrad 10 s.
  static constexpr std::chrono::microseconds kDefaultTimeout = std::chrono::seconds(2);

  explicit Gfx(RegisterIo& io, std::chrono::microseconds timeout = kDefaultTimeout);

  // Polls CP_STAT and RLC_RLCS_BOOTLOAD_STATUS until CP_STAT is 0 and BOOTLOAD_COMPLETE is 1.
  // hcq::TimeoutError: "RLC autoload: waited 2000 ms for CP_STAT 0x0 and
  // RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE 1, last read CP_STAT 0x80000000,
  // RLC_RLCS_BOOTLOAD_STATUS 0x0".
  void wait_rlc_autoload();
  // The MEC's RS64 program start on each of ME 1's four pipes from the MEC firmware's
  // ucode_start_addr, then the pipes reset and released. InvalidInput for a firmware that is
  // not an RS64 MEC file (ucode_start_addr 0): "<path>: not an RS64 MEC firmware
  // (ucode_start_addr 0)".
  void config_mec(const Firmware& mec);
  // SH_MEM_CONFIG / SH_MEM_BASES for VMIDs 0..15 (GRBM_GFX_CNTL.VMID selects each).
  void init_sh_mem();
  // CP_MEC_DOORBELL_RANGE_LOWER/UPPER: doorbells whose byte offset in the doorbell BAR lies in
  // [first_byte, last_byte] reach the MEC. Linux: kiq index * 8 .. userqueue_end * 8.
  void set_mec_doorbell_range(uint32_t first_byte, uint32_t last_byte);
  // CP_MEC_RS64_CNTL: enable runs every pipe (reset 0, active 1, halt 0), disable halts.
  void enable_mec(bool enable);
  // All of the above in Linux's order (gfx_v11_0_hw_init: autoload wait, config_gfx_rs64,
  // constants_init; cp_resume: doorbell range, compute enable).
  void init(const Firmware& mec, uint32_t doorbell_first_byte, uint32_t doorbell_last_byte);

  // GRBM_GFX_CNTL: which ME/pipe/queue and VMID the banked registers reach. The caller holds
  // select_mutex().
  void select(uint32_t me, uint32_t pipe, uint32_t queue, uint32_t vmid);
  std::mutex& select_mutex() { return select_mutex_; }
  RegisterIo& io() { return io_; }
  std::chrono::microseconds timeout() const { return timeout_; }

 private:
  RegisterIo& io_;
  std::chrono::microseconds timeout_;
  std::mutex select_mutex_;
};

struct ComputeQueueConfig {
  uint32_t me = 1, pipe = 0, queue = 0;  // gfx1100: one MEC (ME 1), 4 pipes, 4 queues each
  uint64_t ring_va = 0;      // 256-byte aligned
  uint64_t ring_bytes = 0;   // power of two, 256 bytes .. 8 MiB (QUEUE_SIZE is 6 bits)
  uint64_t rptr_va = 0;      // where the CP reports its read pointer (dwords, 64-bit)
  uint64_t wptr_va = 0;      // where the CP may poll the write pointer (dwords, 64-bit)
  uint64_t eop_va = 0;       // kGfx11MecHpdSize bytes, 256-byte aligned
  uint32_t doorbell_dword = 0;  // the doorbell's offset in the doorbell BAR in dwords (even:
                                // gfx11 doorbells are 64-bit; Linux doorbell_index << 1)
};

// An HQD's indirect-buffer registers (CP_HQD_IB_BASE_ADDR, _HI, CP_HQD_IB_RPTR,
// CP_HQD_IB_CONTROL; the MQD's cp_hqd_ib_base_addr_lo/_hi, cp_hqd_ib_rptr, cp_hqd_ib_control in
// Linux v11_structs.h; Linux gfx_v11_0.c gc_cp_reg_list_11 dumps them per queue for hang
// reports, selecting each queue through GRBM_GFX_CNTL under srbm_mutex).
struct HqdIbRegisters {
  uint32_t base_lo = 0, base_hi = 0, rptr = 0, control = 0;
};
// Where the queue is inside an indirect buffer, from those registers: nothing unless
// CP_HQD_IB_CONTROL.PROCESSING_IB is set; else the IB at IB_BASE_ADDR_HI:IB_BASE_ADDR (bits
// 47:2 of its address), IB_SIZE dwords long, at CONSUMED_OFFSET dwords into it. The fields are
// Linux gc_11_0_0_sh_mask.h's; that IB_SIZE and CONSUMED_OFFSET count dwords (as the
// INDIRECT_BUFFER packet's IB_SIZE does) is this driver's reading, not a public statement.
std::optional<IbPosition> decode_hqd_ib(const HqdIbRegisters& r);

// A compute queue on one HQD. The constructor writes the MQD into BootMemory, programs the
// HQD registers from it and activates it; the destructor dequeues it (errors swallowed; call
// destroy() to see them).
class ComputeQueue {
 public:
  // Throws InvalidInput for a bad config ("compute queue ring size 0x300 is not a power of two
  // from 0x100 to 0x800000", ...) and hcq::Error when the HQD does not come up: "compute queue
  // ME 1 pipe 0 queue 0: CP_HQD_ACTIVE reads 0x0 after activation".
  ComputeQueue(Gfx& gfx, BootMemory& memory, const ComputeQueueConfig& config);
  ~ComputeQueue();
  ComputeQueue(const ComputeQueue&) = delete;
  ComputeQueue& operator=(const ComputeQueue&) = delete;

  // Dequeue (DEQUEUE_REQUEST 2, SPI_COMPUTE_QUEUE_RESET 1) and wait until CP_HQD_ACTIVE is 0
  // (the TimeoutError names CP_HQD_ACTIVE). Idempotent.
  void destroy();
  // The HQD's IB registers, read with the queue selected (GRBM_GFX_CNTL, Gfx's lock held) and
  // the selection restored to ME 0 pipe 0 queue 0 after.
  HqdIbRegisters read_ib();
  const VramBuffer& mqd() const { return mqd_; }
  const ComputeQueueConfig& config() const { return config_; }

 private:
  Gfx& gfx_;
  ComputeQueueConfig config_;
  VramBuffer mqd_;
  bool active_ = false;
};

}  // namespace hcq::amd::am
