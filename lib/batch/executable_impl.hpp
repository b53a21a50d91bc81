// Internal to lib/batch: what compile() builds and run() replays. Not installed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "batch/batch.hpp"
#include "core/capture.hpp"
#include "core/error.hpp"

namespace hcq::batch {

// The host thread's access to a range of device memory: straight through `host` where the
// CPU maps it (one branch, no copy), else through the device's port (DeviceDriver::read_memory
// / write_memory: a device whose memory the CPU cannot map, as behind a USB bridge, where a
// ShadowMemory's host copy is neither what the GPU wrote nor what it will read). Requests go
// in pieces of at most kPortChunk bytes. A port is not ordered after GPU work: the caller
// reads what a signal it waited for covers. No state of its own: callable from any thread
// (drivers' ports are thread-safe).
struct DeviceRange {
  static constexpr uint64_t kPortChunk = 4 << 20;
  std::byte* host = nullptr;  // null: through `port`
  DeviceDriver* port = nullptr;
  uint64_t va = 0;

  uint64_t load(uint64_t off) const {
    if (host) [[likely]]
      return __atomic_load_n(reinterpret_cast<const uint64_t*>(host + off), __ATOMIC_ACQUIRE);
    uint64_t v;
    port->read_memory(va + off, {reinterpret_cast<std::byte*>(&v), 8});
    return v;
  }
  void store(uint64_t off, uint64_t v) const {
    if (host) [[likely]]
      return __atomic_store_n(reinterpret_cast<uint64_t*>(host + off), v, __ATOMIC_RELEASE);
    port->write_memory(va + off, {reinterpret_cast<const std::byte*>(&v), 8});
  }
  void read(uint64_t off, void* out, uint64_t size) const {
    auto* to = static_cast<std::byte*>(out);
    if (host) return void(std::memcpy(to, host + off, size));
    for (uint64_t at = 0; at < size; at += kPortChunk)
      port->read_memory(va + off + at, {to + at, std::min(kPortChunk, size - at)});
  }
  void write(uint64_t off, const void* in, uint64_t size) const {
    const auto* from = static_cast<const std::byte*>(in);
    if (host) return void(std::memcpy(host + off, from, size));
    for (uint64_t at = 0; at < size; at += kPortChunk)
      port->write_memory(va + off + at, {from + at, std::min(kPortChunk, size - at)});
  }
  // `size` bytes from `src` to `dst`; where neither is mapped, through `bounce` (grown to at
  // most kPortChunk bytes). Overlapping ranges only where both are mapped (memmove).
  static void copy(const DeviceRange& dst, const DeviceRange& src, uint64_t size,
                   std::vector<std::byte>& bounce) {
    if (dst.host && src.host) return void(std::memmove(dst.host, src.host, size));
    if (src.host) return dst.write(0, src.host, size);
    if (dst.host) return src.read(0, dst.host, size);
    bounce.resize(std::min(kPortChunk, std::max<uint64_t>(size, bounce.size())));
    for (uint64_t at = 0; at < size; at += kPortChunk) {
      const uint64_t n = std::min(kPortChunk, size - at);
      src.read(at, bounce.data(), n);
      dst.write(at, bounce.data(), n);
    }
  }
};

// Page-aligned host memory mapped for several devices at its own address (KFD userptr):
// the queues' signals and the staging area of copies between devices live there. A device
// that cannot map the process's memory (msm DRM) allocates it instead, as host memory at the
// same CPU and GPU address, and the others map that. A device that cannot reach host memory
// at all allocates its own CPU-visible memory (compile gives it a memory area of its own), and
// so does a device whose memory the CPU cannot map: there host() is a shadow (ShadowMemory)
// its users mark, publish and refresh, and the host thread reaches the memory through
// range() (the device's port).
class SharedHostMemory {
 public:
  SharedHostMemory() = default;
  SharedHostMemory(const std::vector<Device*>& devs, uint64_t bytes) {
    bytes_ = (std::max<uint64_t>(bytes, 1) + 4095) / 4096 * 4096;
    if (devs.size() == 1 && !devs[0]->properties().caps.cpu_maps_memory) {
      shadow_ = ShadowMemory(*devs[0], bytes_);
      port_ = &devs[0]->driver();
      mem_ = shadow_.host();  // zeroed, as the device's copy is once published
      va_ = shadow_.va();
      shadow_.mark(0, bytes_);
      shadow_.publish();
      return;
    }
    Device* owner = nullptr;
    for (Device* d : devs)
      if ((!d->properties().caps.map_host || !d->properties().caps.host_reachable) && !owner)
        owner = d;
    if (owner) {
      owned_ = owner->allocate_visible(bytes_);
      mem_ = static_cast<std::byte*>(owned_.host());
      if (reinterpret_cast<uint64_t>(mem_) != owned_.va())
        throw InvalidInput("batch: " + owner->name() + " cannot map host memory, and the memory "
                           "it shares with the CPU is not at the same CPU and GPU address");
    } else {
      mem_ = static_cast<std::byte*>(std::aligned_alloc(4096, bytes_));
      if (!mem_) throw Error("batch: out of host memory for " + std::to_string(bytes_) + " bytes");
    }
    std::memset(mem_, 0, bytes_);
    va_ = reinterpret_cast<uint64_t>(mem_);
    for (Device* d : devs)
      if (d != owner) maps_.push_back(d->map_host(mem_, bytes_));
  }
  SharedHostMemory(SharedHostMemory&& o) noexcept { *this = std::move(o); }
  SharedHostMemory& operator=(SharedHostMemory&& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(bytes_, o.bytes_);
    std::swap(maps_, o.maps_);
    std::swap(owned_, o.owned_);
    std::swap(shadow_, o.shadow_);
    std::swap(va_, o.va_);
    std::swap(port_, o.port_);
    return *this;
  }
  ~SharedHostMemory() {
    maps_.clear();  // unmap from the devices before the memory goes
    if (!owned_ && !shadow_) std::free(mem_);
  }
  std::byte* host() const { return mem_; }
  uint64_t va() const { return va_; }
  // The shadow of a device's memory the CPU cannot map, else null (then host() is the memory).
  ShadowMemory* shadow() { return shadow_.shadowed() ? &shadow_ : nullptr; }
  // [offset, ...) as the host thread reaches what the devices see: host() where that is the
  // memory, else the device's port.
  DeviceRange range(uint64_t offset) const {
    return {port_ ? nullptr : mem_ + offset, port_, va_ + offset};
  }
  // The GPU's writes into host() where it is a shadow.
  void refresh() {
    if (shadow_.shadowed()) shadow_.refresh(0, bytes_);
  }

