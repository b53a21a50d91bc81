#include "core/capture.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <zlib.h>

#include "core/device.hpp"
#include "core/error.hpp"

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

struct Writer {
  std::mutex mu;
  std::FILE* f = nullptr;
  Options options;
  std::map<const Device*, uint32_t> devices;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> recorded;  // (device, va) -> content hash
  uint64_t sequence = 0;
  std::vector<uint8_t> buf;  // the record being built
  std::vector<uint8_t> packed;

  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }
  template <class T>
  void put(T v) {
    put(&v, sizeof v);
  }
  void put_string(const std::string& s) {
    put(uint16_t(std::min<size_t>(s.size(), 0xffff)));
    put(s.data(), std::min<size_t>(s.size(), 0xffff));
  }
  // Header (type, flags, payload length), then the payload built in `buf`, compressed when
  // asked (its uncompressed length first).
  void emit(RecordType type) {
    uint32_t head[2] = {uint32_t(type), 0};
    const uint8_t* data = buf.data();
    uint64_t len = buf.size();
    if (options.compress) {
      uLongf packed_len = compressBound(uLong(buf.size()));
      packed.resize(8 + packed_len);
      const uint64_t raw = buf.size();
      std::memcpy(packed.data(), &raw, 8);
      if (compress2(packed.data() + 8, &packed_len, buf.data(), uLong(buf.size()), 1) == Z_OK) {
        head[1] = kRecordCompressed;
        data = packed.data();
        len = 8 + packed_len;
      }
    }
    std::fwrite(head, sizeof head, 1, f);
    std::fwrite(&len, sizeof len, 1, f);
    std::fwrite(data, 1, len, f);
    buf.clear();
  }
};

Writer& writer() {
  static Writer w;
  return w;
}

std::atomic<int> state{-1};  // -1: environment not read yet, 0: off, 1: on

void open_locked(Writer& w, const std::string& path, const Options& options) {
  if (w.f) std::fclose(w.f);
  w.f = std::fopen(path.c_str(), "wb");
  if (!w.f) throw OsError("capture: cannot create " + path, errno);
  w.options = options;
  w.devices.clear();
  w.recorded.clear();
  w.sequence = 0;
  std::fwrite(kMagic, sizeof kMagic, 1, w.f);
  uint32_t v[2] = {kVersion, 0};
  std::fwrite(v, sizeof v, 1, w.f);
}

}  // namespace

Options parse_spec(const std::string& spec, std::string& path) {
  Options o;
  size_t at = spec.find(',');
  path = spec.substr(0, at);
  while (at != std::string::npos) {
    size_t next = spec.find(',', at + 1);
    std::string opt = spec.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    if (opt == "full")
      o.full = true;
    else if (opt == "zlib")
      o.compress = true;
    else
      throw InvalidInput("HCQ_CAPTURE: unknown option '" + opt + "' (path[,full][,zlib])");
    at = next;
  }
  if (path.empty()) throw InvalidInput("HCQ_CAPTURE: no file name in '" + spec + "'");
  return o;
}

void start(const std::string& path, const Options& options) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  open_locked(w, path, options);
  state = 1;
}

void stop() {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (w.f) std::fclose(w.f);
  w.f = nullptr;
  state = 0;
}

bool enabled() {
  int s = state.load(std::memory_order_acquire);
  if (s >= 0) return s == 1;
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (state < 0) {
    const char* spec = std::getenv("HCQ_CAPTURE");
    if (spec && *spec) {
      std::string path;
      Options o = parse_spec(spec, path);
      open_locked(w, path, o);
      state = 1;
    } else {
      state = 0;
    }
  }
  return state == 1;
}

void submission(const Device& dev, QueueKind kind, uint32_t queue_index,
                std::span<const Segment> segments) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  if (!w.f) return;
  auto [it, fresh] = w.devices.emplace(&dev, uint32_t(w.devices.size()));
  if (fresh) {
    const auto& p = dev.properties();
    w.put(it->second);
    w.put_string(p.name);
    w.put_string(p.vendor);
    w.put_string(p.arch);
    w.emit(RecordType::Device);
  }
  if (w.options.full)
    for (const Device::LiveBuffer& b : dev.live_buffers()) {
      if (!b.host) continue;  // not CPU-visible: cannot be read here
      const uint64_t h = content_hash(b.host, b.size);
      auto [at, first] = w.recorded.try_emplace({it->second, b.va}, h);
      if (!first && at->second == h) continue;
      at->second = h;
      w.put(it->second);
      w.put(uint32_t(0));
      w.put(b.va);
      w.put(b.size);
      w.put(b.host, b.size);
      w.emit(RecordType::Memory);
    }
  w.put(it->second);
  w.put(uint8_t(kind));
  w.put(uint8_t(queue_index));
  w.put(uint16_t(0));
  w.put(w.sequence++);
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
  std::fflush(w.f);  // a crash or hang must not lose what was submitted before it
}

}  // namespace hcq::capture
