// Reading captures (split from the writer so tools and fuzzers need no device code).
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/capture.hpp"
#include "core/error.hpp"

namespace hcq::capture {
namespace {

// "268435456 (256 MiB)": how a limit reads in the errors.
std::string limit_text(uint64_t bytes) {
  return std::to_string(bytes) + " (" + std::to_string(bytes >> 20) + " MiB)";
}

// A record's payload is read from a pipe this much at a time, so memory follows what arrived.
constexpr uint64_t kReadChunk = 1 << 20;

}  // namespace

namespace {

// A file or a pipe through stdio.
class FileSource : public Source {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    f_.reset(std::fopen(path.c_str(), "rb"));
    if (!f_) throw OsError("capture: cannot open " + path, errno);
    struct stat st {};
    if (::fstat(::fileno(f_.get()), &st) != 0) throw OsError("capture: cannot stat " + path, errno);
    if (S_ISDIR(st.st_mode)) throw InvalidInput(path + " is a directory, not a capture file");
    // A regular file's size bounds every record at once; a pipe's records are read as they
    // arrive.
    if (S_ISREG(st.st_mode)) size_ = uint64_t(st.st_size);
  }
  size_t read_some(void* p, size_t n) override {
    const size_t got = n ? std::fread(p, 1, n, f_.get()) : 0;
    if (got != n && std::ferror(f_.get()))
      throw OsError(path_ + ": reading at offset " + std::to_string(offset_ + got) + " failed",
                    errno);
    offset_ += got;
    return got;
  }
  std::optional<uint64_t> size() const override { return size_; }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> f_;
  std::string path_;
  uint64_t offset_ = 0;
  std::optional<uint64_t> size_;
};

}  // namespace

Reader::Reader(const std::string& path)
    : src_(std::make_unique<FileSource>(path)), path_(path), size_(src_->size()) {
  read_header();
}

Reader::Reader(std::unique_ptr<Source> source, const std::string& name)
    : src_(std::move(source)), path_(name), size_(src_->size()) {
  read_header();
}

void Reader::read_header() {
  uint8_t head[16];
  read(head, sizeof head, "the file header");
  if (std::memcmp(head, kMagic, 8) != 0)
    throw InvalidInput(path_ + ": not an hcq capture (bad magic at offset 0)");
  uint32_t v[2];
  std::memcpy(v, head + 8, sizeof v);
  if (v[0] < 1 || v[0] > kVersion)
    throw InvalidInput(path_ + ": capture format version " + std::to_string(v[0]) +
                       ", this hcq reads versions 1 to " + std::to_string(kVersion));
  version_ = v[0];
  src_->commit();
}

size_t Reader::read_some(void* p, size_t n) {
  const size_t got = src_->read_some(p, n);
  offset_ += got;
  return got;
}

void Reader::read(void* p, size_t n, const char* what) {
  const uint64_t at = offset_;
  const size_t got = read_some(p, n);
  if (got != n)
    throw InvalidInput(path_ + ": truncated at offset " + std::to_string(at) + ": " + what +
                       " of " + std::to_string(n) + " bytes, the input ends after " +
                       std::to_string(got) + " of them");
}

std::vector<uint8_t> Reader::read_payload(uint64_t len, uint64_t at) {
  const std::string claim = "record at offset " + std::to_string(at) + " claims " +
                            std::to_string(len) + " bytes";
  if (len > kMaxRecordBytes)
    throw InvalidInput(path_ + ": " + claim + ", more than the " + limit_text(kMaxRecordBytes) +
                       " a record may hold");
  if (const uint64_t left = size_ ? *size_ - std::min(*size_, offset_) : len; len > left)
    throw InvalidInput(path_ + ": " + claim + ", " + std::to_string(left) +
                       " are left in the file");
  std::vector<uint8_t> payload;
  if (size_) payload.reserve(len);  // the file holds them: checked above
  // From a pipe, a chunk at a time: a claim the input does not back costs one chunk.
  while (payload.size() < len) {
    const size_t have = payload.size(), n = size_t(std::min(len - have, kReadChunk));
    payload.resize(have + n);
    const size_t got = read_some(payload.data() + have, n);
    if (got != n)
      throw InvalidInput(path_ + ": truncated: the " + claim + ", the input ends after " +
                         std::to_string(have + got) + " of them");
  }
  return payload;
}

