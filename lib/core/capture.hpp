// Capture: every submission of every queue appended to a file (HCQ_CAPTURE=path, or
// capture::start), for `hcq dump` to decode. The format is versioned and documented in
// docs/capture-format.md: a header, then typed, length-prefixed records, read as a stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace hcq {
class Device;
}

namespace hcq::capture {

inline constexpr char kMagic[8] = {'H', 'C', 'Q', 'C', 'A', 'P', 0, 0};
inline constexpr uint32_t kVersion = 2;  // the reader also reads version 1

enum class RecordType : uint32_t { Device = 1, Submission = 2, Memory = 3 };

// Record header flag: the payload is zlib-compressed (after its uncompressed length, 8 bytes).
inline constexpr uint32_t kRecordCompressed = 1;

struct Options {
  // Also record, before each submission, the contents of every CPU-visible buffer of its
  // device that changed since it was last recorded: enough to replay the capture.
  bool full = false;
  bool compress = false;  // zlib-compress each record's payload
};
// HCQ_CAPTURE's value: "path[,full][,zlib]"; throws InvalidInput for an unknown option.
Options parse_spec(const std::string& spec, std::string& path);

// One piece of a submission: dwords written into the ring, or a command buffer in device
// memory the ring runs (its address and contents).
struct Segment {
  bool indirect = false;
  uint64_t address = 0;
  std::vector<uint32_t> words;
};

struct DeviceRecord {
  uint32_t id = 0;
  std::string name, vendor, arch;
};

// A buffer's bytes as they were when the next submission of its device was made.
struct MemoryRecord {
  uint32_t device = 0;
  uint64_t address = 0;
  std::vector<uint8_t> bytes;
};

struct SubmissionRecord {
  uint32_t device = 0;
  QueueKind queue = QueueKind::Compute;
  uint32_t queue_index = 0;
  uint64_t sequence = 0;
  uint64_t host_ns = 0;
  std::vector<Segment> segments;
};

// Start writing to `path` (replacing it); throws OsError when it cannot be created.
void start(const std::string& path, const Options& options = {});
// Flush and close; later submissions are not captured.
void stop();
// True while capturing (HCQ_CAPTURE in the environment starts a capture at the first check).
bool enabled();
// Called by lib/core for every submission while enabled.
void submission(const Device& dev, QueueKind kind, uint32_t queue_index,
                std::span<const Segment> segments);

// Reads a capture file record by record; throws hcq::InvalidInput naming the byte offset
// for a bad magic, an unsupported version, or a truncated or malformed record.
class Reader {
 public:
  explicit Reader(const std::string& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  // The next record, or nullopt at the end of the file.
  struct Record {
    RecordType type;
    DeviceRecord device;
    SubmissionRecord submission;
    MemoryRecord memory;
  };
  std::optional<Record> next();

 private:
  void read(void* p, size_t n, const char* what);
  std::FILE* f_ = nullptr;
  std::string path_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;  // of the file
  uint32_t version_ = 0;
};

}  // namespace hcq::capture
