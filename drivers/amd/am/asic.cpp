#include "amd/am/asic.hpp"

#include <map>

#include "amd/am/boot.hpp"
#include "amd/am/firmware.hpp"
#include "amd/am/gfx.hpp"
#include "amd/am/gmc.hpp"
#include "amd/am/ih.hpp"
#include "amd/am/psp.hpp"
#include "amd/am/sdma.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {

// ---- descriptions -----------------------------------------------------------------------

const BlockSpec* AsicDescription::block(BlockKind kind) const {
  for (const BlockSpec& b : blocks)
    if (b.kind == kind) return &b;
  return nullptr;
}

const AsicDescription& gfx1100_asic() {
  // IP versions: Linux amdgpu_discovery.c's table for GC 11.0.0 parts (NBIO 4.3.0, MMHUB 3.0.0,
  // OSSSYS 6.0.0, MP0/MP1 13.0.0, SDMA 6.0.0), as an RX 7900 XTX's discovery table reports.
  static const AsicDescription d = [] {
    AsicDescription a;
    a.name = "gfx1100";
    a.blocks = {{BlockKind::Soc, hw_id::NBIO, {4, 3, 0}},  {BlockKind::Gmc, hw_id::MMHUB, {3, 0, 0}},
                {BlockKind::Ih, hw_id::OSSSYS, {6, 0, 0}}, {BlockKind::Psp, hw_id::MP0, {13, 0, 0}},
                {BlockKind::Smu, hw_id::MP1, {13, 0, 0}},  {BlockKind::Gfx, hw_id::GC, {11, 0, 0}},
                {BlockKind::Sdma, hw_id::SDMA0, {6, 0, 0}}};
    a.firmware = gfx1100_firmware_names();
    a.mec_ring0_doorbell = 0x003;       // AMDGPU_NAVI10_DOORBELL_MEC_RING0
    a.user_queue_end_doorbell = 0x08A;  // AMDGPU_NAVI10_DOORBELL_USERQUEUE_END
    a.max_compute_queues = 16;          // 4 pipes x 4 queues of ME 1
    a.sdma_doorbells = {0x100, 0x10A};  // AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0, _ENGINE1
    return a;
  }();
  return d;
}

std::span<const AsicDescription* const> known_asics() {
  static const AsicDescription* const all[] = {&gfx1100_asic()};
  return all;
}

const AsicDescription& find_asic(const Discovery& discovery,
                                 std::span<const AsicDescription* const> asics) {
  // The first block of `a` whose version discovery does not report, as the error's text.
  auto mismatch = [&](const AsicDescription& a) -> std::optional<std::string> {
    for (const BlockSpec& b : a.blocks) {
      const bool has = discovery.has(b.hw_id);
      if (has && discovery.version(b.hw_id) == b.version) continue;
      return "IP discovery table: " + hw_id_name(b.hw_id) + " " +
             (has ? discovery.version(b.hw_id).to_string() : std::string("missing")) +
             " where hcq's " + a.name + " has " + hw_id_name(b.hw_id) + " " +
             b.version.to_string();
    }
    return std::nullopt;
  };
  const IpVersion gc = discovery.version(hw_id::GC);
  std::optional<std::string> first_mismatch;
  std::string known;
  for (const AsicDescription* a : asics) {
    const BlockSpec* g = a->block(BlockKind::Gfx);
    if (!g) continue;
    known += (known.empty() ? "" : ", ") + ("GC " + g->version.to_string()) + " (" + a->name + ")";
    if (!(g->version == gc)) continue;
    // Several descriptions may share a GC: the first whose every block matches.
    const std::optional<std::string> m = mismatch(*a);
    if (!m) return *a;
    if (!first_mismatch) first_mismatch = m;
  }
  if (first_mismatch) throw InvalidInput(*first_mismatch);
  throw InvalidInput("IP discovery table: GC " + gc.to_string() + ": hcq's AM boot knows " +
                     (known.empty() ? std::string("no ASIC") : known + " only"));
}

