#include "core/replay.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "core/capture.hpp"
#include "core/deadline.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/replay_host.hpp"

namespace hcq::replay {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kWord = 4;  // the merge's unit (replay.hpp)

// What the first pass learns: the devices, and every range of memory each had recorded.
struct Scan {
  std::map<uint32_t, capture::DeviceRecord> devices;
  // Per device: start -> {end, kind, executable} of each recorded range (largest end seen).
  struct Range {
    uint64_t end = 0;
    MemoryKind kind = MemoryKind::Device;
    bool executable = false;
    bool user = false;  // the process's own memory (map_host)
  };
  std::map<uint32_t, std::map<uint64_t, Range>> ranges;
  bool any_memory = false;
};

Scan scan(const std::string& path) {
  capture::Reader r(path);
  r.read_host_steps(true);
  Scan s;
  while (auto rec = r.next()) {
    if (r.version() < 3)
      throw InvalidInput("replay: " + path + " is capture format version " +
                         std::to_string(r.version()) +
                         "; replay needs version 3 (a full capture by this hcq: "
                         "HCQ_CAPTURE=path,full)");
    if (rec->type == capture::RecordType::Device) {
      if (!capture::in_address_space(rec->device.timeline_va, 8))
        throw InvalidInput("replay: " + path + ": device " + std::to_string(rec->device.id) +
                           "'s timeline at " + hex(rec->device.timeline_va) +
                           " runs past the end of the 64-bit address space");
      s.devices[rec->device.id] = rec->device;
    } else if (rec->type == capture::RecordType::Memory) {
      const auto& m = rec->memory;
      if (!s.devices.count(m.device))
        throw InvalidInput("replay: " + path + ": a memory record names device " +
                           std::to_string(m.device) + ", which no record declared");
      if (!capture::in_address_space(m.address, m.bytes.size()))
        throw InvalidInput("replay: " + path + ": a memory record at " + hex(m.address) +
                           " holds " + std::to_string(m.bytes.size()) +
                           " bytes, past the end of the 64-bit address space");
      s.any_memory = true;
      auto& range = s.ranges[m.device][m.address];
      range.end = std::max(range.end, m.address + m.bytes.size());
      range.kind = m.kind;
      range.executable |= (m.flags & capture::kMemoryExecutable) != 0;
      range.user |= (m.flags & capture::kMemoryUser) != 0;
    } else if (rec->type == capture::RecordType::HostSteps) {
      // Refused before any device opens: the replay would hang where the host step was.
      const std::string no = detail::HostSteps::refusal(rec->host_steps);
      if (!no.empty()) throw InvalidInput(no);
      for (const auto& h : rec->host_steps.steps)
        for (uint32_t d : {h.device, h.src_device})
          if (!s.devices.count(d))
            throw InvalidInput("replay: " + path + ": submission " +
                               std::to_string(rec->host_steps.sequence) +
                               "'s host steps name device " + std::to_string(d) +
                               ", which no record declared");
    } else if (rec->type == capture::RecordType::Submission) {
      if (!s.devices.count(rec->submission.device))
        throw InvalidInput("replay: " + path + ": submission " +
                           std::to_string(rec->submission.sequence) + " names device " +
                           std::to_string(rec->submission.device) + ", which no record declared");
    }
  }
  if (s.devices.empty()) throw InvalidInput("replay: " + path + " holds no submission");
  if (!s.any_memory)
    throw InvalidInput("replay: " + path +
                       " is not a full capture (no buffer contents: HCQ_CAPTURE=path,full)");
  return s;
}

// The address a site of a stream holds (write_site's inverse), for the bits it covers.
void read_site(const uint32_t* w, const PatchSite& s, uint64_t& v) {
  switch (s.format) {
    case PatchFormat::Lo32: v |= w[s.dword]; break;
    case PatchFormat::Hi32: v |= uint64_t(w[s.dword]) << 32; break;
    case PatchFormat::LoHi64: v |= w[s.dword] | uint64_t(w[s.dword + 1]) << 32; break;
    case PatchFormat::HiLo64: v |= uint64_t(w[s.dword]) << 32 | w[s.dword + 1]; break;
    case PatchFormat::Field: {
      const uint32_t width = s.width();
      const uint64_t mask = width >= 32 ? 0xffffffffull : (1ull << width) - 1;
      v |= (uint64_t(w[s.dword] >> s.lo()) & mask) << s.shift();
      break;
    }
  }
}

// Finds the timestamp commands in a queue's words the way the device's own encoder writes
// them (Encoder::timestamp), whatever the vendor: where they write, the GPU clock lands, and
// a replay's clock is not the capture's.
class TimestampFinder {
 public:
  explicit TimestampFinder(Encoder& enc) : enc_(enc) {
    auto encode = [&](uint64_t va, std::vector<PatchSite>& sites) {
      CommandStream cs;
      enc_.timestamp(cs, va, sites);
      return std::vector<uint32_t>(cs.data(), cs.data() + cs.size());
    };
    std::vector<PatchSite> sites, other;
    constexpr uint64_t probe = 0x123456780ull;
    words_ = encode(probe, sites);
    const std::vector<uint32_t> moved = encode(0x0fedcba90ull, other);
    for (const PatchSite& s : sites)
      if (s.role == PatchRole::TimestampAddress) sites_.push_back(s);
    fixed_.resize(words_.size());
    for (size_t i = 0; i < words_.size(); i++)
      fixed_[i] = i < moved.size() && moved[i] == words_[i];
    // What the sites hold for the probe: the address, or where in the record the clock goes.
    uint64_t held = 0;
    for (const PatchSite& s : sites_) read_site(words_.data(), s, held);
    delta_ = held - probe;
  }
  // Calls found(va) for each timestamp command in `w`.
  template <class Found>
  void scan(const std::vector<uint32_t>& w, Found found) {
    const size_t n = words_.size();
    if (n == 0 || sites_.empty() || w.size() < n) return;
    for (size_t i = 0; i + n <= w.size(); i++) {
      bool match = true;
      for (size_t k = 0; k < n && match; k++) match = !fixed_[k] || w[i + k] == words_[k];
      if (!match) continue;
      uint64_t v = 0;
      for (const PatchSite& s : sites_) read_site(w.data() + i, s, v);
      v -= delta_;
      // Only what the encoder itself writes for that address (no look-alike).
      CommandStream cs;
      std::vector<PatchSite> ignored;
      enc_.timestamp(cs, v, ignored);
      if (cs.size() == n && std::equal(cs.data(), cs.data() + n, w.data() + i)) {
        found(v);
        i += n - 1;
      }
    }
  }

