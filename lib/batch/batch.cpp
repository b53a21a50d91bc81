#include "batch/batch.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <exception>
#include <cstdio>
#include <chrono>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "io/file_load.hpp"

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

Schedule::Schedule(std::vector<Device*> devices) : devs_(std::move(devices)) {
  if (devs_.empty()) throw InvalidInput("batch: a schedule needs a device");
  for (size_t i = 0; i < devs_.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (devs_[i] == devs_[j]) throw InvalidInput("batch: a device is listed twice");
}

bool Schedule::ours(const Device* d) const {
  return std::find(devs_.begin(), devs_.end(), d) != devs_.end();
}

Mem Schedule::input(Device& dev, uint64_t size) {
  if (size == 0) throw InvalidInput("batch: an input must have a size");
  if (!ours(&dev)) throw InvalidInput("batch: input on " + dev.name() + ", not a schedule device");
  input_sizes_.push_back(size);
  input_devices_.push_back(&dev);
  return {nullptr, int32_t(input_sizes_.size() - 1), size, &dev};
}

void Schedule::check(const Mem& m, uint64_t off, uint64_t size, const std::string& what) const {
  if (m.bound) {
    if (!ours(m.bound->device()))
      throw InvalidInput("batch: " + what + " uses a buffer of " + m.bound->device()->name() +
                         ", which is not one of the schedule's devices");
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
  if (!ours(&p.device()))
    throw InvalidInput("batch: " + what + " was loaded on " + p.device().name() +
                       ", which is not one of the schedule's devices");
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
    if (want[i]->kind != KernelArg::Kind::Bytes && is_buf != (want[i]->kind == KernelArg::Kind::Buffer))
      throw InvalidInput("batch: " + which + (is_buf ? " is a value" : " is a buffer") +
                         " in the kernel");
    if (is_buf) {
      if (want[i]->size != 8) throw InvalidInput("batch: " + which + " is " + std::to_string(want[i]->size) + " bytes, not an address");
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
  for (auto& a : accesses) {
    check(a.mem, a.offset, a.size, what);
    if (a.mem.device != &p.device())
      throw InvalidInput("batch: " + what + " on " + p.device().name() + " uses memory of " +
                         a.mem.device->name() + "; copy it over first");
  }
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

size_t Schedule::load(Mem dst, uint64_t dst_offset, const std::string& path, uint64_t file_offset,
                      uint64_t size) {
  const std::string what = "load #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " reads 0 bytes");
  if (path.empty()) throw InvalidInput("batch: " + what + " names no file");
  check(dst, dst_offset, size, what + " destination");
  Call c;
  c.launch = false;
  c.dst = dst;
  c.dst_offset = dst_offset;
  c.src_offset = file_offset;
  c.size = size;
  c.path = path;
  c.accesses = {Access::written(dst, dst_offset, size)};
  calls_.push_back(std::move(c));
  return calls_.size() - 1;
}

// ---- Executable -----------------------------------------------------------------------

namespace {

// Page-aligned host memory mapped for several devices at its own address (KFD userptr):
// the queues' signals and the staging area of copies between devices live there. A device
// that cannot map the process's memory (msm DRM) allocates it instead, as host memory at the
// same CPU and GPU address, and the others map that. A device that cannot reach host memory
// at all allocates its own CPU-visible memory (compile gives it a memory area of its own).
class SharedHostMemory {
 public:
  SharedHostMemory() = default;
  SharedHostMemory(const std::vector<Device*>& devs, uint64_t bytes) {
    bytes_ = (std::max<uint64_t>(bytes, 1) + 4095) / 4096 * 4096;
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
    for (Device* d : devs)
      if (d != owner) maps_.push_back(d->map_host(mem_, bytes_));
  }
  SharedHostMemory(SharedHostMemory&& o) noexcept { *this = std::move(o); }
  SharedHostMemory& operator=(SharedHostMemory&& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(bytes_, o.bytes_);
    std::swap(maps_, o.maps_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~SharedHostMemory() {
    maps_.clear();  // unmap from the devices before the memory goes
    if (!owned_) std::free(mem_);
  }
  std::byte* host() const { return mem_; }
  uint64_t va() const { return reinterpret_cast<uint64_t>(mem_); }

 private:
  std::byte* mem_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<Buffer> maps_;
  Buffer owned_;  // the memory itself, when a device allocated it
};

}  // namespace

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
  uint64_t* slot(uint32_t q, uint32_t area) const {
    return reinterpret_cast<uint64_t*>(areas[area].sync.host() + uint64_t(q) * 16);
  }
  uint64_t* home_slot(uint32_t q) const { return slot(q, area_of(q)); }
  // Signals a queue's consumers in another area wait on: the host copies the queue's value
  // into that area's slot for it until the queue's end value has passed.
  struct Mirror {
    uint32_t queue, area;
    uint64_t end;
  };
  std::vector<Mirror> mirrors;
  bool pump_mirrors(std::vector<uint64_t>& copied) const;
  std::vector<Buffer> kernargs;  // per device: its launches' arguments
  // The patch table, flat so a replay reads few cache lines: a target is a site in a
  // command buffer (a recording not encoded in place has its device copy as a second
  // target) or a kernel-argument word (a LoHi64 site with the argument's offset added).
  struct Target {
    uint32_t* words;
    PatchSite site;
  };
  std::vector<Target> targets;  // every input's, input after input
  static void write(const std::vector<Target>& t, uint32_t first, uint32_t count, uint64_t v) {
    for (const Target* p = t.data() + first; p != t.data() + first + count; ++p)
      write_site(p->words, p->site, v);
  }
  struct InputPatches {
    uint32_t first = 0, count = 0;  // its run of `targets`
    uint32_t patches = 0;           // the sites and words it patches (devices copies aside)
    uint64_t size;
    Device* device;
    uint64_t bound_va = 0;
    void* bound_host = nullptr;
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
  };
  std::vector<bool> host_queue;            // per queue
  std::vector<HostOp> host_ops;            // in schedule order
  std::vector<uint32_t> host_queue_end;    // per queue: the value its end signals
  struct StagingSlot {
    uint32_t area;
    uint64_t offset;
  };
  std::vector<StagingSlot> staging;        // per staging slot
  uint32_t patch_slots = 0;
  std::thread host_thread;
  std::exception_ptr host_error;  // a failed host op of the last run, until reported
  void report_host_error();
  std::mutex host_mu;
  void run_host(std::vector<uint64_t> prev);
  struct ScalarPatches {
    std::vector<std::byte*> at;
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
  std::vector<Stats> stats;
  // Profiling: two timestamps per op, names, queues, and the cross-queue waits as edges.
  bool profile = false;
  struct OpInfo {
    size_t call;
    uint32_t queue;
    std::string name;
  };
  std::vector<OpInfo> ops;
  std::vector<std::pair<size_t, size_t>> edges;  // producer op -> waiting op
  std::vector<int64_t> clock_offset_ns;          // per queue
  std::vector<uint64_t> last_done;               // per device
  std::vector<std::mutex*> submit_locks;         // the devices' submission locks, in lock order
  bool ran = false;
  size_t last_patches = 0;
  uint64_t bound_by = 0;  // the executable whose own buffers are patched in (its id_)

  ~Impl();
  Device& device_of(uint32_t q) const { return *devs[queue_device[q]]; }
};

Executable::Executable(std::shared_ptr<Impl> impl, std::vector<const Buffer*> bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {
  static std::atomic<uint64_t> executables{0};
  id_ = ++executables;
}
Executable::Executable(Executable&&) noexcept = default;
Executable& Executable::operator=(Executable&&) noexcept = default;
Executable::~Executable() = default;

Executable::Impl::~Impl() {
  if (host_thread.joinable()) host_thread.join();
  if (!ran) return;
  for (size_t d = 0; d < devs.size(); d++) {
    try {
      devs[d]->timeline().wait(last_done[d], std::chrono::milliseconds(2000));
    } catch (const Error&) {
      // Destroyed while a run is stuck: the device reports that to its own waiters.
    }
  }
}

Executable Schedule::compile() const { return compile(CompileOptions{}); }

namespace {
// Live compilations by devices and structure.
std::mutex cache_mu;
std::map<std::pair<std::vector<Device*>, std::string>, std::weak_ptr<Executable::Impl>> cache;
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
  auto dev_index = [&](const Device* d) {
    return uint32_t(std::find(devs_.begin(), devs_.end(), d) - devs_.begin());
  };
  std::string key;
  auto put = [&](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), 8); };
  put(options.profile);
  put(options.copy_queues);
  for (const Program* k : options.copy_kernels) {
    put(reinterpret_cast<uintptr_t>(&k->kernel()));
    put(ours(&k->device()) ? dev_index(&k->device()) : ~size_t{0});
  }
  put(input_sizes_.size());
  for (size_t i = 0; i < input_sizes_.size(); i++) {
    put(input_sizes_[i]);
    put(dev_index(input_devices_[i]));
  }
  put(scalar_bytes_.size());
  for (uint32_t s : scalar_bytes_) put(s);
  for (const Call& c : calls_) {
    put(c.launch);
    if (c.launch) {
      put(reinterpret_cast<uintptr_t>(&c.program->kernel()));
      for (Dim3 d : {c.grid, c.block})
        put(uint64_t(d.x) | uint64_t(d.y) << 21 | uint64_t(d.z) << 42);
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
    } else if (!c.path.empty()) {
      put(slot_of(c.dst));
      put(c.dst_offset);
      put(c.src_offset);
      put(c.size);
      put(c.path.size());
      key.append(c.path);
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
  for (const Buffer* b : bound) {
    put(b->size());
    put(dev_index(b->device()));
  }

  std::lock_guard cache_lock(cache_mu);
  auto cache_key = std::make_pair(devs_, key);
  if (auto hit = cache.find(cache_key); hit != cache.end())
    if (auto impl = hit->second.lock()) return Executable(std::move(impl), std::move(bound));

  auto impl = std::make_shared<Executable::Impl>();
  Executable::Impl& x = *impl;
  // Queue layout: per device its compute queue, then up to `copy_queues` copy queues.
  std::vector<uint32_t> copy_base(devs_.size()), copy_count(devs_.size());
  std::vector<const Program*> copy_kernel(devs_.size(), nullptr);  // kernel copies per device
  for (const Program* k : options.copy_kernels) {
    if (!ours(&k->device()))
      throw InvalidInput("batch: copy kernel '" + k->kernel().name + "' is loaded on " +
                         k->device().name() + ", not a schedule device");
    std::vector<const KernelArg*> a;
    for (auto& ka : k->kernel().args)
      if (ka.kind != KernelArg::Kind::Hidden) a.push_back(&ka);
    // Addresses are 8 bytes and not values (a cubin says only "bytes"), counts 4 bytes.
    using K = KernelArg::Kind;
    auto address = [](const KernelArg* x) { return x->size == 8 && x->kind != K::Value; };
    auto count = [](const KernelArg* x) { return x->size == 4 && x->kind != K::Buffer; };
    if (a.size() != 4 || !address(a[0]) || !address(a[1]) || !count(a[2]) || !count(a[3]))
      throw InvalidInput("batch: copy kernel '" + k->kernel().name + "' must take (dst buffer, "
                         "src buffer, uint32 n, uint32 block)");
    const size_t d = dev_index(&k->device());
    if (copy_kernel[d])
      throw InvalidInput("batch: two copy kernels for " + devs_[d]->name());
    copy_kernel[d] = k;
  }
  for (size_t d = 0; d < devs_.size(); d++) {
    uint32_t have = devs_[d]->queue_count(QueueKind::Copy);
    copy_count[d] = options.copy_queues ? std::min(have, options.copy_queues) : have;
    if (copy_kernel[d]) copy_count[d] = 0;  // copies are launches on the compute queue
    const bool host = copy_count[d] == 0 && !copy_kernel[d];
    if (host && !devs_[d]->properties().caps.uma)
      throw InvalidInput("batch: " + devs_[d]->name() + " has no copy queue to use, and its "
                         "memory is not the host's (give it a copy kernel)");
    x.compute_queue.push_back(uint32_t(x.queue_device.size()));
    x.queue_device.push_back(uint32_t(d));
    x.queue_kind.push_back(QueueKind::Compute);
    x.queue_index.push_back(0);
    x.host_queue.push_back(false);
    copy_base[d] = uint32_t(x.queue_device.size());
    if (copy_kernel[d]) continue;  // no copy queue
    for (uint32_t i = 0; i < std::max(copy_count[d], 1u); i++) {  // a host queue without
      x.queue_device.push_back(uint32_t(d));                     // a copy engine
      x.queue_kind.push_back(QueueKind::Copy);
      x.queue_index.push_back(i);
      x.host_queue.push_back(host);
    }
    copy_count[d] = std::max(copy_count[d], 1u);
  }
  // Loads read on the host: a host queue per device that loads, after the others.
  std::vector<uint32_t> disk_queue(devs_.size(), UINT32_MAX);
  for (const Call& c : calls_) {
    if (c.path.empty()) continue;
    const uint32_t d = uint32_t(dev_index(c.dst.device));
    if (disk_queue[d] != UINT32_MAX) continue;
    disk_queue[d] = uint32_t(x.queue_device.size());
    x.queue_device.push_back(d);
    x.queue_kind.push_back(QueueKind::Copy);
    x.queue_index.push_back(copy_count[d]);  // after its copy queues
    x.host_queue.push_back(true);
  }
  // Areas (see Impl::Area): devices that reach host memory share area 0.
  uint32_t areas = 1;
  for (Device* d : devs_)
    x.device_area.push_back(d->properties().caps.host_reachable ? 0 : areas++);
  // A copy between devices of different areas goes through the staging of both, the host
  // copying between them on a relay queue (a host queue of the first such copy's source).
  uint32_t relay_queue = UINT32_MAX;
  for (const Call& c : calls_) {
    if (c.launch || !c.path.empty() || relay_queue != UINT32_MAX) continue;
    const uint32_t sd = dev_index(c.src.device);
    if (x.device_area[sd] == x.device_area[dev_index(c.dst.device)]) continue;
    relay_queue = uint32_t(x.queue_device.size());
    x.queue_device.push_back(sd);
    x.queue_kind.push_back(QueueKind::Copy);
    x.queue_index.push_back(copy_count[sd] + (disk_queue[sd] != UINT32_MAX));
    x.host_queue.push_back(true);
  }
  const uint32_t nq = uint32_t(x.queue_device.size());
  const uint32_t user_slots = uint32_t(input_sizes_.size()), patch_slots = user_slots + uint32_t(bound.size());
  x.devs = devs_;
  for (Device* d : devs_) x.submit_locks.push_back(&d->submit_mutex());
  std::sort(x.submit_locks.begin(), x.submit_locks.end());
  x.user_inputs = user_slots;
  x.stats.resize(nq);
  x.last_done.assign(devs_.size(), 0);

  // 1. Ops: each call on its queue; a copy between devices becomes two ops around a staging
  // range (a memory slot of its own, after the patchable ones).
  struct Op {
    size_t call;
    uint32_t queue;
    bool launch;
    uint32_t dst_slot = 0, src_slot = 0;
    uint64_t dst_offset = 0, src_offset = 0, size = 0;
    std::string name;
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t, bool>> accesses;  // slot, off, size, write
    std::string path = {};  // a file read on the host (src_offset: in the file)
  };
  std::vector<Op> ops;
  std::vector<uint64_t> staging_bytes(areas, 0);
  auto stage = [&](uint32_t area, uint64_t size) {  // a new staging slot in `area`
    x.staging.push_back({area, staging_bytes[area]});
    staging_bytes[area] += (size + 255) / 256 * 256;
    return patch_slots + uint32_t(x.staging.size() - 1);
  };
  for (size_t i = 0; i < calls_.size(); i++) {
    const Call& c = calls_[i];
    if (c.launch) {
      Op o{i, x.compute_queue[dev_index(&c.program->device())], true, 0, 0, 0, 0, 0, {}, {}};
      o.name = c.program->kernel().name;
      for (auto& a : c.accesses) o.accesses.emplace_back(slot_of(a.mem), a.offset, a.size, a.write);
      ops.push_back(std::move(o));
      continue;
    }
    if (!c.path.empty()) {  // a load: the host reads into staging, a copy takes it from there
      const uint32_t dd = dev_index(c.dst.device);
      const uint32_t st = stage(x.device_area[dd], c.size);
      const std::string name = "read " + std::to_string(c.size) + " bytes of " + c.path;
      Op rd{i, disk_queue[dd], false, st, st, 0, c.src_offset, c.size, name, {}};
      rd.accesses = {{st, 0, c.size, true}};
      rd.path = c.path;
      const uint32_t q = copy_kernel[dd] ? x.compute_queue[dd] : copy_base[dd];
      Op in{i, q, false, slot_of(c.dst), st, c.dst_offset, 0, c.size,
            "copy " + std::to_string(c.size) + " bytes from staging", {}};
      in.accesses = {{st, 0, c.size, false}, {in.dst_slot, c.dst_offset, c.size, true}};
      ops.push_back(std::move(rd));
      ops.push_back(std::move(in));
      continue;
    }
    // Within a device: its first copy queue. Between devices: the copy queue of the peer
    // distance on both sides, so all-to-all traffic spreads over the copy engines.
    const uint32_t dd = dev_index(c.dst.device), sd = dev_index(c.src.device);
    const uint32_t D = uint32_t(devs_.size());
    const uint32_t lane = dd == sd ? 0 : ((dd + D - sd) % D) - 1;
    auto queue_for = [&](uint32_t d) {
      return copy_kernel[d] ? x.compute_queue[d] : copy_base[d] + lane % copy_count[d];
    };
    uint32_t dq = queue_for(dd), sq = queue_for(sd);
    std::string name = "copy " + std::to_string(c.size) + " bytes";
    if ((copy_kernel[dd] || copy_kernel[sd]) && c.size >= (1ull << 32))
      throw InvalidInput("batch: call " + std::to_string(i) + " copies " + std::to_string(c.size) +
                         " bytes, more than a copy kernel's 32-bit count");
    if (dq == sq) {
      Op o{i, dq, false, slot_of(c.dst), slot_of(c.src), c.dst_offset, c.src_offset, c.size, name, {}};
      o.accesses = {{o.src_slot, c.src_offset, c.size, false}, {o.dst_slot, c.dst_offset, c.size, true}};
      ops.push_back(std::move(o));
      continue;
    }
    uint32_t st = stage(x.device_area[sd], c.size);
    Op out{i, sq, false, st, slot_of(c.src), 0, c.src_offset, c.size, name + " to staging", {}};
    out.accesses = {{out.src_slot, c.src_offset, c.size, false}, {st, 0, c.size, true}};
    ops.push_back(std::move(out));
    if (x.device_area[sd] != x.device_area[dd]) {  // the host carries it between the areas
      const uint32_t to = stage(x.device_area[dd], c.size);
      Op relay{i, relay_queue, false, to, st, 0, 0, c.size, name + " between staging areas", {}};
      relay.accesses = {{st, 0, c.size, false}, {to, 0, c.size, true}};
      ops.push_back(std::move(relay));
      st = to;
    }
    Op in{i, dq, false, slot_of(c.dst), st, c.dst_offset, 0, c.size, name + " from staging", {}};
    in.accesses = {{st, 0, c.size, false}, {in.dst_slot, c.dst_offset, c.size, true}};
    ops.push_back(std::move(in));
  }
  const size_t n = ops.size();

  // 2. Position of each op on its queue, and the ops it must follow.
  std::vector<uint32_t> pos(n), count(nq, 0);
  std::map<uint32_t, RangeTracker> trackers;
  std::vector<std::vector<int32_t>> deps(n);
  for (size_t i = 0; i < n; i++) {
    pos[i] = ++count[ops[i].queue];
    for (auto& [slot, off, size, write] : ops[i].accesses)
      trackers[slot].access(off, off + size, write, int32_t(i), deps[i]);
  }
  // 3. One wait per producer queue, for the latest value needed; the producers signal.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> waits(n);  // (queue, value)
  std::vector<bool> signals(n, false);
  std::vector<uint32_t> waited(size_t(nq) * nq, 0);  // [consumer * nq + producer]
  for (size_t i = 0; i < n; i++) {
    std::map<uint32_t, int32_t> latest;  // producer queue -> latest op needed
    for (int32_t d : deps[i]) {
      uint32_t pq = ops[size_t(d)].queue;
      if (pq == ops[i].queue) continue;  // same-queue order stands
      auto [it, fresh] = latest.emplace(pq, d);
      if (!fresh && pos[size_t(d)] > pos[size_t(it->second)]) it->second = d;
    }
    for (auto& [pq, d] : latest) {
      uint32_t& w = waited[size_t(ops[i].queue) * nq + pq];
      if (pos[size_t(d)] <= w) continue;  // an earlier wait on that queue covers it
      w = pos[size_t(d)];
      waits[i].push_back({pq, w});
      signals[size_t(d)] = true;
      x.edges.push_back({size_t(d), i});
    }
  }

  // 4. Memory: per area, signals, staging and timestamps (see Impl::Area); kernel arguments
  // per device (values written now, buffers and scalars patched).
  x.patch_slots = patch_slots;
  x.profile = options.profile;
  x.areas.resize(areas);
  for (uint32_t a = 0; a < areas; a++) {
    std::vector<Device*> in;
    for (size_t d = 0; d < devs_.size(); d++)
      if (x.device_area[d] == a) in.push_back(devs_[d]);
    if (in.empty()) continue;  // no device reaches host memory: area 0 goes unused
    x.areas[a].sync = SharedHostMemory(in, uint64_t(nq) * 16);
    if (staging_bytes[a]) x.areas[a].staging = SharedHostMemory(in, staging_bytes[a]);
    if (x.profile) x.areas[a].timestamps = SharedHostMemory(in, std::max<size_t>(n, 1) * 32);
  }
  std::vector<uint64_t> karg_off(n, 0), karg_bytes(devs_.size(), 0);
  // The program an op launches: its own, or its device's copy kernel for a copy on a compute
  // queue.
  auto program_of = [&](const Op& o) -> const Program* {
    if (o.launch) return calls_[o.call].program;
    return x.queue_kind[o.queue] == QueueKind::Compute ? copy_kernel[x.queue_device[o.queue]]
                                                       : nullptr;
  };
  for (size_t i = 0; i < n; i++)
    if (const Program* prog = program_of(ops[i])) {
      const auto& k = prog->kernel();
      uint64_t align = std::max<uint64_t>(k.kernarg_align, 16);
      uint64_t& total = karg_bytes[x.queue_device[ops[i].queue]];
      total = (total + align - 1) / align * align;
      karg_off[i] = total;
      total += std::max<uint32_t>(k.kernarg_size, 16);
    }
  x.kernargs.resize(devs_.size());
  for (size_t d = 0; d < devs_.size(); d++)
    if (karg_bytes[d]) {
      x.kernargs[d] = devs_[d]->allocate_visible(karg_bytes[d]);
      std::memset(x.kernargs[d].host(), 0, karg_bytes[d]);
    }
  x.inputs.resize(patch_slots);
  // Per input, what it patches: sites in a queue's recording, kernel-argument words (with
  // the argument's offset); made into the flat table once the recordings are bound.
  std::vector<std::vector<std::pair<Queue*, PatchSite>>> input_sites(patch_slots);
  std::vector<std::vector<std::pair<uint64_t*, uint64_t>>> input_words(patch_slots);
  for (uint32_t s = 0; s < user_slots; s++) {
    x.inputs[s].size = input_sizes_[s];
    x.inputs[s].device = input_devices_[s];
  }
  for (size_t s = 0; s < bound.size(); s++) {
    x.inputs[user_slots + s].size = bound[s]->size();
    x.inputs[user_slots + s].device = bound[s]->device();
  }
  x.scalars.resize(scalar_bytes_.size());
  for (size_t s = 0; s < scalar_bytes_.size(); s++) x.scalars[s].bytes = scalar_bytes_[s];
  // Queue q's signal as queues of `area` see it: its own slot, or a mirror the host keeps.
  std::set<std::pair<uint32_t, uint32_t>> mirrored;
  auto signal_va = [&](uint32_t q, uint32_t area) {
    if (area != x.area_of(q)) mirrored.insert({q, area});
    return reinterpret_cast<uint64_t>(x.slot(q, area));
  };
  // An address operand: patched for input and bound slots (an offset stands in until the
  // first run), fixed for staging.
  auto address = [&](uint32_t slot, uint64_t off) {
    if (slot < patch_slots) return off;
    const auto& st = x.staging[slot - patch_slots];
    return x.areas[st.area].staging.va() + st.offset + off;
  };
  auto timestamp_va = [&](size_t op) {
    return x.areas[x.area_of(ops[op].queue)].timestamps.va() + op * 32;
  };

  // 5. Encode every queue once, straight into device memory.
  x.used.assign(nq, false);
  std::vector<uint64_t> estimate(nq, 64);
  for (size_t i = 0; i < n; i++) {
    x.used[ops[i].queue] = true;
    estimate[ops[i].queue] += ops[i].launch ? 160 : 64 + 8 * (ops[i].size >> 22) + 24 * waits[i].size();
  }
  for (uint32_t q : x.compute_queue) x.used[q] = true;  // each device's closer
  for (uint32_t q = 0; q < nq; q++) {
    Device& dev = x.device_of(q);
    if (x.host_queue[q])
      x.queues.push_back(nullptr);  // its work is done by the host at each run
    else if (x.queue_kind[q] == QueueKind::Compute)
      x.queues.push_back(std::make_unique<ComputeQueue>(dev));
    else
      x.queues.push_back(std::make_unique<CopyQueue>(dev, x.queue_index[q]));
    if (x.used[q] && x.queues[q]) x.queues[q]->encode_in_place(estimate[q] + 24 * nq);
  }
  // The sites of a queue's last command that play `role`.
  auto last_sites = [](const Queue& Q, PatchRole role) {
    std::vector<PatchSite> out;
    for (const PatchSite& s : Q.sites_of(Q.commands() - 1))
      if (s.role == role) out.push_back(s);
    return out;
  };
  std::vector<std::vector<PatchSite>> timeline_waits(nq), timeline_signals(nq);
  for (uint32_t q = 0; q < nq; q++) {
    if (!x.used[q] || x.host_queue[q]) continue;
    x.queues[q]->wait(x.device_of(q).timeline().signal().va(), 0);
    timeline_waits[q] = last_sites(*x.queues[q], PatchRole::WaitValue);
    if (x.queue_kind[q] == QueueKind::Compute)
      static_cast<ComputeQueue&>(*x.queues[q]).memory_barrier();
  }
  for (size_t i = 0; i < n; i++) {
    const Op& o = ops[i];
    if (x.host_queue[o.queue]) {
      x.host_ops.push_back({o.queue, o.dst_slot, o.src_slot, o.dst_offset, o.src_offset, o.size,
                            waits[i], signals[i] ? pos[i] : 0, i, o.path});
      for (uint32_t slot : {o.dst_slot, o.src_slot})
        if (slot < patch_slots) x.inputs[slot].host_copied = true;
      x.stats[o.queue].waits += waits[i].size();
      x.stats[o.queue].calls++;
      x.stats[o.queue].signals += signals[i];
      x.ops.push_back({o.call, o.queue, o.name});
      continue;
    }
    Queue& Q = *x.queues[o.queue];
    for (auto& [pq, value] : waits[i]) Q.wait(signal_va(pq, x.area_of(o.queue)), value);
    x.stats[o.queue].waits += waits[i].size();
    if (x.profile) Q.timestamp_at(timestamp_va(i));  // two 16-byte records per op
    if (o.launch) {
      const Call& c = calls_[o.call];
      const uint32_t d = x.queue_device[o.queue];
      auto* args = static_cast<std::byte*>(x.kernargs[d].host()) + karg_off[i];
      const auto& init = c.program->kernel().kernarg_init;
      std::copy(init.begin(), init.begin() + std::min<size_t>(init.size(), c.program->kernel().kernarg_size), args);
      size_t a = 0;
      for (auto& ka : c.program->kernel().args) {
        if (ka.kind == KernelArg::Kind::Hidden) continue;
        const Arg& arg = c.args[a++];
        std::byte* at = args + ka.offset;
        if (arg.kind_ == Arg::Kind::Buffer)
          input_words[slot_of(arg.mem_)].push_back({reinterpret_cast<uint64_t*>(at), arg.offset_});
        else if (arg.kind_ == Arg::Kind::Scalar)
          x.scalars[arg.slot_].at.push_back(at);
        else
          std::memcpy(at, arg.bytes_.data(), arg.bytes_.size());
      }
      auto& cq = static_cast<ComputeQueue&>(Q);
      cq.memory_barrier();
      cq.exec(*c.program, x.kernargs[d].va() + karg_off[i], c.grid, c.block);
    } else if (const Program* kp = program_of(o)) {  // a kernel copy
      const uint32_t d = x.queue_device[o.queue];
      auto* args = static_cast<std::byte*>(x.kernargs[d].host()) + karg_off[i];
      const KernelObject& k = kp->kernel();
      std::copy(k.kernarg_init.begin(),
                k.kernarg_init.begin() + std::min<size_t>(k.kernarg_init.size(), k.kernarg_size), args);
      std::vector<const KernelArg*> ka;
      for (auto& a : k.args)
        if (a.kind != KernelArg::Kind::Hidden) ka.push_back(&a);
      auto put_address = [&](const KernelArg* a, uint32_t slot, uint64_t off) {
        auto* at = reinterpret_cast<uint64_t*>(args + a->offset);
        if (slot < patch_slots)
          input_words[slot].push_back({at, off});
        else
          *at = address(slot, off);
      };
      put_address(ka[0], o.dst_slot, o.dst_offset);
      put_address(ka[1], o.src_slot, o.src_offset);
      constexpr uint32_t kBlock = 256;
      const uint32_t bytes = uint32_t(o.size);
      std::memcpy(args + ka[2]->offset, &bytes, 4);
      std::memcpy(args + ka[3]->offset, &kBlock, 4);
      auto& cq = static_cast<ComputeQueue&>(Q);
      cq.memory_barrier();
      cq.exec(*kp, x.kernargs[d].va() + karg_off[i], {uint32_t((o.size + kBlock - 1) / kBlock), 1, 1},
              {kBlock, 1, 1});
    } else {
      auto& kq = static_cast<CopyQueue&>(Q);
      kq.copy(address(o.dst_slot, o.dst_offset), address(o.src_slot, o.src_offset), o.size);
      for (auto& s : kq.sites_of(kq.commands() - 1)) {
        bool dst = s.role == PatchRole::CopyDst;
        uint32_t slot = dst ? o.dst_slot : o.src_slot;
        if (slot >= patch_slots) continue;  // staging: a fixed address
        PatchSite site = s;
        site.add += dst ? o.dst_offset : o.src_offset;
        input_sites[slot].push_back({&kq, site});
      }
    }
    x.stats[o.queue].calls++;
    if (x.profile) Q.timestamp_at(timestamp_va(i) + 16);
    if (signals[i]) {
      Q.signal_at(signal_va(o.queue, x.area_of(o.queue)), pos[i], false);
      x.stats[o.queue].signals++;
    }
    x.ops.push_back({o.call, o.queue, o.name});
  }
  // 6. Close: every queue reports its end; each device's compute queue waits for all of
  // them, then advances its device timeline (patched with each run's value).
  x.host_queue_end.assign(nq, 0);
  for (uint32_t q = 0; q < nq; q++) {
    if (!x.used[q]) continue;
    if (x.host_queue[q])
      x.host_queue_end[q] = count[q] + 1;
    else
      x.queues[q]->signal_at(signal_va(q, x.area_of(q)), count[q] + 1, false);
  }
  for (uint32_t q : x.compute_queue) {
    for (uint32_t p = 0; p < nq; p++)
      if (p != q && x.used[p]) x.queues[q]->wait(signal_va(p, x.area_of(q)), count[p] + 1);
    x.queues[q]->signal_at(x.device_of(q).timeline().signal().va(), 0, true);
    timeline_signals[q] = last_sites(*x.queues[q], PatchRole::SignalValue);
  }
  for (auto [q, area] : mirrored) x.mirrors.push_back({q, area, count[q] + 1uLL});
  for (uint32_t q = 0; q < nq; q++)
    if (x.used[q] && x.queues[q]) x.queues[q]->bind();
  // 7. The flat patch table, now that every recording sits where it stays.
  auto add_site = [](std::vector<Executable::Impl::Target>& out, Queue& Q, const PatchSite& s) {
    auto [words, device_copy] = Q.patch_bases();
    out.push_back({words, s});
    if (device_copy) out.push_back({device_copy, s});
  };
  for (uint32_t s = 0; s < patch_slots; s++) {
    auto& in = x.inputs[s];
    in.first = uint32_t(x.targets.size());
    for (auto& [Q, site] : input_sites[s]) add_site(x.targets, *Q, site);
    for (auto& [word, add] : input_words[s])
      x.targets.push_back({reinterpret_cast<uint32_t*>(word),
                           offset_site(0, PatchFormat::LoHi64, PatchRole::KernargAddress, add)});
    in.count = uint32_t(x.targets.size()) - in.first;
    in.patches = uint32_t(input_sites[s].size() + input_words[s].size());
  }
  x.timeline_waits.resize(devs_.size());
  x.timeline_signals.resize(devs_.size());
  for (uint32_t q = 0; q < nq; q++) {
    for (auto& s : timeline_waits[q]) add_site(x.timeline_waits[x.queue_device[q]], *x.queues[q], s);
    for (auto& s : timeline_signals[q])
      add_site(x.timeline_signals[x.queue_device[q]], *x.queues[q], s);
  }
  if (x.profile) {
    x.clock_offset_ns.assign(nq, 0);  // host queues record host time: no offset
    for (uint32_t q = 0; q < nq; q++)
      if (x.used[q] && !x.host_queue[q])
        x.clock_offset_ns[q] = x.device_of(q).clock_offset_ns(x.queue_kind[q]);
  }
  cache[cache_key] = impl;
  for (auto it = cache.begin(); it != cache.end();)  // forget compilations no one holds
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  return Executable(std::move(impl), std::move(bound));
}

uint64_t Executable::run(const Bindings& b, std::chrono::milliseconds fence_timeout) {
  Impl& x = *impl_;
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
  if (x.host_thread.joinable()) x.host_thread.join();  // done: the fence above saw its end
  size_t patches = 0;
  auto bind = [&](uint32_t slot, const Buffer* buf) {
    auto& in = x.inputs[slot];
    if (buf->device() != in.device)
      throw InvalidInput("batch: input " + std::to_string(slot) + " is bound to a buffer of " +
                         buf->device()->name() + ", the schedule has it on " + in.device->name());
    if (buf->size() < in.size)
      throw InvalidInput("batch: input " + std::to_string(slot) + " needs " +
                         std::to_string(in.size) + " bytes, the buffer has " +
                         std::to_string(buf->size()));
    if (in.host_copied && !buf->host())
      throw InvalidInput("batch: input " + std::to_string(slot) + " is copied on the host (" +
                         in.device->name() + " has no copy engine), but the CPU cannot see it");
    in.bound_host = buf->host();
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
    for (std::byte* at : sc.at) std::memcpy(at, &bits, sc.bytes);
    patches += sc.at.size();
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
    if (x.areas[a].sync.host())
      for (uint32_t q = 0; q < nq; q++) __atomic_store_n(x.slot(q, a), 0, __ATOMIC_RELAXED);
  // Submit under every device's submission lock, taken in one order (no deadlock with
  // another multi-device run).
  const auto& locks = x.submit_locks;
  for (auto* m : locks) m->lock();
  for (size_t d = 0; d < x.devs.size(); d++) {
    auto [prev, next] = x.devs[d]->timeline().advance();
    x.last_done[d] = next;
    Impl::write(x.timeline_waits[d], 0, uint32_t(x.timeline_waits[d].size()), prev);
    Impl::write(x.timeline_signals[d], 0, uint32_t(x.timeline_signals[d].size()), next);
  }
  try {
    for (uint32_t q = 0; q < nq; q++)
      if (x.used[q] && x.queues[q]) x.queues[q]->submit();
  } catch (...) {
    for (auto* m : locks) m->unlock();
    throw;
  }
  for (auto* m : locks) m->unlock();
  if (std::find(x.host_queue.begin(), x.host_queue.end(), true) != x.host_queue.end() ||
      !x.mirrors.empty()) {
    std::vector<uint64_t> prev(x.devs.size());
    for (size_t d = 0; d < x.devs.size(); d++) prev[d] = x.last_done[d] - 1;
    x.host_thread = std::thread([&x, prev] { x.run_host(prev); });
  }
  x.ran = true;
  x.last_patches = patches;
  return x.last_done[0];
}

void Executable::wait(std::chrono::milliseconds timeout) const {
  if (!impl_->ran) return;
  for (size_t d = 0; d < impl_->devs.size(); d++) {
    try {
      impl_->devs[d]->timeline().wait(impl_->last_done[d], timeout);
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

// Copies each mirrored signal's new value into its mirror; true once every one has relayed
// its queue's end value. `copied`: the value each last relayed.
bool Executable::Impl::pump_mirrors(std::vector<uint64_t>& copied) const {
  bool done = true;
  for (size_t m = 0; m < mirrors.size(); m++) {
    const Mirror& mi = mirrors[m];
    const uint64_t v = __atomic_load_n(home_slot(mi.queue), __ATOMIC_ACQUIRE);
    if (v != copied[m]) __atomic_store_n(slot(mi.queue, mi.area), copied[m] = v, __ATOMIC_RELEASE);
    done &= v >= mi.end;
  }
  return done;
}

// A run's host queues: wait for the device timelines' previous values, then each host op in
// schedule order waits for its producers, copies, and signals; each host queue ends by
// signalling its end value, which the device's closing queue waits for. Meanwhile, and until
// every mirrored signal has passed its end, the host relays signals between areas.
void Executable::Impl::run_host(std::vector<uint64_t> prev) {
  std::vector<uint64_t> copied(mirrors.size(), 0);
  using clock = std::chrono::steady_clock;
  try {
    for (size_t d = 0; d < devs.size(); d++) {
      bool has = false;
      for (size_t q = 0; q < host_queue.size(); q++) has |= host_queue[q] && queue_device[q] == d && used[q];
      if (has) devs[d]->timeline().wait(prev[d]);
    }
    auto host_of = [&](uint32_t slot, uint64_t off) -> char* {
      if (slot < patch_slots) return static_cast<char*>(inputs[slot].bound_host) + off;
      const StagingSlot& st = staging[slot - patch_slots];
      return reinterpret_cast<char*>(areas[st.area].staging.host()) + st.offset + off;
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
        while (__atomic_load_n(home_slot(pq), __ATOMIC_ACQUIRE) < value) {
          if (clock::now() > deadline)
            throw TimeoutError("batch: a host copy waited 10 s for queue " + std::to_string(pq) +
                               " to reach " + std::to_string(value));
          pump_mirrors(copied);
          std::this_thread::sleep_for(std::chrono::microseconds(5));
        }
      }
      auto* ts = profile ? reinterpret_cast<uint64_t*>(areas[area_of(h.queue)].timestamps.host())
                         : nullptr;
      if (ts) ts[h.op * 4 + 1] = now_ticks(h.queue);
      if (h.path.empty())
        std::memmove(host_of(h.dst_slot, h.dst_offset), host_of(h.src_slot, h.src_offset), h.size);
      else
        io::read_range(h.path, h.src_offset, host_of(h.dst_slot, h.dst_offset), h.size,
                       "batch: load of " + h.path);
      if (ts) ts[h.op * 4 + 3] = now_ticks(h.queue);
      if (h.signal) __atomic_store_n(home_slot(h.queue), uint64_t(h.signal), __ATOMIC_RELEASE);
      pump_mirrors(copied);
    }
  } catch (const Error&) {
    // Reported by the next wait() or run(). The host queues still signal their ends below,
    // so the GPU queues waiting on them finish the run and the devices stay usable.
    std::lock_guard lk(host_mu);
    host_error = std::current_exception();
  }
  for (size_t q = 0; q < host_queue.size(); q++)
    if (host_queue[q] && used[q])
      __atomic_store_n(home_slot(uint32_t(q)), uint64_t(host_queue_end[q]), __ATOMIC_RELEASE);
  // Relay until every mirrored queue has ended; give up after 10 s without progress (a
  // faulted or hung device: its waiters hear of that from the device).
  auto last_progress = clock::now();
  for (std::vector<uint64_t> before = copied; !pump_mirrors(copied); before = copied) {
    if (copied != before) last_progress = clock::now();
    if (clock::now() - last_progress > std::chrono::seconds(10)) break;
    std::this_thread::sleep_for(std::chrono::microseconds(5));
  }
}

std::vector<std::pair<Device*, uint64_t>> Executable::points() const {
  std::vector<std::pair<Device*, uint64_t>> out;
  for (size_t d = 0; d < impl_->devs.size(); d++)
    out.push_back({impl_->devs[d], impl_->last_done[d]});
  return out;
}

size_t Executable::last_patch_count() const { return impl_->last_patches; }

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

std::vector<Executable::CallTime> Executable::profile() const {
  const Impl& x = *impl_;
  if (!x.profile) throw InvalidInput("batch: profile() needs a schedule compiled with profile");
  if (!x.ran) throw InvalidInput("batch: profile() before the first run");
  wait();
  std::vector<CallTime> out;
  for (size_t i = 0; i < x.ops.size(); i++) {
    uint32_t q = x.ops[i].queue;
    const auto* ts = reinterpret_cast<const uint64_t*>(x.areas[x.area_of(q)].timestamps.host());
    Device& dev = x.device_of(q);
    const double ns_per_tick = 1e9 / double(dev.properties().timestamp_hz);
    auto host = [&](uint64_t t) {
      return int64_t(double(t) * ns_per_tick) + x.clock_offset_ns[q];
    };
    out.push_back({x.ops[i].call, &dev, x.queue_kind[q], x.queue_index[q], x.ops[i].name,
                   host(ts[4 * i + 1]),    // the timestamps sit in each record's second half
                   host(ts[4 * i + 3])});
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
  // A process per device, a thread per queue (tid = the queue's index in the schedule).
  auto pid = [&](uint32_t q) { return x.queue_device[q] + 1; };
  for (size_t d = 0; d < x.devs.size(); d++)
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << d + 1
        << ",\"args\":{\"name\":" << json_string(x.devs[d]->name()) << "}},\n";
  for (uint32_t q = 0; q < x.queue_device.size(); q++)
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid(q) << ",\"tid\":" << q
        << ",\"args\":{\"name\":"
        << json_string(std::string(to_string(x.queue_kind[q])) + " queue " +
                       std::to_string(x.queue_index[q]))
        << "}},\n";
  for (size_t i = 0; i < calls.size(); i++) {
    const auto& c = calls[i];
    uint32_t q = x.ops[i].queue;
    out << "{\"name\":" << json_string(c.name) << ",\"cat\":\"call\",\"ph\":\"X\",\"pid\":"
        << pid(q) << ",\"tid\":" << q << ",\"ts\":" << us(c.start_ns) << ",\"dur\":"
        << std::to_string(double(std::max<int64_t>(0, c.end_ns - c.start_ns)) / 1000.0)
        << ",\"args\":{\"call\":" << c.call << "}},\n";
  }
  size_t id = 0;
  for (auto& [from, to] : x.edges) {  // a flow arrow from producer end to consumer start
    uint32_t qa = x.ops[from].queue, qb = x.ops[to].queue;
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":" << id
        << ",\"pid\":" << pid(qa) << ",\"tid\":" << qa << ",\"ts\":" << us(calls[from].end_ns)
        << "},\n";
    out << "{\"name\":\"wait\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":"
        << id++ << ",\"pid\":" << pid(qb) << ",\"tid\":" << qb
        << ",\"ts\":" << us(calls[to].start_ns) << "},\n";
  }
  out << "{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":0}\n]}\n";
}

}  // namespace hcq::batch