// ---- what the blocks share --------------------------------------------------------------

struct AmAsic::State {
  std::mutex mu;
  const AsicDescription* description = nullptr;
  BootMemory* memory = nullptr;
  RegisterIo* io = nullptr;
  Hdp* hdp = nullptr;
  HubContext vm;  // VMID 0 as both hubs see it
  std::unique_ptr<Gmc> gmc;
  std::unique_ptr<Ih> ih;
  std::unique_ptr<Gfx> gfx;

  Gmc& need_gmc() {
    if (!gmc) throw Error(std::string("AM ") + description->name + ": the GMC phase has not run");
    return *gmc;
  }
};

namespace {

using State = AmAsic::State;

// `stop` on every item of `items`, the first error thrown after the last: one that fails must
// not leave the others running.
template <class Range, class Stop>
void stop_each(Range&& items, Stop stop) {
  std::string first_error;
  for (auto& item : items) try {
      stop(item);
    } catch (const std::exception& e) {
      if (first_error.empty()) first_error = e.what();
    }
  if (!first_error.empty()) throw Error(first_error);
}

std::string asic_name(const State& s) { return std::string("AM ") + s.description->name; }

// NBIO: AmBoot's own platform set-up (straps through the SMN pair, doorbell aperture, HDP
// remap), which needs the boot's register windows.
class SocBlock final : public IpBlockDriver {
 public:
  void init(BootContext& c) override { c.boot.soc_init(); }
};

// MP1: the SMU the boot already talks to (its probe, the mode-1 reset).
class SmuBlock final : public IpBlockDriver {
 public:
  void init(BootContext& c) override { c.boot.smu_init(); }
};

class GmcBlock final : public IpBlockDriver {
 public:
  explicit GmcBlock(State& s) : s_(s) {}
  void init(BootContext& c) override {
    std::lock_guard lk(s_.mu);
    s_.memory = &c.memory;
    s_.io = &c.io;
    s_.hdp = c.hdp;
    s_.gmc = std::make_unique<Gmc>(c.io, c.memory, c.timeout);
    // VMID 0 spans the 48-bit space the four-level tables translate (page_tables.hpp).
    s_.vm = HubContext{c.page_table_base, 0, (uint64_t(1) << 48) - 1};
    s_.gmc->init_hub(Hub::Mm, s_.vm);
  }
  std::optional<std::string> interrupt(const IhEntry& e) override {
    if (classify(e) != IhSource::VmFault) return std::nullopt;
    if (auto f = decode_vm_fault(e)) return f->describe();
    return e.describe();
  }
  std::string status() override {
    if (!s_.gmc) return {};
    return std::string("gmc: MM hub ") + (s_.gmc->hub_ready(Hub::Mm) ? "up" : "down") +
           ", GC hub " + (s_.gmc->hub_ready(Hub::Gc) ? "up" : "down");
  }

 private:
  State& s_;
};

class IhBlock final : public IpBlockDriver {
 public:
  explicit IhBlock(State& s) : s_(s) {}
  void init(BootContext& c) override {
    std::lock_guard lk(s_.mu);
    s_.ih = std::make_unique<Ih>(c.io, c.memory);
    s_.ih->init();
  }
  std::string status() override {
    if (!s_.ih) return {};
    return "ih: " + std::to_string(s_.ih->overflows()) + " ring overflows, entries " +
           (s_.ih->pending() ? "waiting" : "none waiting");
  }

 private:
  State& s_;
};

class PspBlock final : public IpBlockDriver {
 public:
  void init(BootContext& c) override {
    // The PSP reads the buffers the CPU fills in VRAM: an HDP flush after each (hdp.hpp).
    Hdp* hdp = c.hdp;
    psp_ = std::make_unique<Psp>(c.io, c.memory, Psp::kDefaultTimeout,
                                 Psp::kDefaultHandshakeDelay, [hdp] {
                                   if (hdp) hdp->flush();
                                 }, c.psp_mailbox);
    psp_->boot(find_firmware(c.firmware, FirmwareKind::Sos), c.firmware);
  }
  void fini(BootContext&) override {
    if (psp_) psp_->destroy_ring();
  }