 private:
  Encoder& enc_;
  std::vector<uint32_t> words_;  // encoded for a probe address
  std::vector<bool> fixed_;      // words that do not depend on the address
  std::vector<PatchSite> sites_;
  uint64_t delta_ = 0;  // what the sites hold minus the record's address
};

// The device a capture's device replays on by default: itself when emulated, else the
// emulated target of its architecture.
std::string default_device(const capture::DeviceRecord& d) {
  return d.name.starts_with("emu:") ? d.name : "emu:" + d.arch;
}

// One device of the capture, opened again.
class Target {
 public:
  Target(const capture::DeviceRecord& rec, const std::string& name, const std::string& path,
         const std::map<uint64_t, Scan::Range>& ranges)
      : rec_(rec) {
    auto check = [&](const DeviceProperties& p) {
      if (p.vendor != rec.vendor || p.arch != rec.arch)
        throw InvalidInput("replay: " + path + "'s device " + std::to_string(rec.id) + " is " +
                           rec.vendor + " " + rec.arch + " (" + rec.name + "); " + name +
                           " is " + p.vendor + " " + p.arch +
                           ": replay needs the same architecture");
    };
    // A device named by the caller is checked before it is asked for the captured addresses
    // (another vendor's driver may not be able to place its heap there at all).
    if (name != default_device(rec)) check(Device::open(name)->properties());
    Device::Options o;
    o.va_base = rec.va_base;
    if (rec.copy_queues) o.copy_queues = rec.copy_queues;
    dev_ = Device::open(name, o);
    const auto& p = dev_->properties();
    check(p);
    if (dev_->queue_count(QueueKind::Copy) < rec.copy_queues)
      throw InvalidInput("replay: " + name + " has " +
                         std::to_string(dev_->queue_count(QueueKind::Copy)) +
                         " copy queues; the capture used " + std::to_string(rec.copy_queues));
    // The device's own buffers (its timeline's signal page, rings) sit where the captured
    // device had them: a recorded range inside one of them is restored there.
    for (const auto& b : dev_->live_buffers())
      spans_[b.va] = {b.va + b.size, static_cast<std::byte*>(const_cast<void*>(b.host))};
    reserve(ranges);
    // Completion markers: one 64-bit word per queue, at the heap's last page where free (the
    // capture's buffers are rarely there), else wherever the heap has room.
    const uint64_t top = dev_->heap_base() + dev_->heap_size() - kPage;
    // Where the CPU cannot map device memory, the markers are device memory read through the
    // port (a USB bridge's host window cannot be read back).
    const MemoryKind visible = p.caps.cpu_maps_memory && p.caps.host_reachable
                                   ? MemoryKind::Host
                                   : MemoryKind::Device;
    try {
      if (!spans_.empty() && span_of(top, 8)) throw InvalidInput("taken");
      markers_ = dev_->allocate_at(top, kPage, visible, false);
    } catch (const InvalidInput&) {
      markers_ = dev_->allocate(kPage, visible);
    }
    std::vector<std::byte> zero(kPage);
    write(markers_.va(), zero.data(), kPage, markers_.host());
  }

