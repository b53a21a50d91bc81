// The emulated GPU's compute and copy queues at the register level (issue 17 item 8), GC 11.0.0
// and SDMA 6.0.0: the MEC's HQD registers of every ME/pipe/queue (banked by GRBM_GFX_CNTL),
// the MEC's control and doorbell-range registers, the RLC status the driver waits on, SH_MEM_*
// per VMID, and queue 0's ring registers of both SDMA engines (SDMA0, SDMA1: the same block
// 0x600 dwords apart, gc_11_0_0_offset.h regSDMA1_*; each engine's F32_CNTL 0x20 apart in
// segment 1, sdma_v6_0_get_reg_offset). Activating a queue hands it to the existing
// emulated command processor (engine.hpp) with a QueueDesc taken from the registers; the
// engine's interrupts become IH entries on AmBus::interrupt.
//
// Written from the public descriptions, not from hcq's driver: Linux gfx_v11_0.c (what the
// HQD registers mean: PQ_BASE >> 8, QUEUE_SIZE = log2(dwords) - 1, RPTR_REPORT_ADDR,
// WPTR_POLL_ADDR, DOORBELL_OFFSET in dwords of the doorbell BAR; CP_MEC_DOORBELL_RANGE_* as
// byte offsets; gfx_v11_0_wait_for_rlc_autoload_complete's CP_STAT / BOOTLOAD_COMPLETE;
// gfx_v11_0_eop_irq's ring_id layout), sdma_v6_0.c (RB_BASE >> 8, RB_SIZE = log2(dwords),
// RB_RPTR_ADDR, DOORBELL_OFFSET, F32_CNTL.HALT; sdma_v6_0_process_trap_irq's ring_id layout:
// instance << 4 | queue),
// Linux include/soc15_ih_clientid.h (SOC21_IH_CLIENTID_GRBM_CP 0x14, _GFX 0x0a) and
// include/ivsrcid/gfx/irqsrcs_gfx_11_0_0.h (CP_EOP_INTERRUPT 181, SDMA_TRAP 49), and tinygrad
// test/mockgpu/am/amgpu.py (an HQD_ACTIVE write of 1 starts the queue; DEQUEUE_REQUEST stops
// it).
//
// What the model refuses, as hardware would not run the queue (the queue stays inactive,
// CP_HQD_ACTIVE reads 0, last_error() says why):
//   - activation with no MEC firmware (the mec_firmware_ready hook),
//   - activation on an ME other than 1 (gfx1100 has one MEC),
//   - activation while the queue's MEC pipe is halted, in reset or not active
//     (CP_MEC_RS64_CNTL; its power-on value has MEC_HALT set),
//   - a doorbell not enabled, outside the MEC doorbell range (CP_MEC_DOORBELL_RANGE_LOWER/
//     UPPER, both 0 at power-on) or outside the doorbell BAR,
//   - a ring the engine refuses (size, alignment, unmapped addresses).
// Queue 0 of SDMA0 and of SDMA1 likewise on RB_ENABLE (no SDMA firmware, the engine's F32
// halted, doorbell off or outside the BAR, engine refusal): RB_ENABLE then reads back 0.
// Halting the MEC or a pipe stops that pipe's queues (CP_HQD_ACTIVE 0); halting an SDMA
// engine's F32 stops its queue until it is unhalted.
// CP_HQD_IB_BASE_ADDR/_HI, CP_HQD_IB_RPTR and CP_HQD_IB_CONTROL of an active queue read where
// the engine is inside an indirect buffer (IB_CONTROL.PROCESSING_IB set, IB_SIZE and
// CONSUMED_OFFSET in dwords; the dword units are the model's reading of the field widths), as
// Linux gfx_v11_0.c's per-queue register dump reads them; otherwise what was written.
//
// Model choices no public source states: CP_STAT reads 0x80000000 (CP_BUSY) until the RLC
// autoload is done, then 0; DEQUEUE_REQUEST completes at once (its DEQUEUE_REQ field reads 0
// again); the queue's read/write position starts at 0 (the driver writes PQ_WPTR 0 and a
// zero doorbell before activating).
//
// Threads: every member may be called from several threads at once (one mutex). The engine's
// thread calls AmBus::interrupt and the fault hook without that mutex held; they must not call
// back into this model (a register write may be waiting for the engine's pass to end).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "amd/am/ih_ids.hpp"
#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"
#include "amd/emu/engine.hpp"

namespace hcq::amd::emu {

struct AmGfxHooks {
  std::function<bool()> rlc_autoload_done;   // the PSP model: RLC autoload finished
  std::function<bool()> mec_firmware_ready;  // the PSP model: MEC firmware loaded
  std::function<bool()> sdma_firmware_ready; // the PSP model: SDMA firmware loaded
  // A queue stopped on a bad packet or address: "compute queue ME 1 pipe 0 queue 0" or
  // "SDMA1 queue 0", and the engine's description. May be null.
  std::function<void(const std::string& queue, bool memory_fault, uint64_t address,
                     const std::string& what)>
      fault;
};

class AmGfx final : public AmBlock, private GpuEvents {
 public:
  // IH entry ids (am/ih_ids.hpp: Linux soc15_ih_clientid.h, irqsrcs_gfx_11_0_0.h).
  static constexpr uint32_t kClientGrbmCp = am::ih::kClientGrbmCp, kClientGfx = am::ih::kClientGfx;
  static constexpr uint32_t kSrcCpEop = am::ih::kSrcCpEop, kSrcSdmaTrap = am::ih::kSrcSdmaTrap;
  static constexpr uint32_t kSdmaEngines = 2;  // gfx1100: SDMA0, SDMA1

