#include "amd/am/gfx.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <string>
#include <thread>

#include "amd/am/mqd.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {

namespace gc = gc_11_0_0;
namespace gcf = gc_11_0_0::fields;

namespace {

// "100 ms" when whole milliseconds, otherwise "1500 us" (as RegisterIo writes it).
std::string duration_text(std::chrono::microseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " ms";
  return std::to_string(d.count()) + " us";
}

uint32_t lo32(uint64_t v) { return uint32_t(v); }
uint32_t hi32(uint64_t v) { return uint32_t(v >> 32); }

// gfx1100 has one MEC (ME 1) with four pipes of four queues: Linux gfx_v11_0_sw_init sets
// mec.num_mec 1, num_pipe_per_mec 4, num_queue_per_pipe 4 for GC 11.0.0-11.0.4 (8 only in its
// default branch). GRBM_GFX_CNTL.QUEUEID has room for 8: 4 is the driver's choice, Linux's.
constexpr uint32_t kMecPipes = 4, kMecQueuesPerPipe = 4;

// CP_MEC_RS64_CNTL's reset and active bit of each pipe.
constexpr RegField kMecPipeReset[kMecPipes] = {
    gcf::CP_MEC_RS64_CNTL::MEC_PIPE0_RESET, gcf::CP_MEC_RS64_CNTL::MEC_PIPE1_RESET,
    gcf::CP_MEC_RS64_CNTL::MEC_PIPE2_RESET, gcf::CP_MEC_RS64_CNTL::MEC_PIPE3_RESET};
constexpr RegField kMecPipeActive[kMecPipes] = {
    gcf::CP_MEC_RS64_CNTL::MEC_PIPE0_ACTIVE, gcf::CP_MEC_RS64_CNTL::MEC_PIPE1_ACTIVE,
    gcf::CP_MEC_RS64_CNTL::MEC_PIPE2_ACTIVE, gcf::CP_MEC_RS64_CNTL::MEC_PIPE3_ACTIVE};

std::string queue_name(const ComputeQueueConfig& c) {
  return "compute queue ME " + std::to_string(c.me) + " pipe " + std::to_string(c.pipe) +
         " queue " + std::to_string(c.queue);
}

}  // namespace

Gfx::Gfx(RegisterIo& io, std::chrono::microseconds timeout) : io_(io), timeout_(timeout) {}

void Gfx::wait_rlc_autoload() {
  // gfx_v11_0_wait_for_rlc_autoload_complete: both conditions in one poll.
  const RegField& complete = gcf::RLC_RLCS_BOOTLOAD_STATUS::BOOTLOAD_COMPLETE;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int polls = 0;; ++polls) {
    const bool late = std::chrono::steady_clock::now() >= deadline;
    const uint32_t cp_stat = io_.read(gc::CP_STAT);
    const uint32_t bootload = io_.read(gc::RLC_RLCS_BOOTLOAD_STATUS);
    if (cp_stat == 0 && complete.get(bootload) == 1) return;
    if (late)
      throw TimeoutError("RLC autoload: waited " + duration_text(timeout_) +
                         " for CP_STAT 0x0 and RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE 1, "
                         "last read CP_STAT " + hex(cp_stat) + ", RLC_RLCS_BOOTLOAD_STATUS " +
                         hex(bootload));
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(1));
  }
}

void Gfx::select(uint32_t me, uint32_t pipe, uint32_t queue, uint32_t vmid) {
  // soc21_grbm_select (soc21.c): MEID, PIPEID, VMID, QUEUEID in one write.
  uint32_t v = 0;
  v = gcf::GRBM_GFX_CNTL::MEID.set(v, me);
  v = gcf::GRBM_GFX_CNTL::PIPEID.set(v, pipe);
  v = gcf::GRBM_GFX_CNTL::VMID.set(v, vmid);
  v = gcf::GRBM_GFX_CNTL::QUEUEID.set(v, queue);
  io_.write(gc::GRBM_GFX_CNTL, v);
}