  Device& device() { return *dev_; }
  const capture::DeviceRecord& record() const { return rec_; }

  // Where [va, va + n) lies: its span's start, or none.
  const std::pair<const uint64_t, std::pair<uint64_t, std::byte*>>* span_of(uint64_t va,
                                                                            uint64_t n) const {
    auto it = spans_.upper_bound(va);
    if (it == spans_.begin()) return nullptr;
    --it;
    if (va > it->second.first || n > it->second.first - va) return nullptr;  // no wrap
    return &*it;
  }

  void read(uint64_t va, void* out, uint64_t n) const {
    const auto* s = span_of(va, n);
    if (s && s->second.second) {
      std::memcpy(out, s->second.second + (va - s->first), n);
    } else {
      if (!s && !has_port()) outside(va, n);
      dev_->read_memory(va, {static_cast<std::byte*>(out), n});
    }
  }
  void write(uint64_t va, const void* data, uint64_t n, void* host = nullptr) {
    const auto* s = span_of(va, n);
    std::byte* h = s && s->second.second ? s->second.second + (va - s->first)
                                         : static_cast<std::byte*>(host);
    if (!s && !h && !has_port()) outside(va, n);
    if (h) {
      std::memcpy(h, data, n);
    } else {
      dev_->driver().write_memory(va, {static_cast<const std::byte*>(data), n});
    }
  }

  // A range in no restored buffer, on a device the CPU maps: there is no port to reach it
  // through (the driver would say only that), so say which range it was.
  bool has_port() const { return !dev_->properties().caps.cpu_maps_memory; }
  [[noreturn]] void outside(uint64_t va, uint64_t n) const {
    throw InvalidInput(dev_->name() + ": [" + hex(va) + ", " +
                       (capture::in_address_space(va, n) ? hex(va + n) : std::string("2^64")) +
                       ") is in no buffer the capture recorded");
  }

  // True when `va` is in a timestamp record a command of the replay writes.
  bool timestamp_at(uint64_t va) const {
    auto it = timestamps_.upper_bound(va);
    return it != timestamps_.begin() && va < std::prev(it)->second;
  }