 private:
  std::unique_ptr<Psp> psp_;
};

class GfxBlock final : public IpBlockDriver, public QueueProgrammer {
 public:
  explicit GfxBlock(State& s) : s_(s) {}
  void init(BootContext& c) override {
    std::lock_guard lk(s_.mu);
    s_.gfx = std::make_unique<Gfx>(c.io, c.timeout);
    s_.gfx->wait_rlc_autoload();
    s_.need_gmc().init_hub(Hub::Gc, s_.vm);
    // CP_MEC_DOORBELL_RANGE in bytes of the doorbell BAR: 64-bit doorbells KIQ (0) through
    // USERQUEUE_END (Linux gfx_v11_0_cp_set_doorbell_range: index * 2 dwords << 2).
    s_.gfx->init(find_firmware(c.firmware, FirmwareKind::Mec), 0,
                 s_.description->user_queue_end_doorbell * 8);
  }
  // Every compute queue still there is dequeued.
  void fini(BootContext&) override {
    std::lock_guard lk(s_.mu);
    std::map<uint32_t, std::unique_ptr<ComputeQueue>> queues = std::move(compute_);
    compute_.clear();
    stop_each(queues, [](auto& q) { q.second->destroy(); });
  }
  std::optional<std::string> interrupt(const IhEntry& e) override {
    const IhSource s = classify(e);
    if (s == IhSource::CpBadOpcode || s == IhSource::CpPrivRegFault) return e.describe();
    return std::nullopt;
  }
  std::string status() override {
    if (!s_.gfx) return {};
    const size_t n = compute_.size();
    return "gfx: " + std::to_string(n) + (n == 1 ? " compute queue" : " compute queues") +
           " on ME 1";
  }
  QueueProgrammer* queues(QueueKind kind) override {
    return kind == QueueKind::Compute ? this : nullptr;
  }

  uint32_t create(const AmQueueSetup& q) override {
    std::lock_guard lk(s_.mu);
    if (!s_.gfx || !s_.memory) throw Error(asic_name(s_) + ": the GFX phase has not run");
    const uint32_t most = s_.description->max_compute_queues;
    if (q.index >= most)
      throw InvalidInput(asic_name(s_) + ": compute queue " + std::to_string(q.index) +
                         ": ME 1 has " + std::to_string(most) + " queues");
    ComputeQueueConfig cfg;
    cfg.me = 1;
    cfg.pipe = q.index % 4;
    cfg.queue = q.index / 4;
    cfg.ring_va = q.ring_va;
    cfg.ring_bytes = q.ring_bytes;
    cfg.rptr_va = q.rptr_va;
    cfg.wptr_va = q.wptr_va;
    cfg.eop_va = q.eop_va;
    const uint32_t doorbell = s_.description->mec_ring0_doorbell + q.index;
    cfg.doorbell_dword = doorbell * 2;
    compute_[q.index] = std::make_unique<ComputeQueue>(*s_.gfx, *s_.memory, cfg);
    // The MQD is in VRAM; the CP reads it back (tinygrad setup_ring flushes after it).
    if (s_.hdp) s_.hdp->flush();
    return doorbell;
  }
  void destroy(const AmQueueSetup& q) override {
    std::unique_ptr<ComputeQueue> gone;
    {
      std::lock_guard lk(s_.mu);
      auto it = compute_.find(q.index);
      if (it == compute_.end()) return;
      gone = std::move(it->second);
      compute_.erase(it);
    }
    gone->destroy();
  }
  std::optional<IbPosition> ib_position(const AmQueueSetup& q) override {
    std::lock_guard lk(s_.mu);
    auto it = compute_.find(q.index);
    if (it == compute_.end()) return std::nullopt;
    return decode_hqd_ib(it->second->read_ib());
  }