void Gfx::config_mec(const Firmware& mec) {
  if (mec.kind != FirmwareKind::Mec || mec.ucode_start_addr == 0)
    throw InvalidInput(mec.path + ": not an RS64 MEC firmware (ucode_start_addr " +
                       hex(mec.ucode_start_addr) + ")");
  // gfx_firmware_header_v2_0 ucode_start_addr_lo/_hi; the register takes the start in dwords
  // with hi's low two bits on top (gfx_v11_0_config_gfx_rs64).
  const uint32_t start_lo = lo32(mec.ucode_start_addr), start_hi = hi32(mec.ucode_start_addr);
  {
    std::lock_guard lock(select_mutex_);
    for (uint32_t pipe = 0; pipe < kMecPipes; ++pipe) {
      select(1, pipe, 0, 0);
      io_.write(gc::CP_MEC_RS64_PRGRM_CNTR_START, (start_lo >> 2) | (start_hi << 30));
      io_.write(gc::CP_MEC_RS64_PRGRM_CNTR_START_HI, start_hi >> 2);
    }
    select(0, 0, 0, 0);
  }
  // The pipes take the new start when reset: set the four resets, then clear them.
  uint32_t cntl = io_.read(gc::CP_MEC_RS64_CNTL);
  for (uint32_t pipe = 0; pipe < kMecPipes; ++pipe) cntl = kMecPipeReset[pipe].set(cntl, 1);
  io_.write(gc::CP_MEC_RS64_CNTL, cntl);
  for (uint32_t pipe = 0; pipe < kMecPipes; ++pipe) cntl = kMecPipeReset[pipe].set(cntl, 0);
  io_.write(gc::CP_MEC_RS64_CNTL, cntl);
}

void Gfx::init_sh_mem() {
  // tinygrad AM_GFX.init_hw for GC >= 10; Linux gfx_v11_0_constants_init writes the same
  // DEFAULT_SH_MEM_CONFIG (SH_MEM_ADDRESS_MODE_64 = 0, SH_MEM_ALIGNMENT_MODE_UNALIGNED = 3,
  // INITIAL_INST_PREFETCH 3; soc21 enums).
  uint32_t config = 0;
  config = gcf::SH_MEM_CONFIG::ADDRESS_MODE.set(config, 0);
  config = gcf::SH_MEM_CONFIG::ALIGNMENT_MODE.set(config, 3);
  config = gcf::SH_MEM_CONFIG::INITIAL_INST_PREFETCH.set(config, 3);
  // Apertures: LDS at 0x1000'0000'0000'0000, scratch at 0x2000'0000'0000'0000 (the base's
  // 16 bits are address bits 48..63).
  uint32_t bases = 0;
  bases = gcf::SH_MEM_BASES::SHARED_BASE.set(bases, 1);
  bases = gcf::SH_MEM_BASES::PRIVATE_BASE.set(bases, 2);
  std::lock_guard lock(select_mutex_);
  for (uint32_t vmid = 0; vmid < 16; ++vmid) {
    select(0, 0, 0, vmid);
    io_.write(gc::SH_MEM_CONFIG, config);
    io_.write(gc::SH_MEM_BASES, bases);
  }
  select(0, 0, 0, 0);
}

void Gfx::set_mec_doorbell_range(uint32_t first_byte, uint32_t last_byte) {
  const RegField& lower = gcf::CP_MEC_DOORBELL_RANGE_LOWER::DOORBELL_RANGE_LOWER;
  const RegField& upper = gcf::CP_MEC_DOORBELL_RANGE_UPPER::DOORBELL_RANGE_UPPER;
  // The fields hold the byte offset's dword bits (bits 2..11): 4 KiB of doorbells.
  if (first_byte > last_byte || (first_byte & 3) || (last_byte & 3) ||
      lower.set(0, first_byte >> 2) != first_byte || upper.set(0, last_byte >> 2) != last_byte)
    throw InvalidInput("MEC doorbell range [" + hex(first_byte) + ", " + hex(last_byte) +
                       "] is not an ordered pair of dword offsets below 0x1000");
  io_.write(gc::CP_MEC_DOORBELL_RANGE_LOWER, first_byte);
  io_.write(gc::CP_MEC_DOORBELL_RANGE_UPPER, last_byte);
}

