#include "core/capture_ring.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/deadline.hpp"
#include "core/error.hpp"
#include "os/shm.hpp"

namespace hcq::capture {
namespace {

template <class T>
std::atomic_ref<T> at(T& v) {
  return std::atomic_ref<T>(v);
}

// The follower's sleep while the ring is empty: short at first (a busy writer), up to 2 ms
// when it stays empty (an idle one), so following costs little CPU either way.
class Backoff {
 public:
  void reset() { us_ = 10; }
  void wait() {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    us_ = std::min(us_ * 2, 2000);
  }

 private:
  int us_ = 10;
};

// The SegmentHeader at /dev/shm/NAME, if the name exists and holds one.
bool read_segment_header(const std::string& name, os::SegmentHeader& h) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool ok = ::pread(fd, &h, sizeof h, 0) == ssize_t(sizeof h);
  ::close(fd);
  return ok && h.magic == os::SegmentHeader::kMagic;
}

}  // namespace

RingWriter::RingWriter(const std::string& name, uint64_t capacity) : name_(name) {
  seg_ = std::make_unique<os::SharedSegment>(name, kRingLayout, sizeof(RingHeader) + capacity);
  const std::string who = "capture: shm:" + name + ": ";
  h_ = reinterpret_cast<RingHeader*>(seg_->payload());
  data_ = seg_->payload() + sizeof(RingHeader);
  if (!seg_->hold_role(kWriterRole))
    throw InvalidInput(who + "another process (pid " + std::to_string(h_->writer_pid) +
                       ") is writing to it");
  // A follower of the previous writer that has not read everything keeps its records: they
  // are not reset under it.
  if (!seg_->created() && seg_->role_held(kFollowerRole) &&
      at(h_->state).load(std::memory_order_acquire) != RingHeader::kMaking &&
      at(h_->head).load(std::memory_order_acquire) != at(h_->tail).load(std::memory_order_acquire))
    throw InvalidInput(who + "a follower is still reading the records of the previous writer");
  // Opened afresh: kMaking while the fields change, kOpen (release) once they are right.
  at(h_->state).store(RingHeader::kMaking, std::memory_order_release);
  std::memcpy(h_->magic, kMagic, sizeof h_->magic);
  h_->version = kVersion;
  h_->capacity = capacity;
  h_->writer_pid = int32_t(::getpid());
  h_->writer_start_time = os::SharedSegment::process_start_time(::getpid());
  at(h_->generation).fetch_add(1, std::memory_order_relaxed);
  at(h_->dropped).store(0, std::memory_order_relaxed);
  at(h_->tail).store(0, std::memory_order_relaxed);
  at(h_->head).store(0, std::memory_order_release);  // after the generation (RingSource)
  at(h_->state).store(RingHeader::kOpen, std::memory_order_release);
}

RingWriter::~RingWriter() {
  at(h_->state).store(RingHeader::kClosed, std::memory_order_release);
  try {
    seg_->release_role(kWriterRole);
  } catch (const Error&) {
  }
}

bool RingWriter::fits(uint64_t n) {
  const uint64_t cap = h_->capacity;
  if (cap - (head_ - tail_) >= n) return true;
  tail_ = at(h_->tail).load(std::memory_order_acquire);
  return cap - (head_ - tail_) >= n;
}

void RingWriter::put(const void* p, size_t n) {
  const uint64_t cap = h_->capacity, pos = head_ % cap;
  const size_t first = size_t(std::min<uint64_t>(n, cap - pos));
  std::memcpy(data_ + pos, p, first);
  if (first < n) std::memcpy(data_, static_cast<const std::byte*>(p) + first, n - first);
  head_ += n;
}

void RingWriter::publish() { at(h_->head).store(head_, std::memory_order_release); }

void RingWriter::count_dropped(uint64_t records) {
  at(h_->dropped).fetch_add(records, std::memory_order_relaxed);
}

uint64_t RingWriter::dropped() const { return at(h_->dropped).load(std::memory_order_relaxed); }

