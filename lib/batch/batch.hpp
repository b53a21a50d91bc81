// The batch compiler: a schedule of kernel launches and copies is compiled once into
// device-resident command buffers (one per queue) plus a patch table; each run writes only
// the patches whose values changed and rings one doorbell per queue.
//
//   batch::Schedule s(dev);
//   auto x = s.input(bytes);                 // bound at each run
//   auto k = s.scalar<float>();              // set at each run
//   s.launch(prog, grid, block, {batch::Arg::buffer(x), batch::Arg::scalar(k), ...});
//   s.copy(y, 0, x, 0, bytes);
//   auto exe = s.compile();
//   uint64_t done = exe.run(batch::Bindings().input(x, buf).scalar(k, 2.0f));
//   dev.timeline().wait(done);
//
// Dependencies are tracked per buffer byte range: a write waits for overlapping earlier reads
// and writes, a read for overlapping earlier writes. Only calls another queue waits on signal;
// a queue waits once per producer queue for the latest value it needs; same-queue order
// needs no wait. Inputs must not alias each other or the bound buffers.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/program.hpp"
#include "core/queue.hpp"

namespace hcq::batch {

// A buffer in a schedule: bound at recording, or an input slot bound at each run.
struct Mem {
  const Buffer* bound = nullptr;
  int32_t input = -1;
  uint64_t size = 0;
  Device* device = nullptr;
  static Mem of(const Buffer& b) {
    if (!b) throw InvalidInput("batch: Mem::of an empty Buffer (freed or moved from)");
    return {&b, -1, b.size(), b.device()};
  }
};

template <class T>
struct Scalar {
  uint32_t slot;
};

// What a call reads or writes.
struct Access {
  Mem mem;
  uint64_t offset = 0, size = 0;
  bool write = false;
  static Access read(Mem m, uint64_t off, uint64_t n) { return {m, off, n, false}; }
  static Access written(Mem m, uint64_t off, uint64_t n) { return {m, off, n, true}; }
};

// A kernel argument: a buffer address (bound or input, plus an offset), a constant value, or
// a scalar variable set at each run.
class Arg {
 public:
  static Arg buffer(Mem m, uint64_t offset = 0) {
    Arg a;
    a.kind_ = Kind::Buffer;
    a.mem_ = m;
    a.offset_ = offset;
    return a;
  }
  template <class T>
  static Arg value(const T& v) {
    Arg a;
    a.kind_ = Kind::Value;
    a.bytes_.resize(sizeof(T));
    std::memcpy(a.bytes_.data(), &v, sizeof(T));
    return a;
  }
  template <class T>
  static Arg scalar(Scalar<T> s) {
    Arg a;
    a.kind_ = Kind::Scalar;
    a.slot_ = s.slot;
    a.bytes_.resize(sizeof(T));
    return a;
  }

 private:
  friend class Schedule;
  friend class Executable;
  friend class Compiler;
  enum class Kind : uint8_t { Buffer, Value, Scalar };
  Kind kind_ = Kind::Value;
  Mem mem_;
  uint64_t offset_ = 0;
  uint32_t slot_ = 0;
  std::vector<std::byte> bytes_;
};

// A binding names the Buffer object, not only its memory: a buffer bound to a slot that a
// remote write or read uses (its registration is kept for later runs, RemotePeer::Local)
// must stay where it is, not moved from or destroyed, while later runs use that binding.
class Bindings {
 public:
  Bindings& input(Mem slot, const Buffer& b) {
    if (!b)
      throw InvalidInput("batch: input " + std::to_string(slot.input) +
                         " bound to an empty Buffer (freed or moved from)");
    inputs_.push_back({uint32_t(slot.input), &b});
    return *this;
  }
  template <class T>
  Bindings& scalar(Scalar<T> s, const T& v) {
    uint64_t bits = 0;
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
    std::memcpy(&bits, &v, sizeof(T));
    scalars_.push_back({s.slot, bits});
    return *this;
  }

