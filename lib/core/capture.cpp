#include "core/capture.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/device.hpp"
#include "core/error.hpp"

namespace hcq::capture {
namespace {

struct Writer {
  std::mutex mu;
  std::FILE* f = nullptr;
  std::map<const Device*, uint32_t> devices;
  uint64_t sequence = 0;
  std::vector<uint8_t> buf;  // the record being built

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
  // Header (type, reserved, payload length), then the payload built in `buf`.
  void emit(RecordType type) {
    uint32_t head[2] = {uint32_t(type), 0};
    uint64_t len = buf.size();
    std::fwrite(head, sizeof head, 1, f);
    std::fwrite(&len, sizeof len, 1, f);
    std::fwrite(buf.data(), 1, buf.size(), f);
    buf.clear();
  }
};

Writer& writer() {
  static Writer w;
  return w;
}

std::atomic<int> state{-1};  // -1: environment not read yet, 0: off, 1: on

void open_locked(Writer& w, const std::string& path) {
  if (w.f) std::fclose(w.f);
  w.f = std::fopen(path.c_str(), "wb");
  if (!w.f) throw OsError("capture: cannot create " + path, errno);
  w.devices.clear();
  w.sequence = 0;
  std::fwrite(kMagic, sizeof kMagic, 1, w.f);
  uint32_t v[2] = {kVersion, 0};
  std::fwrite(v, sizeof v, 1, w.f);
}

}  // namespace

void start(const std::string& path) {
  Writer& w = writer();
  std::lock_guard lk(w.mu);
  open_locked(w, path);
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
    const char* path = std::getenv("HCQ_CAPTURE");
    if (path && *path) {
      open_locked(w, path);
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

Reader::Reader(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) throw OsError("capture: cannot open " + path, errno);
  // The size bounds every record: a corrupt length must not make the reader allocate it.
  std::fseek(f_, 0, SEEK_END);
  size_ = uint64_t(std::max(0L, std::ftell(f_)));
  std::fseek(f_, 0, SEEK_SET);
  char magic[8];
  read(magic, 8, "the file header");
  if (std::memcmp(magic, kMagic, 8) != 0)
    throw InvalidInput(path + ": not an hcq capture (bad magic at offset 0)");
  uint32_t v[2];
  read(v, sizeof v, "the file header");
  if (v[0] != kVersion)
    throw InvalidInput(path + ": capture format version " + std::to_string(v[0]) +
                       ", this hcq reads version " + std::to_string(kVersion));
}

Reader::~Reader() {
  if (f_) std::fclose(f_);
}

void Reader::read(void* p, size_t n, const char* what) {
  if (n && std::fread(p, 1, n, f_) != n)
    throw InvalidInput(path_ + ": truncated at offset " + std::to_string(offset_) + " in " +
                       what);
  offset_ += n;
}

std::optional<Reader::Record> Reader::next() {
  uint32_t head[2];
  uint64_t len;
  size_t got = std::fread(head, 1, sizeof head, f_);
  if (got == 0 && std::feof(f_)) return std::nullopt;
  if (got != sizeof head)
    throw InvalidInput(path_ + ": truncated at offset " + std::to_string(offset_) +
                       " in a record header");
  offset_ += sizeof head;
  read(&len, sizeof len, "a record header");
  const uint64_t start = offset_;
  if (len > size_ - start)
    throw InvalidInput(path_ + ": record at offset " + std::to_string(start - 16) +
                       " claims " + std::to_string(len) + " bytes, " +
                       std::to_string(size_ - start) + " are left in the file");
  std::vector<uint8_t> payload(len);
  read(payload.data(), len, "a record");
  size_t at = 0;
  auto take = [&](void* p, size_t n) {
    if (n > payload.size() - at)
      throw InvalidInput(path_ + ": malformed record at offset " + std::to_string(start - 16) +
                         ": its fields run past its length");
    std::memcpy(p, payload.data() + at, n);
    at += n;
  };
  auto take_string = [&] {
    uint16_t n;
    take(&n, 2);
    std::string s(n, '\0');
    take(s.data(), n);
    return s;
  };
  Record r{};
  r.type = RecordType(head[0]);
  if (r.type == RecordType::Device) {
    take(&r.device.id, 4);
    r.device.name = take_string();
    r.device.vendor = take_string();
    r.device.arch = take_string();
  } else if (r.type == RecordType::Submission) {
    auto& s = r.submission;
    uint8_t kind, index;
    uint16_t pad;
    uint32_t nseg;
    take(&s.device, 4);
    take(&kind, 1);
    take(&index, 1);
    take(&pad, 2);
    take(&s.sequence, 8);
    take(&s.host_ns, 8);
    take(&nseg, 4);
    if (kind > 1)
      throw InvalidInput(path_ + ": record at offset " + std::to_string(start - 16) +
                         " names queue kind " + std::to_string(kind));
    s.queue = QueueKind(kind);
    s.queue_index = index;
    for (uint32_t i = 0; i < nseg; i++) {
      Segment seg;
      uint8_t indirect, p8;
      uint32_t words;
      take(&indirect, 1);
      take(&p8, 1);
      take(&pad, 2);
      take(&words, 4);
      take(&seg.address, 8);
      seg.indirect = indirect != 0;
      if (uint64_t(words) * 4 > payload.size() - at)
        throw InvalidInput(path_ + ": malformed record at offset " + std::to_string(start - 16) +
                           ": a segment of " + std::to_string(words) + " dwords runs past it");
      seg.words.resize(words);
      take(seg.words.data(), uint64_t(words) * 4);
      s.segments.push_back(std::move(seg));
    }
  } else {
    // Unknown record types from newer writers are skipped (their length says how far).
    return next();
  }
  return r;
}

}  // namespace hcq::capture
