#include "qcom/adreno_driver.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "os/address_window.hpp"
#include "qcom/decode.hpp"
#include "qcom/encoders.hpp"
#include "qcom/kgsl_abi.hpp"
#include "qcom/program.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPrivateVa = 1ull << 30;  // rings, scratch: before the heap
constexpr uint64_t kHeapVa = 64ull << 30;
constexpr uint64_t kRingBytes = 1 << 20;
// How long an allocation waits for work that still uses a freed object at its address (or
// memory freed objects hold), and the driver's teardown for work still in flight.
constexpr auto kFreedObjectWait = std::chrono::seconds(10);
constexpr auto kTeardownWait = std::chrono::milliseconds(200);

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class AdrenoDriver;

// The one command stream: words for direct submissions go into a ring of GPU memory, and
// every submission is a list of indirect buffers.
class AdrenoQueue final : public HwQueue {
 public:
  explicit AdrenoQueue(AdrenoDriver& drv);
  void submit(const uint32_t* words, size_t n) override;
  void submit_indirect(uint64_t va, size_t ndwords) override;
  // CP_INDIRECT_BUFFER IB_SIZE: 20 bits of dwords (cp.def, from Mesa's adreno_pm4.xml); the
  // kernel writes the IB's size into that packet in the ring (KGSL, msm a6xx_submit).
  size_t max_indirect_dwords() const override {
    return (size_t{1} << CP_INDIRECT_BUFFER_IB_SIZE.width) - 1;
  }
  std::string report();
  // A bound IB's packets around where the CP is in it (the hang report's current submission).
  std::string bound_ib_text(uint64_t va, std::span<const uint32_t> words);

 private:
  struct Submitted {
    uint32_t fence;
    std::vector<IbRef> ibs;
    uint64_t ring_end;  // ring bytes (monotonic) it freed when retired
  };
  uint64_t put_words(const uint32_t* w, size_t n);
  int retire();  // drops what the kernel retired: 0, or the kernel's -errno
  int send(std::vector<IbRef> ibs);  // 0, or the kernel's -errno
  AdrenoDriver& drv_;
  Allocation ring_;
  uint64_t put_ = 0, done_ = 0;
  uint32_t retired_ = 0;  // the newest fence seen retired
  std::deque<Submitted> inflight_;
  std::mutex mu_;
};

class AdrenoDriver final : public DeviceDriver {
 public:
  AdrenoDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<Kmd> kmd, const std::string& name);
  ~AdrenoDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return reserve_base_ + kPrivateVa; }
  uint64_t va_size() const override { return heap_bytes_; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  int export_memory(const Allocation& a) override;
  Allocation import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<hcq::Encoder> encoder(QueueKind) override {
    return std::make_unique<CpEncoder>(gen_, mem_);
  }
  ProgramLayout program_layout(std::span<const std::byte> image) override;
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  std::string hang_report() override;

  Kmd& kmd() { return *kmd_; }
  os::Kernel& kernel() { return *kernel_; }
  Gen gen() const { return gen_; }
  Allocation private_alloc(uint64_t size);
  [[noreturn]] void raise_fault(const std::string& what);
  // A kernel error from a submission or a wait: -EDEADLK means the context faulted.
  [[noreturn]] void fail(const char* what, int r);
  void submitted(uint32_t fence) { last_fence_.store(fence, std::memory_order_release); }

 private:
  // An object freed while submitted work may still use it, and the fence of the newest
  // submission at the time of the free (see free()).
  struct Deferred {
    Allocation a;
    uint32_t fence;
  };
  void reserve_address_space();
  void release(const Allocation& a);  // the kernel driver's free, now
  bool retired(uint32_t fence, std::chrono::milliseconds wait = {});
  void reap();  // under deferred_mu_: frees the deferred objects whose work retired
  bool wait_for_deferred(uint64_t va, uint64_t size);  // under deferred_mu_
  std::shared_ptr<os::Kernel> kernel_;
  std::unique_ptr<Kmd> kmd_;
  DeviceProperties props_;
  Gen gen_ = Gen::A6xx;
  EncoderMemory mem_;
  uint64_t reserve_base_ = 0, reserve_bytes_ = 0, heap_bytes_ = 0, private_next_ = 0;
  std::mutex mu_;
  std::vector<Allocation> private_allocs_;
  std::atomic<uint64_t> allocated_{0};  // bytes of GPU objects this device holds
  AdrenoQueue* queue_ = nullptr;
  StickyFault fault_;
  std::atomic<uint32_t> last_fence_{0};  // of the newest submission; 0: none yet
  std::mutex deferred_mu_;
  std::deque<Deferred> deferred_;  // in fence order
};