 private:
  friend class Executable;
  std::vector<std::pair<uint32_t, const Buffer*>> inputs_;
  std::vector<std::pair<uint32_t, uint64_t>> scalars_;
};

class Executable;
class Compiler;

// A peer in another process or machine that a schedule writes to, reads from or signals
// (issue 20). lib/batch knows no transport: rdma/batch_peer.hpp implements this over an
// rdma::Connection.
// Thread safety: its members are called from an executable's host-queue thread; a peer used
// by several executables must accept calls from several threads at once.
class RemotePeer {
 public:
  // Local bytes a call reads or writes: where the CPU reaches them, and the buffer they are
  // in (at `offset`) where the run bound one the CPU maps, so a transport may keep its
  // registration for the next run (rdma::Endpoint::register_cached); null for the host
  // thread's bounce buffer.
  struct Local {
    std::byte* host = nullptr;
    const Buffer* buffer = nullptr;
    uint64_t offset = 0;
  };
  virtual ~RemotePeer() = default;
  // Copies `size` bytes at `src` (host memory) to the peer's address `remote_addr`, then
  // sets the peer's signal to `value`, in that order, and returns once both have landed
  // (a device-memory target flushed first where the transport needs it). Throws Error,
  // which fails the run (wait() or the next run() throws it).
  virtual void write_and_signal(Local src, uint64_t size, uint64_t remote_addr,
                                uint64_t value) = 0;
  // Copies `size` bytes at the peer's address `remote_addr` to `dst` (host memory) and
  // returns once they are all there. Throws Error as write_and_signal.
  virtual void read(Local dst, uint64_t size, uint64_t remote_addr) = 0;
  // Sets the peer's signal to `value` and returns once it has landed. Throws Error.
  virtual void signal(uint64_t value) = 0;
};

namespace detail {
enum class RemoteOp : uint8_t { Write, Read, Signal };
}

class Schedule {
 public:
  explicit Schedule(Device& dev) : devs_{&dev} {}
  // A schedule over several devices: launches run on their program's device, copies on the
  // copy queue of the buffers' device; a copy between two devices goes through a host
  // staging buffer both can reach (the source device copies into it, the destination device
  // out of it), with the wait between them on the GPUs. A device that cannot reach host
  // memory stages in its own memory instead: a host queue copies between that and the host
  // staging, and the host relays the queues' signals between the two at each run.
  explicit Schedule(std::vector<Device*> devices);

  // An input of the first device, or of `dev`.
  Mem input(uint64_t size) { return input(*devs_.front(), size); }
  Mem input(Device& dev, uint64_t size);
  template <class T>
  Scalar<T> scalar() {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
    scalar_bytes_.push_back(sizeof(T));
    return {uint32_t(scalar_bytes_.size() - 1)};
  }

  // A launch on the compute queue. Without `accesses`, they come from the kernel's metadata:
  // each buffer argument from its offset to the end of the buffer, read-only when the
  // metadata says so (a `const` pointer), else read and written (safe, may over-serialize).
  size_t launch(const Program& p, Dim3 grid, Dim3 block, std::vector<Arg> args,
                std::vector<Access> accesses = {});
  // A copy on a copy queue (device or host-visible buffers of the schedule's devices).
  size_t copy(Mem dst, uint64_t dst_offset, Mem src, uint64_t src_offset, uint64_t size);
  // A "disk" source: bytes [file_offset, file_offset + size) of the file at `path`, read
  // afresh at every run by the host into staging memory and copied into `dst` like any copy.
  // A missing, short or unreadable file fails that run (run() or wait() throw).
  size_t load(Mem dst, uint64_t dst_offset, const std::string& path, uint64_t file_offset,
              uint64_t size);
  // Batches across processes and machines (docs/rdma.md): once the calls writing
  // [src_offset, +size) of `src` are done, the host-queue thread hands the bytes to `peer`,
  // which writes them at the remote address `remote_addr` holds at that run and then sets
  // the peer's signal to the value `signal_value` holds (so a remote schedule's
  // remote_wait() proceeds on its GPU). `src` must be memory the CPU sees; the peer must
  // outlive the executable.
  size_t remote_write(RemotePeer& peer, Mem src, uint64_t src_offset, uint64_t size,
                      Scalar<uint64_t> remote_addr, Scalar<uint64_t> signal_value);
  // A pull from a peer (docs/rdma.md): once the calls before it on [dst_offset, +size) of
  // `dst` are done, the host-queue thread has `peer` read `size` bytes at the remote address
  // `remote_addr` holds at that run into `dst` (memory the CPU sees, else through the
  // device's port), and the calls after it that use that range follow. The read itself does
  // not wait for the peer's producer: record the peer's "ready" first, a remote_wait on a
  // signal the peer's schedule raises with remote_signal once its buffer is written, with
  // the range in its `arrives` (so the read follows the wait), and tell the peer when its
  // buffer may be written again with a remote_signal after the read (see docs/rdma.md).
  size_t remote_read(RemotePeer& peer, Scalar<uint64_t> remote_addr, Mem dst,
                     uint64_t dst_offset, uint64_t size);
  // Sets `peer`'s signal to the value `value` holds at that run, on the host-queue thread of
  // the device of `after`'s first range, once the calls writing the ranges in `after` are
  // done (they count as read by the signal, so later writes to them wait for it too).
  size_t remote_signal(RemotePeer& peer, Scalar<uint64_t> value, std::vector<Access> after);
  // The receiving side: `dev`'s compute queue waits on the GPU until `signal` (one a peer
  // sets, e.g. registered for it) reaches the value `value` holds at that run; the ranges in
  // `arrives` count as written by the wait, so the calls reading them follow it.
  size_t remote_wait(Device& dev, const Signal& signal, Scalar<uint64_t> value,
                     std::vector<Access> arrives);

