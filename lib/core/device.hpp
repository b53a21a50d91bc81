// Device: a GPU opened by name ("amd:0", "emu:gfx1100"). It owns the driver, the address
// heap and buffer cache, the signals, the device timeline, the kernel-argument ring, the
// staging ring and the hardware queues, and offers the plain operations (allocate,
// copy in/out, synchronize) that everything above builds on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/allocators.hpp"
#include "core/driver.hpp"
#include "core/ipc.hpp"
#include "core/types.hpp"

namespace hcq {

class Device;

// What a Device's handles (Buffer, Signal, Program, batch executables) keep of it, so that one
// outliving its Device is safe: releasing it then does nothing (the device's teardown freed
// its memory), using it is an Error naming the device. Thread-safe.
class DeviceLink {
 public:
  // The device, or null once it was destroyed.
  Device* get() const { return dev_.load(std::memory_order_acquire); }
  // The device; throws Error saying `what` outlived it once it was destroyed.
  Device& checked(const char* what) const;

 private:
  friend class Device;
  friend class Buffer;
  friend class Signal;
  std::mutex mu_;  // a release racing with the device's teardown
  std::atomic<Device*> dev_{nullptr};
  std::string name_;
  std::atomic<uint32_t> host_waiters_{0};  // threads asleep in Signal::wait (set() wakes them)
};

// Device memory. Move-only; returns its memory to the device's cache when destroyed.
// A Buffer may outlive its Device: it is then detached (device() is null, releasing it does
// nothing) and its host() pointer must no longer be used. An empty one (default-made, reset or
// moved from) has no address: va() 0, host() null, size() 0, and every API taking a Buffer
// refuses it. Thread safety: one thread at a time per Buffer (its memory is the caller's to
// guard); different Buffers of one Device may be used and freed from any threads.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  uint64_t va() const { return a_.va; }
  uint64_t size() const { return size_; }
  void* host() const { return a_.host; }  // null when not CPU-visible
  MemoryKind kind() const { return a_.kind; }
  // Null for an empty buffer and for one whose device was destroyed.
  Device* device() const { return link_ ? link_->get() : nullptr; }
  explicit operator bool() const { return link_ != nullptr; }
  void reset();
  // A handle another process imports with Device::import_buffer (core/ipc.hpp): the same
  // memory, which lives while either side holds it. Throws InvalidInput for an empty buffer
  // or memory that cannot be shared (Device::map_host's, a driver without export).
  IpcHandle export_ipc() const;
  // True for a buffer Device::import_buffer made (another process's memory).
  bool imported() const { return a_.imported; }

 private:
  friend class Device;
  std::shared_ptr<DeviceLink> link_;
  Allocation a_;
  uint64_t size_ = 0;  // as requested (the allocation may be larger)
};

// Device memory lib/core lays out with the CPU for the GPU to read (the kernel-argument
// ring, bound command buffers, batch areas). Where the CPU maps the device's memory, host()
// is that mapping and mark()/publish()/refresh() cost a branch. On a device whose memory the
// CPU cannot map (Capabilities::cpu_maps_memory false) host() is a host copy this object
// owns: the CPU writes it and marks what it wrote, publish() writes the marked ranges
// through the driver's port (DeviceDriver::write_memory, one request per contiguous range)
// before the submission that reads them, and refresh() reads a range back before the CPU
// reads what the GPU wrote there. Move-only; not thread-safe (its owner serialises).
class ShadowMemory {
 public:
  ShadowMemory() = default;
  // `size` bytes the CPU fills: allocate_visible's memory where the CPU maps the device's
  // memory, else device memory reached through the port.
  ShadowMemory(Device& dev, uint64_t size);
  ShadowMemory(ShadowMemory&&) noexcept = default;
  ShadowMemory& operator=(ShadowMemory&&) noexcept = default;

