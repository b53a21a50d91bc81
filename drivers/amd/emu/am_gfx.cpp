#include "amd/emu/am_gfx.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace gc = am::gc_11_0_0;

constexpr uint32_t kSdmaQueueId = 0x1000;  // engine queue id of SDMA0 queue 0

const am::RegField& field(const am::Reg& r, std::string_view name) {
  return am::describe(r).field(name);
}

uint64_t byte_offset(const am::Reg& r, const am::IpSegmentBases& bases) {
  return am::absolute_dword(am::describe(r), bases) * 4;
}

uint64_t pair64(uint32_t lo, uint32_t hi) { return uint64_t(hi) << 32 | lo; }

}  // namespace

AmGfx::AmGfx(const am::IpSegmentBases& bases, AmBus& bus, hcq::emu::GpuAddressSpace& memory,
             AmGfxHooks hooks)
    : bus_(bus), memory_(memory), hooks_(std::move(hooks)) {
  hqd_first_ = gc::CP_MQD_BASE_ADDR.offset;
  sdma_first_ = gc::SDMA0_QUEUE0_RB_CNTL.offset;
  const uint64_t hqd_base = byte_offset(gc::CP_MQD_BASE_ADDR, bases);
  for (uint32_t i = 0; i < kHqdDwords; ++i) slots_[hqd_base + 4 * i] = {Kind::Hqd, i};
  const uint64_t sdma_base = byte_offset(gc::SDMA0_QUEUE0_RB_CNTL, bases);
  for (uint32_t i = 0; i < kSdmaDwords; ++i) slots_[sdma_base + 4 * i] = {Kind::Sdma, i};
  const std::pair<am::Reg, Kind> singles[] = {
      {gc::GRBM_GFX_CNTL, Kind::GrbmGfxCntl},
      {gc::SH_MEM_CONFIG, Kind::ShMemConfig},
      {gc::SH_MEM_BASES, Kind::ShMemBases},
      {gc::CP_MEC_RS64_PRGRM_CNTR_START, Kind::PrgmStart},
      {gc::CP_MEC_RS64_PRGRM_CNTR_START_HI, Kind::PrgmStartHi},
      {gc::CP_MEC_RS64_CNTL, Kind::MecCntl},
      {gc::CP_MEC_DOORBELL_RANGE_LOWER, Kind::DoorbellLower},
      {gc::CP_MEC_DOORBELL_RANGE_UPPER, Kind::DoorbellUpper},
      {gc::CP_STAT, Kind::CpStat},
      {gc::RLC_RLCS_BOOTLOAD_STATUS, Kind::BootloadStatus},
      {gc::SPI_COMPUTE_QUEUE_RESET, Kind::SpiQueueReset},
      {gc::SDMA0_F32_CNTL, Kind::SdmaF32Cntl},
  };
  for (const auto& s : singles) slots_[byte_offset(s.first, bases)] = {s.second, 0};
  hqds_.resize(kMes * kPipes * kQueues);
  active_.resize(hqds_.size());
  {
    std::lock_guard lock(mutex_);
    power_on_state();
  }
  GpuEvents& events = *this;  // the base is private: convert here, where it is accessible
  engine_ = std::make_unique<Engine>(Gen::Gfx11, memory_, events);
}

AmGfx::~AmGfx() { engine_.reset(); }

bool AmGfx::handles(uint64_t offset) const { return slots_.count(offset) != 0; }

void AmGfx::power_on_state() {
  grbm_gfx_cntl_ = 0;
  for (auto& h : hqds_) h.fill(0);
  std::fill(active_.begin(), active_.end(), false);
  sh_mem_config_.fill(0);
  sh_mem_bases_.fill(0);
  prgm_start_.fill(0);
  prgm_start_hi_.fill(0);
  // The MEC comes out of reset halted (the driver's cp_compute_enable clears MEC_HALT).
  mec_cntl_ = field(gc::CP_MEC_RS64_CNTL, "MEC_HALT").set(0, 1);
  doorbell_lower_ = doorbell_upper_ = spi_queue_reset_ = 0;
  sdma_.fill(0);
  sdma_f32_cntl_ = field(gc::SDMA0_F32_CNTL, "HALT").set(0, 1);
  sdma_running_ = false;
  last_error_.clear();
}

