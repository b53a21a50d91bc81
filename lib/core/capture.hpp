// Capture: every submission of every queue written to a file as it is made (HCQ_CAPTURE=path,
// or capture::start), for `hcq dump` to decode. Each capture starts its file afresh (an
// existing file is truncated, not appended to). The format is versioned and documented in
// docs/capture-format.md: a header, then typed, length-prefixed records, read as a stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
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
inline constexpr uint32_t kVersion = 3;  // the reader also reads versions 1 and 2

// Dropped: only in a live ring (capture_ring.hpp), where records that did not fit were left
// out; its payload is how many (8 bytes). DeviceEnd (version 3): a device closed; in a full
// capture its buffers' last contents come just before it.
enum class RecordType : uint32_t {
  Device = 1,
  Submission = 2,
  Memory = 3,
  Dropped = 4,
  DeviceEnd = 5,
  HostSteps = 6  // a batch run's host steps (HostStepsRecord); read only when asked
};

// A step a batch run's host thread takes between GPU commands (lib/batch: copies on a device
// without a copy engine, signals relayed between memory areas), its addresses resolved for
// that run, so that a replay can take it too (docs/capture-format.md, "6: host steps").
enum class HostStepKind : uint8_t {
  Wait = 1,     // until the 64-bit value at `dst` is >= `value`
  Copy = 2,     // `value` bytes from `src` to `dst`
  Write64 = 3,  // `value` to the 64-bit word at `dst` (a signal)
  Mirror = 4,   // from here on, copy the 64-bit value at `src` to `dst` until it reaches `value`
  File = 5,     // a read from a file (a capture holds no file: a replay refuses it)
  Remote = 6,   // a move to or from a remote peer (RDMA: a replay refuses it)
};
inline constexpr uint8_t kHostStepKinds = 6;  // the last kind
inline constexpr uint32_t kHostStepBytes = 40;  // one step's bytes in the record

struct HostStep {
  HostStepKind kind = HostStepKind::Wait;
  // Whose memory `dst` and `src` are in: a capture device id in a record (for host_steps(),
  // an index into its `devices`).
  uint32_t device = 0, src_device = 0;
  uint64_t dst = 0, src = 0, value = 0;
  bool operator==(const HostStep&) const = default;
};

// Whether [address, address + size) lies in the 64-bit address space (does not wrap). Every
// reader of a capture checks a recorded range with it before using it: hcq dump --buffers,
// the replay's memory records, timeline and host steps.
inline bool in_address_space(uint64_t address, uint64_t size) {
  return size <= UINT64_MAX - address;
}

struct HostStepsRecord {
  uint64_t sequence = 0;  // the last submission recorded before it: the run's
  std::vector<HostStep> steps;
};

// Submission record flags (version 3): submitted together with the next submission record.
inline constexpr uint16_t kSubmissionGrouped = 1;

// Memory record flags (version 3).
// Settled: the device had finished every submission before the one this record precedes
// (its timeline had reached the value that submission waits for), so the bytes are what
// that earlier work left, not a moment in the middle of it.
inline constexpr uint32_t kMemorySettled = 1;
inline constexpr uint32_t kMemoryExecutable = 2;  // allocated for code
inline constexpr uint32_t kMemorySignals = 4;     // a page of signals (the timeline's among them)
// Bytes the CPU wrote where it cannot read them back (a USB bridge's host window through the
// port): a replay writes them as they are.
inline constexpr uint32_t kMemoryWritten = 8;
inline constexpr uint32_t kMemoryUser = 16;  // the process's own memory mapped for the device (map_host)

// Record header flag: the payload is zlib-compressed (after its uncompressed length, 8 bytes).
inline constexpr uint32_t kRecordCompressed = 1;

// Limits (docs/capture-format.md). No record's payload, as stored or inflated, exceeds
// kMaxRecordBytes: a reader refuses a larger claim before allocating it, whatever the input.
// The writer keeps under it by writing a larger buffer's contents in pieces of
// kMemoryPieceBytes, one memory record each.
inline constexpr uint64_t kMaxRecordBytes = 256ull << 20;
inline constexpr uint64_t kMemoryPieceBytes = 64ull << 20;

struct Options {
  // Also record, before each submission, the contents of every CPU-visible buffer of its
  // device that changed since it was last recorded: enough to replay the capture.
  bool full = false;
  bool compress = false;  // zlib-compress each record's payload
  // Also (or only, with no path) append the records to the live ring of this name
  // (capture_ring.hpp), of ring_bytes data bytes.
  std::string ring = {};
  uint64_t ring_bytes = 16ull << 20;
};
// HCQ_CAPTURE's value: one or two targets separated by ';', a file "path[,full][,zlib]" and/or
// a ring "shm:NAME[,size=MiB][,full][,zlib]"; `path` is the file's, "" for a ring alone.
// Throws InvalidInput with an exact message for an unknown option, a bad size, two files or
// two rings, or targets whose full/zlib differ (one capture, one record encoding).
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
  // Version 3 (zero in older captures): the driver's heap (DeviceDriver::va_base, va_size),
  // the device timeline's signal address, and how many queues of each kind it had.
  uint64_t va_base = 0, va_size = 0, timeline_va = 0;
  uint32_t compute_queues = 0, copy_queues = 0;
};

// A buffer's bytes as they were when the next submission of its device was made (or, before
// a DeviceEnd record, when the device closed).
struct MemoryRecord {
  uint32_t device = 0;
  uint32_t flags = 0;        // kMemory* (version 3; 0 in older captures)
  MemoryKind kind = MemoryKind::Device;  // version 3
  uint64_t timeline = 0;     // the device timeline's value when it was read (version 3)
  uint64_t address = 0;
  std::vector<uint8_t> bytes;
};