// ---- driver ---------------------------------------------------------------------------

AdrenoDriver::AdrenoDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<Kmd> kmd,
                           const std::string& name)
    : kernel_(std::move(kernel)), kmd_(std::move(kmd)) {
  props_.name = name;
  const uint32_t chip = kmd_->chip_id();
  const int family = kgsl::adreno_family(chip);
  if (family != 6 && family != 7)
    throw Error(name + ": chip id " + hex(chip) + " is not an Adreno a6xx or a7xx, " +
                "the generations hcq writes packets for");
  gen_ = family == 6 ? Gen::A6xx : Gen::A7xx;
  reserve_address_space();
  private_next_ = reserve_base_;
  Allocation scratch = private_alloc(kPage);
  *static_cast<uint32_t*>(scratch.host) = 1;  // CP_COND_EXEC's condition
  mem_ = {scratch.va, scratch.va + 64};

  const Target* t = nullptr;
  for (auto& x : targets())
    if (x.chip_id == chip) t = &x;
  props_.vendor = "Qualcomm";
  props_.arch = chip_name(chip);
  props_.emulated = kernel_->emulated();
  props_.description = kernel_->emulated() && t
                           ? t->marketing_name + (kmd_->name() == "KGSL" ? "" : ", " + kmd_->name())
                           : "Adreno " + props_.arch + " (" + kmd_->name() + ", chip id " + hex(chip) + ")";
  props_.timestamp_hz = kAlwaysOnHz;
  props_.compute_units = t ? t->shader_processors : 0;
  props_.wave_size = 64;
  props_.device_memory_bytes = t ? t->memory_bytes : 0;
  props_.caps.copy_engine = false;  // copies are host copies on the shared memory, or kernels
  props_.caps.uma = true;
  props_.caps.map_host = kmd_->maps_user_memory();
}

// Every buffer sits at the same CPU and GPU address: reserve CPU address space inside the
// kernel's GPU window, at its start where the process has room there (a small window), else
// where mmap puts it (a window spanning the user address space).
void AdrenoDriver::reserve_address_space() {
  const auto [start, size] = kmd_->va_window();
  const uint64_t first = align_up(start, 2 << 20);
  const uint64_t end = start + size;
  if (end <= first + 2 * kPrivateVa)
    throw Error(props_.name + ": the GPU address window " + hex(start) + "+" + hex(size) +
                " of " + kmd_->name() + " is too small");
  const uint64_t want = std::min(kPrivateVa + kHeapVa, (end - first) & ~(kPage - 1));
  auto inside = [&](void* p) {
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    return p != MAP_FAILED && a >= first && a + want <= end;
  };
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (os::wanted_heap_base()) {  // hcq replay: where the capture had it, or an error
    void* at = reinterpret_cast<void*>(os::reserve_window(*kernel_, want, kPrivateVa, props_.name));
    if (!inside(at)) {
      kernel_->munmap(at, want);
      throw InvalidInput(props_.name + ": cannot place its GPU addresses at " +
                         hex(os::wanted_heap_base()) + ": outside the GPU address window " +
                         hex(start) + "+" + hex(size) + " of " + kmd_->name());
    }
    reserve_base_ = reinterpret_cast<uint64_t>(at);
    reserve_bytes_ = want;
    heap_bytes_ = want - kPrivateVa;
    return;
  }
  void* base = kernel_->mmap(reinterpret_cast<void*>(first), want, PROT_NONE,
                             flags | MAP_FIXED_NOREPLACE, -1, 0);
  if (!inside(base)) {
    if (base != MAP_FAILED) kernel_->munmap(base, want);
    base = kernel_->mmap(nullptr, want, PROT_NONE, flags, -1, 0);
    if (!inside(base)) {
      if (base != MAP_FAILED) kernel_->munmap(base, want);
      throw Error(props_.name + ": no free CPU address range of " + std::to_string(want >> 20) +
                  " MiB inside the GPU address window " + hex(start) + "+" + hex(size) + " of " +
                  kmd_->name());
    }
  }
  reserve_base_ = reinterpret_cast<uint64_t>(base);
  reserve_bytes_ = want;
  heap_bytes_ = want - kPrivateVa;
}

