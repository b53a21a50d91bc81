#include "core/device.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <optional>
#include <sstream>
#include <thread>

#include "core/capture.hpp"
#include "core/deadline.hpp"
#include "core/error.hpp"
#include "core/queue.hpp"
#include "core/registry.hpp"
#include "os/address_window.hpp"

namespace hcq {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSignalBytes = Signal::kBytes;
constexpr uint32_t kSignalsPerPage = kPage / kSignalBytes;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }


}  // namespace

// ---- Buffer ---------------------------------------------------------------------------

Device& DeviceLink::checked(const char* what) const {
  if (Device* d = get()) return *d;
  throw Error(std::string(what) + " of " + name_ + " used after " + name_ +
              " was closed (a handle must not outlive its Device)");
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    link_ = std::move(o.link_);
    a_ = o.a_;
    size_ = o.size_;
    o.link_.reset();
    o.a_ = Allocation{};  // a moved-from handle has no address left to hand out
    o.size_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (!link_) return;
  {
    std::lock_guard lk(link_->mu_);
    if (Device* d = link_->get()) d->release(a_);
  }
  link_.reset();
  // The next allocation may get this address: a freed handle must not pass it on.
  a_ = Allocation{};
  size_ = 0;
}

namespace {
// Frees `a`; false, with the range left allocated, where the driver cannot (its device is
// gone). For the paths that run in destructors.
bool free_or_keep(DeviceDriver& driver, const Allocation& a) noexcept {
  try {
    driver.free(a);
    return true;
  } catch (const Error&) {
    return false;
  }
}
}  // namespace

// ---- ShadowMemory ---------------------------------------------------------------------

ShadowMemory::ShadowMemory(Device& dev, uint64_t size) {
  if (dev.properties().caps.cpu_maps_memory) {
    buf_ = dev.allocate_visible(size);
    host_ = static_cast<std::byte*>(buf_.host());
    return;
  }
  buf_ = dev.allocate(size, MemoryKind::Device);
  copy_ = std::make_unique<std::byte[]>(size);  // zeroed
  host_ = copy_.get();
  port_ = &dev.driver();
}

void ShadowMemory::reset() {
  buf_.reset();
  copy_.reset();
  host_ = nullptr;
  port_ = nullptr;
  dirty_.clear();
}

void ShadowMemory::add_dirty(uint64_t offset, uint64_t size) {
  if (size == 0) return;
  uint64_t end = offset + size;
  // Merge with every range it overlaps or touches: the first that ends at or after `offset`
  // onwards, while they start at or before `end`.
  auto it = dirty_.upper_bound(offset);
  if (it != dirty_.begin() && std::prev(it)->second >= offset) --it;
  while (it != dirty_.end() && it->first <= end) {
    offset = std::min(offset, it->first);
    end = std::max(end, it->second);
    it = dirty_.erase(it);
  }
  dirty_.emplace(offset, end);
}

void ShadowMemory::write_dirty() {
  // Cleared first: a write that throws leaves nothing half-marked to repeat.
  auto ranges = std::move(dirty_);
  dirty_.clear();
  for (auto& [begin, end] : ranges)
    port_->write_memory(va() + begin, {host_ + begin, end - begin});
}

void ShadowMemory::refresh(uint64_t offset, uint64_t size) {
  if (port_) port_->read_memory(va() + offset, {host_ + offset, size});
}

// ---- Signal ---------------------------------------------------------------------------

Signal& Signal::operator=(Signal&& o) noexcept {
  if (this != &o) {
    reset();
    link_ = std::move(o.link_);
    page_ = std::move(o.page_);
    slot_ = o.slot_;
    port_ = o.port_;
    va_ = o.va_;
    id_ = o.id_;
    o.link_.reset();
  }
  return *this;
}

void Signal::reset() {
  if (!link_) return;
  if (page_) {  // imported: its page goes back as a buffer does
    page_.reset();
    link_.reset();
    return;
  }
  {
    std::lock_guard lk(link_->mu_);
    if (Device* d = link_->get()) d->release_signal(id_);
  }
  link_.reset();
}