  // Submits one recorded submission and its completion marker.
  void submit(const capture::SubmissionRecord& s) {
    HwQueue& hw = dev_->hw_queue(s.queue, s.queue_index);
    auto& finder = finders_[int(s.queue)];
    if (!finder) finder = std::make_unique<TimestampFinder>(dev_->encoder(s.queue));
    for (const auto& seg : s.segments) {
      if (seg.words.empty()) continue;
      finder->scan(seg.words, [&](uint64_t va) { timestamps_[va] = va + 16; });
      if (!seg.indirect) {
        hw.submit(seg.words.data(), seg.words.size());
        continue;
      }
      const uint64_t bytes = seg.words.size() * 4;
      if (!span_of(seg.address, bytes))
        throw InvalidInput("replay: submission " + std::to_string(s.sequence) +
                           ": its command buffer [" + hex(seg.address) + ", " +
                           hex(seg.address + bytes) + ") is in no buffer the capture recorded");
      write(seg.address, seg.words.data(), bytes);
      hw.submit_indirect(seg.address, seg.words.size());
    }
    Queue& q = queue(s.queue, s.queue_index);
    q.sequences.push_back(s.sequence);
    CommandStream cs;
    std::vector<PatchSite> sites;
    dev_->encoder(s.queue).signal(cs, q.marker_va, q.sequences.size(), true, sites);
    hw.submit(cs.data(), cs.size());
  }

  uint64_t timeline() const {
    uint64_t v = 0;
    read(rec_.timeline_va, &v, 8);
    return v;
  }

  // A batch run's host steps (all devices' together): the GPU's work is done only once they
  // are taken too, and a hang may be theirs.
  void set_host(const detail::HostSteps* host) { host_ = host; }

  bool all_done() const {
    if (host_ && !host_->done()) return false;
    for (const auto& [key, q] : queues_)
      if (marker(q) < q.sequences.size()) return false;
    return true;
  }

  // Waits until `done` holds; a hang (or a fault) when it does not within `timeout`.
  template <class Done>
  std::optional<Hang> wait(Done done, std::chrono::milliseconds timeout) {
    const auto deadline = deadline_after(timeout);
    try {
      while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return hang("");
        if (host_ && !host_->failure().empty()) return hang("");  // a host step gave up
        dev_->driver().wait_interrupt(std::chrono::milliseconds(1));
      }
    } catch (const GpuFaultError& e) {
      return hang(e.what());  // the fault's message carries the queue's report
    }
    return std::nullopt;
  }

 private:
  struct Queue {
    uint64_t marker_va = 0;
    std::vector<uint64_t> sequences;  // of the submissions made on it, in order
  };
  Queue& queue(QueueKind kind, uint32_t index) {
    auto [it, fresh] = queues_.try_emplace({int(kind), index});
    if (fresh) it->second.marker_va = markers_.va() + 8 * (queues_.size() - 1);
    return it->second;
  }
  uint64_t marker(const Queue& q) const {
    if (markers_.host())
      return __atomic_load_n(reinterpret_cast<const uint64_t*>(
                                 static_cast<std::byte*>(markers_.host()) +
                                 (q.marker_va - markers_.va())),
                             __ATOMIC_ACQUIRE);
    uint64_t v = 0;
    read(q.marker_va, &v, 8);
    return v;
  }
  // The first unfinished submission, and the driver's report (or, for a fault, its message).
  Hang hang(const std::string& fault) {
    Hang h;
    h.device = dev_->name();
    h.submission = UINT64_MAX;
    for (const auto& [key, q] : queues_) {
      const uint64_t done = marker(q);
      if (done < q.sequences.size()) h.submission = std::min(h.submission, q.sequences[done]);
    }
    if (h.submission == UINT64_MAX && !queues_.empty()) {
      // Every queue finished, yet the timeline did not reach what the capture saw.
      for (const auto& [key, q] : queues_)
        if (!q.sequences.empty())
          h.submission = std::max(h.submission == UINT64_MAX ? 0 : h.submission,
                                  q.sequences.back());
    }
    if (h.submission == UINT64_MAX) h.submission = 0;
    h.report = fault.empty() ? dev_->driver().hang_report() : fault;
    // Host steps not taken: their run's submission is the one that did not finish, when no
    // earlier one of this device's queues is stuck.
    if (const auto pending = host_ ? host_->pending() : std::nullopt) {
      if (unfinished_gpu(h.submission) ? *pending < h.submission : true) h.submission = *pending;
      const std::string why = host_->describe();
      h.report = (why.empty() ? "replay: submission " + std::to_string(*pending) +
                                    "'s batch run: its host steps are not all taken"
                              : why) +
                 "\n" + h.report;
    }
    return h;
  }

