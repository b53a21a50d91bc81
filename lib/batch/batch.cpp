#include "batch/batch.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>

#include "core/error.hpp"

namespace hcq::batch {

namespace {



// Byte-range dependency tracker for one memory object: segments with their last writer and
// the readers since.
struct RangeTracker {
  struct Seg {
    uint64_t end;
    int32_t writer = -1;
    std::vector<int32_t> readers;
  };
  std::map<uint64_t, Seg> segs;

  // Split so that a segment boundary falls at `at` (if a segment spans it).
  void split(uint64_t at) {
    auto it = segs.upper_bound(at);
    if (it == segs.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      Seg tail = it->second;
      it->second.end = at;
      segs.emplace(at, std::move(tail));
    }
  }
  // Record call `c` accessing [a, b); add the calls it must follow to `deps`.
  void access(uint64_t a, uint64_t b, bool write, int32_t c, std::vector<int32_t>& deps) {
    split(a);
    split(b);
    // Fill gaps in [a, b) with fresh segments so every byte is covered.
    uint64_t pos = a;
    auto it = segs.lower_bound(a);
    while (pos < b) {
      if (it == segs.end() || it->first > pos) {
        uint64_t gap_end = it == segs.end() ? b : std::min(b, it->first);
        it = segs.emplace_hint(it, pos, Seg{gap_end, -1, {}});
      }
      Seg& s = it->second;
      if (s.writer >= 0) deps.push_back(s.writer);
      if (write) {
        deps.insert(deps.end(), s.readers.begin(), s.readers.end());
        s.writer = c;
        s.readers.clear();
      } else {
        s.readers.push_back(c);
      }
      pos = s.end;
      ++it;
    }
  }
};

}  // namespace

// ---- Schedule -------------------------------------------------------------------------

Mem Schedule::input(uint64_t size) {
  if (size == 0) throw InvalidInput("batch: an input must have a size");
  input_sizes_.push_back(size);
  return {nullptr, int32_t(input_sizes_.size() - 1), size};
}

void Schedule::check(const Mem& m, uint64_t off, uint64_t size, const std::string& what) const {
  if (m.bound) {
    if (m.bound->device() != dev_)
      throw InvalidInput("batch on " + dev_->name() + ": " + what + " uses a buffer of " +
                         m.bound->device()->name() + " (schedules span one device)");
  } else if (m.input < 0 || size_t(m.input) >= input_sizes_.size()) {
    throw InvalidInput("batch: " + what + " uses an input this schedule did not declare");
  }
  if (off > m.size || size > m.size - off)
    throw InvalidInput("batch: " + what + ": range [" + std::to_string(off) + ", " +
                       std::to_string(off) + "+" + std::to_string(size) +
                       ") is outside the buffer of " + std::to_string(m.size) + " bytes");
}

size_t Schedule::launch(const Program& p, Dim3 grid, Dim3 block, std::vector<Arg> args,
                        std::vector<Access> accesses) {
  const std::string what = "launch #" + std::to_string(calls_.size()) + " ('" +
                           p.kernel().name + "')";
  if (&p.device() != dev_)
    throw InvalidInput("batch on " + dev_->name() + ": " + what + " was loaded on " +
                       p.device().name());
  if (grid.count() == 0 || block.count() == 0)
    throw InvalidInput("batch: " + what + " has an empty grid or workgroup");
  std::vector<const KernelArg*> want;
  for (auto& a : p.kernel().args)
    if (a.kind != KernelArg::Kind::Hidden) want.push_back(&a);
  if (want.size() != args.size())
    throw InvalidInput("batch: " + what + " takes " + std::to_string(want.size()) +
                       " arguments, " + std::to_string(args.size()) + " given");
  for (size_t i = 0; i < args.size(); i++) {
    bool is_buf = args[i].kind_ == Arg::Kind::Buffer;
    std::string which = what + " argument " + std::to_string(i);
    if (is_buf != (want[i]->kind == KernelArg::Kind::Buffer))
      throw InvalidInput("batch: " + which + (is_buf ? " is a value" : " is a buffer") +
                         " in the kernel");
    if (is_buf) {
      check(args[i].mem_, args[i].offset_, 0, which);
    } else {
      if (args[i].kind_ == Arg::Kind::Scalar &&
          (args[i].slot_ >= scalar_bytes_.size() ||
           scalar_bytes_[args[i].slot_] != args[i].bytes_.size()))
        throw InvalidInput("batch: " + which + " uses an undeclared scalar");
      if (args[i].bytes_.size() != want[i]->size)
        throw InvalidInput("batch: " + which + " is " + std::to_string(want[i]->size) +
                           " bytes, got " + std::to_string(args[i].bytes_.size()));
    }
  }
  if (accesses.empty()) {
    // From the metadata: const buffers are read, the rest read and written, each from the
    // argument's offset to the end of its buffer.
    for (size_t i = 0; i < args.size(); i++) {
      const Arg& a = args[i];
      if (a.kind_ != Arg::Kind::Buffer) continue;
      bool read_only = want[i]->access == KernelArg::Access::ReadOnly;
      accesses.push_back({a.mem_, a.offset_, a.mem_.size - a.offset_, !read_only});
    }
  }
  for (auto& a : accesses) check(a.mem, a.offset, a.size, what);
  Call c;
  c.launch = true;
  c.program = &p;
  c.grid = grid;
  c.block = block;
  c.args = std::move(args);
  c.accesses = std::move(accesses);
  calls_.push_back(std::move(c));
  return calls_.size() - 1;
}

size_t Schedule::copy(Mem dst, uint64_t dst_offset, Mem src, uint64_t src_offset, uint64_t size) {
  const std::string what = "copy #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " copies 0 bytes");
  check(dst, dst_offset, size, what + " destination");
  check(src, src_offset, size, what + " source");
  Call c;
  c.launch = false;
  c.dst = dst;
  c.src = src;
  c.dst_offset = dst_offset;
  c.src_offset = src_offset;
  c.size = size;
  c.accesses = {Access::read(src, src_offset, size), Access::written(dst, dst_offset, size)};
  calls_.push_back(std::move(c));
  return calls_.size() - 1;
}

// ---- Executable -----------------------------------------------------------------------

struct Executable::Impl {
  Device* dev;
  ComputeQueue compute;
  CopyQueue copy;
  bool copy_used = false;
  Signal signals[2];          // one per queue: the position of its latest signalling call
  Buffer kernargs;            // every launch's arguments, written at link time and patched
  // Patch table. Copy addresses and kernarg words of each input; kernarg bytes of scalars.
  struct SitePatch {
    Queue* queue;
    PatchSite site;
  };
  struct InputPatches {
    std::vector<SitePatch> sites;
    std::vector<std::pair<uint64_t*, uint64_t>> words;  // kernarg word, offset added
    uint64_t size;
    uint64_t bound_va = 0;
  };
  struct ScalarPatches {
    std::vector<std::byte*> at;
    uint32_t bytes;
    uint64_t value = 0;
    bool set = false;
  };
  std::vector<InputPatches> inputs;
  std::vector<ScalarPatches> scalars;
  // Per queue, the commands written into the ring around its command buffer at each run:
  // the wait for the device timeline's previous value, and (compute) the signal of the next.
  CommandStream before[2], after[2];
  std::vector<PatchSite> timeline_waits[2], timeline_signal;
  Stats stats[2];
  // Profiling: two timestamps per call, names, queues, and the cross-queue waits as edges.
  bool profile = false;
  Buffer timestamps;
  std::vector<std::string> names;
  std::vector<uint8_t> call_queue;
  std::vector<std::pair<size_t, size_t>> edges;  // producer call -> waiting call
  int64_t clock_offset_ns[2] = {0, 0};
  std::string device_name;
  uint64_t last_done = 0;
  size_t last_patches = 0;

