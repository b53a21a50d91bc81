#include "amd/emu/am_gfx.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "amd/am/ih_entry.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace gc = am::gc_11_0_0;
namespace gcf = am::gc_11_0_0::fields;

constexpr uint32_t kSdmaQueueId = 0x1000;  // engine queue id of SDMA0 queue 0; SDMA1's is + 1

// Each SDMA engine's queue-0 block and F32_CNTL (gc_11_0_0.def SDMA0_*, SDMA1_*).
constexpr std::array<am::Reg, 2> kSdmaBlock = {gc::SDMA0_QUEUE0_RB_CNTL,
                                               gc::SDMA1_QUEUE0_RB_CNTL};
constexpr std::array<am::Reg, 2> kSdmaF32Cntl = {gc::SDMA0_F32_CNTL, gc::SDMA1_F32_CNTL};

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
  for (uint32_t i = 0; i < kHqdDwords; ++i) slots_[hqd_base + 4 * i] = {Kind::Hqd, i, 0};
  static_assert(kSdmaBlock.size() == kSdmaEngines && kSdmaF32Cntl.size() == kSdmaEngines);
  for (uint32_t e = 0; e < kSdmaEngines; ++e) {
    const uint64_t sdma_base = byte_offset(kSdmaBlock[e], bases);
    for (uint32_t i = 0; i < kSdmaDwords; ++i) slots_[sdma_base + 4 * i] = {Kind::Sdma, i, e};
    slots_[byte_offset(kSdmaF32Cntl[e], bases)] = {Kind::SdmaF32Cntl, 0, e};
  }
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
  };
  for (const auto& s : singles) slots_[byte_offset(s.first, bases)] = {s.second, 0, 0};
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
  mec_cntl_ = gcf::CP_MEC_RS64_CNTL::MEC_HALT.set(0, 1);
  doorbell_lower_ = doorbell_upper_ = spi_queue_reset_ = 0;
  for (SdmaEngine& e : sdma_) {
    e.regs.fill(0);
    e.f32_cntl = gcf::SDMA0_F32_CNTL::HALT.set(0, 1);  // halted until the driver starts it
    e.running = false;
  }
  last_error_.clear();
}

void AmGfx::reset() {
  std::lock_guard lock(mutex_);
  for (uint32_t bank = 0; bank < hqds_.size(); ++bank)
    if (active_[bank]) engine_->remove_queue(bank);
  for (uint32_t e = 0; e < kSdmaEngines; ++e)
    if (sdma_[e].running) engine_->remove_queue(kSdmaQueueId + e);
  power_on_state();
}

uint32_t AmGfx::selected_bank() const {
  const uint32_t me = gcf::GRBM_GFX_CNTL::MEID.get(grbm_gfx_cntl_);
  const uint32_t pipe = gcf::GRBM_GFX_CNTL::PIPEID.get(grbm_gfx_cntl_);
  const uint32_t queue = gcf::GRBM_GFX_CNTL::QUEUEID.get(grbm_gfx_cntl_);
  return (me * kPipes + pipe) * kQueues + queue;
}

std::string AmGfx::ib_positions() const {
  std::istringstream in(engine_->ib_positions());
  std::string out;
  for (std::string line; std::getline(in, line);) {
    unsigned id = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "queue %u: %n", &id, &used) != 1 || used == 0) continue;
    out += queue_name(id) + ": " + line.substr(size_t(used)) + "\n";
  }
  return out;
}

std::string AmGfx::compute_name(uint32_t bank) {
  const uint32_t me = bank / (kPipes * kQueues), pipe = bank / kQueues % kPipes,
                 queue = bank % kQueues;
  return "compute queue ME " + std::to_string(me) + " pipe " + std::to_string(pipe) +
         " queue " + std::to_string(queue);
}

std::string AmGfx::sdma_name(uint32_t engine) {
  std::string out = "SDMA";  // appended: GCC 12 -O3 -Wrestrict on "literal" + std::string
  out += std::to_string(engine);
  out += " queue 0";
  return out;
}

std::string AmGfx::queue_name(uint32_t queue_id) {
  return queue_id >= kSdmaQueueId ? sdma_name(queue_id - kSdmaQueueId) : compute_name(queue_id);
}

uint32_t& AmGfx::hqd_reg(uint32_t bank, const am::Reg& r) {
  return hqds_[bank][r.offset - hqd_first_];
}

uint32_t& AmGfx::sdma_reg(uint32_t engine, const am::Reg& r) {
  return sdma_[engine].regs[r.offset - sdma_first_];
}