void AmGfx::reset() {
  std::lock_guard lock(mutex_);
  for (uint32_t bank = 0; bank < hqds_.size(); ++bank)
    if (active_[bank]) engine_->remove_queue(bank);
  if (sdma_running_) engine_->remove_queue(kSdmaQueueId);
  power_on_state();
}

uint32_t AmGfx::selected_bank() const {
  const uint32_t me = field(gc::GRBM_GFX_CNTL, "MEID").get(grbm_gfx_cntl_);
  const uint32_t pipe = field(gc::GRBM_GFX_CNTL, "PIPEID").get(grbm_gfx_cntl_);
  const uint32_t queue = field(gc::GRBM_GFX_CNTL, "QUEUEID").get(grbm_gfx_cntl_);
  return (me * kPipes + pipe) * kQueues + queue;
}

std::string AmGfx::ib_positions() const {
  std::istringstream in(engine_->ib_positions());
  std::string out;
  for (std::string line; std::getline(in, line);) {
    unsigned id = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "queue %u: %n", &id, &used) != 1 || used == 0) continue;
    out += (id == kSdmaQueueId ? std::string("SDMA0 queue 0") : compute_name(id)) + ": " +
           line.substr(size_t(used)) + "\n";
  }
  return out;
}

std::string AmGfx::compute_name(uint32_t bank) {
  const uint32_t me = bank / (kPipes * kQueues), pipe = bank / kQueues % kPipes,
                 queue = bank % kQueues;
  return "compute queue ME " + std::to_string(me) + " pipe " + std::to_string(pipe) +
         " queue " + std::to_string(queue);
}

uint32_t& AmGfx::hqd_reg(uint32_t bank, const am::Reg& r) {
  return hqds_[bank][r.offset - hqd_first_];
}

uint32_t& AmGfx::sdma_reg(const am::Reg& r) { return sdma_[r.offset - sdma_first_]; }

uint32_t AmGfx::read32(uint64_t offset) {
  const auto it = slots_.find(offset);
  if (it == slots_.end()) throw InvalidInput("AM GFX model: no register at byte " + hex(offset));
  const Slot s = it->second;
  std::lock_guard lock(mutex_);
  const uint32_t vmid = field(gc::GRBM_GFX_CNTL, "VMID").get(grbm_gfx_cntl_);
  const uint32_t me_pipe = selected_bank() / kQueues;
  switch (s.kind) {
    case Kind::Hqd:
      return hqds_[selected_bank()][s.index];
    case Kind::GrbmGfxCntl:
      return grbm_gfx_cntl_;
    case Kind::ShMemConfig:
      return sh_mem_config_[vmid];
    case Kind::ShMemBases:
      return sh_mem_bases_[vmid];
    case Kind::PrgmStart:
      return prgm_start_[me_pipe];
    case Kind::PrgmStartHi:
      return prgm_start_hi_[me_pipe];
    case Kind::MecCntl:
      return mec_cntl_;
    case Kind::DoorbellLower:
      return doorbell_lower_;
    case Kind::DoorbellUpper:
      return doorbell_upper_;
    case Kind::CpStat:
      return hooks_.rlc_autoload_done() ? 0 : field(gc::CP_STAT, "CP_BUSY").set(0, 1);
    case Kind::BootloadStatus:
      return hooks_.rlc_autoload_done()
                 ? field(gc::RLC_RLCS_BOOTLOAD_STATUS, "BOOTLOAD_COMPLETE").set(0, 1)
                 : 0;
    case Kind::SpiQueueReset:
      return spi_queue_reset_;
    case Kind::Sdma:
      return sdma_[s.index];
    case Kind::SdmaF32Cntl:
      return sdma_f32_cntl_;
  }
  return 0;
}

