// libFuzzer target: the capture reader on arbitrary files, then the buffer index `hcq dump
// --buffers` and `--buffer` build on it (tools/buffers.hpp). The reader must read them or throw
// hcq::InvalidInput; nothing else. Of what it reads, the index must account for every memory
// record, choose only buffers that hold the address asked for and recordings made by the
// submission asked for, and find each recording's pieces again in a second pass, whole.
// The first input byte is taken as the piece size the index joins at (1 to 256), so that small
// inputs reach the joining of pieces (the writer's are 64 MiB); the rest is the file.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "core/capture.hpp"
#include "core/error.hpp"
#include "../tools/buffers.hpp"

namespace {

class MemorySource : public hcq::capture::Source {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t read_some(void* p, size_t n) override {
    n = std::min(n, size_ - at_);
    if (n) std::memcpy(p, data_ + at_, n);
    at_ += n;
    return n;
  }
  std::optional<uint64_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_capture: %s\n", what);
    std::abort();
  }
}

// One choice: what choose_buffer returns must hold `address` and be recorded by `at`.
void choose(const hcq::tools::BufferIndex& ix, const uint8_t* data, size_t size, uint64_t address,
            std::optional<uint32_t> device, std::optional<uint64_t> at) {
  hcq::tools::BufferChoice c;
  try {
    c = hcq::tools::choose_buffer(ix, "fuzz", address, device, at);
  } catch (const hcq::InvalidInput&) {
    return;
  }
  check(c.buffer < ix.buffers.size(), "choice past the buffers");
  const auto& b = ix.buffers[c.buffer];
  check(c.recording < b.recordings.size(), "choice past the recordings");
  check(address >= b.start && address - b.start < b.size, "chosen buffer does not hold the address");
  check(!device || b.device == *device, "chosen buffer on another device");
  const auto& rec = b.recordings[c.recording];
  if (at) {
    size_t k = 0;
    while (ix.submissions[k] != *at) k++;  // choose_buffer found it
    check(rec.submissions_before <= k, "chosen recording made after submission --at");
  } else {
    check(c.recording + 1 == b.recordings.size(), "not the last recording");
  }
  hcq::capture::Reader again(std::make_unique<MemorySource>(data, size), "fuzz");
  uint64_t total = 0;
  hcq::tools::for_each_piece(again, "fuzz", b, rec,
                             [&](std::span<const uint8_t> bytes) { total += bytes.size(); });
  check(total == b.size, "pieces do not make the buffer");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t piece = uint64_t(data[0]) + 1;
  data++;
  size--;
  // Every record as replay reads them (host steps parsed too): exact errors only.
  try {
    hcq::capture::Reader all(std::make_unique<MemorySource>(data, size), "fuzz");
    all.read_host_steps(true);
    while (all.next()) {
    }
  } catch (const hcq::InvalidInput&) {
  }
  hcq::tools::BufferIndex ix;
  try {
    hcq::capture::Reader r(std::make_unique<MemorySource>(data, size), "fuzz");
    ix = hcq::tools::index_buffers(r, "fuzz", piece);
  } catch (const hcq::InvalidInput&) {
    return 0;
  }
  uint64_t pieces = 0;
  for (size_t i = 0; i < ix.buffers.size(); i++) {
    const auto& b = ix.buffers[i];
    check(!b.recordings.empty(), "a buffer without recordings");
    check(ix.devices.count(b.device) == 1, "a buffer of an undeclared device");
    check((b.flags & ~hcq::tools::kBufferFlags) == 0, "a record's own flag kept as a buffer's");
    uint64_t last = 0;
    for (const auto& rec : b.recordings) {
      check(rec.pieces >= 1, "a recording without pieces");
      check(rec.first_record >= last, "recordings out of file order");
      check(rec.submissions_before <= ix.submissions.size(), "a recording after the end");
      last = rec.first_record + rec.pieces;
      pieces += rec.pieces;
    }
    if (i) {
      const auto& a = ix.buffers[i - 1];
      check(std::tie(a.device, a.start, a.size) <= std::tie(b.device, b.start, b.size),
            "buffers out of order");
    }
  }
  check(pieces == ix.memory_records, "memory records not all in a buffer");
  // A few addresses: each buffer's first and last byte, and one past its end, with and without
  // a device and a submission, bounded so that a file of many buffers stays quick.
  const std::optional<uint64_t> at =
      ix.submissions.empty() ? std::nullopt : std::optional<uint64_t>(ix.submissions[ix.submissions.size() / 2]);
  for (size_t i = 0; i < ix.buffers.size() && i < 8; i++) {
    const auto& b = ix.buffers[i];
    choose(ix, data, size, b.start, std::nullopt, std::nullopt);
    choose(ix, data, size, b.start + (b.size ? b.size - 1 : 0), b.device, at);
    choose(ix, data, size, b.start + b.size, std::nullopt, at);
  }
  choose(ix, data, size, 0, std::nullopt, std::nullopt);
  return 0;
}
