// Compiling a schedule: queue assignment, dependencies per byte range, encoding every queue
// once into device memory, and the patch table a run writes.
#include "batch/executable_impl.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

namespace hcq::batch {

namespace {

// Threads per workgroup of a kernel copy (CompileOptions::copy_kernels).
constexpr uint32_t kCopyKernelBlock = 256;

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

// Live compilations by devices and structure. Devices are named by their links, not their
// addresses: a device opened where a closed one was is another device (a live compilation
// holds the closed device's link, so its address is not reused).
std::mutex cache_mu;
std::map<std::pair<std::vector<const DeviceLink*>, std::string>, std::weak_ptr<Executable::Impl>>
    cache;

}  // namespace

// compile() in stages, each leaving in members what the later ones read.
class Compiler {
 public:
  Compiler(const Schedule& s, const Schedule::CompileOptions& options)
      : s_(s), options(options), devs_(s.devs_), input_sizes_(s.input_sizes_),
        input_devices_(s.input_devices_), scalar_bytes_(s.scalar_bytes_), calls_(s.calls_) {}

  Executable compile() {
    const std::string key = structure_key();
    std::lock_guard cache_lock(cache_mu);
    std::vector<const DeviceLink*> links;
    for (Device* d : devs_) links.push_back(d->link().get());
    auto cache_key = std::make_pair(std::move(links), key);
    if (auto hit = cache.find(cache_key); hit != cache.end())
      if (auto shared = hit->second.lock()) return Executable(std::move(shared), std::move(bound));
    lay_out_queues();
    make_ops();
    order_ops();
    allocate_memory();
    encode();
    close_queues();
    build_patch_table();
    cache[cache_key] = impl;
    for (auto it = cache.begin(); it != cache.end();)  // forget compilations no one holds
      it = it->second.expired() ? cache.erase(it) : std::next(it);
    return Executable(std::move(impl), std::move(bound));
  }

 private:
  using Call = Schedule::Call;
  // What identifies compilations that can be shared: calls, programs, sizes, ranges,
  // constant arguments, options; buffers bound at recording only by size and device.
  std::string structure_key();
  // Queues per device: the compute queue, then up to `copy_queues` copy queues (host queues
  // where the device has no copy engine), a host queue for loads, one to relay between
  // memory areas; the areas.
  void lay_out_queues();
  // 1. Ops: each call on its queue; a copy between devices becomes two ops around a staging
  // range (a memory slot of its own, after the patchable ones).
  void make_ops();
  // 2. Position of each op on its queue and the ops it must follow; 3. one wait per producer
  // queue, for the latest value needed; the producers signal.
  void order_ops();
  // 4. Memory: per area, signals, staging and timestamps (see Impl::Area); kernel arguments
  // per device (values written now, buffers and scalars patched).
  void allocate_memory();
  // 5. Encode every queue once, straight into device memory.
  void encode();
  // Op i: a launch, a copy by the device's copy kernel, a copy on a copy queue.
  void encode_launch(ComputeQueue& cq, size_t i);
  void encode_kernel_copy(ComputeQueue& cq, const Program& kernel, size_t i);
  void encode_copy(CopyQueue& kq, size_t i);
  // What the profile and trace keep of op i; its commands span [dword_begin, dword_end) of
  // its queue's recording (zeros on a host queue).
  Executable::Impl::OpInfo op_info(size_t i, uint64_t dword_begin, uint64_t dword_end) const;
  // 6. Close: every queue reports its end; each device's compute queue waits for all of
  // them, then advances its device timeline (patched with each run's value).
  void close_queues();
  // 7. The flat patch table, now that every recording sits where it stays.
  void build_patch_table();