  // True when `sequence` is a submission of a queue that has not finished it.
  bool unfinished_gpu(uint64_t sequence) const {
    for (const auto& [key, q] : queues_) {
      const uint64_t done = marker(q);
      for (uint64_t i = done; i < q.sequences.size(); i++)
        if (q.sequences[i] == sequence) return true;
    }
    return false;
  }

  // Reserves every recorded range that is not inside one of the device's own buffers, ranges
  // that touch or overlap merged into one allocation.
  void reserve(const std::map<uint64_t, Scan::Range>& ranges) {
    std::vector<std::pair<uint64_t, Scan::Range>> todo;
    for (const auto& [va, r] : ranges) {
      if (span_of(va, r.end - va)) continue;
      const uint64_t start = va / kPage * kPage;
      Scan::Range page = r;
      page.end = (r.end + kPage - 1) / kPage * kPage;
      if (!todo.empty() && start <= todo.back().second.end &&
          todo.back().second.user == r.user) {
        todo.back().second.end = std::max(todo.back().second.end, page.end);
        todo.back().second.executable |= page.executable;
      } else {
        todo.emplace_back(start, page);
      }
    }
    for (const auto& [va, r] : todo) {
      try {
        if (r.user) {
          // The captured process's own memory, mapped for the device: the same here.
          user_.push_back(std::make_unique<HostMapping>(va, r.end - va));
          reserved_.push_back(dev_->map_host(user_.back()->p, r.end - va));
        } else {
          reserved_.push_back(dev_->allocate_at(va, r.end - va, r.kind, r.executable));
        }
      } catch (const InvalidInput& e) {
        throw InvalidInput("replay: cannot restore the capture's memory at [" + hex(va) + ", " +
                           hex(r.end) + ") on " + dev_->name() + ": " + e.what());
      }
      const Buffer& b = reserved_.back();
      spans_[b.va()] = {b.va() + b.size(), static_cast<std::byte*>(b.host())};
    }
  }

  // Anonymous memory at exactly the captured process's address (map_host's memory).
  struct HostMapping {
    HostMapping(uint64_t va, uint64_t size) : size(size) {
      p = ::mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED || p != reinterpret_cast<void*>(va)) {
        if (p != MAP_FAILED) ::munmap(p, size);
        throw InvalidInput(std::string("host memory there is taken in this process (") +
                           (p == MAP_FAILED ? std::strerror(errno) : "mapped elsewhere") + ")");
      }
    }
    ~HostMapping() { ::munmap(p, size); }
    void* p = nullptr;
    uint64_t size;
  };

  capture::DeviceRecord rec_;
  std::vector<std::unique_ptr<HostMapping>> user_;  // outlives the buffers mapping it
  std::unique_ptr<Device> dev_;
  std::vector<Buffer> reserved_;
  std::map<uint64_t, std::pair<uint64_t, std::byte*>> spans_;  // start -> {end, host or null}
  Buffer markers_;
  std::map<std::pair<int, uint32_t>, Queue> queues_;
  std::unique_ptr<TimestampFinder> finders_[2];  // per queue kind
  std::map<uint64_t, uint64_t> timestamps_;      // timestamp records written: start -> end
  const detail::HostSteps* host_ = nullptr;
};

class Replayer {
 public:
  Replayer(const std::string& path, const Options& o) : path_(path), o_(o) {}