std::vector<uint8_t> Reader::inflate_payload(const std::vector<uint8_t>& stored, uint64_t at) {
  const std::string what = path_ + ": compressed record at offset " + std::to_string(at);
  uint64_t raw = 0;
  if (stored.size() < 8)
    throw InvalidInput(what + " is " + std::to_string(stored.size()) +
                       " bytes, shorter than its 8-byte length");
  std::memcpy(&raw, stored.data(), 8);
  if (raw > kMaxRecordBytes)
    throw InvalidInput(what + " claims " + std::to_string(raw) + " bytes inflated, more than the " +
                       limit_text(kMaxRecordBytes) + " a record may hold");
  z_stream z{};
  if (inflateInit(&z) != Z_OK) throw Error("capture: zlib's inflateInit failed");
  std::unique_ptr<z_stream, int (*)(z_streamp)> end(&z, inflateEnd);
  z.next_in = const_cast<Bytef*>(stored.data() + 8);
  z.avail_in = uInt(stored.size() - 8);  // at most kMaxRecordBytes
  // The output grows as bytes come out, to one byte past the stated length at most: a stream
  // that states little and inflates to much stops there.
  std::vector<uint8_t> out;
  int rc = Z_OK;
  while (rc == Z_OK && z.total_out <= raw) {
    out.resize(size_t(std::min<uint64_t>(raw + 1, std::max<uint64_t>(out.size() * 2, 1 << 20))));
    z.next_out = out.data() + z.total_out;
    z.avail_out = uInt(out.size() - z.total_out);
    rc = inflate(&z, Z_NO_FLUSH);
  }
  if (z.total_out > raw)
    throw InvalidInput(what + " inflates to more than its stated " + std::to_string(raw) +
                       " bytes");
  if (rc != Z_STREAM_END)
    throw InvalidInput(what + " does not inflate to its " + std::to_string(raw) + " bytes (zlib: " +
                       (z.msg ? z.msg : "the stream ends early") + ")");
  if (z.total_out != raw)
    throw InvalidInput(what + " inflates to " + std::to_string(z.total_out) +
                       " bytes, its header says " + std::to_string(raw));
  out.resize(raw);
  return out;
}

std::optional<Reader::Record> Reader::next() {
  // A loop, not a recursion: a file may hold any number of records of types this reader skips.
  for (;;) {
    const uint64_t at = offset_;
    uint8_t head[16];
    const size_t got = read_some(head, sizeof head);
    if (got == 0) return std::nullopt;
    if (got != sizeof head)
      throw InvalidInput(path_ + ": truncated at offset " + std::to_string(at) +
                         ": a record header of 16 bytes, the input ends after " +
                         std::to_string(got) + " of them");
    uint32_t type, flags;
    uint64_t len;
    std::memcpy(&type, head, 4);
    std::memcpy(&flags, head + 4, 4);
    std::memcpy(&len, head + 8, 8);
    std::vector<uint8_t> payload = read_payload(len, at);
    src_->commit();  // a ring may reuse the record's bytes: it is read whole
    // Unknown record types from newer writers are skipped (their length says how far).
    if (type < uint32_t(RecordType::Device) || type > uint32_t(RecordType::HostSteps)) continue;
    if (type == uint32_t(RecordType::HostSteps) && !host_steps_) continue;
    if (flags & kRecordCompressed) payload = inflate_payload(payload, at);
    return parse(type, payload, at);
  }
}