  std::byte* host() const { return host_; }
  uint64_t va() const { return buf_.va(); }
  uint64_t size() const { return buf_.size(); }
  const Buffer& buffer() const { return buf_; }
  explicit operator bool() const { return bool(buf_); }
  // True where host() is a copy published through the port.
  bool shadowed() const { return port_ != nullptr; }
  // The CPU wrote [offset, offset + size) of host().
  void mark(uint64_t offset, uint64_t size) {
    if (port_) [[unlikely]]
      add_dirty(offset, size);
  }
  // Writes what was marked since the last publish() to the device.
  void publish() {
    if (!dirty_.empty()) [[unlikely]]
      write_dirty();
  }
  // Reads [offset, offset + size) from the device into host() (what the GPU wrote).
  void refresh(uint64_t offset, uint64_t size);
  void reset();

 private:
  void add_dirty(uint64_t offset, uint64_t size);
  void write_dirty();
  Buffer buf_;
  std::unique_ptr<std::byte[]> copy_;
  std::byte* host_ = nullptr;
  DeviceDriver* port_ = nullptr;
  std::map<uint64_t, uint64_t> dirty_;  // marked ranges: start -> end, disjoint, not touching
};

// A 64-bit value and a timestamp record (Encoder::timestamp: 16 bytes, the timestamp in its
// second half) in device-visible memory. Move-only handle. value(), set() and wait() may be
// called from several threads at once. One that outlives its Device throws Error from
// value(), set(), timestamp(), wait() and device() (its memory went with the device).
class Signal {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{10000};
  static constexpr uint64_t kBytes = 32;  // value, pad, timestamp record

  Signal() = default;
  Signal(Signal&& o) noexcept { *this = std::move(o); }
  Signal& operator=(Signal&& o) noexcept;
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;
  ~Signal() { reset(); }

  uint64_t value() const {
    check_alive();
    if (port_) [[unlikely]]
      return port_read(0);
    return __atomic_load_n(&slot_[0], __ATOMIC_ACQUIRE);
  }
  void set(uint64_t v) {
    check_alive();
    if (port_) [[unlikely]]
      port_write(v);
    else
      __atomic_store_n(&slot_[0], v, __ATOMIC_SEQ_CST);  // ordered before the load below
    // A thread asleep in wait() hears of no interrupt for a value the host writes: wake it.
    if (link_->host_waiters_.load(std::memory_order_seq_cst) != 0) [[unlikely]]
      wake_host_waiters();
  }
  uint64_t timestamp() const {
    check_alive();
    if (port_) [[unlikely]]
      return port_read(24);
    return __atomic_load_n(&slot_[3], __ATOMIC_ACQUIRE);
  }
  uint64_t va() const { return va_; }  // of the value
  // The timestamp record (the timestamp itself is at timestamp_va()+8).
  uint64_t timestamp_va() const { return va_ + 16; }
  uint32_t id() const { return id_; }
  Device& device() const;

  // Wait until value() >= v: spin briefly, then sleep on the device's interrupt, or until a
  // host thread's set() on any signal of the device wakes it. Throws
  // TimeoutError naming the device, signal, value expected and seen; GpuFaultError on a fault.
  // An imported signal set by another process's GPU wakes no interrupt here: the sleeps
  // are then short (the wait polls), so it still sees the value within about a millisecond.
  void wait(uint64_t v, std::chrono::milliseconds timeout = kDefaultTimeout) const;
  void reset();
  // A handle another process imports with Device::import_signal (core/ipc.hpp): the page
  // of signals this one lives in and its place there. Throws InvalidInput for an empty
  // signal or one the CPU does not map (a device reached through a port).
  IpcHandle export_ipc() const;
  bool imported() const { return bool(page_); }

 private:
  friend class Device;
  void check_alive() const {
    if (!link_ || !link_->get()) [[unlikely]]
      throw_detached();
  }
  [[noreturn]] void throw_detached() const;
  void wake_host_waiters() const;
  void wait_for(uint64_t v, std::chrono::milliseconds timeout) const;  // wait() but the capture
  // Where the CPU cannot map the signal page: its words through the driver's port.
  uint64_t port_read(uint64_t offset) const;
  void port_write(uint64_t v);
  std::shared_ptr<DeviceLink> link_;
  Buffer page_;                    // an imported signal's page (import_signal), else empty
  uint64_t* slot_ = nullptr;       // the CPU's mapping of the value, or null
  DeviceDriver* port_ = nullptr;   // where slot_ is null
  uint64_t va_ = 0;
  uint32_t id_ = 0;
};

