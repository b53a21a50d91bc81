#include "amd/am/gfx1100.hpp"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "amd/am/gfx.hpp"
#include "amd/am/gmc.hpp"
#include "amd/am/ih.hpp"
#include "amd/am/psp.hpp"
#include "amd/am/sdma.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

// What the phases bring up and the queue and fault hooks use afterwards.
struct Gfx1100 {
  std::mutex mu;
  std::unique_ptr<Gmc> gmc;
  std::unique_ptr<Ih> ih;
  std::unique_ptr<Psp> psp;
  std::unique_ptr<Gfx> gfx;
  BootMemory* memory = nullptr;
  RegisterIo* io = nullptr;
  HubContext vm;  // VMID 0 as both hubs see it
  std::map<uint32_t, std::unique_ptr<ComputeQueue>> compute;  // by AmQueueSetup::index
  std::array<std::unique_ptr<SdmaQueue>, kSdmaEngines> sdma;  // copy queue i: SDMA i queue 0
  Hdp* hdp = nullptr;

  Gmc& need_gmc() {
    if (!gmc) throw Error("AM gfx1100: the GMC phase has not run");
    return *gmc;
  }
};

Hub hub_of(VmHub h) { return h == VmHub::Gc ? Hub::Gc : Hub::Mm; }

// An IH entry that means a queue stopped, as a fault text; nothing for the others (end of
// pipe and SDMA trap interrupts come with the wake mailbox's write, which the driver reads).
std::optional<std::string> fault_of(const IhEntry& e) {
  switch (classify(e)) {
    case IhSource::VmFault:
      if (auto f = decode_vm_fault(e)) return f->describe();
      return e.describe();
    case IhSource::CpBadOpcode:
    case IhSource::CpPrivRegFault:
      return e.describe();
    default:
      return std::nullopt;
  }
}

// The IH ring's entries since the last drain and the hubs' latched faults, as one text; the
// hubs' registers are read when `read_hubs` or when a VM fault entry came (Linux reads them on
// the entry, gmc_v11_0_process_interrupt). s.mu held.
std::optional<std::string> collect_faults(Gfx1100& s, bool read_hubs) {
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
    if (auto f = fault_of(e)) add(*f);
  if (text.empty()) return std::nullopt;
  return text;
}

}  // namespace