Reader::Record Reader::parse(uint32_t type, const std::vector<uint8_t>& payload, uint64_t at) {
  const std::string where = path_ + ": malformed record at offset " + std::to_string(at);
  size_t pos = 0;
  auto take = [&](void* p, size_t n) {
    if (n > payload.size() - pos)
      throw InvalidInput(where + ": its fields run past its " + std::to_string(payload.size()) +
                         " bytes");
    if (n) std::memcpy(p, payload.data() + pos, n);  // p is null for an empty segment
    pos += n;
  };
  auto take_string = [&] {
    uint16_t n;
    take(&n, 2);
    std::string s(n, '\0');
    take(s.data(), n);
    return s;
  };
  Record r{};
  r.type = RecordType(type);
  if (r.type == RecordType::Device) {
    take(&r.device.id, 4);
    r.device.name = take_string();
    r.device.vendor = take_string();
    r.device.arch = take_string();
    if (version_ >= 3) {
      take(&r.device.va_base, 8);
      take(&r.device.va_size, 8);
      take(&r.device.timeline_va, 8);
      take(&r.device.compute_queues, 4);
      take(&r.device.copy_queues, 4);
    }
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
      throw InvalidInput(where + ": queue kind " + std::to_string(kind) +
                         " (0 compute, 1 copy)");
    s.queue = QueueKind(kind);
    s.queue_index = index;
    if (version_ >= 3) s.grouped = (pad & kSubmissionGrouped) != 0;
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
      if (uint64_t(words) * 4 > payload.size() - pos)
        throw InvalidInput(where + ": segment " + std::to_string(i) + " of " +
                           std::to_string(words) + " dwords runs past its " +
                           std::to_string(payload.size()) + " bytes");
      seg.words.resize(words);
      take(seg.words.data(), uint64_t(words) * 4);
      s.segments.push_back(std::move(seg));
    }
  } else if (r.type == RecordType::Dropped) {
    take(&r.dropped, 8);
  } else if (r.type == RecordType::HostSteps) {
    uint32_t count, pad;
    take(&r.host_steps.sequence, 8);
    take(&count, 4);
    take(&pad, 4);
    // Checked before reserving: a count is no reason to allocate more than the payload holds.
    if (uint64_t(count) * kHostStepBytes > payload.size() - pos)
      throw InvalidInput(where + ": " + std::to_string(count) + " host steps of " +
                         std::to_string(kHostStepBytes) + " bytes run past its " +
                         std::to_string(payload.size()) + " bytes");
    r.host_steps.steps.reserve(count);
    for (uint32_t i = 0; i < count; i++) {
      HostStep h;
      uint8_t kind, p8;
      uint16_t p16;
      take(&kind, 1);
      take(&p8, 1);
      take(&p16, 2);
      take(&h.device, 4);
      take(&h.src_device, 4);
      take(&pad, 4);
      take(&h.dst, 8);
      take(&h.src, 8);
      take(&h.value, 8);
      if (kind < 1 || kind > kHostStepKinds)
        throw InvalidInput(where + ": host step " + std::to_string(i) + " is of kind " +
                           std::to_string(kind) + " (1 to " + std::to_string(kHostStepKinds) +
                           ")");
      h.kind = HostStepKind(kind);
      r.host_steps.steps.push_back(h);
    }
  } else if (r.type == RecordType::DeviceEnd) {
    uint32_t pad;
    take(&r.end.device, 4);
    take(&pad, 4);
    take(&r.end.timeline, 8);
  } else {
    uint32_t flags;
    uint64_t size;
    take(&r.memory.device, 4);
    take(&flags, 4);  // reserved (0) before version 3
    if (version_ >= 3) {
      if (flags >> 8 > 1)
        throw InvalidInput(where + ": memory kind " + std::to_string(flags >> 8) +
                           " (0 device, 1 host)");
      r.memory.flags = flags & 0xff;
      r.memory.kind = MemoryKind(flags >> 8);
      take(&r.memory.timeline, 8);
    }
    take(&r.memory.address, 8);
    take(&size, 8);
    if (size != payload.size() - pos)
      throw InvalidInput(where + ": a memory record of " + std::to_string(size) +
                         " bytes holds " + std::to_string(payload.size() - pos));
    r.memory.bytes.assign(payload.begin() + long(pos), payload.end());
  }
  return r;
}

}  // namespace hcq::capture
