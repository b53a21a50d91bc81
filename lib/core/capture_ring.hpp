// Live capture (issue 19, part 3): capture records appended to a byte ring in a shared
// segment (HCQ_CAPTURE=shm:NAME), read as they arrive by a follower in another process
// (`hcq dump --follow NAME`). The records are the capture file's, byte for byte, so the
// follower decodes them with capture::Reader. Layout and rules: docs/shm.md "Live capture
// ring".
//
// One writer and one follower per ring: the writer never blocks (a record that does not fit
// is dropped whole and counted, never overwriting what the follower has not read), and the
// follower waits for records while the writer lives and ends when it is gone, however it went.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/capture.hpp"

namespace hcq::os {
class SharedSegment;
}

namespace hcq::capture {

// os::SharedSegment layout version of a ring's payload; a change to RingHeader bumps it.
inline constexpr uint32_t kRingLayout = 1;
inline constexpr uint64_t kDefaultRingBytes = 16ull << 20;  // shm:NAME without size=
inline constexpr uint64_t kMaxRingMiB = 4096;
// os::SharedSegment roles: the writer and the follower each hold theirs while attached.
inline constexpr unsigned kWriterRole = 0, kFollowerRole = 1;

// At the start of the segment's payload. head and tail count bytes since the writer opened the
// ring (position = count % capacity) and sit on cache lines of their own; they, state and
// dropped are accessed through std::atomic_ref only.
struct RingHeader {
  enum State : uint32_t { kMaking = 0, kOpen = 1, kClosed = 2 };
  char magic[8];      // capture::kMagic: the records' format
  uint32_t version;   // capture::kVersion of the records
  uint32_t state;     // State: kClosed is written by a writer that stopped cleanly
  uint64_t capacity;  // data bytes after this header
  int32_t writer_pid;
  uint32_t generation;  // one more at every writer's open: a follower sees a new writer
  uint64_t writer_start_time;  // with writer_pid, names the writer (os::SharedSegment)
  uint64_t dropped;            // records dropped so far (the ring was full)
  uint8_t pad0[16];
  uint64_t head;  // offset 64: bytes published by the writer (release)
  uint8_t pad1[56];
  uint64_t tail;  // offset 128: bytes the follower is done with (release)
  uint8_t pad2[56];
};
static_assert(sizeof(RingHeader) == 192);

// The writer's end. Thread safety: one thread at a time (the capture writer's mutex); the
// follower in another process works concurrently through head and tail.
class RingWriter {
 public:
  // Attaches to (or makes) ring `name` with `capacity` data bytes and opens it for writing.
  // Errors: os::SharedSegment's (an older layout in use), and InvalidInput
  //   "capture: shm:NAME: another process (pid 123) is writing to it"
  //   "capture: shm:NAME: a follower is still reading the records of the previous writer"
  RingWriter(const std::string& name, uint64_t capacity);
  // Marks the ring closed (the follower ends once it has read what is left) and detaches.
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // Whether put() may add `n` bytes now (what the follower has read frees space). The
  // follower's tail, a cache line it writes, is read again only when the space last seen is
  // short of `n`.
  bool fits(uint64_t n);
  // Copies `n` bytes after what was put before; the caller checked fits(n). Nothing is
  // visible to the follower before publish().
  void put(const void* p, size_t n);
  void publish();
  // Counts records that were dropped because they did not fit.
  void count_dropped(uint64_t records);
  uint64_t dropped() const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<os::SharedSegment> seg_;
  RingHeader* h_ = nullptr;
  std::byte* data_ = nullptr;
  uint64_t head_ = 0;  // put() so far, published or not
  uint64_t tail_ = 0;  // the follower's tail when last read: free space is at least this
};

// The follower's end, a capture::Source: first a file header (kMagic and the ring's version),
// then the records as the writer publishes them. read_some() waits while the writer lives and
// returns fewer bytes than asked only at the end: the writer gone (closed, killed, or replaced
// by another) and every published byte read. Thread safety: one thread at a time.
class RingSource : public Source {
 public:
  // Waits up to `timeout` for a writer to open ring `name` (a follower may start first).
  // Errors: TimeoutError "dump: shm:NAME: no capture writer appeared in 10000 ms";
  // InvalidInput "dump: shm:NAME: another follower is reading it"; os::SharedSegment's (a
  // bad name at once: "shared segment 'a/b': a name is letters, digits, ...").
  RingSource(const std::string& name, std::chrono::milliseconds timeout);
  ~RingSource() override;
  size_t read_some(void* p, size_t n) override;
  void commit() override;
  // Records the writer dropped so far, by its count in the ring.
  uint64_t dropped() const;
  // At the end: whether the writer closed the ring (false: it died, or another replaced it).
  bool closed_cleanly() const { return closed_cleanly_; }
  int writer_pid() const { return writer_pid_; }

 private:
  bool writer_gone();
  std::string name_;
  std::unique_ptr<os::SharedSegment> seg_;
  RingHeader* h_ = nullptr;
  const std::byte* data_ = nullptr;
  uint64_t capacity_ = 0, tail_ = 0;
  int writer_pid_ = 0;
  uint64_t writer_start_ = 0;
  uint32_t generation_ = 0;
  uint8_t file_header_[16] = {};
  size_t header_left_ = 16;
  bool ended_ = false, closed_cleanly_ = false;
};

}  // namespace hcq::capture