  explicit Impl(Device& d) : dev(&d), compute(d), copy(d) {}
  ~Impl();
  size_t user_inputs = 0;  // inputs [0, user_inputs) are the schedule's; the rest its buffers
};

Executable::Executable(std::shared_ptr<Impl> impl, std::vector<const Buffer*> bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {}
Executable::Executable(Executable&&) noexcept = default;
Executable& Executable::operator=(Executable&&) noexcept = default;
Executable::~Executable() = default;

Executable::Impl::~Impl() {
  if (!last_done) return;
  try {
    dev->timeline().wait(last_done, std::chrono::milliseconds(2000));
  } catch (const Error&) {
    // Destroyed while a run is stuck: the device reports that to its own waiters.
  }
}

Executable Schedule::compile() const { return compile(CompileOptions{}); }

namespace {
// Live compilations by device and structure.
std::mutex cache_mu;
std::map<std::pair<const Device*, std::string>, std::weak_ptr<Executable::Impl>> cache;
}  // namespace

Executable Schedule::compile(const CompileOptions& options) const {
  // Every buffer bound at recording becomes an input slot after the declared ones, numbered
  // by first use, so the structure key below does not depend on which buffers they are.
  std::vector<const Buffer*> bound;
  std::map<const Buffer*, uint32_t> bound_slot;
  auto slot_of = [&](const Mem& m) -> uint32_t {
    if (!m.bound) return uint32_t(m.input);
    auto [it, fresh] = bound_slot.emplace(m.bound, uint32_t(input_sizes_.size() + bound.size()));
    if (fresh) bound.push_back(m.bound);
    return it->second;
  };
  std::string key;
  auto put = [&](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), 8); };
  put(options.profile);
  put(input_sizes_.size());
  for (uint64_t s : input_sizes_) put(s);
  put(scalar_bytes_.size());
  for (uint32_t s : scalar_bytes_) put(s);
  for (const Call& c : calls_) {
    put(c.launch);
    if (c.launch) {
      put(reinterpret_cast<uintptr_t>(&c.program->kernel()));
      for (Dim3 d : {c.grid, c.block}) put(uint64_t(d.x) | uint64_t(d.y) << 21 | uint64_t(d.z) << 42);
      for (const Arg& a : c.args) {
        put(uint64_t(a.kind_));
        if (a.kind_ == Arg::Kind::Buffer) {
          put(slot_of(a.mem_));
          put(a.offset_);
        } else if (a.kind_ == Arg::Kind::Scalar) {
          put(a.slot_);
        } else {
          put(a.bytes_.size());
          key.append(reinterpret_cast<const char*>(a.bytes_.data()), a.bytes_.size());
        }
      }
    } else {
      put(slot_of(c.dst));
      put(c.dst_offset);
      put(slot_of(c.src));
      put(c.src_offset);
      put(c.size);
    }
    for (const Access& a : c.accesses) {
      put(slot_of(a.mem));
      put(a.offset);
      put(a.size);
      put(a.write);
    }
  }
  for (const Buffer* b : bound) put(b->size());