  // Places the registers with GC's segment bases; `memory` is the GPU's view of memory the
  // engine reads rings and packets through; `bus` must outlive the model.
  AmGfx(const am::IpSegmentBases& bases, AmBus& bus, hcq::emu::GpuAddressSpace& memory,
        AmGfxHooks hooks);
  ~AmGfx() override;
  AmGfx(const AmGfx&) = delete;
  AmGfx& operator=(const AmGfx&) = delete;

  bool handles(uint64_t offset) const override;
  // hcq::InvalidInput for an offset handles() refuses: "AM GFX model: no register at byte 0x4".
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;
  // Power-on state: every queue stopped and removed from the engine, registers at reset values.
  void reset() override;

  // Why the last activation was refused ("" when none was): "compute queue ME 1 pipe 0 queue
  // 0: activation refused: no MEC firmware loaded".
  std::string last_error() const;
  // Where each queue waiting inside an indirect buffer is, one line per queue, named by its
  // hardware queue: "compute queue ME 1 pipe 0 queue 0: IB 0x<va> <n> dwords, at dword <m>"
  // (the engine's ib_positions; the CP_HQD_IB_* registers say the same per compute queue).
  std::string ib_positions() const;
  bool compute_queue_running(uint32_t me, uint32_t pipe, uint32_t queue) const;
  // Queue 0 of SDMA engine `engine` (false past the last engine).
  bool sdma_queue_running(uint32_t engine = 0) const;
  // Look at the doorbells now (a waiter is about to sleep on the GPU's MSI; engine.hpp kick).
  void kick();

 private:
  enum class Kind : uint8_t {
    Hqd, GrbmGfxCntl, ShMemConfig, ShMemBases, PrgmStart, PrgmStartHi, MecCntl, DoorbellLower,
    DoorbellUpper, CpStat, BootloadStatus, SpiQueueReset, Sdma, SdmaF32Cntl
  };
  struct Slot {
    Kind kind;
    uint32_t index = 0;   // dword in the HQD bank / SDMA queue block
    uint32_t engine = 0;  // SDMA engine (Sdma, SdmaF32Cntl)
  };
  static constexpr uint32_t kMes = 4, kPipes = 4, kQueues = 8;
  static constexpr uint32_t kHqdDwords = 0x40, kSdmaDwords = 0x4c;
  using Hqd = std::array<uint32_t, kHqdDwords>;
  struct SdmaEngine {
    std::array<uint32_t, kSdmaDwords> regs{};  // queue 0's block, SDMA0_QUEUE0_RB_CNTL first
    uint32_t f32_cntl = 0;
    bool running = false;
  };

  // GpuEvents (the engine's thread).
  void interrupt(uint32_t context_id) override;
  void queue_interrupt(uint32_t queue_id, uint32_t context_id) override;
  void fault(uint32_t queue_id, bool memory_fault, uint64_t address,
             const std::string& what) override;

  void power_on_state();  // mutex_ held
  uint32_t selected_bank() const;
  uint32_t& hqd_reg(uint32_t bank, const am::Reg& r);
  // Engine `engine`'s copy of the SDMA0 queue-0 register `r` (the blocks have one layout).
  uint32_t& sdma_reg(uint32_t engine, const am::Reg& r);
  void write_hqd(uint32_t bank, uint32_t index, uint32_t value);
  // CP_HQD_IB_BASE_ADDR/_HI, IB_RPTR, IB_CONTROL: the engine's position in an IB (`positions`,
  // its ib_positions text) while the queue runs inside one, else the stored value.
  bool is_ib_register(uint32_t index) const;
  uint32_t ib_register(uint32_t bank, uint32_t index, const std::string& positions);
  void activate(uint32_t bank);
  void deactivate(uint32_t bank);
  bool pipe_running(uint32_t pipe) const;
  void stop_halted_pipes();
  void start_sdma(uint32_t engine);
  void stop_sdma(uint32_t engine);
  const volatile uint64_t* doorbell(uint64_t byte, const std::string& who, std::string& error);
  // Hands the queue `d` to the engine with its doorbell at `doorbell_byte`; why it was refused
  // ("" when it was not).
  std::string add_to_engine(QueueDesc d, uint64_t doorbell_byte, const std::string& who);
  static std::string compute_name(uint32_t bank);
  static std::string sdma_name(uint32_t engine);
  static std::string queue_name(uint32_t queue_id);  // an engine queue id's hardware queue

  AmBus& bus_;
  hcq::emu::GpuAddressSpace& memory_;
  AmGfxHooks hooks_;
  std::unordered_map<uint64_t, Slot> slots_;  // byte offset -> register
  uint32_t hqd_first_ = 0, sdma_first_ = 0;  // dword offsets in GC segment 0 of the blocks
                                             // (SDMA0's; SDMA1's has the same layout)

  mutable std::mutex mutex_;
  uint32_t grbm_gfx_cntl_ = 0;
  std::vector<Hqd> hqds_;  // kMes * kPipes * kQueues banks
  std::vector<bool> active_;
  std::array<uint32_t, 16> sh_mem_config_{}, sh_mem_bases_{};
  std::array<uint32_t, kMes * kPipes> prgm_start_{}, prgm_start_hi_{};
  uint32_t mec_cntl_ = 0, doorbell_lower_ = 0, doorbell_upper_ = 0, spi_queue_reset_ = 0;
  std::array<SdmaEngine, kSdmaEngines> sdma_{};
  std::string last_error_;
  std::unique_ptr<Engine> engine_;  // last: its thread calls back into this object
};

}  // namespace hcq::amd::emu