bool AmGfx::is_ib_register(uint32_t index) const {
  for (const am::Reg& r : {gc::CP_HQD_IB_BASE_ADDR, gc::CP_HQD_IB_BASE_ADDR_HI, gc::CP_HQD_IB_RPTR,
                           gc::CP_HQD_IB_CONTROL})
    if (index == r.offset - hqd_first_) return true;
  return false;
}

uint32_t AmGfx::ib_register(uint32_t bank, uint32_t index, const std::string& positions) {
  // The engine's position in the queue's IB (its lines "queue <id>: IB 0x<va> <n> dwords, at
  // dword <m>") as the CP keeps it: base address bits 47:2, IB_SIZE and CONSUMED_OFFSET in
  // dwords, PROCESSING_IB while inside (gc_11_0_0.def fields).
  unsigned long long va = 0;
  unsigned size = 0, at = 0;
  bool inside = false;
  std::istringstream in(positions);
  for (std::string line; std::getline(in, line);) {
    unsigned id = 0;
    unsigned long long v = 0;
    unsigned n = 0, m = 0;
    if (std::sscanf(line.c_str(), "queue %u: IB 0x%llx %u dwords, at dword %u", &id, &v, &n, &m) ==
            4 &&
        id == bank)
      inside = true, va = v, size = n, at = m;
  }
  const uint32_t stored = hqds_[bank][index];
  if (!inside || !active_[bank]) {
    if (index == gc::CP_HQD_IB_CONTROL.offset - hqd_first_)
      return gcf::CP_HQD_IB_CONTROL::PROCESSING_IB.set(stored, 0);
    return stored;
  }
  if (index == gc::CP_HQD_IB_BASE_ADDR.offset - hqd_first_)
    return gcf::CP_HQD_IB_BASE_ADDR::IB_BASE_ADDR.set(0, uint32_t(va >> 2));
  if (index == gc::CP_HQD_IB_BASE_ADDR_HI.offset - hqd_first_)
    return gcf::CP_HQD_IB_BASE_ADDR_HI::IB_BASE_ADDR_HI.set(0, uint32_t(va >> 32));
  if (index == gc::CP_HQD_IB_RPTR.offset - hqd_first_)
    return gcf::CP_HQD_IB_RPTR::CONSUMED_OFFSET.set(0, at);
  uint32_t control = gcf::CP_HQD_IB_CONTROL::IB_SIZE.set(stored, size);
  return gcf::CP_HQD_IB_CONTROL::PROCESSING_IB.set(control, 1);
}

uint32_t AmGfx::read32(uint64_t offset) {
  const auto it = slots_.find(offset);
  if (it == slots_.end()) throw InvalidInput("AM GFX model: no register at byte " + hex(offset));
  const Slot s = it->second;
  // The engine's positions are asked for before this model's lock (the engine's thread may
  // be waiting on it).
  const std::string positions =
      s.kind == Kind::Hqd && is_ib_register(s.index) ? engine_->ib_positions() : std::string();
  std::lock_guard lock(mutex_);
  const uint32_t vmid = gcf::GRBM_GFX_CNTL::VMID.get(grbm_gfx_cntl_);
  const uint32_t me_pipe = selected_bank() / kQueues;
  switch (s.kind) {
    case Kind::Hqd:
      if (is_ib_register(s.index)) return ib_register(selected_bank(), s.index, positions);
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
      return hooks_.rlc_autoload_done() ? 0 : gcf::CP_STAT::CP_BUSY.set(0, 1);
    case Kind::BootloadStatus:
      return hooks_.rlc_autoload_done() ? gcf::RLC_RLCS_BOOTLOAD_STATUS::BOOTLOAD_COMPLETE.set(0, 1)
                                        : 0;
    case Kind::SpiQueueReset:
      return spi_queue_reset_;
    case Kind::Sdma:
      return sdma_[s.engine].regs[s.index];
    case Kind::SdmaF32Cntl:
      return sdma_[s.engine].f32_cntl;
  }
  return 0;
}