 private:
  std::byte* mem_ = nullptr;
  uint64_t va_ = 0;
  ShadowMemory shadow_;
  DeviceDriver* port_ = nullptr;  // the shadowed device's, else null
  uint64_t bytes_ = 0;
  std::vector<Buffer> maps_;
  Buffer owned_;  // the memory itself, when a device allocated it
};

struct Executable::Impl {
  std::vector<Device*> devs;
  // Queues in device order: each device's compute queue, then its copy queues.
  std::vector<std::unique_ptr<Queue>> queues;
  std::vector<uint32_t> queue_device;  // per queue: index into devs
  std::vector<QueueKind> queue_kind;
  std::vector<uint32_t> queue_index;   // per queue: which queue of that kind on its device
  std::vector<uint32_t> compute_queue; // per device
  std::vector<bool> used;
  // Memory areas: area 0 is host memory that every device reaching it maps; a device that
  // cannot reach host memory has an area of its own (its CPU-visible memory). An area holds
  // a 16-byte slot per queue (the queue's signal where its device lives, elsewhere a mirror
  // the host relays), the staging of the ops there, and their timestamps.
  struct Area {
    SharedHostMemory sync, staging, timestamps;
  };
  std::vector<Area> areas;
  std::vector<uint32_t> device_area;  // per device
  uint32_t area_of(uint32_t q) const { return device_area[queue_device[q]]; }
  // The slot in host(): the memory, or the shadow run() re-arms and publishes.
  uint64_t* slot(uint32_t q, uint32_t area) const {
    return reinterpret_cast<uint64_t*>(areas[area].sync.host() + uint64_t(q) * 16);
  }
  // Queue q's slot in `area` as the host thread reads and writes it (through the device's
  // port where the CPU cannot map the area).
  DeviceRange slot_range(uint32_t q, uint32_t area) const {
    return areas[area].sync.range(uint64_t(q) * 16);
  }
  DeviceRange home_slot(uint32_t q) const { return slot_range(q, area_of(q)); }
  // Signals a queue's consumers in another area wait on: the host copies the queue's value
  // into that area's slot for it until the queue's end value has passed.
  struct Mirror {
    uint32_t queue, area;
    uint64_t end;
  };
  std::vector<Mirror> mirrors;
  bool host_work = false;  // host queues or mirrors: each run wakes the host thread
  bool pump_mirrors(std::vector<uint64_t>& copied) const;
  std::vector<ShadowMemory> kernargs;  // per device: its launches' arguments
  // The patch table, flat so a replay reads few cache lines: a target is a site in a
  // command buffer (a recording not encoded in place has its device copy as a second
  // target) or a kernel-argument word (a LoHi64 site with the argument's offset added).
  // `shadow`: the ShadowMemory whose host copy `words` is in (a device whose memory the CPU
  // cannot map), marked for publishing; null elsewhere.
  struct Target {
    uint32_t* words;
    PatchSite site;
    ShadowMemory* shadow = nullptr;
  };
  std::vector<Target> targets;  // every input's, input after input
  static void write(const std::vector<Target>& t, uint32_t first, uint32_t count, uint64_t v) {
    for (const Target* p = t.data() + first; p != t.data() + first + count; ++p) {
      write_site(p->words, p->site, v);
      if (p->shadow) [[unlikely]]
        p->shadow->mark(uint64_t(reinterpret_cast<std::byte*>(p->words + p->site.dword) -
                                 p->shadow->host()),
                        site_bytes(p->site));
    }
  }
  struct InputPatches {
    uint32_t first = 0, count = 0;  // its run of `targets`
    uint32_t patches = 0;           // the sites and words it patches (devices copies aside)
    uint64_t size;
    Device* device;
    uint64_t bound_va = 0;
    void* bound_host = nullptr;
    const Buffer* bound_buffer = nullptr;  // the last run's (remote calls name it to peers)
    bool host_copied = false;  // a host copy reads or writes it: the CPU must see it
  };
  // Copies on devices without a copy engine run on the host, in a host queue per such device
  // (a queue with no command buffer: a thread at each run waits for its producers' signals,
  // copies, and signals like a GPU queue).
  struct HostOp {
    uint32_t queue;
    uint32_t dst_slot, src_slot;
    uint64_t dst_offset, src_offset, size;
    std::vector<std::pair<uint32_t, uint32_t>> waits;  // (queue, value)
    uint32_t signal = 0;                                // value to signal, 0 for none
    size_t op;                                          // for profiling records
    std::string path = {};  // a file read (src_offset: in the file) instead of a copy
    // A remote write instead (the peer takes the source range), a remote read (into the
    // destination range) or a remote signal, the remote address and signal value being
    // these scalars' values at the run.
    RemotePeer* peer = nullptr;
    detail::RemoteOp remote = {};
    uint32_t addr_scalar = 0, value_scalar = 0;
  };
  // The run's host steps for a capture (capture::host_steps), `done` its timeline values.
  std::vector<capture::HostStep> capture_host_steps(const std::vector<uint64_t>& done) const;
  uint32_t device_index(const Device* d) const;  // in devs
  uint32_t area_device(uint32_t area) const;     // the first device whose area it is
  std::vector<bool> host_queue;            // per queue
  std::vector<HostOp> host_ops;            // in schedule order
  std::vector<uint32_t> host_queue_end;    // per queue: the value its end signals
  struct StagingSlot {
    uint32_t area;
    uint64_t offset;
  };
  std::vector<StagingSlot> staging;        // per staging slot
  uint32_t patch_slots = 0;
  std::vector<std::byte> bounce;  // the host thread's, for copies between ported ranges
  std::exception_ptr host_error;  // a failed host op of the last run, until reported
  void report_host_error();
  std::mutex host_mu;
  void run_host(const std::vector<uint64_t>& prev);
  // The host queues' thread: started by the first run that needs it, then woken per run
  // (starting a thread per run cost more than the rest of a replay).
  struct HostWorker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false, busy = false, stop = false;
    // Set by the destructor: a host op blocked on a stream (a FIFO with no writer) or
    // waiting for a queue gives up, so destruction does not wait for it.
    std::atomic<bool> cancel{false};
    std::vector<uint64_t> prev;  // per device: the timeline value before the run
  } host;
  void start_host(std::vector<uint64_t> prev);
  void wait_host_idle();
  void host_loop();
  struct ScalarPatches {
    std::vector<std::byte*> at;
    std::vector<ShadowMemory*> shadow;  // per `at`: as Target::shadow
    std::vector<Target> sites;          // remote waits' values in the recordings
    uint32_t bytes;
    uint64_t value = 0;
    bool set = false;
  };
  std::vector<InputPatches> inputs;
  std::vector<ScalarPatches> scalars;
  size_t user_inputs = 0;  // inputs [0, user_inputs) are the schedule's; the rest its buffers
  // Per queue, the patch sites of its first command, the wait for its device timeline's
  // previous value, and (the closing compute queue of each device) of its last, the signal
  // of the next: patched in the command buffer at each run, so a submission writes only the
  // indirect buffer into the ring (one GPFIFO entry on NVIDIA).
  std::vector<std::vector<Target>> timeline_waits, timeline_signals;  // per device
  std::vector<std::vector<Queue*>> device_queues;  // per device: its used queues, submitted together
  std::vector<std::vector<uint32_t>> device_queue_ids;  // the same queues' indices
  std::vector<Stats> stats;
  // Profiling: two timestamps per op, names, queues, and the cross-queue waits as edges.
  bool profile = false;
  struct OpInfo {
    size_t call;
    uint32_t queue;
    std::string name;
    // What the trace says of it: a launch's (or kernel copy's) kernel and dimensions, a
    // copy's operands (slots as in HostOp), a load's file.
    std::string kernel = {};
    Dim3 grid = {}, block = {};
    uint32_t dst_slot = 0, src_slot = 0;
    uint64_t dst_offset = 0, src_offset = 0, size = 0;
    std::string path = {};
    bool remote = false;  // a remote write, read, signal or wait: no destination slot
    bool remote_read = false;  // but a remote read has one
    // Its commands in its queue's recording, in dwords (GPU queues): the range of the
    // captured submission's packets (`hcq dump` offsets) that are this op's.
    uint64_t dword_begin = 0, dword_end = 0;
  };
  std::vector<OpInfo> ops;
  std::vector<std::pair<size_t, size_t>> edges;  // producer op -> waiting op
  std::vector<Device::ClockSync> clock_sync;     // per queue (zero for host queues)
  // A slot's address at the last run (an input's or bound buffer's, or staging).
  uint64_t slot_address(uint32_t slot, uint64_t offset) const {
    if (slot < patch_slots) return inputs[slot].bound_va + offset;
    const StagingSlot& st = staging[slot - patch_slots];
    return areas[st.area].staging.va() + st.offset + offset;
  }
  // The devices' links: an executable may outlive its devices (running it is then an Error).
  std::vector<std::shared_ptr<DeviceLink>> links;
  std::mutex run_mu;    // held by run() from its fence to its submission
  mutable std::mutex state_mu;  // last_done and ran, which wait() and points() read during a run
  std::vector<uint64_t> last_run() const;  // last_done, or empty before the first run
  std::vector<uint64_t> last_done;               // per device
  // Per queue: the capture record of the last run's submission (none for a host queue; the
  // vector is empty when no capture was on).
  std::vector<std::optional<uint64_t>> capture_sequence;
  std::vector<std::mutex*> submit_locks;         // the devices' submission locks, in lock order
  bool ran = false;
  size_t last_patches = 0;
  uint64_t bound_by = 0;  // the executable whose own buffers are patched in (its id_)

  ~Impl();
  Device& device_of(uint32_t q) const { return *devs[queue_device[q]]; }
};

}  // namespace hcq::batch