  struct CompileOptions {
    bool profile = false;     // bracket every call with GPU timestamps
    uint32_t copy_queues = 0;  // copy queues used per device (0: all the device has)
    // Kernel copies: each program's device copies with it on its compute queue instead of a
    // copy queue (hcq has no compiler: the kernel comes from the user). Its arguments are
    // (dst buffer, src buffer, uint32 n, uint32 block), one byte per thread: thread
    // group * block + local copies byte i < n, in workgroups of 256. Needed by a device with
    // no copy queue whose memory is not the host's; devices without either copy on the host.
    std::vector<const Program*> copy_kernels = {};
  };
  // Schedules of the same structure (calls, programs, sizes, ranges, constant arguments) on
  // the same device share one compilation while any executable of it is alive; the buffers
  // bound at recording are patched in like inputs.
  Executable compile() const;
  Executable compile(const CompileOptions& options) const;
  size_t calls() const { return calls_.size(); }

 private:
  friend class Executable;
  friend class Compiler;
  struct Call {  // every member defaulted: calls are made with designated initializers
    bool launch = false;
    const Program* program = nullptr;
    Dim3 grid = {}, block = {};
    std::vector<Arg> args = {};
    Mem dst = {}, src = {};
    uint64_t dst_offset = 0, src_offset = 0, size = 0;
    std::string path = {};  // a load: the file, src_offset its offset
    RemotePeer* peer = nullptr;       // a remote write (src, src_offset, size), read (dst,
    detail::RemoteOp remote = {};     // dst_offset, size) or signal (after `accesses`)
    const Signal* signal = nullptr;   // a remote wait, on `device`'s compute queue
    Device* device = nullptr;
    uint32_t addr_scalar = 0, value_scalar = 0;  // the remote address and signal value
    std::vector<Access> accesses = {};
  };
  void check(const Mem& m, uint64_t off, uint64_t size, const std::string& what) const;
  bool ours(const Device* d) const;

  std::vector<Device*> devs_;
  std::vector<uint64_t> input_sizes_;
  std::vector<Device*> input_devices_;
  std::vector<uint32_t> scalar_bytes_;
  std::vector<Call> calls_;
};

// Thread safety: every member may be called from several threads at once, on one executable
// or on several. Executables of identical schedules share one compilation (see compile()):
// runs of a compilation are serialised, each fencing on the run before it (whichever
// executable or thread made it) before it rewrites the shared command buffers, so a run
// blocks while the one before it is still on the GPU. wait(), points() and profile() see the
// compilation's latest run; to wait for your own run, wait for the value run() returned.
// Schedule is not thread-safe: build one per thread.
class Executable {
 public:
  Executable(Executable&&) noexcept;
  Executable& operator=(Executable&&) noexcept;
  ~Executable();

  // Patch what changed and submit; returns the timeline value on the (first) device that
  // marks the end of this run (points() has every device's). Every input and scalar must be
  // bound on the first run; later runs may bind only what changes. Waits first for the
  // previous run (TimeoutError after `fence_timeout`).
  uint64_t run(const Bindings& b,
               std::chrono::milliseconds fence_timeout = Signal::kDefaultTimeout);
  void wait(std::chrono::milliseconds timeout = Signal::kDefaultTimeout) const;
  // The last run's end on each device's timeline.
  std::vector<std::pair<Device*, uint64_t>> points() const;

  // Patch writes the last run made (bindings and timeline values), for tests and benchmarks.
  size_t last_patch_count() const;
  // Per queue kind (summed over devices, or of one device): how many calls, waits on other
  // queues and signals were encoded. A copy between devices counts on both copy queues.
  struct Stats {
    size_t calls = 0, waits = 0, signals = 0;
  };
  Stats stats(QueueKind k) const;
  Stats stats(const Device& dev, QueueKind k) const;
  // True when both run the same compiled command buffers (the structure cache hit).
  bool shares_compilation_with(const Executable& o) const { return impl_ == o.impl_; }

  // With CompileOptions::profile, after a run has finished: each call's start and end in host
  // steady_clock nanoseconds (GPU timestamps shifted by the offset measured per queue kind).
  struct CallTime {
    size_t call;
    Device* device;
    QueueKind queue;
    uint32_t queue_index;  // which queue of that kind on the device
    std::string name;
    int64_t start_ns, end_ns;
  };
  std::vector<CallTime> profile() const;
  // The last run as a Chrome / Perfetto trace (JSON, docs/trace.md): one complete event per
  // op (a copy between devices makes two or three) on a track per queue that ran calls, a
  // process per device, and a flow arrow for every cross-queue wait; times in host
  // CLOCK_MONOTONIC microseconds; each event's args name its call, kernel and dimensions or
  // copy operands, and the capture submission it went out in. Throws Error when `out` fails.
  void write_trace(std::ostream& out) const;

  struct Impl;  // opaque: the compiled command buffers and patch table

 private:
  friend class Compiler;
  Executable(std::shared_ptr<Impl> impl, std::vector<const Buffer*> bound);
  // Compiled command buffers, shared by every executable of the same structure.
  std::shared_ptr<Impl> impl_;
  // The schedule's own buffers: patched like inputs, so a cached compilation serves other
  // buffers too.
  std::vector<const Buffer*> bound_;
  uint64_t id_ = 0;  // tells the shared compilation whose buffers it holds (nonzero)
};

}  // namespace hcq::batch