void AmGfx::write32(uint64_t offset, uint32_t value) {
  const auto it = slots_.find(offset);
  if (it == slots_.end()) throw InvalidInput("AM GFX model: no register at byte " + hex(offset));
  const Slot s = it->second;
  std::lock_guard lock(mutex_);
  const uint32_t vmid = gcf::GRBM_GFX_CNTL::VMID.get(grbm_gfx_cntl_);
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
      SdmaEngine& e = sdma_[s.engine];
      const am::RegField& rb_enable = gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE;
      const bool was_enabled = rb_enable.get(sdma_reg(s.engine, gc::SDMA0_QUEUE0_RB_CNTL));
      e.regs[s.index] = value;
      if (s.index == gc::SDMA0_QUEUE0_RB_CNTL.offset - sdma_first_) {
        const bool enabled = rb_enable.get(value);
        if (enabled && !was_enabled) start_sdma(s.engine);
        if (!enabled && e.running) stop_sdma(s.engine);
      }
      break;
    }
    case Kind::SdmaF32Cntl: {
      SdmaEngine& e = sdma_[s.engine];
      e.f32_cntl = value;
      const bool halted = gcf::SDMA0_F32_CNTL::HALT.get(value);
      const bool enabled =
          gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE.get(sdma_reg(s.engine, gc::SDMA0_QUEUE0_RB_CNTL));
      if (halted && e.running) stop_sdma(s.engine);
      if (!halted && enabled && !e.running) start_sdma(s.engine);
      break;
    }
  }
}

void AmGfx::write_hqd(uint32_t bank, uint32_t index, uint32_t value) {
  Hqd& h = hqds_[bank];
  if (index == gc::CP_HQD_ACTIVE.offset - hqd_first_) {
    const bool want = gcf::CP_HQD_ACTIVE::ACTIVE.get(value);
    if (want && !active_[bank]) activate(bank);
    if (!want && active_[bank]) deactivate(bank);
    return;
  }
  if (index == gc::CP_HQD_DEQUEUE_REQUEST.offset - hqd_first_) {
    const am::RegField& req = gcf::CP_HQD_DEQUEUE_REQUEST::DEQUEUE_REQ;
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
  namespace mec = gcf::CP_MEC_RS64_CNTL;
  constexpr am::RegField kReset[] = {mec::MEC_PIPE0_RESET, mec::MEC_PIPE1_RESET,
                                     mec::MEC_PIPE2_RESET, mec::MEC_PIPE3_RESET};
  constexpr am::RegField kActive[] = {mec::MEC_PIPE0_ACTIVE, mec::MEC_PIPE1_ACTIVE,
                                      mec::MEC_PIPE2_ACTIVE, mec::MEC_PIPE3_ACTIVE};
  if (pipe >= std::size(kReset)) return false;
  return !mec::MEC_HALT.get(mec_cntl_) && !kReset[pipe].get(mec_cntl_) &&
         kActive[pipe].get(mec_cntl_);
}

void AmGfx::activate(uint32_t bank) {
  const std::string who = compute_name(bank) + ": activation refused";
  const uint32_t me = bank / (kPipes * kQueues), pipe = bank / kQueues % kPipes;
  const uint32_t db = hqd_reg(bank, gc::CP_HQD_PQ_DOORBELL_CONTROL);
  const uint64_t db_byte = uint64_t(gcf::CP_HQD_PQ_DOORBELL_CONTROL::DOORBELL_OFFSET.get(db)) * 4;
  const am::RegField& lower = gcf::CP_MEC_DOORBELL_RANGE_LOWER::DOORBELL_RANGE_LOWER;
  const am::RegField& upper = gcf::CP_MEC_DOORBELL_RANGE_UPPER::DOORBELL_RANGE_UPPER;
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
  } else if (!gcf::CP_HQD_PQ_DOORBELL_CONTROL::DOORBELL_EN.get(db)) {
    error = who + ": CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN is 0";
  } else if (db_byte < first || db_byte > last) {
    error = who + ": doorbell at byte " + hex(db_byte) + " is outside the MEC doorbell range [" +
            hex(first) + ", " + hex(last) + "]";
  }
  if (error.empty()) {
    QueueDesc d;
    d.type = QueueDesc::Type::Pm4;
    d.id = bank;
    d.ring_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_BASE), hqd_reg(bank, gc::CP_HQD_PQ_BASE_HI))
                << 8;
    // QUEUE_SIZE: the ring holds 2^(QUEUE_SIZE+1) dwords.
    d.ring_bytes = uint64_t(4) << (gcf::CP_HQD_PQ_CONTROL::QUEUE_SIZE.get(
                                       hqd_reg(bank, gc::CP_HQD_PQ_CONTROL)) +
                                   1);
    d.rptr_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_RPTR_REPORT_ADDR) & 0xfffffffc,
                       hqd_reg(bank, gc::CP_HQD_PQ_RPTR_REPORT_ADDR_HI) & 0xffff);
    d.wptr_va = pair64(hqd_reg(bank, gc::CP_HQD_PQ_WPTR_POLL_ADDR) & 0xfffffffc,
                       hqd_reg(bank, gc::CP_HQD_PQ_WPTR_POLL_ADDR_HI) & 0xffff);
    error = add_to_engine(d, db_byte, who);
  }
  if (!error.empty()) {
    last_error_ = error;
    return;
  }
  active_[bank] = true;
  hqd_reg(bank, gc::CP_HQD_ACTIVE) = gcf::CP_HQD_ACTIVE::ACTIVE.set(0, 1);
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