  // Every buffer bound at recording becomes an input slot after the declared ones, numbered
  // by first use, so the structure key does not depend on which buffers they are.
  uint32_t slot_of(const Mem& m) {
    if (!m.bound) return uint32_t(m.input);
    auto [it, fresh] = bound_slot.emplace(m.bound, uint32_t(input_sizes_.size() + bound.size()));
    if (fresh) bound.push_back(m.bound);
    return it->second;
  }
  uint32_t dev_index(const Device* d) const {
    return uint32_t(std::find(devs_.begin(), devs_.end(), d) - devs_.begin());
  }
  // The device whose host queue runs a remote call: a write's source's, a read's
  // destination's, a signal's first range's.
  uint32_t remote_device(const Call& c) const {
    if (c.remote == detail::RemoteOp::Write) return dev_index(c.src.device);
    if (c.remote == detail::RemoteOp::Read) return dev_index(c.dst.device);
    return dev_index(c.accesses.front().mem.device);
  }
  // A new staging slot in `area`.
  uint32_t stage(uint32_t area, uint64_t size) {
    x.staging.push_back({area, staging_bytes[area]});
    staging_bytes[area] += (size + 255) / 256 * 256;
    return patch_slots + uint32_t(x.staging.size() - 1);
  }
  struct Op;
  // The program an op launches: its own, or its device's copy kernel for a copy on a compute
  // queue.
  const Program* program_of(const Op& o) const;
  // Queue q's signal as queues of `area` see it: its own slot, or a mirror the host keeps.
  uint64_t signal_va(uint32_t q, uint32_t area) {
    if (area != x.area_of(q)) mirrored.insert({q, area});
    return x.areas[area].sync.va() + uint64_t(q) * 16;
  }
  // An address operand: patched for input and bound slots (an offset stands in until the
  // first run), fixed for staging.
  uint64_t address(uint32_t slot, uint64_t off) const {
    if (slot < patch_slots) return off;
    const auto& st = x.staging[slot - patch_slots];
    return x.areas[st.area].staging.va() + st.offset + off;
  }
  uint64_t timestamp_va(size_t op) const;
  // The sites of a queue's last command that play `role`.
  static std::vector<PatchSite> last_sites(const Queue& Q, PatchRole role) {
    std::vector<PatchSite> out;
    for (const PatchSite& s : Q.sites_of(Q.commands() - 1))
      if (s.role == role) out.push_back(s);
    return out;
  }
  static void add_site(std::vector<Executable::Impl::Target>& out, Queue& Q, const PatchSite& s) {
    auto [words, device_copy] = Q.patch_bases();
    // The words that are the bound memory's shadow, where it is one, are marked when patched.
    ShadowMemory& bound = Q.bound_memory();
    auto shadow_of = [&](uint32_t* w) {
      return bound.shadowed() && w == reinterpret_cast<uint32_t*>(bound.host()) ? &bound : nullptr;
    };
    out.push_back({words, s, shadow_of(words)});
    if (device_copy) out.push_back({device_copy, s, shadow_of(device_copy)});
  }
  // The kernel-argument shadow holding `at`, or null (see Impl::Target::shadow).
  ShadowMemory* kernarg_shadow(const void* at) {
    for (ShadowMemory& k : x.kernargs)
      if (k.shadowed() && at >= k.host() && at < k.host() + k.size()) return &k;
    return nullptr;
  }

  const Schedule& s_;
  const Schedule::CompileOptions& options;
  const std::vector<Device*>& devs_;
  const std::vector<uint64_t>& input_sizes_;
  const std::vector<Device*>& input_devices_;
  const std::vector<uint32_t>& scalar_bytes_;
  const std::vector<Call>& calls_;

