// Running a compiled schedule: fence, patch what changed, submit; the host queues and relays.
#include "batch/executable_impl.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "core/capture.hpp"
#include "io/file_load.hpp"

namespace hcq::batch {
namespace {

// Every device's submission lock, taken in the one order compile() sorted them into (no
// deadlock with another multi-device run), released on the way out.
struct LockAll {
  explicit LockAll(const std::vector<std::mutex*>& m) : mutexes(m) {
    for (auto* mu : mutexes) mu->lock();
  }
  ~LockAll() {
    for (auto* mu : mutexes) mu->unlock();
  }
  const std::vector<std::mutex*>& mutexes;
};

}  // namespace

Executable::Executable(std::shared_ptr<Impl> impl, std::vector<const Buffer*> bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {
  static std::atomic<uint64_t> executables{0};
  id_ = ++executables;
}
Executable::Executable(Executable&&) noexcept = default;
Executable& Executable::operator=(Executable&&) noexcept = default;
Executable::~Executable() = default;

Executable::Impl::~Impl() {
  if (host.thread.joinable()) {
    {
      std::lock_guard lk(host.mu);
      host.stop = true;
    }
    host.cancel = true;
    host.cv.notify_all();
    host.thread.join();
  }
  if (!ran) return;
  for (size_t d = 0; d < devs.size(); d++) {
    if (!links[d]->get()) continue;  // closed first: its teardown waited for its work
    try {
      devs[d]->timeline().wait(last_done[d], std::chrono::milliseconds(2000));
    } catch (const Error&) {
      // Destroyed while a run is stuck: the device reports that to its own waiters.
    }
  }
}

uint64_t Executable::run(const Bindings& b, std::chrono::milliseconds fence_timeout) {
  Impl& x = *impl_;
  // One run of a compilation at a time: runs rewrite the same command buffers, signals and
  // patch table, each after fencing on the one before.
  std::lock_guard run_lock(x.run_mu);
  for (auto& link : x.links) link->checked("batch executable");
  x.report_host_error();  // a host op of the previous run failed and no wait() said so yet
  // Fence on the previous run: its command buffers and signals are about to be rewritten.
  if (x.ran)
    for (size_t d = 0; d < x.devs.size(); d++) {
      try {
        x.devs[d]->timeline().wait(x.last_done[d], fence_timeout);
      } catch (const TimeoutError& e) {
        throw TimeoutError(x.devs[d]->name() + ": batch re-run: the previous run (timeline value " +
                           std::to_string(x.last_done[d]) + ") has not finished after " +
                           std::to_string(fence_timeout.count()) + " ms (" + e.what() + ")");
      }
    }
  x.wait_host_idle();  // done or nearly: the fence above saw its queues end
  size_t patches = 0;
  auto bind = [&](uint32_t slot, const Buffer* buf) {
    auto& in = x.inputs[slot];
    if (!*buf)  // freed (or moved from) after it was bound: its old address is not its own
      throw InvalidInput("batch: input " + std::to_string(slot) +
                         " is an empty Buffer (freed or moved from)");
    if (buf->device() != in.device)
      throw InvalidInput("batch: input " + std::to_string(slot) + " is bound to a buffer of " +
                         (buf->device() ? buf->device()->name() : "a closed device") +
                         ", the schedule has it on " + in.device->name());
    if (buf->size() < in.size)
      throw InvalidInput("batch: input " + std::to_string(slot) + " needs " +
                         std::to_string(in.size) + " bytes, the buffer has " +
                         std::to_string(buf->size()));
    // Where the CPU cannot map the device's memory the host copies through its port.
    if (in.host_copied && !buf->host() && in.device->properties().caps.cpu_maps_memory)
      throw InvalidInput("batch: input " + std::to_string(slot) + " is copied on the host (" +
                         in.device->name() + " has no copy engine), but the CPU cannot see it");
    in.bound_host = buf->host();
    in.bound_buffer = buf;
    if (buf->va() == in.bound_va) return;  // unchanged: nothing to write
    in.bound_va = buf->va();
    Impl::write(x.targets, in.first, in.count, in.bound_va);
    patches += in.patches;
  };
  // The schedule's own buffers: already in place when this executable bound them last.
  if (x.bound_by != id_) {
    for (size_t i = 0; i < bound_.size(); i++) bind(uint32_t(x.user_inputs + i), bound_[i]);
    x.bound_by = id_;
  }
  for (auto& [slot, buf] : b.inputs_) {
    if (slot >= x.user_inputs) throw InvalidInput("batch: binding for an undeclared input");
    bind(slot, buf);
  }
  for (auto& [slot, bits] : b.scalars_) {
    if (slot >= x.scalars.size()) throw InvalidInput("batch: binding for an undeclared scalar");
    auto& sc = x.scalars[slot];
    if (sc.set && sc.value == bits) continue;
    sc.set = true;
    sc.value = bits;
    for (size_t k = 0; k < sc.at.size(); k++) {
      std::memcpy(sc.at[k], &bits, sc.bytes);
      if (sc.shadow[k]) sc.shadow[k]->mark(uint64_t(sc.at[k] - sc.shadow[k]->host()), sc.bytes);
    }
    Impl::write(sc.sites, 0, uint32_t(sc.sites.size()), bits);
    patches += sc.at.size() + sc.sites.size();
  }
  if (!x.ran) {  // the first run binds everything
    for (size_t s = 0; s < x.user_inputs; s++)
      if (!x.inputs[s].bound_va)
        throw InvalidInput("batch: input " + std::to_string(s) + " is not bound");
    for (size_t s = 0; s < x.scalars.size(); s++)
      if (!x.scalars[s].set)
        throw InvalidInput("batch: scalar " + std::to_string(s) + " is not set");
  }
  // Re-arm: the queues' signals count from zero again in every run.
  const uint32_t nq = uint32_t(x.queues.size());
  for (uint32_t a = 0; a < x.areas.size(); a++)
    if (x.areas[a].sync.host()) {
      for (uint32_t q = 0; q < nq; q++) __atomic_store_n(x.slot(q, a), 0, __ATOMIC_RELAXED);
      if (ShadowMemory* sh = x.areas[a].sync.shadow()) {
        sh->mark(0, uint64_t(nq) * 16);
        sh->publish();
      }
    }
  for (ShadowMemory& k : x.kernargs) k.publish();  // the patched arguments, where shadows
  // Submit under every device's submission lock.
  std::vector<uint64_t> done(x.devs.size());
  std::vector<std::optional<uint64_t>> sequences;  // the queues' capture records, if capturing
  {
    LockAll locks(x.submit_locks);
    // Each device's next timeline value; a failed submission gives them all back.
    std::vector<Timeline::Reservation> values;
    values.reserve(x.devs.size());
    for (size_t d = 0; d < x.devs.size(); d++) {
      const auto& r = values.emplace_back(x.devs[d]->timeline().reserve());
      done[d] = r.next;
      Impl::write(x.timeline_waits[d], 0, uint32_t(x.timeline_waits[d].size()), r.prev);
      Impl::write(x.timeline_signals[d], 0, uint32_t(x.timeline_signals[d].size()), r.next);
    }
    // Every device's queues go into the capture before any is submitted: a capture that
    // fails then submits nothing, where a device submitted alone would wait for the others.
    if (capture::enabled()) {
      sequences.resize(nq);  // allocated only while capturing: a replay's path stays as it was
      // One group in the capture: nothing runs before all are submitted (a replay does so too).
      size_t left = 0;
      for (auto& queues : x.device_queues) left += queues.size();
      for (size_t d = 0; d < x.devs.size(); d++)
        for (size_t i = 0; i < x.device_queues[d].size(); i++)
          sequences[x.device_queue_ids[d][i]] = x.device_queues[d][i]->record_capture(--left > 0);
      // What the host thread will do in this run, right after the run's submissions: a
      // replay of the capture takes the same steps.
      if (x.host_work) {
        const std::vector<capture::HostStep> steps = x.capture_host_steps(done);
        const std::vector<const Device*> devs(x.devs.begin(), x.devs.end());
        capture::host_steps(devs, steps);
      }
    }
    for (auto& queues : x.device_queues) Queue::submit_together(queues, /*capture=*/false);
    for (auto& r : values) r.commit();
  }
  {
    std::lock_guard lk(x.state_mu);
    x.last_done = done;
    x.capture_sequence = std::move(sequences);
    x.ran = true;
    x.last_patches = patches;
  }
  if (x.host_work) {
    std::vector<uint64_t> prev(x.devs.size());
    for (size_t d = 0; d < x.devs.size(); d++) prev[d] = done[d] - 1;
    x.start_host(std::move(prev));
  }
  return done[0];
}

std::vector<uint64_t> Executable::Impl::last_run() const {
  std::lock_guard lk(state_mu);
  return ran ? last_done : std::vector<uint64_t>{};
}

void Executable::wait(std::chrono::milliseconds timeout) const {
  const std::vector<uint64_t> last = impl_->last_run();
  for (auto& link : impl_->links) link->checked("batch executable");
  for (size_t d = 0; d < last.size(); d++) {
    try {
      impl_->devs[d]->timeline().wait(last[d], timeout);
    } catch (const TimeoutError&) {
      impl_->report_host_error();
      throw;
    }
  }
  impl_->report_host_error();
}

void Executable::Impl::report_host_error() {
  std::exception_ptr e;
  {
    std::lock_guard lk(host_mu);
    std::swap(e, host_error);
  }
  if (e) std::rethrow_exception(e);
}

uint32_t Executable::Impl::device_index(const Device* d) const {
  return uint32_t(std::find(devs.begin(), devs.end(), d) - devs.begin());
}

uint32_t Executable::Impl::area_device(uint32_t area) const {
  return uint32_t(std::find(device_area.begin(), device_area.end(), area) - device_area.begin());
}

// run_host's steps for the run whose timeline values are `done`, as addresses (the slots'
// bindings are this run's): its order of waits, copies and signals, mirrors first (the host
// relays them from the start until they end).
std::vector<capture::HostStep> Executable::Impl::capture_host_steps(
    const std::vector<uint64_t>& done) const {
  using capture::HostStepKind;
  std::vector<capture::HostStep> out;
  auto slot_va = [&](uint32_t q, uint32_t area) { return areas[area].sync.va() + uint64_t(q) * 16; };
  auto slot_device = [&](uint32_t slot) {
    if (slot < patch_slots) return device_index(inputs[slot].device);
    return area_device(staging[slot - patch_slots].area);
  };
  for (const Mirror& m : mirrors)
    out.push_back({HostStepKind::Mirror, area_device(m.area), queue_device[m.queue],
                   slot_va(m.queue, m.area), slot_va(m.queue, area_of(m.queue)), m.end});
  for (uint32_t d = 0; d < devs.size(); d++) {
    bool has = false;
    for (size_t q = 0; q < host_queue.size(); q++) has |= host_queue[q] && queue_device[q] == d && used[q];
    if (has)
      out.push_back({HostStepKind::Wait, d, d, devs[d]->timeline().signal().va(), 0, done[d] - 1});
  }
  for (const HostOp& h : host_ops) {
    for (auto& [pq, value] : h.waits)
      out.push_back({HostStepKind::Wait, queue_device[pq], queue_device[pq],
                     slot_va(pq, area_of(pq)), 0, value});
    if (h.peer) {
      out.push_back({HostStepKind::Remote, queue_device[h.queue], queue_device[h.queue], 0, 0, 0});
    } else if (!h.path.empty()) {
      out.push_back({HostStepKind::File, slot_device(h.dst_slot), slot_device(h.dst_slot),
                     slot_address(h.dst_slot, h.dst_offset), 0, h.size});
    } else {
      out.push_back({HostStepKind::Copy, slot_device(h.dst_slot), slot_device(h.src_slot),
                     slot_address(h.dst_slot, h.dst_offset),
                     slot_address(h.src_slot, h.src_offset), h.size});
    }
    if (h.signal)
      out.push_back({HostStepKind::Write64, queue_device[h.queue], queue_device[h.queue],
                     slot_va(h.queue, area_of(h.queue)), 0, h.signal});
  }
  for (uint32_t q = 0; q < host_queue.size(); q++)
    if (host_queue[q] && used[q])
      out.push_back({HostStepKind::Write64, queue_device[q], queue_device[q],
                     slot_va(q, area_of(q)), 0, host_queue_end[q]});
  return out;
}

// Copies each mirrored signal's new value into its mirror; true once every one has relayed
// its queue's end value. `copied`: the value each last relayed.
bool Executable::Impl::pump_mirrors(std::vector<uint64_t>& copied) const {
  bool done = true;
  for (size_t m = 0; m < mirrors.size(); m++) {
    const Mirror& mi = mirrors[m];
    const uint64_t v = home_slot(mi.queue).load(0);
    if (v != copied[m]) slot_range(mi.queue, mi.area).store(0, copied[m] = v);
    done &= v >= mi.end;
  }
  return done;
}

// A run's host queues: wait for the device timelines' previous values, then each host op in
// schedule order waits for its producers, copies, and signals; each host queue ends by
// signalling its end value, which the device's closing queue waits for. Meanwhile, and until
// every mirrored signal has passed its end, the host relays signals between areas.
void Executable::Impl::start_host(std::vector<uint64_t> prev) {
  {
    std::lock_guard lk(host.mu);
    host.prev = std::move(prev);
    host.pending = true;
  }
  if (!host.thread.joinable())
    host.thread = std::thread([this] { host_loop(); });
  else
    host.cv.notify_all();
}

void Executable::Impl::wait_host_idle() {
  if (!host.thread.joinable()) return;  // no host work (only run(), on one thread, starts it)
  std::unique_lock lk(host.mu);
  host.cv.wait(lk, [&] { return !host.pending && !host.busy; });
}

void Executable::Impl::host_loop() {
  std::unique_lock lk(host.mu);
  for (;;) {
    host.cv.wait(lk, [&] { return host.pending || host.stop; });
    if (!host.pending) return;  // stopping, nothing left to run
    host.pending = false;
    host.busy = true;
    const std::vector<uint64_t> prev = host.prev;
    lk.unlock();
    run_host(prev);
    lk.lock();
    host.busy = false;
    host.cv.notify_all();
  }
}

void Executable::Impl::run_host(const std::vector<uint64_t>& prev) {
  std::vector<uint64_t> copied(mirrors.size(), 0);
  using clock = std::chrono::steady_clock;
  try {
    for (size_t d = 0; d < devs.size(); d++) {
      bool has = false;
      for (size_t q = 0; q < host_queue.size(); q++) has |= host_queue[q] && queue_device[q] == d && used[q];
      if (has) devs[d]->timeline().wait(prev[d]);
    }
    // A slot's bytes as the devices see them: its mapping, else the device's port.
    auto range_of = [&](uint32_t slot, uint64_t off) -> DeviceRange {
      if (slot < patch_slots) {
        const InputPatches& in = inputs[slot];
        if (in.bound_host) return {static_cast<std::byte*>(in.bound_host) + off, nullptr, 0};
        return {nullptr, &in.device->driver(), in.bound_va + off};
      }
      const StagingSlot& st = staging[slot - patch_slots];
      return areas[st.area].staging.range(st.offset + off);
    };
    // A load's destination (always staging) in host memory: the staging itself, or where it
    // is a shadow, the shadow's host copy, written through the port once read (one read of
    // the file: a stream cannot be read again).
    auto staging_host = [&](uint32_t slot, uint64_t off) -> std::byte* {
      const StagingSlot& st = staging[slot - patch_slots];
      return areas[st.area].staging.host() + st.offset + off;
    };
    // A remote call's local bytes: with their buffer where it is a bound one the CPU maps.
    auto local_of = [&](uint32_t slot, uint64_t off, std::byte* host) -> RemotePeer::Local {
      if (!host) return {};
      if (slot < patch_slots && inputs[slot].bound_buffer) return {host, inputs[slot].bound_buffer, off};
      return {host, nullptr, 0};
    };
    auto now_ticks = [&](uint32_t q) {
      const double hz = double(device_of(q).properties().timestamp_hz);
      const uint64_t ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       clock::now().time_since_epoch())
                                       .count());
      return uint64_t(double(ns) * hz / 1e9);
    };
    for (const HostOp& h : host_ops) {
      for (auto& [pq, value] : h.waits) {
        const auto deadline = clock::now() + std::chrono::seconds(10);
        while (home_slot(pq).load(0) < value) {
          if (clock::now() > deadline)
            throw TimeoutError("batch: a host copy waited 10 s for queue " + std::to_string(pq) +
                               " to reach " + std::to_string(value));
          if (host.cancel.load(std::memory_order_relaxed))
            throw Error("batch: the executable was destroyed while a host copy waited");
          pump_mirrors(copied);
          std::this_thread::sleep_for(std::chrono::microseconds(5));
        }
      }
      // The op's two timestamp records (the time in each one's second half), where the
      // profile reads them: through the port where the area is a device's shadow.
      const DeviceRange ts = profile ? areas[area_of(h.queue)].timestamps.range(h.op * 32)
                                     : DeviceRange{};
      if (profile) ts.store(8, now_ticks(h.queue));
      const DeviceRange dst = range_of(h.dst_slot, h.dst_offset);
      if (h.peer && h.remote == detail::RemoteOp::Signal) {
        h.peer->signal(scalars[h.value_scalar].value);
      } else if (h.peer && h.remote == detail::RemoteOp::Read) {
        RemotePeer::Local to = local_of(h.dst_slot, h.dst_offset, dst.host);
        if (!to.host) {  // into host memory, then through the device's port
          bounce.resize(std::max<uint64_t>(bounce.size(), h.size));
          to.host = bounce.data();
        }
        h.peer->read(to, h.size, scalars[h.addr_scalar].value);
        if (!dst.host) dst.write(0, to.host, h.size);
      } else if (h.peer) {
        const DeviceRange src = range_of(h.src_slot, h.src_offset);
        RemotePeer::Local from = local_of(h.src_slot, h.src_offset, src.host);
        if (!from.host) {  // through the device's port into host memory the peer can read
          bounce.resize(std::max<uint64_t>(bounce.size(), h.size));
          src.read(0, bounce.data(), h.size);
          from.host = bounce.data();
        }
        h.peer->write_and_signal(from, h.size, scalars[h.addr_scalar].value,
                                 scalars[h.value_scalar].value);
      } else if (h.path.empty()) {
        DeviceRange::copy(dst, range_of(h.src_slot, h.src_offset), h.size, bounce);
      } else {
        std::byte* to = dst.host ? dst.host : staging_host(h.dst_slot, h.dst_offset);
        io::read_range(h.path, h.src_offset, to, h.size, "batch: load of " + h.path, 4 << 20, 4,
                       &host.cancel);
        if (!dst.host) dst.write(0, to, h.size);
      }
      if (profile) ts.store(24, now_ticks(h.queue));
      if (h.signal) home_slot(h.queue).store(0, h.signal);
      pump_mirrors(copied);
    }
  } catch (const Error&) {
    // Reported by the next wait() or run(). The host queues still signal their ends below,
    // so the GPU queues waiting on them finish the run and the devices stay usable.
    std::lock_guard lk(host_mu);
    host_error = std::current_exception();
  }
  try {
    for (size_t q = 0; q < host_queue.size(); q++)
      if (host_queue[q] && used[q]) home_slot(uint32_t(q)).store(0, host_queue_end[q]);
    // Relay until every mirrored queue has ended; give up after 10 s without progress (a
    // faulted or hung device: its waiters hear of that from the device).
    auto last_progress = clock::now();
    for (std::vector<uint64_t> before = copied; !pump_mirrors(copied); before = copied) {
      if (copied != before) last_progress = clock::now();
      if (clock::now() - last_progress > std::chrono::seconds(10)) break;
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
  } catch (const Error&) {
    // A port request failed (a device that went away): the device's waiters hear of it;
    // the run's own first error, if any, stays the one reported.
    std::lock_guard lk(host_mu);
    if (!host_error) host_error = std::current_exception();
  }
}

std::vector<std::pair<Device*, uint64_t>> Executable::points() const {
  std::vector<std::pair<Device*, uint64_t>> out;
  std::lock_guard lk(impl_->state_mu);
  for (size_t d = 0; d < impl_->devs.size(); d++)
    out.push_back({impl_->devs[d], impl_->last_done[d]});
  return out;
}

size_t Executable::last_patch_count() const {
  std::lock_guard lk(impl_->state_mu);
  return impl_->last_patches;
}

Executable::Stats Executable::stats(QueueKind k) const {
  Stats s;
  for (size_t q = 0; q < impl_->stats.size(); q++) {
    if (impl_->queue_kind[q] != k) continue;
    s.calls += impl_->stats[q].calls;
    s.waits += impl_->stats[q].waits;
    s.signals += impl_->stats[q].signals;
  }
  return s;
}

Executable::Stats Executable::stats(const Device& dev, QueueKind k) const {
  for (size_t d = 0; d < impl_->devs.size(); d++) {
    if (impl_->devs[d] != &dev) continue;
    Stats s;
    for (size_t q = 0; q < impl_->stats.size(); q++) {
      if (impl_->queue_device[q] != d || impl_->queue_kind[q] != k) continue;
      s.calls += impl_->stats[q].calls;
      s.waits += impl_->stats[q].waits;
      s.signals += impl_->stats[q].signals;
    }
    return s;
  }
  throw InvalidInput("batch: " + dev.name() + " is not one of the schedule's devices");
}

}  // namespace hcq::batch