  std::lock_guard cache_lock(cache_mu);
  auto cache_key = std::make_pair(static_cast<const Device*>(dev_), key);
  if (auto hit = cache.find(cache_key); hit != cache.end())
    if (auto impl = hit->second.lock()) return Executable(std::move(impl), std::move(bound));

  auto impl = std::make_shared<Executable::Impl>(*dev_);
  Executable::Impl& x = *impl;
  x.user_inputs = input_sizes_.size();
  const size_t n = calls_.size();

  // 1. Queue of each call, its position there, and the calls it must follow.
  std::vector<uint8_t> queue(n);
  std::vector<uint32_t> pos(n);
  uint32_t count[2] = {0, 0};
  std::map<uint32_t, RangeTracker> trackers;
  std::vector<std::vector<int32_t>> deps(n);
  for (size_t i = 0; i < n; i++) {
    const Call& c = calls_[i];
    queue[i] = uint8_t(c.launch ? QueueKind::Compute : QueueKind::Copy);
    pos[i] = ++count[queue[i]];
    for (auto& a : c.accesses)
      trackers[slot_of(a.mem)].access(a.offset, a.offset + a.size, a.write, int32_t(i), deps[i]);
  }
  // 2. One wait per producer queue, for the latest value needed; the producers signal.
  std::vector<uint32_t> wait_for(n, 0);  // value of the other queue's signal to wait for
  std::vector<int32_t> wait_on(n, -1);   // ...which the call `wait_on` signals
  std::vector<bool> signals(n, false);
  uint32_t waited[2] = {0, 0};
  for (size_t i = 0; i < n; i++) {
    int other = 1 - queue[i];
    int32_t latest = -1;
    for (int32_t d : deps[i])
      if (queue[d] == other && (latest < 0 || pos[d] > pos[latest])) latest = d;
    if (latest >= 0 && pos[latest] > waited[queue[i]]) {
      // Waits from one queue on the other are monotonic: a later one covers earlier ones.
      wait_for[i] = pos[latest];
      wait_on[i] = latest;
      waited[queue[i]] = pos[latest];
      signals[latest] = true;
    }
  }
  (void)waited;