void AmGfx::write32(uint64_t offset, uint32_t value) {
  const auto it = slots_.find(offset);
  if (it == slots_.end()) throw InvalidInput("AM GFX model: no register at byte " + hex(offset));
  const Slot s = it->second;
  std::lock_guard lock(mutex_);
  const uint32_t vmid = field(gc::GRBM_GFX_CNTL, "VMID").get(grbm_gfx_cntl_);
  const uint32_t me_pipe = selected_bank() / kQueues;
  switch (s.kind) {
    case Kind::Hqd:
      write_hqd(selected_bank(), s.index, value);
      break;
    case Kind::GrbmGfxCntl:
      grbm_gfx_cntl_ = value;
      break;
    case Kind::ShMemConfig:
      sh_mem_config_[vmid] = value;
      break;
    case Kind::ShMemBases:
      sh_mem_bases_[vmid] = value;
      break;
    case Kind::PrgmStart:
      prgm_start_[me_pipe] = value;
      break;
    case Kind::PrgmStartHi:
      prgm_start_hi_[me_pipe] = value;
      break;
    case Kind::MecCntl:
      mec_cntl_ = value;
      stop_halted_pipes();
      break;
    case Kind::DoorbellLower:
      doorbell_lower_ = value;
      break;
    case Kind::DoorbellUpper:
      doorbell_upper_ = value;
      break;
    case Kind::CpStat:
    case Kind::BootloadStatus:
      break;  // read-only status
    case Kind::SpiQueueReset:
      spi_queue_reset_ = value;
      break;
    case Kind::Sdma: {
      const am::RegField& rb_enable = field(gc::SDMA0_QUEUE0_RB_CNTL, "RB_ENABLE");
      const bool was_enabled = rb_enable.get(sdma_reg(gc::SDMA0_QUEUE0_RB_CNTL));
      sdma_[s.index] = value;
      if (s.index == gc::SDMA0_QUEUE0_RB_CNTL.offset - sdma_first_) {
        const bool enabled = rb_enable.get(value);
        if (enabled && !was_enabled) start_sdma();
        if (!enabled && sdma_running_) stop_sdma();
      }
      break;
    }
    case Kind::SdmaF32Cntl: {
      sdma_f32_cntl_ = value;
      const bool halted = field(gc::SDMA0_F32_CNTL, "HALT").get(value);
      const bool enabled =
          field(gc::SDMA0_QUEUE0_RB_CNTL, "RB_ENABLE").get(sdma_reg(gc::SDMA0_QUEUE0_RB_CNTL));
      if (halted && sdma_running_) stop_sdma();
      if (!halted && enabled && !sdma_running_) start_sdma();
      break;
    }
  }
}

void AmGfx::write_hqd(uint32_t bank, uint32_t index, uint32_t value) {
  Hqd& h = hqds_[bank];
  if (index == gc::CP_HQD_ACTIVE.offset - hqd_first_) {
    const bool want = field(gc::CP_HQD_ACTIVE, "ACTIVE").get(value);
    if (want && !active_[bank]) activate(bank);
    if (!want && active_[bank]) deactivate(bank);
    return;
  }
  if (index == gc::CP_HQD_DEQUEUE_REQUEST.offset - hqd_first_) {
    const am::RegField& req = field(gc::CP_HQD_DEQUEUE_REQUEST, "DEQUEUE_REQ");
    if (req.get(value) != 0 && active_[bank]) deactivate(bank);
    h[index] = req.set(value, 0);  // the request completes at once
    return;
  }
  h[index] = value;
}

const volatile uint64_t* AmGfx::doorbell(uint64_t byte, const std::string& who,
                                         std::string& error) {
  if (byte % 8 != 0 || byte + 8 > bus_.doorbells.size()) {
    error = who + ": doorbell at byte " + hex(byte) + " is outside the doorbell BAR (" +
            hex(bus_.doorbells.size()) + " bytes) or not 8-byte aligned";
    return nullptr;
  }
  return reinterpret_cast<const volatile uint64_t*>(bus_.doorbells.data() + byte);
}

bool AmGfx::pipe_running(uint32_t pipe) const {
  const std::string p = "MEC_PIPE" + std::to_string(pipe);
  return !field(gc::CP_MEC_RS64_CNTL, "MEC_HALT").get(mec_cntl_) &&
         !field(gc::CP_MEC_RS64_CNTL, p + "_RESET").get(mec_cntl_) &&
         field(gc::CP_MEC_RS64_CNTL, p + "_ACTIVE").get(mec_cntl_);
}

