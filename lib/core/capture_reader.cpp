// Reading captures (split from the writer so tools and fuzzers need no device code).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/capture.hpp"
#include "core/error.hpp"

namespace hcq::capture {

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
  if (v[0] < 1 || v[0] > kVersion)
    throw InvalidInput(path + ": capture format version " + std::to_string(v[0]) +
                       ", this hcq reads versions 1 to " + std::to_string(kVersion));
  version_ = v[0];
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
  if (head[1] & kRecordCompressed) {
    uint64_t raw = 0;
    if (len < 8) throw InvalidInput(path_ + ": compressed record at offset " +
                                    std::to_string(start - 16) + " is shorter than its header");
    std::memcpy(&raw, payload.data(), 8);
    // zlib expands at most about 1032:1; a larger claim is corrupt (and must not be allocated).
    if (raw > (len - 8) * 1032 + 64)
      throw InvalidInput(path_ + ": compressed record at offset " + std::to_string(start - 16) +
                         " claims " + std::to_string(raw) + " bytes from " +
                         std::to_string(len - 8));
    std::vector<uint8_t> out(raw);
    uLongf got = uLongf(raw);
    if (uncompress(out.data(), &got, payload.data() + 8, uLong(len - 8)) != Z_OK || got != raw)
      throw InvalidInput(path_ + ": compressed record at offset " + std::to_string(start - 16) +
                         " does not inflate to its " + std::to_string(raw) + " bytes");
    payload = std::move(out);
  }
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
  } else if (r.type == RecordType::Memory) {
    uint32_t pad;
    uint64_t size;
    take(&r.memory.device, 4);
    take(&pad, 4);
    take(&r.memory.address, 8);
    take(&size, 8);
    if (size != payload.size() - at)
      throw InvalidInput(path_ + ": malformed record at offset " + std::to_string(start - 16) +
                         ": a memory record of " + std::to_string(size) + " bytes holds " +
                         std::to_string(payload.size() - at));
    r.memory.bytes.assign(payload.begin() + long(at), payload.end());
  } else {
    // Unknown record types from newer writers are skipped (their length says how far).
    return next();
  }
  return r;
}

}  // namespace hcq::capture