  // 3. Kernel arguments: one host-visible block, values written now.
  std::vector<uint64_t> karg_off(n, 0);
  uint64_t karg_bytes = 0;
  for (size_t i = 0; i < n; i++)
    if (calls_[i].launch) {
      const auto& k = calls_[i].program->kernel();
      karg_bytes = (karg_bytes + std::max<uint64_t>(k.kernarg_align, 16) - 1) /
                   std::max<uint64_t>(k.kernarg_align, 16) * std::max<uint64_t>(k.kernarg_align, 16);
      karg_off[i] = karg_bytes;
      karg_bytes += std::max<uint32_t>(k.kernarg_size, 16);
    }
  if (karg_bytes) {
    x.kernargs = dev_->allocate(karg_bytes, MemoryKind::Host);
    std::memset(x.kernargs.host(), 0, karg_bytes);
  }
  x.inputs.resize(input_sizes_.size() + bound.size());
  for (size_t s = 0; s < input_sizes_.size(); s++) x.inputs[s].size = input_sizes_[s];
  for (size_t s = 0; s < bound.size(); s++) x.inputs[input_sizes_.size() + s].size = bound[s]->size();
  x.scalars.resize(scalar_bytes_.size());
  for (size_t s = 0; s < scalar_bytes_.size(); s++) x.scalars[s].bytes = scalar_bytes_[s];