 private:
  State& s_;
  std::map<uint32_t, std::unique_ptr<ComputeQueue>> compute_;  // by AmQueueSetup::index; s_.mu
};

class SdmaBlock final : public IpBlockDriver, public QueueProgrammer {
 public:
  explicit SdmaBlock(State& s) : s_(s) {}
  // Nothing at boot: a copy queue's ring registers are written when it is made.
  void init(BootContext&) override {}
  // Every copy queue still there is stopped.
  void fini(BootContext&) override {
    std::lock_guard lk(s_.mu);
    std::array<std::unique_ptr<SdmaQueue>, kSdmaEngines> queues = std::move(sdma_);
    for (auto& q : sdma_) q.reset();
    stop_each(queues, [](auto& q) {
      if (q) q->stop();
    });
  }
  std::string status() override {
    std::string engines;
    for (size_t i = 0; i < sdma_.size(); i++)
      if (sdma_[i]) engines += (engines.empty() ? "" : ", ") + ("SDMA" + std::to_string(i));
    return "sdma: copy queues on " + (engines.empty() ? std::string("no engine") : engines);
  }
  QueueProgrammer* queues(QueueKind kind) override {
    return kind == QueueKind::Copy ? this : nullptr;
  }

  uint32_t create(const AmQueueSetup& q) override {
    std::lock_guard lk(s_.mu);
    if (!s_.io) throw Error(asic_name(s_) + ": the GMC phase has not run");
    const std::vector<uint32_t>& doorbells = s_.description->sdma_doorbells;
    if (q.index >= doorbells.size() || q.index >= sdma_.size())
      throw InvalidInput(asic_name(s_) + ": copy queue " + std::to_string(q.index) +
                         ": hcq runs one copy queue on each of the 2 SDMA engines (queue 0 of "
                         "SDMA0 and SDMA1)");
    if (sdma_[q.index])
      throw InvalidInput(asic_name(s_) + ": copy queue " + std::to_string(q.index) + " (SDMA" +
                         std::to_string(q.index) + " queue 0) is open already");
    SdmaQueueConfig cfg;
    cfg.engine = q.index;
    cfg.ring_va = q.ring_va;
    cfg.ring_bytes = q.ring_bytes;
    cfg.rptr_va = q.rptr_va;
    cfg.wptr_va = q.wptr_va;
    const uint32_t doorbell = doorbells[q.index];
    cfg.doorbell_dword = doorbell * 2;
    sdma_[q.index] = std::make_unique<SdmaQueue>(*s_.io, cfg);
    return doorbell;
  }
  void destroy(const AmQueueSetup& q) override {
    std::unique_ptr<SdmaQueue> gone;
    {
      std::lock_guard lk(s_.mu);
      if (q.index < sdma_.size()) gone = std::move(sdma_[q.index]);
    }
    if (gone) gone->stop();
  }
  std::string hardware_name(const AmQueueSetup& q) override {
    std::string name = "SDMA";  // appended: GCC 12 -O3 -Wrestrict on "literal" + std::string
    name += std::to_string(q.index);
    name += " queue 0";
    return name;
  }

 private:
  State& s_;
  std::array<std::unique_ptr<SdmaQueue>, kSdmaEngines> sdma_;  // copy queue i: SDMA i queue 0
};

Hub hub_of(VmHub h) { return h == VmHub::Gc ? Hub::Gc : Hub::Mm; }

}  // namespace

// ---- the ASIC ---------------------------------------------------------------------------

std::unique_ptr<IpBlockDriver> AmAsic::standard_block(const BlockSpec& spec, AmAsic& asic) {
  State& s = asic.state();
  switch (spec.kind) {
    case BlockKind::Soc:
      return std::make_unique<SocBlock>();
    case BlockKind::Gmc:
      return std::make_unique<GmcBlock>(s);
    case BlockKind::Ih:
      return std::make_unique<IhBlock>(s);
    case BlockKind::Psp:
      return std::make_unique<PspBlock>();
    case BlockKind::Smu:
      return std::make_unique<SmuBlock>();
    case BlockKind::Gfx:
      return std::make_unique<GfxBlock>(s);
    case BlockKind::Sdma:
      return std::make_unique<SdmaBlock>(s);
  }
  throw InvalidInput("AM: no block driver for " + hw_id_name(spec.hw_id) + " " +
                     spec.version.to_string());
}