AdrenoDriver::~AdrenoDriver() {
  // Work still in flight after a short wait (a hung kernel) may use any object: those are
  // left to the kernel driver, which frees a process's objects with its file once the
  // context is gone and their work retired.
  const uint32_t last = last_fence_.load(std::memory_order_acquire);
  if (!last || retired(last, kTeardownWait)) {
    for (auto& d : deferred_) release(d.a);
    for (auto& a : private_allocs_) release(a);
  }
  kmd_.reset();  // the context goes before the address space
  if (reserve_base_) kernel_->munmap(reinterpret_cast<void*>(reserve_base_), reserve_bytes_);
}

Allocation AdrenoDriver::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool) {
  size = align_up(size, kPage);
  std::unique_lock lk(deferred_mu_);
  reap();
  // The address of a freed object that submitted work still uses: once that work retired.
  if (!wait_for_deferred(va, size))
    throw TimeoutError(props_.name + ": the GPU address " + hex(va) + " belongs to a freed object "
                       "that submitted work still uses after " +
                       std::to_string(kFreedObjectWait.count()) + " s");
  uint64_t handle;
  try {
    handle = kmd_->allocate(va, size, kind);
  } catch (const OsError& e) {
    if (e.err() != ENOMEM) throw;
    // Freed objects hold memory until their work retires: that much may come back.
    const size_t waiting = deferred_.size();
    if (waiting && wait_for_deferred(0, ~0ull) && deferred_.size() < waiting) {
      lk.unlock();
      return allocate(va, size, kind, false);
    }
    // Neither KGSL nor msm says how much is left; what this device holds is known here.
    const uint64_t held = allocated_.load();
    const uint64_t total = props_.device_memory_bytes;
    throw Error(std::string(e.what()) + "; free: at most " +
                std::to_string(total > held ? total - held : 0) + " of " +
                std::to_string(total) + " bytes (this device holds " + std::to_string(held) +
                ")");
  }
  allocated_ += size;
  return Allocation{va, size, reinterpret_cast<void*>(va), kind, handle};
}

// Sharing with another process: what the kernel driver can (KGSL: memory from the dma-buf
// heap, Kmd::shares_memory); msm DRM keeps DeviceDriver's refusal.
int AdrenoDriver::export_memory(const Allocation& a) {
  if (!kmd_->shares_memory()) return DeviceDriver::export_memory(a);
  if (a.user)
    throw InvalidInput(props_.name + ": the caller's host memory at " + hex(a.va) +
                       " cannot be exported");
  return kmd_->export_memory(a.handle);
}

Allocation AdrenoDriver::import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) {
  if (!kmd_->shares_memory()) return DeviceDriver::import_memory(fd, va, size, kind);
  std::unique_lock lk(deferred_mu_);
  reap();
  if (!wait_for_deferred(va, size))  // as allocate(): the address may be a busy freed object's
    throw TimeoutError(props_.name + ": the GPU address " + hex(va) + " belongs to a freed object "
                       "that submitted work still uses after " +
                       std::to_string(kFreedObjectWait.count()) + " s");
  Allocation out{va, size, reinterpret_cast<void*>(va), kind, kmd_->import_memory(fd, va, size)};
  allocated_ += size;
  return out;
}