  // 4. Encode both queues once, straight into device memory (sized generously; a larger
  // stream still works through host memory).
  uint64_t estimate[2] = {64, 64};
  for (size_t i = 0; i < n; i++)
    estimate[queue[i]] += calls_[i].launch ? 160 : 64 + 8 * (calls_[i].size >> 22);
  x.compute.encode_in_place(estimate[0]);
  if (count[int(QueueKind::Copy)]) x.copy.encode_in_place(estimate[1]);
  for (int q = 0; q < 2; q++) x.signals[q] = dev_->new_signal(0);
  x.device_name = dev_->name();
  x.call_queue = queue;
  if (options.profile) {
    x.profile = true;
    x.timestamps = dev_->allocate(std::max<size_t>(n, 1) * 16, MemoryKind::Host);
    std::memset(x.timestamps.host(), 0, x.timestamps.size());
    for (int q = 0; q < 2; q++)
      if (q == int(QueueKind::Compute) || count[int(QueueKind::Copy)])
        x.clock_offset_ns[q] = dev_->clock_offset_ns(QueueKind(q));
  }
  for (size_t i = 0; i < n; i++) {
    const Call& c = calls_[i];
    x.names.push_back(c.launch ? c.program->kernel().name
                               : "copy " + std::to_string(c.size) + " bytes");
    if (wait_on[i] >= 0) x.edges.push_back({size_t(wait_on[i]), i});
  }
  x.copy_used = count[int(QueueKind::Copy)] > 0;
  const Signal& tl = dev_->timeline().signal();
  Queue* queues[2] = {&x.compute, &x.copy};
  for (int q = 0; q < 2; q++) {
    std::vector<PatchSite> sites;
    dev_->encoder(QueueKind(q)).wait(x.before[q], tl.va(), 0, sites);
    for (auto& s : sites)
      if (s.role == PatchRole::WaitValue) x.timeline_waits[q].push_back(s);
  }
  x.compute.memory_barrier();
  for (size_t i = 0; i < n; i++) {
    const Call& c = calls_[i];
    int q = queue[i];
    Queue& Q = *queues[q];
    if (wait_for[i]) {
      Q.wait(x.signals[1 - q], wait_for[i]);
      x.stats[q].waits++;
    }
    if (x.profile) Q.timestamp_at(x.timestamps.va() + i * 16);
    if (c.launch) {
      auto* args = static_cast<std::byte*>(x.kernargs.host()) + karg_off[i];
      const auto& k = c.program->kernel();
      size_t a = 0;
      for (auto& ka : k.args) {
        if (ka.kind == KernelArg::Kind::Hidden) continue;
        const Arg& arg = c.args[a++];
        std::byte* at = args + ka.offset;
        if (arg.kind_ == Arg::Kind::Buffer) {
          x.inputs[slot_of(arg.mem_)].words.push_back({reinterpret_cast<uint64_t*>(at), arg.offset_});
        } else if (arg.kind_ == Arg::Kind::Scalar) {
          x.scalars[arg.slot_].at.push_back(at);
        } else {
          std::memcpy(at, arg.bytes_.data(), arg.bytes_.size());
        }
      }
      x.compute.memory_barrier();
      x.compute.exec(*c.program, x.kernargs.va() + karg_off[i], c.grid, c.block);
    } else {
      // Addresses are patched in at the first run (offsets stand in until then).
      x.copy.copy(c.dst_offset, c.src_offset, c.size);
      for (auto& s : x.copy.sites_of(x.copy.commands() - 1)) {
        const Mem& m = s.role == PatchRole::CopyDst ? c.dst : c.src;
        PatchSite site = s;
        site.add += s.role == PatchRole::CopyDst ? c.dst_offset : c.src_offset;
        x.inputs[slot_of(m)].sites.push_back({&x.copy, site});
      }
    }
    x.stats[q].calls++;
    if (x.profile) Q.timestamp_at(x.timestamps.va() + i * 16 + 8);
    if (signals[i]) {
      Q.signal(x.signals[q], pos[i], false);
      x.stats[q].signals++;
    }
  }
  // 5. Close: the copy queue reports its end; the compute queue waits for it and advances
  // the device timeline (patched with each run's value).
  if (x.copy_used) {
    x.copy.signal(x.signals[int(QueueKind::Copy)], count[int(QueueKind::Copy)] + 1, false);
    x.compute.wait(x.signals[int(QueueKind::Copy)], count[int(QueueKind::Copy)] + 1);
  }
  {
    std::vector<PatchSite> sites;
    dev_->encoder(QueueKind::Compute).signal(x.after[0], tl.va(), 0, true, sites);
    for (auto& s : sites)
      if (s.role == PatchRole::SignalValue) x.timeline_signal.push_back(s);
  }
  x.compute.bind();
  if (x.copy_used) x.copy.bind();
  cache[cache_key] = impl;
  for (auto it = cache.begin(); it != cache.end();)  // forget compilations no one holds
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  return Executable(std::move(impl), std::move(bound));
}

uint64_t Executable::run(const Bindings& b, std::chrono::milliseconds fence_timeout) {
  Impl& x = *impl_;
  Device& dev = *x.dev;
  // Fence on the previous run: its command buffers and signals are about to be rewritten.
  if (x.last_done) {
    try {
      dev.timeline().wait(x.last_done, fence_timeout);
    } catch (const TimeoutError& e) {
      throw TimeoutError(dev.name() + ": batch re-run: the previous run (timeline value " +
                         std::to_string(x.last_done) + ") has not finished after " +
                         std::to_string(fence_timeout.count()) + " ms (" + e.what() + ")");
    }
  }
  size_t patches = 0;
  auto bind = [&](uint32_t slot, const Buffer* buf) {
    auto& in = x.inputs[slot];
    if (buf->device() != &dev)
      throw InvalidInput("batch: input " + std::to_string(slot) + " is bound to a buffer of " +
                         buf->device()->name() + ", the schedule runs on " + dev.name());
    if (buf->size() < in.size)
      throw InvalidInput("batch: input " + std::to_string(slot) + " needs " +
                         std::to_string(in.size) + " bytes, the buffer has " +
                         std::to_string(buf->size()));
    if (buf->va() == in.bound_va) return;  // unchanged: nothing to write
    in.bound_va = buf->va();
    for (auto& s : in.sites) s.queue->patch_site(s.site, in.bound_va);
    for (auto& [word, add] : in.words) *word = in.bound_va + add;
    patches += in.sites.size() + in.words.size();
  };
  for (size_t i = 0; i < bound_.size(); i++) bind(uint32_t(x.user_inputs + i), bound_[i]);
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
    for (std::byte* at : sc.at) std::memcpy(at, &bits, sc.bytes);
    patches += sc.at.size();
  }
  if (!x.last_done) {  // the first run binds everything
    for (size_t s = 0; s < x.inputs.size(); s++)
      if (!x.inputs[s].bound_va)
        throw InvalidInput("batch: input " + std::to_string(s) + " is not bound");
    for (size_t s = 0; s < x.scalars.size(); s++)
      if (!x.scalars[s].set)
        throw InvalidInput("batch: scalar " + std::to_string(s) + " is not set");
  }
  // Re-arm: the queues' signals count from zero again in every run.
  x.signals[0].set(0);
  x.signals[1].set(0);
  uint64_t next;
  {
    std::lock_guard lk(dev.submit_mutex());
    auto [prev, nxt] = dev.timeline().advance();
    next = nxt;
    for (int q = 0; q < 2; q++)
      for (auto& s : x.timeline_waits[q]) x.before[q].patch(s, prev);
    for (auto& s : x.timeline_signal) x.after[0].patch(s, next);
    auto span = [](const CommandStream& c) {
      return std::span<const uint32_t>(c.data(), c.size());
    };
    if (x.copy_used) x.copy.submit(span(x.before[1]), {});
    x.compute.submit(span(x.before[0]), span(x.after[0]));
  }
  x.last_done = next;
  x.last_patches = patches;
  return next;
}