std::string AmGfx::add_to_engine(QueueDesc d, uint64_t doorbell_byte, const std::string& who) {
  std::string error;
  d.doorbell = doorbell(doorbell_byte, who, error);
  if (!d.doorbell) return error;
  try {
    engine_->add_queue(d);
  } catch (const InvalidInput& e) {
    return who + ": " + e.what();
  }
  return "";
}

void AmGfx::start_sdma(uint32_t engine) {
  const std::string who = sdma_name(engine) + ": RB_ENABLE refused";
  const std::string regs = std::string("SDMA") += std::to_string(engine);  // register prefix
  auto reg = [&](const am::Reg& sdma0) -> uint32_t& { return sdma_reg(engine, sdma0); };
  const uint32_t rb_cntl = reg(gc::SDMA0_QUEUE0_RB_CNTL);
  const uint64_t db_byte = uint64_t(gcf::SDMA0_QUEUE0_DOORBELL_OFFSET::OFFSET.get(
                               reg(gc::SDMA0_QUEUE0_DOORBELL_OFFSET))) *
                           4;
  std::string error;
  if (!hooks_.sdma_firmware_ready()) {
    error = who + ": no SDMA firmware loaded";
  } else if (gcf::SDMA0_F32_CNTL::HALT.get(sdma_[engine].f32_cntl)) {
    error = who + ": " + regs + "_F32_CNTL.HALT is set";
  } else if (!gcf::SDMA0_QUEUE0_DOORBELL::ENABLE.get(reg(gc::SDMA0_QUEUE0_DOORBELL))) {
    error = who + ": " + regs + "_QUEUE0_DOORBELL.ENABLE is 0";
  }
  if (error.empty()) {
    QueueDesc d;
    d.type = QueueDesc::Type::Sdma;
    d.id = kSdmaQueueId + engine;
    d.ring_va = pair64(reg(gc::SDMA0_QUEUE0_RB_BASE), reg(gc::SDMA0_QUEUE0_RB_BASE_HI)) << 8;
    // RB_SIZE: the ring holds 2^RB_SIZE dwords.
    d.ring_bytes = uint64_t(4) << gcf::SDMA0_QUEUE0_RB_CNTL::RB_SIZE.get(rb_cntl);
    d.rptr_va = pair64(reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_LO) & 0xfffffffc,
                       reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_HI));
    d.wptr_va = pair64(reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO),
                       reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI));
    error = add_to_engine(d, db_byte, who);
  }
  if (!error.empty()) {
    last_error_ = error;
    reg(gc::SDMA0_QUEUE0_RB_CNTL) = gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE.set(rb_cntl, 0);
    return;
  }
  sdma_[engine].running = true;
}

void AmGfx::stop_sdma(uint32_t engine) {
  engine_->remove_queue(kSdmaQueueId + engine);
  sdma_[engine].running = false;
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
  uint32_t client, source, ring_id;
  if (queue_id >= kSdmaQueueId) {
    // sdma_v6_0_process_trap_irq: ring_id = instance << 4 | queue (queue 0).
    client = kClientGfx, source = kSrcSdmaTrap, ring_id = (queue_id - kSdmaQueueId) << 4;
  } else {
    // gfx_v11_0_eop_irq: ME in bits 2-3, pipe in 0-1, queue in 4-6.
    const uint32_t me = queue_id / (kPipes * kQueues), pipe = queue_id / kQueues % kPipes,
                   queue = queue_id % kQueues;
    client = kClientGrbmCp, source = kSrcCpEop, ring_id = queue << 4 | me << 2 | pipe;
  }
  const uint64_t ts = engine_->timestamp();
  namespace f = am::ih_entry;
  bus_.interrupt(f::make({{f::CLIENT_ID, client},
                          {f::SOURCE_ID, source},
                          {f::RING_ID, ring_id},
                          {f::TIMESTAMP_LO, uint32_t(ts)},
                          {f::TIMESTAMP_HI, (ts >> 32) & 0xffff},
                          {f::SRC_DATA0, context_id}}));
}

void AmGfx::fault(uint32_t queue_id, bool memory_fault, uint64_t address,
                  const std::string& what) {
  if (!hooks_.fault) return;
  hooks_.fault(queue_name(queue_id), memory_fault, address, what);
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

bool AmGfx::sdma_queue_running(uint32_t engine) const {
  std::lock_guard lock(mutex_);
  return engine < kSdmaEngines && sdma_[engine].running;
}

}  // namespace hcq::amd::emu