void Signal::throw_detached() const {
  if (!link_) throw InvalidInput("use of an empty Signal");
  link_->checked(("signal " + std::to_string(id_)).c_str());
  throw Error("signal " + std::to_string(id_) + ": its device was closed");  // not reached
}

uint64_t Signal::port_read(uint64_t offset) const {
  uint64_t v = 0;
  port_->read_memory(va_ + offset, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

void Signal::wake_host_waiters() const {
  if (Device* d = link_->get()) d->wake_host_waiters();
}

void Signal::port_write(uint64_t v) { port_->write_memory(va_, std::as_bytes(std::span(&v, 1))); }

Device& Signal::device() const {
  if (!link_) throw InvalidInput("device() of an empty Signal");
  return link_->checked(("signal " + std::to_string(id_)).c_str());
}

void Signal::wait(uint64_t v, std::chrono::milliseconds timeout) const {
  wait_for(v, timeout);
  // The CPU may now read what the GPU left and write over it: a full capture records the
  // buffers here, so a replay tells the GPU's results from the CPU's writes that follow.
  if (capture::enabled()) capture::waited(device());
}

void Signal::wait_for(uint64_t v, std::chrono::milliseconds timeout) const {
  using clock = std::chrono::steady_clock;
  Device* const dev = &device();  // throws once the device was closed
  if (value() >= v) return;
  auto start = clock::now();
  // Spin first: a round trip on a busy device completes within microseconds. Not through
  // the port: each read there is a transport request.
  for (int i = 0; i < (port_ ? 0 : 4000); i++) {
    if (value() >= v) return;
    __builtin_ia32_pause();
  }
  auto deadline = start + bounded_wait(timeout);  // milliseconds::max(): no limit
  // Counted before the value is read again, so a host set() after that read wakes the sleep
  // (set() stores, then loads the count; this adds, then loads the value).
  struct HostWaiting {
    explicit HostWaiting(DeviceLink& l) : n(l.host_waiters_) {
      n.fetch_add(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    ~HostWaiting() { n.fetch_sub(1, std::memory_order_relaxed); }
    std::atomic<uint32_t>& n;
  } waiting(*link_);
  // Sleeps in slices: an imported signal (set by another process) or a driver whose wait a
  // host set() cannot end is looked at again every millisecond.
  const std::chrono::milliseconds slice(page_ || !dev->driver().can_wake_waiters() ? 1 : 100);
  for (;;) {
    uint64_t gen = dev->irq_generation();
    const uint64_t seen = value();
    if (seen >= v) return;
    auto now = clock::now();
    if (now >= deadline) {
      dev->driver().check_faults();
      // The value the timeout was decided on: the report decodes the queued packets (seconds
      // under the sanitizers), and work that ends meanwhile must not read as "value is v".
      std::string report = dev->driver().hang_report();
      throw TimeoutError(dev->name() + ": signal " + std::to_string(id_) + " (va " + hex(va_) +
                         ") timed out after " + std::to_string(timeout.count()) +
                         " ms: waiting for value >= " + std::to_string(v) + ", value is " +
                         std::to_string(seen) + (report.empty() ? "" : "\n" + report));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    // Another process's GPU sets an imported signal without interrupting this device.
    dev->wait_interrupt(std::clamp(left, std::chrono::milliseconds(1), slice), gen);
  }
}

// ---- Device ---------------------------------------------------------------------------

std::unique_ptr<Device> Device::open(const std::string& name) { return open(name, Options{}); }

std::unique_ptr<Device> Device::open(const std::string& name, const Options& opt) {
  std::string want = name;
  if (want.empty() || want == "auto") {
    auto all = list();
    auto it = std::find_if(all.begin(), all.end(), [](auto& l) { return !l.emulated; });
    want = it != all.end() ? it->name : "emu:gfx1100";
  }
  // The driver reserves its addresses as it opens: where opt.va_base says, when it says.
  os::WantedHeapBase wanted(opt.va_base);
  for (auto& f : builtin_drivers())
    if (auto drv = f.open(want)) {
      if (opt.va_base && drv->va_base() != opt.va_base)  // a driver that could not place it
        throw InvalidInput(want + ": cannot place its GPU addresses at " + hex(opt.va_base));
      return std::make_unique<Device>(std::move(drv), opt);
    }
  std::string known;
  for (auto& l : list()) known += (known.empty() ? "" : ", ") + l.name;
  throw InvalidInput("unknown device '" + name + "' (devices here: " + known + ")");
}

std::vector<Device::Listing> Device::list() {
  std::vector<Listing> real, emu;
  for (auto& f : builtin_drivers())
    for (auto& l : f.list()) (l.emulated ? emu : real).push_back(l);
  real.insert(real.end(), emu.begin(), emu.end());
  return real;
}

Device::Device(std::unique_ptr<DeviceDriver> driver, const Options& opt)
    : driver_(std::move(driver)),
      opt_(opt),
      link_(std::make_shared<DeviceLink>()),
      heap_(driver_->va_base(), driver_->va_size(), driver_->properties().name),
      cache_(opt.buffer_cache_bytes) {
  static std::atomic<uint64_t> opened{0};
  serial_ = ++opened;
  link_->dev_ = this;
  link_->name_ = driver_->properties().name;
  const bool copy_engine = driver_->properties().caps.copy_engine;
  if (opt.copy_queues == 0 && copy_engine)
    throw InvalidInput(driver_->properties().name + ": at least one copy queue is needed");
  compute_queue_ = driver_->create_queue(QueueKind::Compute);
  // Without a copy engine there are no copy queues: copies are host copies (UMA) or kernels.
  const uint32_t max_copy = driver_->properties().caps.max_copy_queues;
  const uint32_t copies = max_copy ? std::min(opt.copy_queues, max_copy) : opt.copy_queues;
  for (uint32_t i = 0; copy_engine && i < copies; i++)
    copy_queues_.push_back(driver_->create_queue(QueueKind::Copy));
  for (auto k : {QueueKind::Compute, QueueKind::Copy}) {
    encoders_[int(k)] = driver_->encoder(k);
  }
  timeline_.signal_ = new_signal(opt.timeline_start);
  timeline_.last_ = opt.timeline_start;
  kernarg_mem_ = ShadowMemory(*this, opt.kernarg_ring_bytes);
  const Capabilities& caps = properties().caps;
  uint64_t staging_bytes = opt.staging_ring_bytes;
  if (caps.cpu_maps_memory) {
    staging_mem_ = allocate_visible(staging_bytes);
    // Fault the rings' pages in now, so the first copies and launches run at full speed.
    std::memset(kernarg_mem_.host(), 0, kernarg_mem_.size());
    std::memset(staging_mem_.host(), 0, staging_mem_.size());
  } else if (caps.host_window_bytes && caps.host_reachable) {
    // Host memory the port writes and the copy queue reads (a USB bridge's SRAM): half the
    // window at most, so Host allocations of the caller still fit.
    staging_bytes = std::min(staging_bytes, caps.host_window_bytes / 2 / kPage * kPage);
    staging_mem_ = allocate(staging_bytes, MemoryKind::Host);
  }
  auto wait = [this](uint64_t tag) { timeline_.wait(tag); };
  kernarg_ring_ = std::make_unique<TaggedRing>(opt.kernarg_ring_bytes, wait);
  staging_ring_ = std::make_unique<TaggedRing>(std::max<uint64_t>(staging_bytes, 1), wait);
}

Device::~Device() {
  try {
    synchronize(std::chrono::milliseconds(2000));
  } catch (const Error&) {
    // A faulted or hung device is torn down anyway; the error was reported to its waiter.
  }
  if (capture::enabled()) capture::device_closed(*this);  // the buffers' last contents
  kernarg_mem_.reset();
  staging_mem_.reset();
  timeline_.signal_.reset();
  compute_queue_.reset();
  copy_queues_.clear();
  {
    // Detach the handles still alive (Buffers, Signals, Programs): from now on releasing
    // them does nothing and using them is an Error.
    std::lock_guard lk(link_->mu_);
    link_->dev_ = nullptr;
  }
  // A device that is gone (a USB bridge unplugged) cannot take its page tables back: what it
  // held goes with it, and the process goes on.
  auto free_quietly = [this](const Allocation& a) { free_or_keep(*driver_, a); };
  std::lock_guard lk(mem_mu_);
  {
    std::lock_guard live(live_mu_);
    for (auto& [va, a] : live_) free_quietly(a);  // what detached buffers held
    live_.clear();
  }
  for (auto& a : cache_.drain()) free_quietly(a);
  for (auto& a : signal_pages_) free_quietly(a);
}

Buffer Device::allocate(uint64_t size, MemoryKind kind, bool executable) {
  if (size == 0) throw InvalidInput(name() + ": cannot allocate a buffer of 0 bytes");
  if (kind == MemoryKind::Host && !properties().caps.host_reachable)
    throw InvalidInput(name() + ": cannot allocate host memory: this device cannot reach host "
                                "memory (allocate_visible gives memory the CPU and the device "
                                "both reach)");
  uint64_t rounded = round_up(size, kPage);
  std::lock_guard lk(mem_mu_);
  Allocation a;
  // Cached entries are keyed by size and kind (kind in the low bits of the key).
  if (!executable && cache_.take(rounded | uint64_t(kind), a)) {
    a.kind = kind;
  } else {
    // Large buffers are aligned to 2 MiB so the GPU can use large pages.
    uint64_t align = rounded >= (2u << 20) ? (2u << 20) : kPage;
    uint64_t va = heap_.allocate(rounded, align);
    try {
      try {
        a = driver_->allocate(va, rounded, kind, executable);
      } catch (const Error&) {
        // Out of memory, perhaps only because of what the cache keeps: give that back and
        // try once more.
        if (cache_.cached_bytes() == 0) throw;
        for (auto& old : cache_.drain()) {
          driver_->free(old);
          heap_.free(old.va);
        }
        a = driver_->allocate(va, rounded, kind, executable);
      }
    } catch (...) {
      heap_.free(va);
      throw;
    }
  }
  a.executable = executable;
  return hand_out(a, size);
}

Buffer Device::hand_out(const Allocation& a, uint64_t size) {
  Buffer b;
  b.link_ = link_;
  b.a_ = a;
  b.size_ = size;
  std::lock_guard live(live_mu_);
  live_[a.va] = a;
  return b;
}

Buffer Device::allocate_at(uint64_t va, uint64_t size, MemoryKind kind, bool executable) {
  if (size == 0 || va % kPage || size % kPage)
    throw InvalidInput(name() + ": allocate_at needs a page-aligned address and size, got " +
                       hex(va) + " and " + std::to_string(size) + " bytes");
  if (kind == MemoryKind::Host && !properties().caps.host_reachable)
    throw InvalidInput(name() + ": cannot allocate host memory: this device cannot reach host "
                                "memory");
  std::lock_guard lk(mem_mu_);
  // Cached buffers hold heap ranges that nobody uses: give them back so the range may be free.
  for (auto& old : cache_.drain())
    if (free_or_keep(*driver_, old)) heap_.free(old.va);
  heap_.reserve(va, size);
  Allocation a;
  try {
    a = driver_->allocate(va, size, kind, executable);
  } catch (...) {
    heap_.free(va);
    throw;
  }
  a.executable = executable;
  return hand_out(a, size);
}

MemoryKind Device::visible_kind() const {
  return properties().caps.host_reachable ? MemoryKind::Host : MemoryKind::Device;
}

void Device::check_visible(const void* host, const char* what) const {
  if (host) return;
  throw Error(name() + ": " + what + " must be memory the CPU and the device share, but " +
              (properties().caps.host_reachable
                   ? "its host memory is not CPU-visible"
                   : "it cannot reach host memory and its device memory is not CPU-visible "
                     "(a BAR too small to map it)"));
}

Buffer Device::allocate_visible(uint64_t size) {
  Buffer b = allocate(size, visible_kind());
  check_visible(b.host(), "memory from allocate_visible");
  return b;
}

std::vector<Device::LiveBuffer> Device::live_buffers() const {
  std::lock_guard live(live_mu_);
  std::vector<LiveBuffer> out;
  out.reserve(live_.size() + live_signal_pages_.size());
  for (auto& [va, a] : live_)
    out.push_back({a.va, a.size, a.host, a.kind, a.executable, false, a.user});
  for (auto& a : live_signal_pages_)
    out.push_back({a.va, a.size, a.host, a.kind, false, true, false});
  std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.va < y.va; });
  return out;
}

Buffer Device::map_host(void* ptr, uint64_t size) {
  auto addr = reinterpret_cast<uint64_t>(ptr);
  if (!ptr || size == 0 || addr % kPage || size % kPage)
    throw InvalidInput(name() + ": map_host needs a page-aligned address and size, got " +
                       hex(addr) + " and " + std::to_string(size) + " bytes");
  if (!properties().caps.host_reachable)
    throw InvalidInput(name() + ": this device cannot reach host memory");
  return hand_out(driver_->map_user(ptr, size), size);
}

void Device::release(Allocation a) {
  {
    std::lock_guard live(live_mu_);
    live_.erase(a.va);
  }
  // Called from Buffer's destructor: a driver that cannot free (its device is gone, a USB
  // bridge unplugged) keeps the range, and the Buffer still goes.
  auto free_quietly = [this](const Allocation& old) { return free_or_keep(*driver_, old); };
  if (a.user) {  // the caller's memory: unmap it, nothing to cache
    std::lock_guard lk(mem_mu_);
    free_quietly(a);
    return;
  }
  if (a.imported) {  // another process's memory: never handed out again
    std::lock_guard lk(mem_mu_);
    if (free_quietly(a)) heap_.free(a.va);
    return;
  }
  std::lock_guard lk(mem_mu_);
  for (auto& old : cache_.put(a.size | uint64_t(a.kind), a))
    if (free_quietly(old)) heap_.free(old.va);
}

Signal Device::new_signal(uint64_t initial) {
  // Where the CPU cannot map device memory, signals live in device memory read through the
  // port (a USB bridge's host window is not readable by the CPU).
  const bool mapped = properties().caps.cpu_maps_memory;
  std::lock_guard lk(mem_mu_);
  if (free_signal_slots_.empty()) {
    uint64_t va = heap_.allocate(kPage, kPage);
    Allocation page;
    try {
      page = driver_->allocate(va, kPage, mapped ? visible_kind() : MemoryKind::Device, false);
    } catch (...) {
      heap_.free(va);
      throw;
    }
    if (mapped && !page.host) {
      driver_->free(page);
      heap_.free(va);
      check_visible(nullptr, "a signal page");
    }
    signal_pages_.push_back(page);
    {
      std::lock_guard live(live_mu_);
      live_signal_pages_.push_back(page);
    }
    uint32_t first = uint32_t(signal_pages_.size() - 1) * kSignalsPerPage;
    for (uint32_t i = kSignalsPerPage; i-- > 0;) free_signal_slots_.push_back(first + i);
  }
  uint32_t id = free_signal_slots_.back();
  free_signal_slots_.pop_back();
  auto& page = signal_pages_[id / kSignalsPerPage];
  uint64_t off = uint64_t(id % kSignalsPerPage) * kSignalBytes;
  Signal s;
  s.link_ = link_;
  s.id_ = id;
  s.va_ = page.va + off;
  if (!mapped) {
    s.port_ = driver_.get();
    const uint64_t words[4] = {initial, 0, 0, 0};  // value, pad, timestamp record
    driver_->write_memory(s.va_, std::as_bytes(std::span(words)));
    return s;
  }
  s.slot_ = reinterpret_cast<uint64_t*>(static_cast<char*>(page.host) + off);
  s.slot_[1] = s.slot_[2] = s.slot_[3] = 0;
  s.set(initial);
  return s;
}

IpcHandle Device::export_signal(const Signal& s) {
  if (s.page_)  // an imported one, passed on
    return export_allocation(s.page_.a_, IpcHandle::Kind::Signal, Signal::kBytes,
                             s.va_ - s.page_.va());
  if (!s.slot_)
    throw InvalidInput(name() + ": signal " + std::to_string(s.id_) +
                       " cannot be exported: the CPU does not map its memory");
  Allocation page;
  {
    std::lock_guard lk(mem_mu_);
    page = signal_pages_.at(s.id_ / kSignalsPerPage);
  }
  return export_allocation(page, IpcHandle::Kind::Signal, Signal::kBytes, s.va_ - page.va);
}

void Device::release_signal(uint32_t id) {
  std::lock_guard lk(mem_mu_);
  free_signal_slots_.push_back(id);
}

HwQueue& Device::hw_queue(QueueKind kind, uint32_t index) {
  if (index >= queue_count(kind))
    throw InvalidInput(name() + ": no " + to_string(kind) + " queue " + std::to_string(index) +
                       " (it has " + std::to_string(queue_count(kind)) + ")");
  return kind == QueueKind::Compute ? *compute_queue_ : *copy_queues_[index];
}
Encoder& Device::encoder(QueueKind kind) { return *encoders_[int(kind)]; }

size_t Device::max_indirect_dwords(QueueKind kind, uint32_t index) {
  const HwQueue& q = hw_queue(kind, index);
  const size_t granule = q.indirect_granule_dwords();
  uint64_t limit = q.max_indirect_dwords();
  if (opt_.max_indirect_dwords) limit = std::min(limit, opt_.max_indirect_dwords / granule * granule);
  if (limit == 0)
    throw InvalidInput(name() + ": Options::max_indirect_dwords " +
                       std::to_string(opt_.max_indirect_dwords) + " is below the " +
                       to_string(kind) + " queue's granule of " + std::to_string(granule) +
                       " dwords");
  return size_t(limit);
}

uint64_t Device::kernarg_write(std::span<const std::byte> args, uint64_t align, uint64_t tag) {
  std::lock_guard lk(ring_mu_);
  const uint64_t off = kernarg_ring_->allocate(std::max<uint64_t>(args.size(), 1), align, tag);
  if (!args.empty()) std::memcpy(kernarg_mem_.host() + off, args.data(), args.size());
  kernarg_mem_.mark(off, args.size());
  kernarg_mem_.publish();
  return kernarg_mem_.va() + off;
}

uint64_t Device::irq_generation() {
  std::lock_guard lk(irq_mu_);
  return irq_generation_;
}

void Device::wait_interrupt(std::chrono::milliseconds t, uint64_t seen_generation) {
  std::unique_lock lk(irq_mu_);
  if (irq_generation_ != seen_generation) return;
  if (irq_sleeper_) {
    irq_cv_.wait_for(lk, bounded_wait(t), [&] { return irq_generation_ != seen_generation; });
    return;
  }
  irq_sleeper_ = true;
  lk.unlock();
  auto wake_all = [&] {
    lk.lock();
    irq_sleeper_ = false;
    ++irq_generation_;
    irq_cv_.notify_all();
  };
  try {
    driver_->wait_interrupt(t);
  } catch (...) {
    wake_all();
    throw;
  }
  wake_all();
}

void Device::wake_host_waiters() {
  std::lock_guard lk(irq_mu_);
  ++irq_generation_;
  irq_cv_.notify_all();
  if (irq_sleeper_) driver_->wake_waiters();
}

Device::ClockSync Device::clock_sync(QueueKind kind) {
  ClockSync best{0, INT64_MAX};
  for (int i = 0; i < 5; i++) {  // keep the tightest of a few measurements
    Signal s = new_signal();
    Queue q(*this, kind);
    uint64_t t0, t1, done;
    {
      std::lock_guard lk(submit_mu_);
      auto r = timeline_.reserve();
      q.wait(timeline_.signal(), r.prev).timestamp(s).signal(timeline_.signal(), r.next);
      t0 = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
      q.submit();
      r.commit();
      done = r.next;
    }
    timeline_.wait(done);
    t1 = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    double gpu_ns = double(s.timestamp()) * 1e9 / double(properties().timestamp_hz);
    int64_t offset = int64_t((t0 + t1) / 2) - int64_t(gpu_ns);
    if (int64_t(t1 - t0) < best.window_ns) best = {offset, int64_t(t1 - t0)};
  }
  return best;
}

void Device::synchronize(std::chrono::milliseconds timeout) {
  uint64_t last;
  {
    std::lock_guard lk(submit_mu_);
    last = timeline_.last();
  }
  timeline_.wait(last, timeout);
  driver_->check_faults();
}

// ---- copies ---------------------------------------------------------------------------

static void check_range(const Device& d, const Buffer& b, uint64_t off, uint64_t size,
                        const char* what) {
  if (!b) throw InvalidInput(d.name() + ": " + what + ": empty buffer");
  if (!b.device())
    throw InvalidInput(d.name() + ": " + what + ": the buffer's device was closed");
  if (b.device() != &d)
    throw InvalidInput(d.name() + ": " + what + ": buffer belongs to device " +
                       b.device()->name());
  if (off > b.size() || size > b.size() - off)
    throw InvalidInput(d.name() + ": " + what + ": range [" + std::to_string(off) + ", " +
                       std::to_string(off) + "+" + std::to_string(size) +
                       ") is outside the buffer of " + std::to_string(b.size()) + " bytes");
}

void Device::copy_in(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size) {
  check_range(*this, dst, dst_offset, size, "copy_in");
  staged_copy(true, dst, dst_offset, const_cast<void*>(src), size);
}

void Device::copy_out(void* dst, const Buffer& src, uint64_t src_offset, uint64_t size) {
  check_range(*this, src, src_offset, size, "copy_out");
  staged_copy(false, src, src_offset, dst, size);
}

void Device::staged_copy(bool to_device, const Buffer& buf, uint64_t off, void* host,
                         uint64_t size) {
  if (size == 0) return;
  char* h = static_cast<char*>(host);
  if (properties().caps.uma && buf.host()) {
    // Device memory is host memory: order after queued work, then memcpy.
    synchronize();
    char* d = static_cast<char*>(buf.host()) + off;
    to_device ? std::memcpy(d, h, size) : std::memcpy(h, d, size);
    return;
  }
  if (!properties().caps.cpu_maps_memory && (!to_device || !staging_mem_)) {
    // Through the port, which is not ordered after GPU work: wait for the work before it.
    // (A copy-out cannot stage: the CPU cannot read a USB bridge's host window.)
    synchronize();
    if (to_device)
      driver_->write_memory(buf.va() + off, {reinterpret_cast<const std::byte*>(h), size});
    else
      driver_->read_memory(buf.va() + off, {reinterpret_cast<std::byte*>(h), size});
    return;
  }
  // One staged copy at a time: a copy-out holds its staging chunks until the host has read
  // them, and a copy that held chunks while it waited for the submission lock would deadlock
  // with one that holds the lock while it waits for those chunks.
  std::lock_guard staging_lock(staging_mu_);
  const uint64_t chunk = std::min(opt_.staging_chunk_bytes, staging_ring_->capacity() / 2);
  struct Pending {  // a copy-out chunk the host has not read yet
    uint64_t tag, offset;
    char* host;
    uint64_t size;
  };
  std::deque<Pending> pending;
  auto release = [&](const Pending& p) {
    std::lock_guard rl(ring_mu_);
    staging_ring_->release(p.offset);
  };
  auto drain_one = [&] {
    Pending p = pending.front();
    timeline_.wait(p.tag);
    std::memcpy(p.host, static_cast<char*>(staging_mem_.host()) + p.offset, p.size);
    pending.pop_front();
    release(p);
  };
  try {
    for (uint64_t done = 0; done < size;) {
      uint64_t n = std::min(chunk, size - done);
      std::lock_guard lk(submit_mu_);
      auto r = timeline_.reserve();
      std::optional<uint64_t> soff;
      for (;;) {
        {
          std::lock_guard rl(ring_mu_);
          soff = staging_ring_->try_allocate(n, 256, r.next, !to_device);
        }
        if (soff) break;
        if (pending.empty()) throw Error(name() + ": staging ring full of chunks nobody holds");
        drain_one();  // the ring wants back a chunk of ours not yet read out
      }
      if (!to_device) pending.push_back({r.next, *soff, h + done, n});
      uint64_t staging_va = staging_mem_.va() + *soff;
      if (to_device && staging_mem_.host())
        std::memcpy(static_cast<char*>(staging_mem_.host()) + *soff, h + done, n);
      else if (to_device) {  // host memory the CPU does not map: written through the port
        const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(h + done), n};
        driver_->write_memory(staging_va, bytes);
        // The capture cannot read it back (a USB bridge's window): it records the write.
        if (capture::enabled()) capture::wrote(*this, staging_va, bytes);
      }
      CopyQueue q(*this);
      q.wait(timeline_.signal(), r.prev);
      if (to_device)
        q.copy(buf.va() + off + done, staging_va, n);
      else
        q.copy(staging_va, buf.va() + off + done, n);
      q.signal(timeline_.signal(), r.next);
      q.submit();
      r.commit();
      done += n;
    }
    while (!pending.empty()) drain_one();
  } catch (...) {
    // Give the held chunks back; their tags still keep them from a copy the GPU has queued.
    for (const Pending& p : pending) release(p);
    throw;
  }
}

void Device::copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                  uint64_t size) {
  check_range(*this, dst, dst_offset, size, "copy (destination)");
  if (src && src.device() && src.device() != this) {
    // Another device's buffer: through host memory, a staging chunk at a time.
    check_range(*src.device(), src, src_offset, size, "copy (source)");
    std::vector<char> bounce(std::min(size, opt_.staging_chunk_bytes));
    for (uint64_t done = 0; done < size;) {
      uint64_t n = std::min<uint64_t>(bounce.size(), size - done);
      src.device()->copy_out(bounce.data(), src, src_offset + done, n);
      copy_in(dst, dst_offset + done, bounce.data(), n);
      done += n;
    }
    return;
  }
  check_range(*this, src, src_offset, size, "copy (source)");
  if (size == 0) return;
  if (properties().caps.uma && dst.host() && src.host()) {
    // Device memory is host memory: order after queued work, then a host copy.
    synchronize();
    std::memmove(static_cast<char*>(dst.host()) + dst_offset,
                 static_cast<const char*>(src.host()) + src_offset, size);
    return;
  }
  if (!properties().caps.copy_engine)
    throw InvalidInput(name() + ": copy between buffers the CPU cannot see needs a copy engine, "
                                "and this device has none");
  std::lock_guard lk(submit_mu_);
  auto r = timeline_.reserve();
  CopyQueue q(*this);
  q.wait(timeline_.signal(), r.prev);
  q.copy(dst.va() + dst_offset, src.va() + src_offset, size);
  q.signal(timeline_.signal(), r.next);
  q.submit();
  r.commit();
}

}  // namespace hcq