  std::shared_ptr<Executable::Impl> impl = std::make_shared<Executable::Impl>();
  Executable::Impl& x = *impl;
  std::vector<const Buffer*> bound;
  std::map<const Buffer*, uint32_t> bound_slot;
  // Queue layout.
  std::vector<uint32_t> copy_base, copy_count;   // per device: its first copy queue, how many
  std::vector<const Program*> copy_kernel;       // per device: its copy kernel, if any
  std::vector<uint32_t> disk_queue;              // per device: its host queue for loads
  std::vector<uint32_t> remote_queue;            // per device: its host queue for remote writes
  // Per scalar, the wait values it patches (remote waits) in a queue's recording.
  std::vector<std::vector<std::pair<Queue*, PatchSite>>> scalar_sites;
  uint32_t relay_queue = UINT32_MAX, areas = 1, nq = 0, user_slots = 0, patch_slots = 0;
  // Ops.
  struct Op {
    size_t call;
    uint32_t queue;
    bool launch;
    uint32_t dst_slot = 0, src_slot = 0;
    uint64_t dst_offset = 0, src_offset = 0, size = 0;
    std::string name;
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t, bool>> accesses;  // slot, off, size, write
    std::string path = {};  // a file read on the host (src_offset: in the file)
    RemotePeer* peer = nullptr;      // a remote write, read or signal on a host queue
    detail::RemoteOp remote = {};
    const Signal* signal = nullptr;  // a remote wait on a compute queue
    uint32_t addr_scalar = 0, value_scalar = 0;
  };
  std::vector<Op> ops;
  size_t n = 0;
  std::vector<uint64_t> staging_bytes;  // per area
  // Order: per op its position on its queue, its waits (queue, value), whether it signals;
  // per queue how many ops.
  std::vector<uint32_t> pos, count;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> waits;
  std::vector<bool> signals;
  // Memory and encoding.
  std::vector<uint64_t> karg_off;  // per op: its kernel arguments in its device's block
  // Per input, what it patches: sites in a queue's recording, kernel-argument words (with
  // the argument's offset); made into the flat table once the recordings are bound.
  std::vector<std::vector<std::pair<Queue*, PatchSite>>> input_sites;
  std::vector<std::vector<std::pair<uint64_t*, uint64_t>>> input_words;
  std::set<std::pair<uint32_t, uint32_t>> mirrored;  // (queue, area)
  std::vector<std::vector<PatchSite>> timeline_waits, timeline_signals;  // per queue
};

const Program* Compiler::program_of(const Op& o) const {
  if (o.peer || o.signal) return nullptr;
  if (o.launch) return calls_[o.call].program;
  return x.queue_kind[o.queue] == QueueKind::Compute ? copy_kernel[x.queue_device[o.queue]]
                                                     : nullptr;
}

uint64_t Compiler::timestamp_va(size_t op) const {
  return x.areas[x.area_of(ops[op].queue)].timestamps.va() + op * 32;
}

Executable Schedule::compile() const { return compile(CompileOptions{}); }

Executable Schedule::compile(const CompileOptions& options) const {
  return Compiler(*this, options).compile();
}

std::string Compiler::structure_key() {
  std::string key;
  auto put = [&](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), 8); };
  put(options.profile);
  put(options.copy_queues);
  for (const Program* k : options.copy_kernels) {
    put(reinterpret_cast<uintptr_t>(&k->kernel()));
    put(s_.ours(&k->device()) ? dev_index(&k->device()) : ~size_t{0});
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
    } else if (c.peer) {  // the peer by address: its host op calls that object
      put(reinterpret_cast<uintptr_t>(c.peer));
      put(uint64_t(c.remote));
      put(c.remote == detail::RemoteOp::Write ? slot_of(c.src) : slot_of(c.dst));
      put(c.remote == detail::RemoteOp::Write ? c.src_offset : c.dst_offset);
      put(c.size);
      put(c.addr_scalar);
      put(c.value_scalar);
    } else if (c.signal) {  // the signal's address is encoded in the wait
      put(~uint64_t{0});
      put(c.signal->va());
      put(dev_index(c.device));
      put(c.value_scalar);
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
  return key;
}