void Gfx::enable_mec(bool enable) {
  // gfx_v11_0_cp_compute_enable (rs64_enable).
  uint32_t cntl = io_.read(gc::CP_MEC_RS64_CNTL);
  cntl = gcf::CP_MEC_RS64_CNTL::MEC_INVALIDATE_ICACHE.set(cntl, enable ? 0 : 1);
  for (uint32_t pipe = 0; pipe < kMecPipes; ++pipe) {
    cntl = kMecPipeReset[pipe].set(cntl, enable ? 0 : 1);
    cntl = kMecPipeActive[pipe].set(cntl, enable ? 1 : 0);
  }
  cntl = gcf::CP_MEC_RS64_CNTL::MEC_HALT.set(cntl, enable ? 0 : 1);
  io_.write(gc::CP_MEC_RS64_CNTL, cntl);
  // Linux waits 50 us after the write (udelay(50)); tinygrad 50 ms.
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void Gfx::init(const Firmware& mec, uint32_t doorbell_first_byte, uint32_t doorbell_last_byte) {
  wait_rlc_autoload();
  config_mec(mec);
  init_sh_mem();
  set_mec_doorbell_range(doorbell_first_byte, doorbell_last_byte);
  enable_mec(true);
}

// ------------------------------------------------------------------------------------------

ComputeQueue::ComputeQueue(Gfx& gfx, BootMemory& memory, const ComputeQueueConfig& c)
    : gfx_(gfx), config_(c) {
  const std::string name = queue_name(c);
  if (c.me != 1 || c.pipe >= kMecPipes || c.queue >= kMecQueuesPerPipe)
    throw InvalidInput(name + ": gfx1100 has ME 1 only, pipes 0..3, queues 0..3");
  if (c.ring_bytes < 256 || c.ring_bytes > (8u << 20) || !std::has_single_bit(c.ring_bytes))
    throw InvalidInput(name + ": ring size " + hex(c.ring_bytes) +
                       " is not a power of two from 0x100 to 0x800000");
  if ((c.ring_va & 0xff) || (c.eop_va & 0xff))
    throw InvalidInput(name + ": ring " + hex(c.ring_va) + " and EOP buffer " + hex(c.eop_va) +
                       " must be 256-byte aligned");
  if ((c.rptr_va & 7) || (c.wptr_va & 7))
    throw InvalidInput(name + ": read pointer " + hex(c.rptr_va) + " and write pointer " +
                       hex(c.wptr_va) + " must be 8-byte aligned");
  if (c.doorbell_dword & 1)
    throw InvalidInput(name + ": doorbell dword " + hex(c.doorbell_dword) +
                       " is odd (gfx11 doorbells are 64-bit)");

  namespace mqd = mqd_v11;
  mqd_ = memory.alloc(mqd::kBytes, 4096, "compute MQD");

  // The MQD as gfx_v11_0_compute_mqd_init fills it (values from Linux unless noted).
  std::array<uint32_t, mqd::kDwords> m{};
  m[mqd::HEADER] = 0xC0310800;
  m[mqd::COMPUTE_PIPELINESTAT_ENABLE] = 1;
  for (uint32_t se : {mqd::COMPUTE_STATIC_THREAD_MGMT_SE0, mqd::COMPUTE_STATIC_THREAD_MGMT_SE1,
                      mqd::COMPUTE_STATIC_THREAD_MGMT_SE2, mqd::COMPUTE_STATIC_THREAD_MGMT_SE3})
    m[se] = ~0u;
  m[mqd::COMPUTE_MISC_RESERVED] = 7;
  auto hqd = [&m](const Reg& r) -> uint32_t& { return m[mqd::hqd_dword(r)]; };
  hqd(gc::CP_HQD_EOP_BASE_ADDR) = lo32(c.eop_va >> 8);
  hqd(gc::CP_HQD_EOP_BASE_ADDR_HI) = hi32(c.eop_va >> 8);
  // EOP_SIZE: the buffer holds 2^(EOP_SIZE+1) dwords.
  hqd(gc::CP_HQD_EOP_CONTROL) =
      gcf::CP_HQD_EOP_CONTROL::EOP_SIZE.set(0, std::countr_zero(kGfx11MecHpdSize / 4) - 1);
  uint32_t doorbell = 0;
  doorbell = gcf::CP_HQD_PQ_DOORBELL_CONTROL::DOORBELL_OFFSET.set(doorbell, c.doorbell_dword);
  doorbell = gcf::CP_HQD_PQ_DOORBELL_CONTROL::DOORBELL_EN.set(doorbell, 1);
  hqd(gc::CP_HQD_PQ_DOORBELL_CONTROL) = doorbell;
  hqd(gc::CP_MQD_BASE_ADDR) = lo32(mqd_.mc) & 0xfffffffc;
  hqd(gc::CP_MQD_BASE_ADDR_HI) = hi32(mqd_.mc);
  // VMID 0; PRIV_STATE 1 as tinygrad's setup_ring sets it.
  hqd(gc::CP_MQD_CONTROL) = gcf::CP_MQD_CONTROL::PRIV_STATE.set(0, 1);
  hqd(gc::CP_HQD_PQ_BASE) = lo32(c.ring_va >> 8);
  hqd(gc::CP_HQD_PQ_BASE_HI) = hi32(c.ring_va >> 8);
  uint32_t pq = 0;
  pq = gcf::CP_HQD_PQ_CONTROL::QUEUE_SIZE.set(pq, std::countr_zero(c.ring_bytes / 4) - 1);
  pq = gcf::CP_HQD_PQ_CONTROL::RPTR_BLOCK_SIZE.set(pq, std::countr_zero(4096u / 4) - 1);
  pq = gcf::CP_HQD_PQ_CONTROL::UNORD_DISPATCH.set(pq, 1);
  pq = gcf::CP_HQD_PQ_CONTROL::PRIV_STATE.set(pq, 1);
  pq = gcf::CP_HQD_PQ_CONTROL::KMD_QUEUE.set(pq, 1);
  hqd(gc::CP_HQD_PQ_CONTROL) = pq;
  hqd(gc::CP_HQD_PQ_RPTR_REPORT_ADDR) = lo32(c.rptr_va) & 0xfffffffc;
  hqd(gc::CP_HQD_PQ_RPTR_REPORT_ADDR_HI) = hi32(c.rptr_va) & 0xffff;
  hqd(gc::CP_HQD_PQ_WPTR_POLL_ADDR) = lo32(c.wptr_va) & 0xfffffffc;
  hqd(gc::CP_HQD_PQ_WPTR_POLL_ADDR_HI) = hi32(c.wptr_va) & 0xffff;
  hqd(gc::CP_HQD_VMID) = 0;
  uint32_t persistent = 0;
  persistent = gcf::CP_HQD_PERSISTENT_STATE::PRELOAD_SIZE.set(persistent, 0x55);
  persistent = gcf::CP_HQD_PERSISTENT_STATE::PRELOAD_REQ.set(persistent, 1);  // tinygrad
  hqd(gc::CP_HQD_PERSISTENT_STATE) = persistent;
  hqd(gc::CP_HQD_IB_CONTROL) = gcf::CP_HQD_IB_CONTROL::MIN_IB_AVAIL_SIZE.set(0, 3);
  // Pipe priority 2, queue priority 15 (tinygrad's setup_ring; Linux takes them from the
  // ring's priority); quantum enabled, scale 1, duration 1 (Linux since 2025, tinygrad 0x111).
  hqd(gc::CP_HQD_PIPE_PRIORITY) = 2;
  hqd(gc::CP_HQD_QUEUE_PRIORITY) = 0xf;
  hqd(gc::CP_HQD_QUANTUM) = 0x111;
  hqd(gc::CP_HQD_ACTIVE) = 1;
  mqd_.write(0, std::as_bytes(std::span(m)));

  RegisterIo& io = gfx_.io();
  std::lock_guard lock(gfx_.select_mutex());
  gfx_.select(c.me, c.pipe, c.queue, 0);
  try {
    // gfx_v11_0_kiq_init_register's order.
    io.write(gc::CP_HQD_EOP_BASE_ADDR, hqd(gc::CP_HQD_EOP_BASE_ADDR));
    io.write(gc::CP_HQD_EOP_BASE_ADDR_HI, hqd(gc::CP_HQD_EOP_BASE_ADDR_HI));
    io.write(gc::CP_HQD_EOP_CONTROL, hqd(gc::CP_HQD_EOP_CONTROL));
    io.write(gc::CP_HQD_PQ_DOORBELL_CONTROL, hqd(gc::CP_HQD_PQ_DOORBELL_CONTROL));
    if (io.read(gc::CP_HQD_ACTIVE) & 1) {
      // A queue left active on this HQD: drain it first.
      io.write(gc::CP_HQD_DEQUEUE_REQUEST, 1);
      io.wait(describe(gc::CP_HQD_ACTIVE), 1, 0, gfx_.timeout());
      io.write(gc::CP_HQD_DEQUEUE_REQUEST, 0);
      io.write(gc::CP_HQD_PQ_RPTR, 0);
      io.write(gc::CP_HQD_PQ_WPTR_LO, 0);
      io.write(gc::CP_HQD_PQ_WPTR_HI, 0);
    }
    for (const Reg& r : {gc::CP_MQD_BASE_ADDR, gc::CP_MQD_BASE_ADDR_HI, gc::CP_MQD_CONTROL,
                         gc::CP_HQD_PQ_BASE, gc::CP_HQD_PQ_BASE_HI, gc::CP_HQD_PQ_CONTROL,
                         gc::CP_HQD_PQ_RPTR_REPORT_ADDR, gc::CP_HQD_PQ_RPTR_REPORT_ADDR_HI,
                         gc::CP_HQD_PQ_WPTR_POLL_ADDR, gc::CP_HQD_PQ_WPTR_POLL_ADDR_HI,
                         gc::CP_HQD_PQ_DOORBELL_CONTROL, gc::CP_HQD_PQ_WPTR_LO,
                         gc::CP_HQD_PQ_WPTR_HI, gc::CP_HQD_VMID, gc::CP_HQD_PERSISTENT_STATE,
                         gc::CP_HQD_ACTIVE})
      io.write(r, hqd(r));
    const uint32_t active = io.read(gc::CP_HQD_ACTIVE);
    if (!(active & 1))
      throw Error(name + ": CP_HQD_ACTIVE reads " + hex(active) + " after activation");
  } catch (...) {
    gfx_.select(0, 0, 0, 0);
    throw;
  }
  gfx_.select(0, 0, 0, 0);
  active_ = true;
}

std::optional<IbPosition> decode_hqd_ib(const HqdIbRegisters& r) {
  if (!gcf::CP_HQD_IB_CONTROL::PROCESSING_IB.get(r.control)) return std::nullopt;
  const RegField& lo = gcf::CP_HQD_IB_BASE_ADDR::IB_BASE_ADDR;
  const RegField& hi = gcf::CP_HQD_IB_BASE_ADDR_HI::IB_BASE_ADDR_HI;
  IbPosition p;
  p.va = uint64_t(hi.get(r.base_hi)) << 32 | uint64_t(lo.get(r.base_lo)) << 2;
  p.dwords = gcf::CP_HQD_IB_CONTROL::IB_SIZE.get(r.control);
  p.at = gcf::CP_HQD_IB_RPTR::CONSUMED_OFFSET.get(r.rptr);
  return p;
}

HqdIbRegisters ComputeQueue::read_ib() {
  RegisterIo& io = gfx_.io();
  std::lock_guard lock(gfx_.select_mutex());
  gfx_.select(config_.me, config_.pipe, config_.queue, 0);
  HqdIbRegisters r;
  try {
    r.base_lo = io.read(gc::CP_HQD_IB_BASE_ADDR);
    r.base_hi = io.read(gc::CP_HQD_IB_BASE_ADDR_HI);
    r.rptr = io.read(gc::CP_HQD_IB_RPTR);
    r.control = io.read(gc::CP_HQD_IB_CONTROL);
  } catch (...) {
    gfx_.select(0, 0, 0, 0);
    throw;
  }
  gfx_.select(0, 0, 0, 0);
  return r;
}

ComputeQueue::~ComputeQueue() {
  ignoring_errors([this] { destroy(); });
}

void ComputeQueue::destroy() {
  if (!active_) return;
  RegisterIo& io = gfx_.io();
  std::lock_guard lock(gfx_.select_mutex());
  gfx_.select(config_.me, config_.pipe, config_.queue, 0);
  try {
    if (io.read(gc::CP_HQD_ACTIVE) & 1) {
      // tinygrad _dequeue_hqds (Linux gfx_v11_0_soft_reset writes the same two): 2 resets
      // the queue's waves rather than draining them.
      io.write(gc::CP_HQD_DEQUEUE_REQUEST, 2);
      io.write(gc::SPI_COMPUTE_QUEUE_RESET, 1);
      io.wait(describe(gc::CP_HQD_ACTIVE), 1, 0, gfx_.timeout());
    }
  } catch (...) {
    gfx_.select(0, 0, 0, 0);
    throw;
  }
  gfx_.select(0, 0, 0, 0);
  active_ = false;
}

}  // namespace hcq::amd::am