// The device timeline: one signal, monotonic; each submission waits for the previous value
// and signals the next. Values are full 64-bit everywhere (hardware waits included), so
// crossing 2^31 or 2^32 changes nothing.
//
// Thread safety: reserve() only under the device's submit_mutex(); last() there, or from any
// thread for a value that may be a moment old (the capture reads it so); signal() and wait()
// from any thread.
class Timeline {
 public:
  const Signal& signal() const { return signal_; }
  // The value the newest submission signals.
  uint64_t last() const { return last_.load(std::memory_order_relaxed); }

  // The next value, reserved for one submission: it waits for `prev` and signals `next`.
  // A reservation destroyed without commit() (the submission threw before it reached the
  // GPU) gives its value back, so no later wait hangs on a value nothing will signal.
  class Reservation {
   public:
    Reservation(Reservation&& o) noexcept : prev(o.prev), next(o.next), tl_(o.tl_) {
      o.tl_ = nullptr;
    }
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation() {
      if (tl_ && tl_->last() == next) tl_->last_.store(prev, std::memory_order_relaxed);
    }
    void commit() { tl_ = nullptr; }
    const uint64_t prev, next;

   private:
    friend class Timeline;
    Reservation(Timeline* tl, uint64_t p) : prev(p), next(p + 1), tl_(tl) {}
    Timeline* tl_;
  };
  // Call under the device's submit_mutex(), and commit() once the submission is made.
  Reservation reserve() {
    const uint64_t prev = last();
    last_.store(prev + 1, std::memory_order_relaxed);  // under submit_mutex(): no read-modify-write
    return Reservation(this, prev);
  }
  void wait(uint64_t v, std::chrono::milliseconds timeout = Signal::kDefaultTimeout) const {
    signal_.wait(v, timeout);
  }

 private:
  friend class Device;
  Signal signal_;
  // Written under the submit mutex; atomic so that the capture may read it from elsewhere.
  std::atomic<uint64_t> last_{0};
};

// Thread safety: every Device member may be called from several threads at once (allocate,
// copies, launches through Program, new_signal, synchronize ...): submissions are serialised
// by submit_mutex() and take timeline values in submission order; staged copies take the
// staging ring one copy at a time (copies from several threads are correct, not parallel).
// The destructor must not race with any other call. Buffers, Signals and Programs may
// outlive their Device: releasing them then does nothing, using them is an Error.
class Device {
 public:
  struct Options {
    uint64_t timeline_start = 0;             // first timeline value (tests start near a wrap)
    uint64_t kernarg_ring_bytes = 1 << 20;
    uint64_t staging_ring_bytes = 16 << 20;
    uint64_t staging_chunk_bytes = 2 << 20;  // one copy-queue copy per chunk
    uint64_t buffer_cache_bytes = 256 << 20;
    // Hardware copy queues (SDMA rings on AMD): batches spread copies between devices over
    // them by peer distance. Plain copies use the first.
    uint32_t copy_queues = 2;
    // Nonzero: the largest indirect buffer (dwords) a recording of any queue is submitted in,
    // when below the queue's own limit (HwQueue::max_indirect_dwords). Lets tests reach a
    // split recording's edges without a million-dword recording.
    uint64_t max_indirect_dwords = 0;
    // Nonzero: the driver's heap must start at this address (DeviceDriver::va_base), or the
    // open fails (hcq replay: the addresses a capture recorded). Zero: wherever it can.
    uint64_t va_base = 0;
  };

  // Opens "amd:N" or "emu:<target>". Throws InvalidInput for an unknown name.
  static std::unique_ptr<Device> open(const std::string& name);
  static std::unique_ptr<Device> open(const std::string& name, const Options& opt);
  // Every name that can be opened here: real devices first, then emulated targets.
  struct Listing {
    std::string name, description;
    bool emulated;
  };
  static std::vector<Listing> list();

  // The buffers handed out and not yet released (capture's "full" mode records them).
  struct LiveBuffer {
    uint64_t va = 0, size = 0;
    const void* host = nullptr;  // null when the CPU cannot see it
    MemoryKind kind = MemoryKind::Device;
    bool executable = false;  // allocated for code
    bool signals = false;     // a page of signals (new_signal), the timeline's among them
    bool user = false;        // the caller's host memory (map_host)
  };
  std::vector<LiveBuffer> live_buffers() const;