  Result run() {
    Scan s = scan(path_);
    if (!o_.device.empty() && s.devices.size() > 1)
      throw InvalidInput("replay: " + path_ + " holds " + std::to_string(s.devices.size()) +
                         " devices; a DEVICE can be named only for a capture of one");
    for (const auto& [id, d] : s.devices) {
      const std::string name = o_.device.empty() ? default_device(d) : o_.device;
      targets_[id] = std::make_unique<Target>(d, name, path_, s.ranges[id]);
      result_.devices.push_back(targets_[id]->device().name());
    }
    host_ = std::make_unique<detail::HostSteps>(memory_, o_.timeout);
    for (auto& [id, t] : targets_) t->set_host(host_.get());
    capture::Reader r(path_);
    r.read_host_steps(true);
    std::optional<uint64_t> last;  // the last submission replayed
    bool stopping = false;  // --until reached: compare what follows, up to the next submission
    // A group the capture submitted together (kSubmissionGrouped) goes to the GPU together:
    // one of its submissions may wait for a later one of it.
    std::vector<capture::SubmissionRecord> group;
    while (auto rec = r.next()) {
      if (rec->type == capture::RecordType::Memory) {
        if (!memory(rec->memory, last, !group.empty())) return result_;
      } else if (rec->type == capture::RecordType::Submission) {
        auto& sub = rec->submission;
        if (group.empty() && (stopping || (o_.until && sub.sequence > *o_.until))) break;
        group.push_back(std::move(sub));
        if (group.back().grouped) continue;
        for (const auto& g : group) {
          targets_.at(g.device)->submit(g);
          result_.submissions++;
          last = g.sequence;
          if (o_.on_submission) o_.on_submission(g.sequence);
          if (o_.until && g.sequence >= *o_.until) stopping = true;
        }
        group.clear();
      } else if (rec->type == capture::RecordType::HostSteps) {
        host_->add(std::move(rec->host_steps));  // taken while the run's submissions run
      } else if (rec->type == capture::RecordType::DeviceEnd) {
        Target& t = *targets_.at(rec->end.device);
        const uint64_t want = rec->end.timeline;
        if (auto h = t.wait([&] { return t.timeline() >= want && t.all_done(); }, o_.timeout)) {
          result_.hang = std::move(*h);
          return result_;
        }
      }
    }
    for (auto& [id, t] : targets_) {
      Target& target = *t;
      if (auto h = target.wait([&] { return target.all_done(); }, o_.timeout)) {
        result_.hang = std::move(*h);
        return result_;
      }
    }
    return result_;
  }