struct DeviceEndRecord {
  uint32_t device = 0;
  uint64_t timeline = 0;  // the device timeline's value when it closed
};

struct SubmissionRecord {
  uint32_t device = 0;
  QueueKind queue = QueueKind::Compute;
  uint32_t queue_index = 0;
  uint64_t sequence = 0;
  uint64_t host_ns = 0;
  bool grouped = false;  // submitted together with the next submission record (version 3)
  std::vector<Segment> segments;
};

// Start writing to `path` through os::OutputFile (no symlink followed, another user's file not
// truncated), and/or to the ring options.ring names; throws OsError when the file cannot be
// created or its header not written, RingWriter's errors for the ring, and then nothing is
// captured. An empty path with no ring is InvalidInput "capture: no file and no ring to write".
void start(const std::string& path, const Options& options = {});
// Close; later submissions are not captured. Throws OsError when the close fails.
void stop();
// `path` is read by this process (hcq replay's capture): a capture opened later refuses it as
// its file (os::OutputFile::Rules::inputs), and one writing it already is InvalidInput
// "capture: PATH is the file this process's capture writes (PATH); it cannot be read at the
// same time".
void protect_input(const std::string& path);
// True while capturing (HCQ_CAPTURE in the environment starts a capture at the first check).
// A capture HCQ_CAPTURE asks for that cannot be opened counts as on: every submission throws
// why.
bool enabled();
// Called by lib/core for every submission while enabled. Throws (OsError for a failed write)
// when the submission cannot be recorded; after that every later submission throws the same
// error and nothing more is written, so the file never holds records after a hole. Returns
// the submission record's sequence number (what `hcq dump` prints as "submission N"), or
// nullopt when no capture file is open.
// `grouped`: this submission and the next one recorded go to the GPU together (Queue::
// submit_together, batch runs): nothing of it runs before the next is submitted, so a replay
// submits them together too.
std::optional<uint64_t> submission(const Device& dev, QueueKind kind, uint32_t queue_index,
                                   std::span<const Segment> segments, bool grouped = false);
// Called by ~Device once its work is done: a device this capture recorded gets its buffers'
// last contents (full captures) and a DeviceEnd record. Never throws (a destructor calls it):
// a failed write fails the later submissions as submission() would.
void device_closed(const Device& dev) noexcept;
// Called by a batch run whose host thread has work, right after the run's submissions were
// recorded: records its steps, in the order the host takes them, the step's device fields
// indexing `devices`. Nothing when no capture is open. Throws as submission() does.
void host_steps(std::span<const Device* const> devices, std::span<const HostStep> steps);
// Called by Signal::wait once the value came: a full capture records the buffers of `dev`
// that changed (the GPU's results, before the CPU reads or overwrites them). Never throws: a
// failed write fails the later submissions as submission() would.
void waited(const Device& dev) noexcept;
// Called where lib/core writes memory of `dev` the CPU cannot read back (a USB bridge's host
// window, through the port): a full capture records the bytes written at `va`
// (kMemoryWritten). Throws as submission() does.
void wrote(const Device& dev, uint64_t va, std::span<const std::byte> bytes);

// Where a Reader's bytes come from: a file or a pipe, or a live ring (capture_ring.hpp).
class Source {
 public:
  virtual ~Source() = default;
  // Up to `n` bytes; fewer only at the end of the input. Throws OsError for a failed read.
  virtual size_t read_some(void* p, size_t n) = 0;
  // The input's size when known at once (a regular file): bounds every record's claim.
  virtual std::optional<uint64_t> size() const { return std::nullopt; }
  // The Reader is done with every byte read so far (a whole record): a ring may reuse them.
  virtual void commit() {}
};

// Reads a capture file (or a pipe, or another Source) record by record; throws hcq::InvalidInput naming the path,
// the byte offset, the value seen and the limit for a bad magic, an unsupported version, or a
// truncated, malformed or oversized record; OsError for a failed read. Memory use is one record
// (never more than kMaxRecordBytes, and from a pipe never much more than it has delivered).
class Reader {
 public:
  explicit Reader(const std::string& path);
  // Reads `source`; `name` stands for it in the messages (as the path does).
  Reader(std::unique_ptr<Source> source, const std::string& name);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  // The next record, or nullopt at the end of the file.
  struct Record {
    RecordType type;
    DeviceRecord device;
    SubmissionRecord submission;
    MemoryRecord memory;
    DeviceEndRecord end;
    uint64_t dropped = 0;  // RecordType::Dropped: records left out here
    HostStepsRecord host_steps;
  };
  // Also return HostSteps records (skipped by default, as a type this reader did not know:
  // readers that only decode submissions need not know them).
  void read_host_steps(bool on) { host_steps_ = on; }
  // The file's format version (1 to kVersion).
  uint32_t version() const { return version_; }
  std::optional<Record> next();

 private:
  // Up to `n` bytes; fewer only at the end of the input. Throws OsError for a failed read.
  size_t read_some(void* p, size_t n);
  // Exactly `n` bytes of `what` (for the message); throws InvalidInput when the input ends first.
  void read(void* p, size_t n, const char* what);
  std::vector<uint8_t> read_payload(uint64_t len, uint64_t at);
  std::vector<uint8_t> inflate_payload(const std::vector<uint8_t>& stored, uint64_t at);
  Record parse(uint32_t type, const std::vector<uint8_t>& payload, uint64_t at);
  void read_header();
  std::unique_ptr<Source> src_;  // closed on every path, a throwing constructor's too
  std::string path_;
  uint64_t offset_ = 0;
  std::optional<uint64_t> size_;  // of a regular file; none for a pipe or a device
  uint32_t version_ = 0;
  bool host_steps_ = false;
};

}  // namespace hcq::capture