  Device(std::unique_ptr<DeviceDriver> driver, const Options& opt);
  // Waits at most 2 s for the work submitted so far, then tears down anyway: queues still
  // busy are destroyed (an emulated GPU abandons a kernel still running), so destruction
  // takes about 2 s plus the teardown at most, whatever the GPU is doing.
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceProperties& properties() const { return driver_->properties(); }
  const std::string& name() const { return properties().name; }
  // Unique among the devices this process opened, never reused (unlike the address: a device
  // opened after another was closed may get its address).
  uint64_t serial() const { return serial_; }
  DeviceDriver& driver() { return *driver_; }
  // The address range buffers are handed out from (the driver's heap).
  uint64_t heap_base() const { return heap_.base(); }
  uint64_t heap_size() const { return heap_.size(); }

  // MemoryKind::Host on a device that cannot reach host memory is an InvalidInput error.
  Buffer allocate(uint64_t size, MemoryKind kind = MemoryKind::Device, bool executable = false);
  // The same at exactly [va, va + size) (page-aligned), inside the heap and free (hcq replay
  // restores a capture's buffers where they were). Throws InvalidInput naming the range and
  // what is in the way otherwise.
  Buffer allocate_at(uint64_t va, uint64_t size, MemoryKind kind, bool executable);
  // Memory the CPU and this device both reach at one address (signals, kernel arguments,
  // staging, command buffers): host memory, or CPU-visible device memory on a device that
  // cannot reach host memory. Throws Error when the device has no such memory.
  Buffer allocate_visible(uint64_t size);
  // The caller's host memory (page-aligned address and size) as a device buffer at the same
  // address, without copying. The memory must stay mapped while the buffer lives.
  Buffer map_host(void* ptr, uint64_t size);
  Signal new_signal(uint64_t initial = 0);
  // What another process exported (Buffer::export_ipc, Signal::export_ipc; received with
  // receive_handle), mapped on this device at a new address: the same memory, which this
  // device's queues read, write and wait on. The handle's fd is used up. Throws InvalidInput
  // for a handle of the other kind, from a device of another name or arch, of sizes that do
  // not fit, or whose fd holds less memory than it says (each message names both sides).
  Buffer import_buffer(IpcHandle h);
  Signal import_signal(IpcHandle h);
  Timeline& timeline() { return timeline_; }
  const Timeline& timeline() const { return timeline_; }