void Executable::wait(std::chrono::milliseconds timeout) const {
  if (impl_->last_done) impl_->dev->timeline().wait(impl_->last_done, timeout);
}

size_t Executable::last_patch_count() const { return impl_->last_patches; }

std::vector<Executable::CallTime> Executable::profile() const {
  const Impl& x = *impl_;
  if (!x.profile) throw InvalidInput("batch: profile() needs a schedule compiled with profile");
  if (!x.last_done) throw InvalidInput("batch: profile() before the first run");
  wait();
  std::vector<CallTime> out;
  const auto* ts = static_cast<const uint64_t*>(x.timestamps.host());
  const double ns_per_tick = 1e9 / double(x.dev->properties().timestamp_hz);
  for (size_t i = 0; i < x.names.size(); i++) {
    int q = x.call_queue[i];
    auto host = [&](uint64_t t) { return int64_t(double(t) * ns_per_tick) + x.clock_offset_ns[q]; };
    out.push_back({i, QueueKind(q), x.names[i], host(ts[2 * i]), host(ts[2 * i + 1])});
  }
  return out;
}

namespace {
std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o + "\"";
}
}  // namespace

void Executable::write_trace(std::ostream& out) const {
  auto calls = profile();
  const Impl& x = *impl_;
  int64_t t0 = INT64_MAX;
  for (auto& c : calls) t0 = std::min(t0, c.start_ns);
  auto us = [&](int64_t ns) { return std::to_string(double(ns - t0) / 1000.0); };
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":"
      << json_string(x.device_name) << "}},\n";
  for (int q = 0; q < 2; q++)
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << q
        << ",\"args\":{\"name\":" << json_string(std::string(to_string(QueueKind(q))) + " queue")
        << "}},\n";
  for (auto& c : calls)
    out << "{\"name\":" << json_string(c.name) << ",\"cat\":\"call\",\"ph\":\"X\",\"pid\":1,"
        << "\"tid\":" << int(c.queue) << ",\"ts\":" << us(c.start_ns)
        << ",\"dur\":" << std::to_string(double(std::max<int64_t>(0, c.end_ns - c.start_ns)) / 1000.0)
        << ",\"args\":{\"call\":" << c.call << "}},\n";
  size_t id = 0;
  for (auto& [from, to] : x.edges) {  // a flow arrow from producer end to consumer start
    const auto& a = calls[from];
    const auto& b = calls[to];
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":" << id
        << ",\"pid\":1,\"tid\":" << int(a.queue) << ",\"ts\":" << us(a.end_ns) << "},\n";
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id++
        << ",\"pid\":1,\"tid\":" << int(b.queue) << ",\"ts\":" << us(b.start_ns) << "},\n";
  }
  out << "{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":0}\n]}\n";
}

Executable::Stats Executable::stats(QueueKind k) const { return impl_->stats[int(k)]; }

}  // namespace hcq::batch