// The GPU reaches an object through the very mapping a free drops (the CPU and the GPU share
// it at one address), so an object freed while submitted work may still use it stays until
// that work retires, as the kernel drivers keep theirs: drm/msm holds a reference to each
// object of a submit until the submit retires (msm_gem_submit.c, msm_gpu.c retire_submit), and
// KGSL a kgsl_mem_entry reference per command batch, freeing on a timestamp where asked
// (IOCTL_KGSL_GPUMEM_FREE_ID_ON_TIMESTAMP); Mesa's freedreno likewise frees a busy BO only once
// its fences signal. Deferred frees go once the context retired the newest submission of the
// time of the free: on later allocations and frees, when waits find the queue idle, and when
// the driver goes.
void AdrenoDriver::free(const Allocation& a) {
  if (a.user) {
    kmd_->free_user(a.handle, a.va);
    return;
  }
  std::lock_guard lk(deferred_mu_);
  reap();
  const uint32_t fence = last_fence_.load(std::memory_order_acquire);
  if (fence && !retired(fence)) {
    deferred_.push_back({a, fence});
    return;
  }
  release(a);
}

void AdrenoDriver::release(const Allocation& a) {
  reserve_range(*kernel_, a.va, a.size);  // drops the CPU mapping, keeps the range ours
  kmd_->free(a.handle);
  allocated_ -= a.size;
}

// A faulted context (-EDEADLK) runs nothing more: its fences count as retired.
bool AdrenoDriver::retired(uint32_t fence, std::chrono::milliseconds wait) {
  const int r = kmd_->wait(fence, wait);
  return r == 0 || r == -EDEADLK;
}

void AdrenoDriver::reap() {
  while (!deferred_.empty() && retired(deferred_.front().fence)) {
    release(deferred_.front().a);
    deferred_.pop_front();
  }
}

// Waits (bounded) for the work of the deferred objects overlapping [va, va + size) and frees
// them; false when it did not retire in time.
bool AdrenoDriver::wait_for_deferred(uint64_t va, uint64_t size) {
  uint32_t fence = 0;
  bool any = false;
  for (const Deferred& d : deferred_)
    if (d.a.va < va + size && va < d.a.va + d.a.size) fence = d.fence, any = true;
  if (!any) return true;
  if (!retired(fence, std::chrono::duration_cast<std::chrono::milliseconds>(kFreedObjectWait)))
    return false;
  reap();
  return true;
}

Allocation AdrenoDriver::map_user(void* host, uint64_t size) {
  Allocation out{reinterpret_cast<uint64_t>(host), size, host, MemoryKind::Host, 0};
  out.handle = kmd_->map_user(host, size);
  out.user = true;
  return out;
}

Allocation AdrenoDriver::private_alloc(uint64_t size) {
  uint64_t va;
  {
    std::lock_guard lk(mu_);
    size = align_up(size, kPage);
    va = align_up(private_next_, std::min<uint64_t>(size, 2 << 20));
    if (va + size > reserve_base_ + kPrivateVa)
      throw Error(props_.name + ": driver-private GPU address space exhausted");
    private_next_ = va + size;
  }
  Allocation a = allocate(va, size, MemoryKind::Host, false);
  std::lock_guard lk(mu_);
  private_allocs_.push_back(a);
  return a;
}

std::unique_ptr<HwQueue> AdrenoDriver::create_queue(QueueKind kind) {
  if (kind != QueueKind::Compute)
    throw InvalidInput(props_.name + ": Adreno GPUs have no copy engine (no copy queues)");
  if (queue_) throw InvalidInput(props_.name + ": one compute queue per " + kmd_->context());
  auto q = std::make_unique<AdrenoQueue>(*this);
  queue_ = q.get();
  return q;
}

void AdrenoDriver::fail(const char* what, int r) {
  if (r == -EDEADLK)
    raise_fault("the GPU faulted on " + kmd_->context() + " (" + what + ": " +
                std::strerror(-r) + ")");
  throw OsError(props_.name + ": " + what, -r);
}