void AmGfx::activate(uint32_t bank) {
  const std::string who = compute_name(bank) + ": activation refused";
  const uint32_t me = bank / (kPipes * kQueues), pipe = bank / kQueues % kPipes;
  const uint32_t db = hqd_reg(bank, gc::CP_HQD_PQ_DOORBELL_CONTROL);
  const uint64_t db_byte =
      uint64_t(field(gc::CP_HQD_PQ_DOORBELL_CONTROL, "DOORBELL_OFFSET").get(db)) * 4;
  const am::RegField& lower = field(gc::CP_MEC_DOORBELL_RANGE_LOWER, "DOORBELL_RANGE_LOWER");
  const am::RegField& upper = field(gc::CP_MEC_DOORBELL_RANGE_UPPER, "DOORBELL_RANGE_UPPER");
  const uint64_t first = uint64_t(lower.get(doorbell_lower_)) * 4;
  const uint64_t last = uint64_t(upper.get(doorbell_upper_)) * 4;
  std::string error;
  if (me != 1) {
    error = who + ": gfx1100 has one MEC (ME 1)";
  } else if (!hooks_.mec_firmware_ready()) {
    error = who + ": no MEC firmware loaded";
  } else if (!pipe_running(pipe)) {
    error = who + ": MEC pipe " + std::to_string(pipe) + " is not running (CP_MEC_RS64_CNTL " +
            hex(mec_cntl_) + ")";
  } else if (!field(gc::CP_HQD_PQ_DOORBELL_CONTROL, "DOORBELL_EN").get(db)) {
    error = who + ": CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN is 0";
  } else if (db_byte < first || db_byte > last) {
    error = who + ": doorbell at byte " + hex(db_byte) + " is outside the MEC doorbell range [" +
            hex(first) + ", " + hex(last) + "]";
  }
  const volatile uint64_t* bell = error.empty() ? doorbell(db_byte, who, error) : nullptr;
  if (error.empty()) {
    QueueDesc d;
    d.type = QueueDesc::Type::Pm4;
    d.id = bank;
    d.ring_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_BASE), hqd_reg(bank, gc::CP_HQD_PQ_BASE_HI))
                << 8;
    // QUEUE_SIZE: the ring holds 2^(QUEUE_SIZE+1) dwords.
    d.ring_bytes = uint64_t(4)
                   << (field(gc::CP_HQD_PQ_CONTROL, "QUEUE_SIZE").get(
                           hqd_reg(bank, gc::CP_HQD_PQ_CONTROL)) + 1);
    d.rptr_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_RPTR_REPORT_ADDR) & 0xfffffffc,
                       hqd_reg(bank, gc::CP_HQD_PQ_RPTR_REPORT_ADDR_HI) & 0xffff);
    d.wptr_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_WPTR_POLL_ADDR) & 0xfffffffc,
                       hqd_reg(bank, gc::CP_HQD_PQ_WPTR_POLL_ADDR_HI) & 0xffff);
    d.doorbell = bell;
    try {
      engine_->add_queue(d);
    } catch (const InvalidInput& e) {
      error = who + ": " + e.what();
    }
  }
  if (!error.empty()) {
    last_error_ = error;
    return;
  }
  active_[bank] = true;
  hqd_reg(bank, gc::CP_HQD_ACTIVE) = field(gc::CP_HQD_ACTIVE, "ACTIVE").set(0, 1);
}

void AmGfx::deactivate(uint32_t bank) {
  engine_->remove_queue(bank);
  active_[bank] = false;
  hqd_reg(bank, gc::CP_HQD_ACTIVE) = 0;
}

void AmGfx::stop_halted_pipes() {
  for (uint32_t bank = 0; bank < hqds_.size(); ++bank)
    if (active_[bank] && !pipe_running(bank / kQueues % kPipes)) deactivate(bank);
}

