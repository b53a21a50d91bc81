#include "core/capture.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>

#include <sys/stat.h>
#include <zlib.h>

#include "core/capture_ring.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "os/output_file.hpp"

namespace hcq::capture {
namespace {

// A cheap 64-bit hash of a buffer's bytes (FNV-1a over 8-byte words): full mode writes a
// buffer again only when it changed.
uint64_t content_hash(const void* p, uint64_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// The live ring's end of a capture: the same records as the file, appended whole or dropped
// whole (never blocking the submission). A device record that did not fit is kept and goes
// first once there is room, since the follower cannot decode its submissions without it; the
// records dropped since the last one that went in are announced by a Dropped record before
// the next.
struct RingSink {
  std::unique_ptr<RingWriter> ring;
  uint64_t unannounced = 0;                    // dropped since the last record that went in
  std::vector<std::vector<uint8_t>> devices;  // device records still to go in (rare: copied)

  void write(const uint8_t* rec, size_t n, RecordType type) {
    uint64_t need = n + (unannounced ? 24 : 0);
    for (const auto& d : devices) need += d.size();
    if (!ring->fits(need)) {
      if (type == RecordType::Device) {
        devices.emplace_back(rec, rec + n);
      } else {
        unannounced++;
        ring->count_dropped(1);
      }
      return;
    }
    for (const auto& d : devices) ring->put(d.data(), d.size());
    devices.clear();
    if (unannounced) {
      const uint32_t head[2] = {uint32_t(RecordType::Dropped), 0};
      const uint64_t len = 8;
      ring->put(head, 8);
      ring->put(&len, 8);
      ring->put(&unannounced, 8);
      unannounced = 0;
    }
    ring->put(rec, n);
    ring->publish();
  }
};

struct Writer {
  std::mutex mu;
  os::OutputFile file;  // every write checked: a full disk is an error, not a short capture
  RingSink ring;        // HCQ_CAPTURE=shm:NAME: the live ring, if any
  // Why the capture cannot go on (an open or a write that failed): every later submission
  // throws it, and nothing more is written after the hole.
  std::exception_ptr failed;
  // Files this process reads (protect_input): the path and the file it named then (device,
  // inode). A file made at that path later is another file, not an input.
  struct Input {
    std::string path;
    dev_t dev;
    ino_t ino;
  };
  std::vector<Input> inputs;
  Options options;
  std::map<uint64_t, uint32_t> devices;  // Device::serial() -> id in the capture, while open
  uint32_t next_device = 0;              // ids are never reused within a file
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> recorded;  // (device, va) -> content hash
  uint64_t sequence = 0;
  // The record being built: its 16-byte header, then the payload, in buf's first `used`
  // bytes. buf only grows, and fields are copied in with memcpy: building a submission's
  // record is most of what a capture to the ring costs.
  std::vector<uint8_t> buf;
  size_t used = 0;
  std::vector<uint8_t> packed;

  // Called in a catch block: part of a record may be in the file, so nothing more goes after
  // it (nor in the ring, which is closed so its follower ends); later submissions throw why.
  void fail() {
    failed = std::current_exception();
    file = {};
    ring = {};
  }
  void begin() {
    if (buf.size() < 4096) buf.resize(4096);
    used = 16;
  }
  void put(const void* p, size_t n) {
    if (buf.size() - used < n) buf.resize(std::max(buf.size() * 2, used + n));
    std::memcpy(buf.data() + used, p, n);
    used += n;
  }
  template <class T>
  void put(T v) {
    put(&v, sizeof v);
  }
  void put_string(const std::string& s) {
    put(uint16_t(std::min<size_t>(s.size(), 0xffff)));
    put(s.data(), std::min<size_t>(s.size(), 0xffff));
  }
  // Writes the record built in `buf` (since begin()) in one write: header (type, flags, payload
  // length), then the payload, compressed when asked (its uncompressed length first).
  void emit(RecordType type) {
    const uint64_t raw = used - 16;
    if (raw > kMaxRecordBytes)  // no reader would take it
      throw InvalidInput("capture: a record of " + std::to_string(raw) + " bytes, more than the " +
                         std::to_string(kMaxRecordBytes) + " a record may hold");
    uint32_t head[2] = {uint32_t(type), 0};
    uint8_t* out = buf.data();
    uint64_t out_bytes = used;
    if (options.compress) {
      uLongf packed_len = compressBound(uLong(raw));
      packed.resize(24 + packed_len);
      std::memcpy(packed.data() + 16, &raw, 8);
      if (compress2(packed.data() + 24, &packed_len, buf.data() + 16, uLong(raw), 1) == Z_OK) {
        head[1] = kRecordCompressed;
        out = packed.data();
        out_bytes = 24 + packed_len;
      }
    }
    const uint64_t len = out_bytes - 16;
    std::memcpy(out, head, 8);
    std::memcpy(out + 8, &len, 8);
    if (ring.ring) ring.write(out, out_bytes, type);
    if (file.is_open()) file.write(out, out_bytes);
  }
};

Writer& writer() {
  static Writer w;
  return w;
}

std::atomic<int> state{-1};  // -1: environment not read yet, 0: off, 1: on

void open_locked(Writer& w, const std::string& path, const Options& options) {
  if (path.empty() && options.ring.empty())
    throw InvalidInput("capture: no file and no ring to write");
  // No symlink followed and no other user's file truncated (os::OutputFile's rule); private,
  // as it holds memory contents; never one of the files this process reads.
  os::OutputFile f;
  if (!path.empty()) {
    std::vector<std::string> reading;
    for (const Writer::Input& in : w.inputs) {
      struct stat st {};
      if (::stat(in.path.c_str(), &st) == 0 && st.st_dev == in.dev && st.st_ino == in.ino)
        reading.push_back(in.path);
    }
    f = os::OutputFile::create(path, {.mode = 0600, .inputs = reading});
    uint32_t v[2] = {kVersion, 0};
    f.write(kMagic, sizeof kMagic);
    f.write(v, sizeof v);
  }
  // The ring's header holds the format version: nothing of the file's header goes in it.
  RingSink ring;
  if (!options.ring.empty())
    ring.ring = std::make_unique<RingWriter>(options.ring, options.ring_bytes);
  w.file = std::move(f);
  w.ring = std::move(ring);
  w.failed = nullptr;
  w.options = options;
  w.devices.clear();
  w.next_device = 0;
  w.recorded.clear();
  w.sequence = 0;
}

// Closes the capture; throws OsError when the close fails (after a failure already thrown by
// a submission, the file is closed without another report).
void close_locked(Writer& w) {
  state = 0;
  w.failed = nullptr;
  w.ring = {};  // closed: its follower ends once it has read the rest
  os::OutputFile f = std::move(w.file);
  if (f.is_open()) f.close();
}

// The buffers of `dev` (capture id `id`) whose contents changed since they were last
// recorded, one memory record each (full mode). `settled`: the device had finished the work
// before this point (kMemorySettled).
// `idle`: no submission is being made (a wait, the close), so settled means the timeline
// reached the newest value.
void record_memory_locked(Writer& w, const Device& dev, uint32_t id, bool idle) {
  // The timeline is read before the contents: they are at least what that value's work left.
  const Timeline& tl = dev.timeline();
  const uint64_t seen = tl.signal().value();
  // The submission being recorded has reserved its value (every lib/core path reserves
  // first), so the work before it is done once the timeline reached the one before.
  const uint64_t last = tl.last();
  const bool settled = idle ? seen >= last : seen + 1 >= last;
  for (const Device::LiveBuffer& b : dev.live_buffers()) {
    // Memory the CPU cannot map is read through the device's port (not the host memory
    // of a USB bridge's window: the CPU cannot read that through the bridge).
    std::vector<std::byte> read;
    const void* bytes = b.host;
    if (!bytes && !dev.properties().caps.cpu_maps_memory && b.kind == MemoryKind::Device) {
      read.resize(b.size);
      dev.read_memory(b.va, read);
      bytes = read.data();
    }
    if (!bytes) continue;  // not CPU-visible: cannot be read here
    const uint64_t h = content_hash(bytes, b.size);
    auto [at, first] = w.recorded.try_emplace({id, b.va}, h);
    if (!first && at->second == h) continue;
    at->second = h;
    const uint32_t flags = (settled ? kMemorySettled : 0) |
                           (b.executable ? kMemoryExecutable : 0) |
                           (b.signals ? kMemorySignals : 0) | (b.user ? kMemoryUser : 0) |
                           uint32_t(b.kind) << 8;
    // In pieces, each a record under the reader's limit, at consecutive addresses.
    uint64_t off = 0;
    do {
      const uint64_t n = std::min(b.size - off, kMemoryPieceBytes);
      w.begin();
      w.put(id);
      w.put(flags);
      w.put(seen);
      w.put(b.va + off);
      w.put(n);
      w.put(static_cast<const uint8_t*>(bytes) + off, n);
      w.emit(RecordType::Memory);
    } while ((off += kMemoryPieceBytes) < b.size);
  }
}

// The capture's id of `dev`, its device record written the first time.
uint32_t device_id_locked(Writer& w, const Device& dev) {
  // try_emplace: no node is allocated for a device already recorded (every submission).
  auto [it, fresh] = w.devices.try_emplace(dev.serial(), w.next_device);
  if (fresh) {
    w.next_device++;
    const auto& p = dev.properties();
    w.begin();
    w.put(it->second);
    w.put_string(p.name);
    w.put_string(p.vendor);
    w.put_string(p.arch);
    w.put(dev.heap_base());
    w.put(dev.heap_size());
    w.put(dev.timeline().signal().va());
    w.put(dev.queue_count(QueueKind::Compute));
    w.put(dev.queue_count(QueueKind::Copy));
    w.emit(RecordType::Device);
  }
  return it->second;
}

// Writes the records of one submission: its device's (the first time), the buffers that
// changed (full mode), the submission's. Each record is one checked write.
uint64_t record_locked(Writer& w, const Device& dev, QueueKind kind, uint32_t queue_index,
                       std::span<const Segment> segments, bool grouped) {
  const uint32_t id = device_id_locked(w, dev);
  if (w.options.full) record_memory_locked(w, dev, id, false);
  w.begin();
  w.put(id);
  w.put(uint8_t(kind));
  w.put(uint8_t(queue_index));
  w.put(uint16_t(grouped ? kSubmissionGrouped : 0));
  const uint64_t sequence = w.sequence++;
  w.put(sequence);
  w.put(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  w.put(uint32_t(segments.size()));
  for (const Segment& s : segments) {
    w.put(uint8_t(s.indirect));
    w.put(uint8_t(0));
    w.put(uint16_t(0));
    w.put(uint32_t(s.words.size()));
    w.put(s.address);
    w.put(s.words.data(), s.words.size() * 4);
  }
  w.emit(RecordType::Submission);
  return sequence;
}

}  // namespace

Options parse_spec(const std::string& spec, std::string& path) {
  Options o;
  path.clear();
  bool have_file = false, have_ring = false;
  std::optional<std::pair<bool, bool>> encoding;  // the first target's full and zlib
  std::string first_target;
  size_t start = 0;
  for (;;) {
    const size_t end = spec.find(';', start);
    const std::string target = spec.substr(start, end == std::string::npos ? end : end - start);
    const bool ring = target.starts_with("shm:");
    bool full = false, compress = false;
    size_t at = target.find(',');
    const std::string name = target.substr(0, at);
    while (at != std::string::npos) {
      const size_t next = target.find(',', at + 1);
      const std::string opt = target.substr(at + 1, next == std::string::npos ? next : next - at - 1);
      if (opt == "full") {
        full = true;
      } else if (opt == "zlib") {
        compress = true;
      } else if (ring && opt.starts_with("size=")) {
        const std::string n = opt.substr(5);
        uint64_t mib = 0;
        if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
            (mib = std::stoull(n)) < 1 || mib > kMaxRingMiB)
          throw InvalidInput("HCQ_CAPTURE: size takes 1 to " + std::to_string(kMaxRingMiB) +
                             " (MiB), not '" + n + "'");
        o.ring_bytes = mib << 20;
      } else {
        throw InvalidInput("HCQ_CAPTURE: unknown option '" + opt + "' (" +
                           (ring ? "shm:NAME[,size=MiB][,full][,zlib]" : "path[,full][,zlib]") +
                           ")");
      }
      at = next;
    }
    if (ring) {
      if (have_ring) throw InvalidInput("HCQ_CAPTURE: more than one shm: ring in '" + spec + "'");
      have_ring = true;
      o.ring = name.substr(4);
      if (o.ring.empty()) throw InvalidInput("HCQ_CAPTURE: no ring name in '" + target + "'");
    } else {
      if (name.empty()) throw InvalidInput("HCQ_CAPTURE: no file name in '" + spec + "'");
      if (have_file) throw InvalidInput("HCQ_CAPTURE: more than one file in '" + spec + "'");
      have_file = true;
      path = name;
    }
    if (!encoding) {
      encoding.emplace(full, compress);
      first_target = target;
    } else if (*encoding != std::pair(full, compress)) {
      throw InvalidInput("HCQ_CAPTURE: '" + first_target + "' and '" + target +
                         "' differ in full or zlib (both targets get the same records)");
    }
    o.full = full;
    o.compress = compress;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return o;
}

void start(const std::string& path, const Options& options) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  close_locked(w);
  open_locked(w, path, options);
  state = 1;
}

void protect_input(const std::string& path) {
  Writer& w = writer();
  {
    std::lock_guard lk(w.mu);
    struct stat in {}, out {};
    if (::stat(path.c_str(), &in) != 0) return;  // the reader says why it cannot open it
    if (w.file.is_open() && ::stat(w.file.path().c_str(), &out) == 0 &&
        in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw InvalidInput("capture: " + path + " is the file this process's capture writes (" +
                         w.file.path() + "); it cannot be read at the same time");
    w.inputs.push_back({path, in.st_dev, in.st_ino});
  }
  // HCQ_CAPTURE is read now that the input is known: one naming it (or failing otherwise) is
  // this caller's error at once, not a capture that fails where nothing submits through it.
  if (enabled()) {
    std::lock_guard lk(w.mu);
    if (w.failed) std::rethrow_exception(w.failed);
  }
}

void stop() {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  close_locked(w);
}

bool enabled() {
  int s = state.load(std::memory_order_acquire);
  if (s >= 0) return s == 1;
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (state < 0) {
    const char* spec = std::getenv("HCQ_CAPTURE");
    if (spec && *spec) {
      // A capture that was asked for and cannot be made fails the submissions (each one says
      // why) instead of letting the run go on unrecorded.
      try {
        std::string path;
        Options o = parse_spec(spec, path);
        open_locked(w, path, o);
      } catch (const Error&) {
        w.failed = std::current_exception();
      }
      state = 1;
    } else {
      state = 0;
    }
  }
  return state == 1;
}

std::optional<uint64_t> submission(const Device& dev, QueueKind kind, uint32_t queue_index,
                                   std::span<const Segment> segments, bool grouped) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (w.failed) std::rethrow_exception(w.failed);
  if (!w.file.is_open() && !w.ring.ring) return std::nullopt;
  try {
    return record_locked(w, dev, kind, queue_index, segments, grouped);
  } catch (...) {
    w.fail();
    throw;
  }
}

void wrote(const Device& dev, uint64_t va, std::span<const std::byte> bytes) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (w.failed) std::rethrow_exception(w.failed);
  if (!w.options.full || (!w.file.is_open() && !w.ring.ring)) return;
  try {
    const uint32_t id = device_id_locked(w, dev);
    for (uint64_t off = 0; off < bytes.size(); off += kMemoryPieceBytes) {
      const uint64_t n = std::min<uint64_t>(bytes.size() - off, kMemoryPieceBytes);
      w.begin();
      w.put(id);
      w.put(kMemoryWritten | uint32_t(MemoryKind::Host) << 8);
      w.put(dev.timeline().signal().value());
      w.put(va + off);
      w.put(n);
      w.put(bytes.data() + off, n);
      w.emit(RecordType::Memory);
    }
  } catch (...) {
    w.fail();
    throw;
  }
}

void host_steps(std::span<const Device* const> devices, std::span<const HostStep> steps) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (w.failed) std::rethrow_exception(w.failed);
  if ((!w.file.is_open() && !w.ring.ring) || w.sequence == 0) return;
  // The caller's mistake, refused before anything is written: the capture goes on.
  for (const HostStep& h : steps)
    if (std::max(h.device, h.src_device) >= devices.size())
      throw InvalidInput("capture: a host step names device " +
                         std::to_string(std::max(h.device, h.src_device)) + " of " +
                         std::to_string(devices.size()));
  try {
    std::vector<uint32_t> ids;
    for (const Device* d : devices) ids.push_back(device_id_locked(w, *d));
    auto id = [&](uint32_t index) { return ids[index]; };
    w.begin();
    w.put(w.sequence - 1);
    w.put(uint32_t(steps.size()));
    w.put(uint32_t(0));
    for (const HostStep& h : steps) {
      w.put(uint8_t(h.kind));
      w.put(uint8_t(0));
      w.put(uint16_t(0));
      w.put(id(h.device));
      w.put(id(h.src_device));
      w.put(uint32_t(0));
      w.put(h.dst);
      w.put(h.src);
      w.put(h.value);
    }
    w.emit(RecordType::HostSteps);
  } catch (...) {
    w.fail();
    throw;
  }
}

void waited(const Device& dev) noexcept {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (!w.options.full || w.failed || (!w.file.is_open() && !w.ring.ring)) return;
  auto it = w.devices.find(dev.serial());
  if (it == w.devices.end()) return;  // nothing of it captured yet
  try {
    record_memory_locked(w, dev, it->second, true);
  } catch (...) {
    w.fail();
  }
}

void device_closed(const Device& dev) noexcept {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (w.failed || (!w.file.is_open() && !w.ring.ring)) return;
  auto it = w.devices.find(dev.serial());
  if (it == w.devices.end()) return;  // never submitted while capturing
  try {
    if (w.options.full) record_memory_locked(w, dev, it->second, true);
    w.begin();
    w.put(it->second);
    w.put(uint32_t(0));
    w.put(dev.timeline().signal().value());
    w.emit(RecordType::DeviceEnd);
  } catch (...) {
    w.fail();  // the next submission throws why
  }
  w.devices.erase(it);
}

}  // namespace hcq::capture