void Compiler::lay_out_queues() {
  // Queue layout: per device its compute queue, then up to `copy_queues` copy queues.
  copy_base.assign(devs_.size(), 0);
  copy_count.assign(devs_.size(), 0);
  copy_kernel.assign(devs_.size(), nullptr);
  for (const Program* k : options.copy_kernels) {
    if (!s_.ours(&k->device()))
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
  disk_queue.assign(devs_.size(), UINT32_MAX);
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
  // Remote writes, reads and signals are the host's too: a host queue per device that
  // talks to peers.
  remote_queue.assign(devs_.size(), UINT32_MAX);
  for (const Call& c : calls_) {
    if (!c.peer) continue;
    const uint32_t d = remote_device(c);
    if (remote_queue[d] != UINT32_MAX) continue;
    remote_queue[d] = uint32_t(x.queue_device.size());
    x.queue_device.push_back(d);
    x.queue_kind.push_back(QueueKind::Copy);
    x.queue_index.push_back(copy_count[d] + (disk_queue[d] != UINT32_MAX));
    x.host_queue.push_back(true);
  }
  // Areas (see Impl::Area): devices that reach host memory share area 0.
  areas = 1;
  for (Device* d : devs_)
    x.device_area.push_back(
        d->properties().caps.host_reachable && d->properties().caps.cpu_maps_memory ? 0 : areas++);
  // A copy between devices of different areas goes through the staging of both, the host
  // copying between them on a relay queue (a host queue of the first such copy's source).
  relay_queue = UINT32_MAX;
  for (const Call& c : calls_) {
    if (c.launch || !c.path.empty() || c.peer || c.signal || relay_queue != UINT32_MAX) continue;
    const uint32_t sd = dev_index(c.src.device);
    if (x.device_area[sd] == x.device_area[dev_index(c.dst.device)]) continue;
    relay_queue = uint32_t(x.queue_device.size());
    x.queue_device.push_back(sd);
    x.queue_kind.push_back(QueueKind::Copy);
    x.queue_index.push_back(copy_count[sd] + (disk_queue[sd] != UINT32_MAX) +
                            (remote_queue[sd] != UINT32_MAX));
    x.host_queue.push_back(true);
  }
  nq = uint32_t(x.queue_device.size());
  user_slots = uint32_t(input_sizes_.size());
  patch_slots = user_slots + uint32_t(bound.size());
  x.devs = devs_;
  for (Device* d : devs_) x.links.push_back(d->link());
  for (Device* d : devs_) x.submit_locks.push_back(&d->submit_mutex());
  std::sort(x.submit_locks.begin(), x.submit_locks.end());
  x.user_inputs = user_slots;
  x.stats.resize(nq);
  x.last_done.assign(devs_.size(), 0);
}

void Compiler::make_ops() {
  staging_bytes.assign(areas, 0);
  for (size_t i = 0; i < calls_.size(); i++) {
    const Call& c = calls_[i];
    if (c.launch) {
      Op o{i, x.compute_queue[dev_index(&c.program->device())], true, 0, 0, 0, 0, 0, {}, {}};
      o.name = c.program->kernel().name;
      for (auto& a : c.accesses) o.accesses.emplace_back(slot_of(a.mem), a.offset, a.size, a.write);
      ops.push_back(std::move(o));
      continue;
    }
    if (c.peer) {
      const uint32_t q = remote_queue[remote_device(c)];
      Op o{i, q, false, 0, 0, 0, 0, c.size, {}, {}};
      if (c.remote == detail::RemoteOp::Write) {
        o.src_slot = slot_of(c.src);
        o.src_offset = c.src_offset;
        o.name = "remote write " + std::to_string(c.size) + " bytes";
      } else if (c.remote == detail::RemoteOp::Read) {
        o.dst_slot = slot_of(c.dst);
        o.dst_offset = c.dst_offset;
        o.name = "remote read " + std::to_string(c.size) + " bytes";
      } else {
        o.name = "remote signal";
      }
      for (auto& a : c.accesses) o.accesses.emplace_back(slot_of(a.mem), a.offset, a.size, a.write);
      o.peer = c.peer;
      o.remote = c.remote;
      o.addr_scalar = c.addr_scalar;
      o.value_scalar = c.value_scalar;
      ops.push_back(std::move(o));
      continue;
    }
    if (c.signal) {
      Op o{i, x.compute_queue[dev_index(c.device)], false, 0, 0, 0, 0, 0, "remote wait", {}};
      for (auto& a : c.accesses) o.accesses.emplace_back(slot_of(a.mem), a.offset, a.size, true);
      o.signal = c.signal;
      o.value_scalar = c.value_scalar;
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
  n = ops.size();
}

void Compiler::order_ops() {
  pos.assign(n, 0);
  count.assign(nq, 0);
  std::map<uint32_t, RangeTracker> trackers;
  std::vector<std::vector<int32_t>> deps(n);
  for (size_t i = 0; i < n; i++) {
    pos[i] = ++count[ops[i].queue];
    for (auto& [slot, off, size, write] : ops[i].accesses)
      trackers[slot].access(off, off + size, write, int32_t(i), deps[i]);
  }
  // 3. One wait per producer queue, for the latest value needed; the producers signal.
  waits.assign(n, {});
  signals.assign(n, false);
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
}

void Compiler::allocate_memory() {
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
  karg_off.assign(n, 0);
  std::vector<uint64_t> karg_bytes(devs_.size(), 0);
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
      x.kernargs[d] = ShadowMemory(*devs_[d], karg_bytes[d]);
      std::memset(x.kernargs[d].host(), 0, karg_bytes[d]);
      x.kernargs[d].mark(0, karg_bytes[d]);  // published by the first run
    }
  x.inputs.resize(patch_slots);
  input_sites.assign(patch_slots, {});
  input_words.assign(patch_slots, {});
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
  scalar_sites.assign(scalar_bytes_.size(), {});
}

void Compiler::encode() {
  x.used.assign(nq, false);
  std::vector<uint64_t> estimate(nq, 64);
  for (size_t i = 0; i < n; i++) {
    x.used[ops[i].queue] = true;
    // Dwords: a launch (a kernel copy too) or a copy (one packet per 4 MiB chunk), its waits,
    // timestamps and signal; room to spare, so the recording stays where it was encoded.
    estimate[ops[i].queue] += (program_of(ops[i]) ? 160 : 64 + 8 * (ops[i].size >> 22)) +
                              24 * waits[i].size() + (x.profile ? 32 : 0) + (signals[i] ? 16 : 0);
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
  timeline_waits.assign(nq, {});
  timeline_signals.assign(nq, {});
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
      x.host_ops.back().peer = o.peer;
      x.host_ops.back().remote = o.remote;
      x.host_ops.back().addr_scalar = o.addr_scalar;
      x.host_ops.back().value_scalar = o.value_scalar;
      // The slots the host touches: a copy's two, a remote write's source, a remote read's
      // destination (a remote signal's ranges only order it).
      std::vector<uint32_t> touched = {o.dst_slot, o.src_slot};
      if (o.peer && o.remote == detail::RemoteOp::Write) touched = {o.src_slot};
      if (o.peer && o.remote == detail::RemoteOp::Read) touched = {o.dst_slot};
      if (o.peer && o.remote == detail::RemoteOp::Signal) touched = {};
      for (uint32_t slot : touched)
        if (slot < patch_slots) x.inputs[slot].host_copied = true;
      x.stats[o.queue].waits += waits[i].size();
      x.stats[o.queue].calls++;
      x.stats[o.queue].signals += signals[i];
      x.ops.push_back(op_info(i, 0, 0));
      continue;
    }
    Queue& Q = *x.queues[o.queue];
    const uint64_t dword_begin = Q.stream().size();
    for (auto& [pq, value] : waits[i]) Q.wait(signal_va(pq, x.area_of(o.queue)), value);
    x.stats[o.queue].waits += waits[i].size();
    if (x.profile) Q.timestamp_at(timestamp_va(i));  // two 16-byte records per op
    if (o.signal) {  // the value is a scalar's, patched at each run
      Q.wait(o.signal->va(), 0);
      for (const PatchSite& site : last_sites(Q, PatchRole::WaitValue))
        scalar_sites[o.value_scalar].push_back({&Q, site});
    } else if (o.launch)
      encode_launch(static_cast<ComputeQueue&>(Q), i);
    else if (const Program* kp = program_of(o))
      encode_kernel_copy(static_cast<ComputeQueue&>(Q), *kp, i);
    else
      encode_copy(static_cast<CopyQueue&>(Q), i);
    x.stats[o.queue].calls++;
    if (x.profile) Q.timestamp_at(timestamp_va(i) + 16);
    if (signals[i]) {
      Q.signal_at(signal_va(o.queue, x.area_of(o.queue)), pos[i], false);
      x.stats[o.queue].signals++;
    }
    x.ops.push_back(op_info(i, dword_begin, Q.stream().size()));
  }
}

Executable::Impl::OpInfo Compiler::op_info(size_t i, uint64_t dword_begin,
                                           uint64_t dword_end) const {
  const Op& o = ops[i];
  Executable::Impl::OpInfo info{o.call, o.queue, o.name};
  if (const Program* p = program_of(o)) info.kernel = p->kernel().name;
  if (o.launch) {
    info.grid = calls_[o.call].grid;
    info.block = calls_[o.call].block;
  } else if (program_of(o)) {  // a kernel copy: encode_kernel_copy's dimensions
    info.grid = {uint32_t((o.size + kCopyKernelBlock - 1) / kCopyKernelBlock), 1, 1};
    info.block = {kCopyKernelBlock, 1, 1};
  }
  if (!o.launch) {
    info.dst_slot = o.dst_slot;
    info.src_slot = o.src_slot;
    info.dst_offset = o.dst_offset;
    info.src_offset = o.src_offset;
    info.size = o.size;
    info.path = o.path;
    info.remote = o.peer || o.signal;
    info.remote_read = o.peer && o.remote == detail::RemoteOp::Read;
  }
  info.dword_begin = dword_begin;
  info.dword_end = dword_end;
  return info;
}

void Compiler::encode_launch(ComputeQueue& cq, size_t i) {
  const Op& o = ops[i];
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
  cq.memory_barrier();
  cq.exec(*c.program, x.kernargs[d].va() + karg_off[i], c.grid, c.block);
}

void Compiler::encode_kernel_copy(ComputeQueue& cq, const Program& kernel, size_t i) {
  const Op& o = ops[i];
  const uint32_t d = x.queue_device[o.queue];
  auto* args = static_cast<std::byte*>(x.kernargs[d].host()) + karg_off[i];
  const KernelObject& k = kernel.kernel();
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
  const uint32_t bytes = uint32_t(o.size), block = kCopyKernelBlock;
  std::memcpy(args + ka[2]->offset, &bytes, 4);
  std::memcpy(args + ka[3]->offset, &block, 4);
  cq.memory_barrier();
  cq.exec(kernel, x.kernargs[d].va() + karg_off[i],
          {uint32_t((o.size + block - 1) / block), 1, 1}, {block, 1, 1});
}

void Compiler::encode_copy(CopyQueue& kq, size_t i) {
  const Op& o = ops[i];
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

void Compiler::close_queues() {
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
  x.host_work = !x.mirrors.empty() ||
                std::find(x.host_queue.begin(), x.host_queue.end(), true) != x.host_queue.end();
  for (uint32_t q = 0; q < nq; q++)
    if (x.used[q] && x.queues[q]) x.queues[q]->bind();
}

void Compiler::build_patch_table() {
  for (uint32_t s = 0; s < patch_slots; s++) {
    auto& in = x.inputs[s];
    in.first = uint32_t(x.targets.size());
    for (auto& [Q, site] : input_sites[s]) add_site(x.targets, *Q, site);
    for (auto& [word, add] : input_words[s])
      x.targets.push_back({reinterpret_cast<uint32_t*>(word),
                           offset_site(0, PatchFormat::LoHi64, PatchRole::KernargAddress, add),
                           kernarg_shadow(word)});
    in.count = uint32_t(x.targets.size()) - in.first;
    in.patches = uint32_t(input_sites[s].size() + input_words[s].size());
  }
  for (auto& sc : x.scalars)
    for (std::byte* at : sc.at) sc.shadow.push_back(kernarg_shadow(at));
  for (size_t s = 0; s < scalar_sites.size(); s++)
    for (auto& [Q, site] : scalar_sites[s]) add_site(x.scalars[s].sites, *Q, site);
  x.timeline_waits.resize(devs_.size());
  x.timeline_signals.resize(devs_.size());
  x.device_queues.resize(devs_.size());
  x.device_queue_ids.resize(devs_.size());
  for (uint32_t q = 0; q < nq; q++) {
    if (x.used[q] && x.queues[q]) {
      x.device_queues[x.queue_device[q]].push_back(x.queues[q].get());
      x.device_queue_ids[x.queue_device[q]].push_back(q);
    }
    for (auto& s : timeline_waits[q]) add_site(x.timeline_waits[x.queue_device[q]], *x.queues[q], s);
    for (auto& s : timeline_signals[q])
      add_site(x.timeline_signals[x.queue_device[q]], *x.queues[q], s);
  }
  if (x.profile) {
    x.clock_sync.assign(nq, {});  // host queues record host time: no offset
    for (uint32_t q = 0; q < nq; q++)
      if (x.used[q] && !x.host_queue[q])
        x.clock_sync[q] = x.device_of(q).clock_sync(x.queue_kind[q]);
  }
}

}  // namespace hcq::batch