void AmGfx::start_sdma() {
  const std::string who = "SDMA0 queue 0: RB_ENABLE refused";
  const uint32_t rb_cntl = sdma_reg(gc::SDMA0_QUEUE0_RB_CNTL);
  const uint64_t db_byte = uint64_t(field(gc::SDMA0_QUEUE0_DOORBELL_OFFSET, "OFFSET")
                                        .get(sdma_reg(gc::SDMA0_QUEUE0_DOORBELL_OFFSET))) *
                           4;
  std::string error;
  if (!hooks_.sdma_firmware_ready()) {
    error = who + ": no SDMA firmware loaded";
  } else if (field(gc::SDMA0_F32_CNTL, "HALT").get(sdma_f32_cntl_)) {
    error = who + ": SDMA0_F32_CNTL.HALT is set";
  } else if (!field(gc::SDMA0_QUEUE0_DOORBELL, "ENABLE")
                  .get(sdma_reg(gc::SDMA0_QUEUE0_DOORBELL))) {
    error = who + ": SDMA0_QUEUE0_DOORBELL.ENABLE is 0";
  }
  const volatile uint64_t* bell = error.empty() ? doorbell(db_byte, who, error) : nullptr;
  if (error.empty()) {
    QueueDesc d;
    d.type = QueueDesc::Type::Sdma;
    d.id = kSdmaQueueId;
    d.ring_va = pair64(sdma_reg(gc::SDMA0_QUEUE0_RB_BASE), sdma_reg(gc::SDMA0_QUEUE0_RB_BASE_HI))
                << 8;
    // RB_SIZE: the ring holds 2^RB_SIZE dwords.
    d.ring_bytes = uint64_t(4) << field(gc::SDMA0_QUEUE0_RB_CNTL, "RB_SIZE").get(rb_cntl);
    d.rptr_va = pair64(sdma_reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_LO) & 0xfffffffc,
                       sdma_reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_HI));
    d.wptr_va = pair64(sdma_reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO),
                       sdma_reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI));
    d.doorbell = bell;
    try {
      engine_->add_queue(d);
    } catch (const InvalidInput& e) {
      error = who + ": " + e.what();
    }
  }
  if (!error.empty()) {
    last_error_ = error;
    sdma_reg(gc::SDMA0_QUEUE0_RB_CNTL) =
        field(gc::SDMA0_QUEUE0_RB_CNTL, "RB_ENABLE").set(rb_cntl, 0);
    return;
  }
  sdma_running_ = true;
}

void AmGfx::stop_sdma() {
  engine_->remove_queue(kSdmaQueueId);
  sdma_running_ = false;
}

void AmGfx::kick() { engine_->kick(); }

void AmGfx::interrupt(uint32_t) {
  // Every engine interrupt arrives through queue_interrupt.
}

void AmGfx::queue_interrupt(uint32_t queue_id, uint32_t context_id) {
  if (!bus_.interrupt) return;
  // The IH entry (Linux amdgpu_ih.h / soc15 decode, tinygrad's SOC15_*_FROM_IH_ENTRY): dword 0
  // client id [7:0], source id [15:8], ring id [23:16], VMID [27:24]; dwords 1-2 the
  // timestamp (48 bits); dword 4 src_data[0], the context id.
  std::array<uint32_t, 8> e{};
  uint32_t client, source, ring_id;
  if (queue_id == kSdmaQueueId) {
    // sdma_v6_0_process_trap_irq: ring_id = instance << 4 | queue.
    client = kClientGfx, source = kSrcSdmaTrap, ring_id = 0;
  } else {
    // gfx_v11_0_eop_irq: ME in bits 2-3, pipe in 0-1, queue in 4-6.
    const uint32_t me = queue_id / (kPipes * kQueues), pipe = queue_id / kQueues % kPipes,
                   queue = queue_id % kQueues;
    client = kClientGrbmCp, source = kSrcCpEop, ring_id = queue << 4 | me << 2 | pipe;
  }
  const uint64_t ts = engine_->timestamp();
  e[0] = client | source << 8 | ring_id << 16;
  e[1] = uint32_t(ts);
  e[2] = uint32_t(ts >> 32) & 0xffff;
  e[4] = context_id;
  bus_.interrupt(e);
}

void AmGfx::fault(uint32_t queue_id, bool memory_fault, uint64_t address,
                  const std::string& what) {
  if (!hooks_.fault) return;
  hooks_.fault(queue_id == kSdmaQueueId ? std::string("SDMA0 queue 0") : compute_name(queue_id),
               memory_fault, address, what);
}

std::string AmGfx::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

bool AmGfx::compute_queue_running(uint32_t me, uint32_t pipe, uint32_t queue) const {
  std::lock_guard lock(mutex_);
  if (me >= kMes || pipe >= kPipes || queue >= kQueues) return false;
  return active_[(me * kPipes + pipe) * kQueues + queue];
}

bool AmGfx::sdma_queue_running() const {
  std::lock_guard lock(mutex_);
  return sdma_running_;
}

}  // namespace hcq::amd::emu