 private:
  // Merges one memory record into the replay (see replay.hpp); false when the replay stops
  // here (a difference with `compare`, or a hang).
  bool memory(const capture::MemoryRecord& m, std::optional<uint64_t> last, bool in_group) {
    Target& t = *targets_.at(m.device);
    const bool settled = (m.flags & capture::kMemorySettled) != 0;
    if (last && !in_group) {
      // The replay finishes everything submitted so far, so that it is at least as far as the
      // captured device was when it read these bytes (at least at m.timeline, perhaps
      // further): a byte the capture saw change that the replay left alone is the CPU's.
      const uint64_t want = m.timeline;
      auto done = [&] { return t.all_done() && t.timeline() >= want; };
      if (auto h = t.wait(done, o_.timeout)) {
        result_.hang = std::move(*h);
        return false;
      }
    }
    const uint64_t n = m.bytes.size();
    if (n == 0) return true;
    if (m.flags & capture::kMemoryWritten) {  // the CPU's write, as it made it
      t.write(m.address, m.bytes.data(), n);
      return true;
    }
    auto& previous = previous_[{m.device, m.address}];
    if (previous.size() != n) {  // first seen (or a new buffer there): restore it
      t.write(m.address, m.bytes.data(), n);
      previous = m.bytes;
      return true;
    }
    std::vector<uint8_t> now(n);
    t.read(m.address, now.data(), n);
    // Signals are the CPU's and the GPU's to set and reset (a slot reused, a value the CPU
    // raised): their bytes are restored, never compared (a wrong one shows as a hang). Settled
    // means the replay's GPU is as far as the captured one was: then they are the capture's.
    const bool signals = (m.flags & capture::kMemorySignals) != 0;
    if (settled && o_.compare && !signals) result_.compared++;
    uint64_t first_diff = UINT64_MAX, last_diff = 0;
    // Runs of bytes to write: the CPU's writes the capture saw (and, settled without
    // compare, the captured GPU's where the replay's differs: the replay follows the capture).
    uint64_t run = UINT64_MAX;
    auto flush = [&](uint64_t end) {
      if (run != UINT64_MAX) t.write(m.address + run, m.bytes.data() + run, end - run);
      run = UINT64_MAX;
    };
    // A word at a time (4 bytes, aligned to the record): the GPU writes whole words, and a
    // byte of a value the replay wrote may equal the byte before it by chance (a float's zero
    // low bytes), which must not make the rest of that word "the CPU's".
    for (uint64_t i = 0; i < n; i += kWord) {
      const uint64_t w = std::min<uint64_t>(kWord, n - i);
      auto same = [&](const uint8_t* a, const uint8_t* b) { return std::memcmp(a + i, b + i, w) == 0; };
      bool take = false;
      if (!same(now.data(), m.bytes.data())) {
        if (same(now.data(), previous.data())) {
          take = true;  // the capture's CPU wrote it (or its GPU, and the replay's did not)
        } else if (signals) {
          take = settled;
        } else if (t.timestamp_at(m.address + i)) {
          // A GPU clock value: the replay's own, never the capture's.
        } else if (settled) {
          uint64_t b = i;
          while (now[b] == m.bytes[b]) b++;
          if (first_diff == UINT64_MAX) first_diff = b;
          for (b = i + w - 1; now[b] == m.bytes[b]; b--) {
          }
          last_diff = b;
          take = !o_.compare;
        }
      }
      if (take && run == UINT64_MAX) run = i;
      if (!take) flush(i);
    }
    flush(n);
    previous = m.bytes;
    if (first_diff != UINT64_MAX && o_.compare) {
      Difference d;
      d.submission = last.value_or(0);
      d.device = t.device().name();
      d.address = m.address + first_diff;
      d.length = last_diff - first_diff + 1;
      const uint64_t shown = std::min<uint64_t>(d.length, 16);
      d.captured.assign(m.bytes.begin() + long(first_diff),
                        m.bytes.begin() + long(first_diff + shown));
      d.replayed.assign(now.begin() + long(first_diff), now.begin() + long(first_diff + shown));
      result_.difference = std::move(d);
      return false;
    }
    return true;
  }

  std::string path_;
  Options o_;
  std::map<uint32_t, std::unique_ptr<Target>> targets_;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<uint8_t>> previous_;  // the last record
  Result result_;
  // The host steps' way to the targets' memory (from the host-steps thread).
  struct TargetMemory : detail::HostSteps::Memory {
    explicit TargetMemory(std::map<uint32_t, std::unique_ptr<Target>>& t) : targets(t) {}
    void read(uint32_t device, uint64_t va, void* out, uint64_t n) override {
      targets.at(device)->read(va, out, n);
    }
    void write(uint32_t device, uint64_t va, const void* in, uint64_t n) override {
      targets.at(device)->write(va, in, n);
    }
    std::map<uint32_t, std::unique_ptr<Target>>& targets;
  } memory_{targets_};
  std::unique_ptr<detail::HostSteps> host_;  // stopped before the targets close
};

}  // namespace

Result run(const std::string& path, const Options& options) {
  capture::protect_input(path);  // HCQ_CAPTURE naming it would truncate what is replayed
  return Replayer(path, options).run();
}

Bisection bisect(const std::string& path, const Options& options) {
  Bisection b;
  Options o = options;
  o.compare = true;
  o.until.reset();
  Result whole = run(path, o);
  b.replays = 1;
  if (whole.clean()) return b;
  // The prefix ending at the submission the whole replay failed at fails the same way (a hang
  // there, or the same bytes compared after it): the first failing prefix is at most that.
  uint64_t hi = whole.hang ? whole.hang->submission : whole.difference->submission;
  b.first_failing = hi;
  b.failure = whole;
  uint64_t lo = 0;  // prefixes ending before `lo` are not known to fail
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    o.until = mid;
    Result r = run(path, o);
    b.replays++;
    if (r.clean()) {
      lo = mid + 1;
    } else {
      hi = mid;
      b.first_failing = mid;
      b.failure = std::move(r);
    }
  }
  return b;
}

}  // namespace hcq::replay