RingSource::RingSource(const std::string& name, std::chrono::milliseconds timeout) : name_(name) {
  os::SharedSegment::check_name(name);  // not a timeout for a name no writer could have
  const std::string who = "dump: shm:" + name + ": ";
  const auto deadline = deadline_after(timeout);
  Backoff backoff;
  for (;; backoff.wait()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(who + "no capture writer appeared in " + std::to_string(timeout.count()) +
                         " ms");
    os::SegmentHeader sh{};
    if (!read_segment_header(name, sh)) continue;
    if (sh.payload_bytes > sizeof(RingHeader) + (kMaxRingMiB << 20))
      throw InvalidInput(who + "its segment header gives " + std::to_string(sh.payload_bytes) +
                         " bytes, more than a ring holds (" + std::to_string(kMaxRingMiB) +
                         " MiB): not a ring hcq made");
    // Attached with the size the segment says: a segment of another layout in use is
    // SharedSegment's exact error; one nobody holds (left by a crash) is made afresh, and
    // then this follower lets it go again (removing the name) and waits for a writer.
    seg_ = std::make_unique<os::SharedSegment>(name, kRingLayout,
                                               sh.payload_bytes >= sizeof(RingHeader)
                                                   ? sh.payload_bytes
                                                   : sizeof(RingHeader) + 1);
    if (seg_->created()) {
      seg_.reset();
      continue;
    }
    h_ = reinterpret_cast<RingHeader*>(seg_->payload());
    if (at(h_->state).load(std::memory_order_acquire) != RingHeader::kOpen ||
        !seg_->role_held(kWriterRole)) {
      seg_.reset();  // being made, or left by a writer that is gone: wait for the next one
      h_ = nullptr;
      continue;
    }
    if (!seg_->hold_role(kFollowerRole))
      throw InvalidInput(who + "another follower is reading it");
    break;
  }
  data_ = seg_->payload() + sizeof(RingHeader);
  // Read once and checked against what is mapped: positions are taken modulo it, and a
  // damaged or hostile header must not divide by zero or reach past the mapping.
  capacity_ = h_->capacity;
  const uint64_t holds = seg_->payload_bytes() - sizeof(RingHeader);
  if (capacity_ == 0 || capacity_ != holds)
    throw InvalidInput(who + "its header gives a capacity of " + std::to_string(capacity_) +
                       " bytes where the segment holds " + std::to_string(holds) +
                       ": not a ring hcq made");
  writer_pid_ = h_->writer_pid;
  writer_start_ = h_->writer_start_time;
  generation_ = at(h_->generation).load(std::memory_order_relaxed);
  tail_ = at(h_->tail).load(std::memory_order_acquire);
  std::memcpy(file_header_, h_->magic, 8);
  std::memcpy(file_header_ + 8, &h_->version, 4);
}

RingSource::~RingSource() {
  if (seg_) {
    try {
      seg_->release_role(kFollowerRole);
    } catch (const Error&) {
    }
  }
}

bool RingSource::writer_gone() {
  if (at(h_->generation).load(std::memory_order_relaxed) != generation_ ||
      h_->writer_pid != writer_pid_ || h_->writer_start_time != writer_start_)
    return true;  // another writer opened the ring: ours is gone, its records with it
  if (at(h_->state).load(std::memory_order_acquire) == RingHeader::kClosed) {
    closed_cleanly_ = true;
    return true;
  }
  return !seg_->role_held(kWriterRole);  // the kernel dropped a dead writer's lock
}

size_t RingSource::read_some(void* p, size_t n) {
  auto* out = static_cast<std::byte*>(p);
  size_t got = 0;
  if (header_left_) {  // the file header the records follow
    const size_t k = std::min(n, header_left_);
    std::memcpy(out, file_header_ + (16 - header_left_), k);
    header_left_ -= k;
    got = k;
  }
  Backoff backoff;
  while (got < n && !ended_) {
    const uint64_t head = at(h_->head).load(std::memory_order_acquire);
    // A new writer resets head (after its generation, released by its head store): what is
    // there is no longer this writer's.
    if (at(h_->generation).load(std::memory_order_relaxed) != generation_) {
      ended_ = true;
      break;
    }
    if (head == tail_) {
      if (writer_gone()) {
        // What it published before it went is final: read that, then end.
        if (at(h_->head).load(std::memory_order_acquire) == tail_) ended_ = true;
        continue;
      }
      backoff.wait();
      continue;
    }
    backoff.reset();
    // The writer never publishes more than the ring holds past what was read: a head beyond
    // that (or behind the tail) is a damaged or hostile ring, not records to read for ever.
    if (head - tail_ > capacity_)
      throw InvalidInput("dump: shm:" + name_ + ": its head (" + std::to_string(head) +
                         ") is not within " + std::to_string(capacity_) +
                         " bytes after what was read (" + std::to_string(tail_) +
                         "): a damaged ring");
    const uint64_t pos = tail_ % capacity_;
    const size_t k = size_t(std::min<uint64_t>({head - tail_, n - got, capacity_ - pos}));
    std::memcpy(out + got, data_ + pos, k);
    got += k;
    tail_ += k;
  }
  return got;
}

void RingSource::commit() {
  // Only whole records are given back: a follower that dies mid-record leaves the tail at a
  // record's start for the next one.
  if (seg_) at(h_->tail).store(tail_, std::memory_order_release);
}

uint64_t RingSource::dropped() const { return at(h_->dropped).load(std::memory_order_relaxed); }

}  // namespace hcq::capture