[[noreturn]] void AdrenoDriver::raise_fault(const std::string& what) {
  fault_.raise([&] {
    return fault_message(*kernel_, props_.name, what,
                         queue_ ? queue_->report() : "");
  });
}

void AdrenoDriver::check_faults() { fault_.check(); }

void AdrenoDriver::wait_interrupt(std::chrono::milliseconds timeout) {
  check_faults();
  // The kernel wakes the caller when the newest submission retires.
  const auto start = std::chrono::steady_clock::now();
  int r = kmd_->wait(last_fence_.load(std::memory_order_acquire),
                     std::max(timeout, std::chrono::milliseconds(1)));
  if (r < 0 && r != -ETIMEDOUT) fail("waiting for a fence", r);
  if (r == 0) {  // the queue is idle: the deferred frees can go
    std::unique_lock lk(deferred_mu_, std::try_to_lock);
    if (lk.owns_lock()) reap();
  }
  // Everything retired already: the awaited value comes from elsewhere (the host, another
  // device); poll again shortly rather than spin.
  if (r == 0 && std::chrono::steady_clock::now() - start < std::chrono::microseconds(50))
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::string AdrenoDriver::hang_report() { return queue_ ? queue_->report() : ""; }

// ---- queue ----------------------------------------------------------------------------

AdrenoQueue::AdrenoQueue(AdrenoDriver& drv) : drv_(drv), ring_(drv.private_alloc(kRingBytes)) {}

int AdrenoQueue::retire() {
  while (!inflight_.empty()) {
    int r = drv_.kmd().wait(inflight_.front().fence, std::chrono::milliseconds(0));
    if (r == -ETIMEDOUT) return 0;
    if (r < 0) return r;
    retired_ = inflight_.front().fence;
    if (inflight_.front().ring_end) done_ = inflight_.front().ring_end;
    inflight_.pop_front();
  }
  return 0;
}

uint64_t AdrenoQueue::put_words(const uint32_t* w, size_t n) {
  const uint64_t bytes = n * 4;
  if (bytes > kRingBytes / 2)
    throw InvalidInput(drv_.properties().name + ": a submission of " + std::to_string(bytes) +
                       " bytes does not fit the command ring; bind it instead");
  uint64_t pos = put_ % kRingBytes;
  const uint64_t pad = pos + bytes > kRingBytes ? kRingBytes - pos : 0;
  const auto start = std::chrono::steady_clock::now();
  while (put_ + pad + bytes - done_ > kRingBytes) {
    if (int r = retire(); r < 0) drv_.fail("reading retired fences", r);
    if (put_ + pad + bytes - done_ <= kRingBytes) break;
    int r = drv_.kmd().wait(inflight_.front().fence, std::chrono::milliseconds(10));
    if (r < 0 && r != -ETIMEDOUT) drv_.fail("waiting for ring space", r);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      throw TimeoutError(drv_.properties().name + ": command ring full for 10 s");
  }
  put_ += pad;
  pos = put_ % kRingBytes;
  std::memcpy(static_cast<char*>(ring_.host) + pos, w, bytes);
  put_ += bytes;
  return ring_.va + pos;
}

int AdrenoQueue::send(std::vector<IbRef> ibs) {
  uint32_t fence = 0;
  if (int r = drv_.kmd().submit(ibs, fence); r < 0) return r;
  inflight_.push_back({fence, std::move(ibs), put_});
  drv_.submitted(fence);
  return 0;
}

void AdrenoQueue::submit(const uint32_t* words, size_t n) {
  drv_.check_faults();
  int r = 0;
  {
    std::lock_guard lk(mu_);
    if (n == 0) return;
    const uint64_t va = put_words(words, n);
    r = send({{va, n * 4}});
  }
  if (r < 0) drv_.fail("submitting", r);  // after unlocking: the report reads the queue
}

void AdrenoQueue::submit_indirect(uint64_t va, size_t ndwords) {
  drv_.check_faults();
  // KGSL and drm/msm put each IB in a ring CP_INDIRECT_BUFFER whose IB_SIZE field holds its
  // dwords (cp.def): a longer one would run truncated, so it is refused here.
  if (ndwords > kMaxIbDwords)
    desc::throw_does_not_fit(drv_.properties().name + ": CP_INDIRECT_BUFFER", "IB_SIZE", ndwords,
                             CP_INDIRECT_BUFFER_IB_SIZE.width);
  int r = 0;
  {
    std::lock_guard lk(mu_);
    r = send({{va, ndwords * 4}});
  }
  if (r < 0) drv_.fail("submitting", r);
}

std::string AdrenoQueue::bound_ib_text(uint64_t va, std::span<const uint32_t> words) {
  // The emulated CP says where inside the IB it waits (os::EmulatorReport::IbPositions: one
  // line per waiting context, "IB 0x<va> <dwords> dwords, at dword <n>"); a real one shows
  // CP_IB1_BASE / CP_IB1_REM_SIZE only in a snapshot, so its IB shows from the start.
  uint32_t at = 0;
  bool known = false;
  if (auto lines = drv_.kernel().emulator_report(os::EmulatorReport::IbPositions)) {
    std::istringstream in(*lines);
    for (std::string l; std::getline(in, l);) {
      unsigned long long ib_va = 0;
      unsigned dwords = 0, pos = 0;
      if (std::sscanf(l.c_str(), "IB %llx %u dwords, at dword %u", &ib_va, &dwords, &pos) == 3 &&
          ib_va == va && dwords == words.size() && pos < dwords) {
        at = pos;
        known = true;
      }
    }
  }
  return indirect_buffer_text(va, words.size(), decode_cp(words, drv_.gen()), known ? &at : nullptr,
                              "    ");
}

std::string AdrenoQueue::report() {
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return drv_.properties().name + ": compute queue: (busy submitting)";
  retire();  // an error (a faulted context) still shows what was in flight
  if (inflight_.empty()) return "";
  const std::string word = drv_.kmd().fence_word();
  std::string out = drv_.properties().name + ": compute queue (" + drv_.kmd().context() +
                    "): retired " + word + " " + std::to_string(retired_) +
                    ", submissions after it:";
  bool first = true;
  for (const Submitted& s : inflight_) {
    out += "\n  " + std::string(first ? "HERE > " : "pending") + " " + word + " " +
           std::to_string(s.fence);
    const bool current = first;
    first = false;
    for (const IbRef& ib : s.ibs) {
      const bool in_ring = ib.va >= ring_.va && ib.va + ib.bytes <= ring_.va + ring_.size;
      // Every object is mapped for the CPU at its GPU address, and one in flight stays mapped
      // (frees wait for the work that uses it).
      auto* w = reinterpret_cast<const uint32_t*>(ib.va);
      const size_t n = size_t(ib.bytes / 4);
      if (!in_ring && current) {  // a bound command buffer the CP may be in: around its position
        out.append("\n").append(bound_ib_text(ib.va, {w, n}));
        continue;
      }
      out += "\n    IB " + hex(ib.va) + ", " + std::to_string(n) + " dwords";
      if (!in_ring) continue;  // a bound command buffer still to come
      for (auto& p : decode_cp({w, n}, drv_.gen())) out += "\n      " + to_text(p);
    }
  }
  return out;
}

// ---- programs -------------------------------------------------------------------------

ProgramLayout AdrenoDriver::program_layout(std::span<const std::byte> file) {
  const Gen gen = gen_;
  Ir3Module m = parse_ir3(file);
  if (m.family && m.family != uint32_t(gen))
    throw InvalidInput(props_.name + ": ir3 container is built for a" + std::to_string(m.family) +
                       "xx, the device is a" + std::to_string(int(gen)) + "xx");
  uint64_t total = 0;
  const auto places = place_ir3(m, file.size(), total);
  std::vector<std::byte> image(total);
  std::memcpy(image.data(), kLoadedMagic, 8);
  const uint64_t file_bytes = file.size();
  std::memcpy(image.data() + 8, &file_bytes, 8);
  std::memcpy(image.data() + kLoadedHeaderBytes, file.data(), file.size());
  for (size_t i = 0; i < m.kernels.size(); i++) {
    const Ir3Kernel& k = m.kernels[i];
    std::memcpy(image.data() + places[i].code, k.instructions.data(), k.instructions.size() * 4);
    if (!k.immediates.empty())
      std::memcpy(image.data() + places[i].immediates, k.immediates.data(), k.immediates.size() * 4);
  }
  ProgramLayout l;
  l.vendor = "Adreno";
  l.size = total;
  l.bytes = std::move(image);
  for (size_t i = 0; i < m.kernels.size(); i++) {
    const Ir3Kernel& k = m.kernels[i];
    auto obj = std::make_shared<AdrenoKernel>();
    obj->name = k.name;
    if (k.local_memory_bytes || k.private_memory_bytes) {
      l.kernels.push_back({std::move(obj), "needs local or private memory"});
      continue;
    }
    if (k.uavs.size() != k.uav_count) {  // a version-1 container
      l.kernels.push_back({std::move(obj), "uses " + std::to_string(k.uav_count) +
                                               " UAVs that its version-1 ir3 container binds to "
                                               "no argument"});
      continue;
    }
    obj->code_va = places[i].code;
    obj->instr_dwords = k.instructions.size();
    obj->full_regs = k.full_regs;
    obj->half_regs = k.half_regs;
    obj->branch_stack = k.branch_stack;
    obj->threadsize = k.threadsize;
    obj->const_dwords = k.const_dwords;
    obj->args_offset = k.args_offset;
    obj->args_bytes = k.args_bytes;
    obj->uav_count = k.uav_count;
    obj->workgroup_id_regid = k.workgroup_id_regid;
    obj->local_id_regid = k.local_id_regid;
    if (!k.immediates.empty()) {
      obj->immediates_va = places[i].immediates;
      obj->immediates_offset = k.immediates_offset;
      obj->immediates_dwords = uint32_t(k.immediates.size());
    }
    obj->kernarg_size = std::max<uint32_t>(k.args_bytes, 16);
    obj->kernarg_align = 16;
    if (!k.uavs.empty()) {
      // The descriptors follow the argument block in the kernarg area; their fixed words
      // are laid there with it (kernarg_init), the addresses copied in by each launch.
      constexpr uint32_t kDescBytes = kTEX_MEMOBJ_DWORDS * 4;
      obj->uav_table_offset = uint32_t(align_up(obj->kernarg_size, 64));
      obj->kernarg_size = obj->uav_table_offset + uint32_t(k.uavs.size()) * kDescBytes;
      obj->kernarg_align = 64;
      obj->kernarg_init.assign(obj->kernarg_size, std::byte{0});
      for (size_t u = 0; u < k.uavs.size(); u++) {
        obj->uav_arg_offsets.push_back(k.args[k.uavs[u].arg].offset);
        uint32_t desc[kTEX_MEMOBJ_DWORDS];
        CpEncoder::uav_descriptor(desc, k.uavs[u].format);
        std::memcpy(obj->kernarg_init.data() + obj->uav_table_offset + u * kDescBytes, desc,
                    kDescBytes);
      }
    }
    for (const Ir3Arg& a : k.args)
      obj->args.push_back({a.name, a.offset, a.size, a.kind, a.access});
    l.kernels.push_back({std::move(obj), ""});
  }
  l.place = [gen](KernelObject& kernel, uint64_t va) {
    auto& k = static_cast<AdrenoKernel&>(kernel);
    k.code_va += va;
    if (k.immediates_va) k.immediates_va += va;  // 0: the kernel has no immediates
    CpEncoder(gen, {}).prepare(k);
  };
  return l;
}

}  // namespace

std::unique_ptr<DeviceDriver> open_adreno_device(std::shared_ptr<os::Kernel> kernel,
                                                 std::unique_ptr<Kmd> kmd,
                                                 const std::string& device_name) {
  return std::make_unique<AdrenoDriver>(std::move(kernel), std::move(kmd), device_name);
}

}  // namespace hcq::qcom