AmDriverHooks gfx1100_hooks() {
  auto s = std::make_shared<Gfx1100>();
  AmDriverHooks h;

  h.boot.gmc = [s](BootContext& c) {
    std::lock_guard lk(s->mu);
    s->memory = &c.memory;
    s->io = &c.io;
    s->hdp = c.hdp;
    s->gmc = std::make_unique<Gmc>(c.io, c.memory, c.timeout);
    // VMID 0 spans the 48-bit space the four-level tables translate (page_tables.hpp).
    s->vm = HubContext{c.page_table_base, 0, (uint64_t(1) << 48) - 1};
    s->gmc->init_hub(Hub::Mm, s->vm);
  };
  h.boot.ih = [s](BootContext& c) {
    std::lock_guard lk(s->mu);
    s->ih = std::make_unique<Ih>(c.io, c.memory);
    s->ih->init();
  };
  h.boot.psp = [s](BootContext& c) {
    std::lock_guard lk(s->mu);
    // The PSP reads the buffers the CPU fills in VRAM: an HDP flush after each (hdp.hpp).
    Hdp* hdp = c.hdp;
    s->psp = std::make_unique<Psp>(c.io, c.memory, Psp::kDefaultTimeout,
                                   Psp::kDefaultHandshakeDelay, [hdp] {
                                     if (hdp) hdp->flush();
                                   }, c.psp_mailbox);
    s->psp->boot(find_firmware(c.firmware, FirmwareKind::Sos), c.firmware);
  };
  h.boot.gfx = [s](BootContext& c) {
    std::lock_guard lk(s->mu);
    s->gfx = std::make_unique<Gfx>(c.io, c.timeout);
    s->gfx->wait_rlc_autoload();
    s->need_gmc().init_hub(Hub::Gc, s->vm);
    // CP_MEC_DOORBELL_RANGE in bytes of the doorbell BAR: 64-bit doorbells KIQ (0) through
    // USERQUEUE_END (Linux gfx_v11_0_cp_set_doorbell_range: index * 2 dwords << 2).
    s->gfx->init(find_firmware(c.firmware, FirmwareKind::Mec), 0, kUserQueueEndDoorbell * 8);
  };
  h.boot.shutdown = [s](BootContext&) {
    std::lock_guard lk(s->mu);
    std::string first_error;
    auto keep = [&](const std::exception& e) {
      if (first_error.empty()) first_error = e.what();
    };
    for (auto& [index, q] : s->compute) try {
        q->destroy();
      } catch (const std::exception& e) {
        keep(e);
      }
    s->compute.clear();
    for (auto& q : s->sdma)
      if (q) try {
          q->stop();
        } catch (const std::exception& e) {
          keep(e);
        }
    for (auto& q : s->sdma) q.reset();
    if (s->psp) try {
        s->psp->destroy_ring();
      } catch (const std::exception& e) {
        keep(e);
      }
    if (!first_error.empty()) throw Error("AM gfx1100 shutdown: " + first_error);
  };

  h.compute.create = [s](const AmQueueSetup& q) -> uint32_t {
    std::lock_guard lk(s->mu);
    if (!s->gfx || !s->memory) throw Error("AM gfx1100: the GFX phase has not run");
    if (q.index >= kMaxComputeQueues)
      throw InvalidInput("AM gfx1100: compute queue " + std::to_string(q.index) +
                         ": ME 1 has " + std::to_string(kMaxComputeQueues) + " queues");
    ComputeQueueConfig cfg;
    cfg.me = 1;
    cfg.pipe = q.index % 4;
    cfg.queue = q.index / 4;
    cfg.ring_va = q.ring_va;
    cfg.ring_bytes = q.ring_bytes;
    cfg.rptr_va = q.rptr_va;
    cfg.wptr_va = q.wptr_va;
    cfg.eop_va = q.eop_va;
    const uint32_t doorbell = kMecRing0Doorbell + q.index;
    cfg.doorbell_dword = doorbell * 2;
    s->compute[q.index] = std::make_unique<ComputeQueue>(*s->gfx, *s->memory, cfg);
    // The MQD is in VRAM; the CP reads it back (tinygrad setup_ring flushes after it).
    if (s->hdp) s->hdp->flush();
    return doorbell;
  };
  h.compute.destroy = [s](const AmQueueSetup& q) {
    std::unique_ptr<ComputeQueue> gone;
    {
      std::lock_guard lk(s->mu);
      auto it = s->compute.find(q.index);
      if (it == s->compute.end()) return;
      gone = std::move(it->second);
      s->compute.erase(it);
    }
    gone->destroy();
  };
  h.compute.ib_position = [s](const AmQueueSetup& q) -> std::optional<IbPosition> {
    std::lock_guard lk(s->mu);
    auto it = s->compute.find(q.index);
    if (it == s->compute.end()) return std::nullopt;
    return decode_hqd_ib(it->second->read_ib());
  };
  h.copy.hardware_name = [](const AmQueueSetup& q) {
    std::string name = "SDMA";  // appended: GCC 12 -O3 -Wrestrict on "literal" + std::string
    name += std::to_string(q.index);
    name += " queue 0";
    return name;
  };
  h.copy.create = [s](const AmQueueSetup& q) -> uint32_t {
    std::lock_guard lk(s->mu);
    if (!s->io) throw Error("AM gfx1100: the GMC phase has not run");
    if (q.index >= kSdmaEngines)
      throw InvalidInput("AM gfx1100: copy queue " + std::to_string(q.index) +
                         ": hcq runs one copy queue on each of the 2 SDMA engines (queue 0 of "
                         "SDMA0 and SDMA1)");
    if (s->sdma[q.index])
      throw InvalidInput("AM gfx1100: copy queue " + std::to_string(q.index) + " (SDMA" +
                         std::to_string(q.index) + " queue 0) is open already");
    SdmaQueueConfig cfg;
    cfg.engine = q.index;
    cfg.ring_va = q.ring_va;
    cfg.ring_bytes = q.ring_bytes;
    cfg.rptr_va = q.rptr_va;
    cfg.wptr_va = q.wptr_va;
    const uint32_t doorbell = kSdmaEngineDoorbells[q.index];
    cfg.doorbell_dword = doorbell * 2;
    s->sdma[q.index] = std::make_unique<SdmaQueue>(*s->io, cfg);
    return doorbell;
  };
  h.copy.destroy = [s](const AmQueueSetup& q) {
    std::unique_ptr<SdmaQueue> gone;
    {
      std::lock_guard lk(s->mu);
      if (q.index < kSdmaEngines) gone = std::move(s->sdma[q.index]);
    }
    if (gone) gone->stop();
  };

  h.invalidate = [s](VmHub hub, std::span<const VaRange>) {
    Gmc* gmc = nullptr;
    {
      std::lock_guard lk(s->mu);
      gmc = s->gmc.get();
    }
    // Before the GMC phase (or for the GC hub before the GFX phase) no hub translates yet.
    if (gmc && gmc->hub_ready(hub_of(hub))) gmc->invalidate(hub_of(hub));
  };
  h.read_fault = [s]() -> std::optional<std::string> {
    std::lock_guard lk(s->mu);
    return collect_faults(*s, true);
  };
  h.poll_fault = [s]() -> std::optional<std::string> {
    std::lock_guard lk(s->mu);
    if (!s->ih || !s->ih->pending()) return std::nullopt;  // a look at memory only
    return collect_faults(*s, false);
  };
  return h;
}

}  // namespace hcq::amd::am