  // Copies through the staging ring and the copy queue (memcpy on UMA devices). The ring is
  // host memory, or CPU-visible device memory on a device that cannot reach host memory.
  // copy_in returns once `src` may be reused; copy_out returns with the data in `dst`.
  // Where the CPU cannot map the device's memory (cpu_maps_memory false), copy_in stages
  // through host memory written with the port when the device has a host window (the ring
  // is then at most half of it), else writes the buffer through the port after the work
  // before it; copy_out waits for the work before it, then reads the buffer through the port.
  void copy_in(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size);
  void copy_out(void* dst, const Buffer& src, uint64_t src_offset, uint64_t size);
  // Device-to-device: on this device's copy queue, or through host memory when `src` lives
  // on another device.
  void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
            uint64_t size);
  // Host steady_clock nanoseconds minus GPU timestamp nanoseconds, measured on a queue of
  // `kind` (a timestamp bracketed by host clock reads; error within half the round trip).
  int64_t clock_offset_ns(QueueKind kind) { return clock_sync(kind).offset_ns; }
  // The same measurement with its round trip: the GPU timestamp was taken within `window_ns`
  // of host time, so offset_ns is right within window_ns / 2 (plus a timestamp tick).
  struct ClockSync {
    int64_t offset_ns = 0, window_ns = 0;
  };
  ClockSync clock_sync(QueueKind kind);
  // Wait until everything submitted so far has finished.
  void synchronize(std::chrono::milliseconds timeout = Signal::kDefaultTimeout);

  // The hardware queue of a kind, and its encoder (for recordings).
  HwQueue& hw_queue(QueueKind kind, uint32_t index = 0);
  uint32_t queue_count(QueueKind kind) const {
    return kind == QueueKind::Compute ? 1 : uint32_t(copy_queues_.size());
  }
  Encoder& encoder(QueueKind kind);
  // The largest indirect buffer a recording for that queue is submitted in (dwords, a
  // multiple of its granule): its own limit, or Options::max_indirect_dwords when lower.
  size_t max_indirect_dwords(QueueKind kind, uint32_t index = 0);
  // Serialises submissions: timeline values are handed out in submission order.
  std::mutex& submit_mutex() { return submit_mu_; }

  // Kernel arguments: `args` laid into the kernel-argument ring (aligned to `align`), on the
  // device before this returns (through the port where the CPU cannot map the device's
  // memory: one write), freed when the timeline reaches `tag`. Returns their address.
  uint64_t kernarg_write(std::span<const std::byte> args, uint64_t align, uint64_t tag);
  // Reads device memory through the driver's port (a device with cpu_maps_memory false);
  // the caller orders it after the GPU work that writes there.
  void read_memory(uint64_t va, std::span<std::byte> out) const { driver_->read_memory(va, out); }

  // What this device's handles keep of it (see DeviceLink).
  const std::shared_ptr<DeviceLink>& link() const { return link_; }

  // Used by Signal::wait: sleep on the device interrupt for at most `t`, unless an
  // interrupt arrived since `irq_generation()` returned `seen_generation`.
  uint64_t irq_generation();
  void wait_interrupt(std::chrono::milliseconds t, uint64_t seen_generation);
  // Used by Signal::set: ends the sleeps of wait_interrupt (a host thread set a signal).
  void wake_host_waiters();

 private:
  friend class Buffer;
  friend class Signal;
  void release(Allocation a);
  void release_signal(uint32_t id);
  // core/ipc.cpp
  IpcHandle export_allocation(const Allocation& a, IpcHandle::Kind kind, uint64_t size,
                              uint64_t offset);
  IpcHandle export_signal(const Signal& s);
  Buffer import_allocation(IpcHandle& h, IpcHandle::Kind want, const char* what);
  void staged_copy(bool to_device, const Buffer& buf, uint64_t off, void* host, uint64_t size);
  // The kind allocate_visible hands out; throws (naming `what`) when `host` is null.
  MemoryKind visible_kind() const;
  // A Buffer of `size` bytes (as asked) on allocation `a`, listed as live.
  Buffer hand_out(const Allocation& a, uint64_t size);
  void check_visible(const void* host, const char* what) const;

  std::unique_ptr<DeviceDriver> driver_;
  Options opt_;
  std::shared_ptr<DeviceLink> link_;
  uint64_t serial_;
  mutable std::mutex mem_mu_;  // heap, cache, signal pool
  mutable std::mutex live_mu_;
  std::map<uint64_t, Allocation> live_;  // by address: the buffers handed out
  VaHeap heap_;
  SizeCache<Allocation> cache_;
  std::vector<Allocation> signal_pages_;
  std::vector<Allocation> live_signal_pages_;  // the same, under live_mu_ (live_buffers)
  std::vector<uint32_t> free_signal_slots_;
  std::unique_ptr<HwQueue> compute_queue_;
  std::vector<std::unique_ptr<HwQueue>> copy_queues_;
  std::unique_ptr<Encoder> encoders_[2];
  std::mutex submit_mu_;
  Timeline timeline_;
  std::mutex staging_mu_;  // held for a whole staged copy (see staged_copy)
  std::mutex ring_mu_;
  ShadowMemory kernarg_mem_;
  Buffer staging_mem_;  // none on a device with neither mapped memory nor a host window
  std::unique_ptr<TaggedRing> kernarg_ring_, staging_ring_;
  // One sleeper in the driver at a time; the rest wait for its wake-up (no lost wake-ups
  // with the driver's auto-reset interrupt event).
  std::mutex irq_mu_;
  std::condition_variable irq_cv_;
  bool irq_sleeper_ = false;
  uint64_t irq_generation_ = 0;
};

}  // namespace hcq