const char* block_kind_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::Soc: return "soc";
    case BlockKind::Gmc: return "gmc";
    case BlockKind::Ih: return "ih";
    case BlockKind::Psp: return "psp";
    case BlockKind::Smu: return "smu";
    case BlockKind::Gfx: return "gfx";
    case BlockKind::Sdma: return "sdma";
  }
  return "?";
}

AmAsic::AmAsic(const AsicDescription& description, const BlockFactory& make)
    : description_(description), state_(std::make_unique<State>()) {
  state_->description = &description_;
  for (const BlockSpec& spec : description_.blocks)
    blocks_.push_back({spec, make ? make(spec, *this) : standard_block(spec, *this)});
}

AmAsic::~AmAsic() = default;

std::mutex& AmAsic::mutex() { return state_->mu; }

QueueProgrammer* AmAsic::queues(QueueKind kind) {
  for (Block& b : blocks_)
    if (b.driver)
      if (QueueProgrammer* p = b.driver->queues(kind)) return p;
  return nullptr;
}

void AmAsic::shutdown(BootContext& c) {
  std::vector<IpBlockDriver*> reversed;  // (std::views::reverse: clang 14's ranges cannot)
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (it->driver) reversed.push_back(it->driver.get());
  try {
    stop_each(reversed, [&](IpBlockDriver* b) { b->fini(c); });
  } catch (const Error& e) {
    throw Error(std::string("AM ") + description_.name + " shutdown: " + e.what());
  }
}

void AmAsic::invalidate(VmHub hub) {
  Gmc* gmc = nullptr;
  {
    std::lock_guard lk(state_->mu);
    gmc = state_->gmc.get();
  }
  // Before the GMC phase (or for the GC hub before the GFX phase) no hub translates yet.
  if (gmc && gmc->hub_ready(hub_of(hub))) gmc->invalidate(hub_of(hub));
}

// The IH ring's entries since the last drain and the hubs' latched faults, as one text; the
// hubs' registers are read when `read_hubs` or when a VM fault entry came (Linux reads them on
// the entry, gmc_v11_0_process_interrupt).
std::optional<std::string> AmAsic::collect_faults(bool read_hubs) {
  State& s = *state_;
  std::vector<IhEntry> entries;
  if (s.ih) entries = s.ih->drain();
  for (const IhEntry& e : entries) read_hubs = read_hubs || classify(e) == IhSource::VmFault;
  std::string text;
  auto add = [&](const std::string& t) { text += (text.empty() ? "" : "; ") + t; };
  if (s.gmc && read_hubs)
    for (Hub hub : {Hub::Gc, Hub::Mm})
      if (s.gmc->hub_ready(hub))
        if (auto f = s.gmc->read_fault(hub)) {
          add(f->describe());
          s.gmc->clear_fault(hub);
        }
  for (const IhEntry& e : entries)
    for (Block& b : blocks_)
      if (b.driver)
        if (auto f = b.driver->interrupt(e)) {
          add(*f);
          break;
        }
  if (text.empty()) return std::nullopt;
  return text;
}

std::optional<std::string> AmAsic::read_fault() {
  std::lock_guard lk(state_->mu);
  return collect_faults(true);
}

std::optional<std::string> AmAsic::poll_fault() {
  std::lock_guard lk(state_->mu);
  if (!state_->ih || !state_->ih->pending()) return std::nullopt;  // a look at memory only
  return collect_faults(false);
}

std::string AmAsic::status() {
  std::lock_guard lk(state_->mu);
  std::string out;
  for (Block& b : blocks_)
    if (b.driver)
      if (std::string line = b.driver->status(); !line.empty())
        out += (out.empty() ? "" : "\n") + line;
  return out;
}

}  // namespace hcq::amd::am
