#include "io/file_load.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/queue.hpp"

namespace hcq::io {
namespace {

constexpr uint64_t kAlign = 4096;  // O_DIRECT: file offset, length and memory aligned to this

uint64_t align_down(uint64_t v) { return v / kAlign * kAlign; }
uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads with io_uring, several in flight; where io_uring is not available (an old kernel, or
// one where it is disabled) the same calls read synchronously with pread.
class Reader {
 public:
  Reader(int fd, uint32_t depth) : fd_(fd) {
    ok_ = io_uring_queue_init(std::max(depth, 1u), &ring_, 0) == 0;
  }
  ~Reader() {
    drain();  // the kernel must not write into memory that is about to go
    if (ok_) io_uring_queue_exit(&ring_);
  }
  // Starts reading `len` bytes at `offset` into `to`; `tag` names it in the completion.
  void start(void* to, uint64_t len, uint64_t offset, uint64_t tag) {
    if (!ok_) {
      done_.push_back({tag, read_all(to, len, offset)});
      return;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // full: the caller keeps at most `depth` in flight, so this is a bug
      throw Error("load_file: io_uring submission queue full");
    }
    io_uring_prep_read(sqe, fd_, to, unsigned(len), offset);
    io_uring_sqe_set_data64(sqe, tag);
    if (int r = io_uring_submit(&ring_); r < 0) throw OsError("load_file: io_uring_submit", -r);
    in_flight_++;
  }
  // The next finished read: {tag, bytes read or -errno}.
  std::pair<uint64_t, int64_t> next() {
    if (!done_.empty()) {
      auto d = done_.front();
      done_.erase(done_.begin());
      return d;
    }
    io_uring_cqe* cqe = nullptr;
    int r;
    do r = io_uring_wait_cqe(&ring_, &cqe);
    while (r == -EINTR);
    if (r < 0) throw OsError("load_file: io_uring_wait_cqe", -r);
    std::pair<uint64_t, int64_t> out{io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(&ring_, cqe);
    in_flight_--;
    return out;
  }
  // A finished read is waiting for next().
  bool ready() {
    if (!done_.empty()) return true;
    io_uring_cqe* cqe = nullptr;
    return ok_ && in_flight_ && io_uring_peek_cqe(&ring_, &cqe) == 0;
  }
  void drain() {
    while (ok_ && in_flight_) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
      io_uring_cqe_seen(&ring_, cqe);
      in_flight_--;
    }
  }
  bool uses_io_uring() const { return ok_; }

 private:
  int64_t read_all(void* to, uint64_t len, uint64_t offset) {
    uint64_t got = 0;
    while (got < len) {
      ssize_t r = ::pread(fd_, static_cast<char*>(to) + got, len - got, off_t(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) break;
      got += uint64_t(r);
    }
    return int64_t(got);
  }
  int fd_;
  bool ok_ = false;
  io_uring ring_{};
  uint32_t in_flight_ = 0;
  std::vector<std::pair<uint64_t, int64_t>> done_;
};

}  // namespace

namespace {

[[noreturn]] void ends_early(const std::string& who, uint64_t offset, uint64_t size,
                             uint64_t end) {
  throw Error(who + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
              ") wanted, the file ends at " + std::to_string(offset + end));
}

// A stream (FIFO, pipe, character device) in order: poll() with a short timeout between
// reads, so a stream whose writer never comes can be cancelled. The first `offset` bytes are
// read and dropped (a stream has no offsets).
void read_stream(int fd, uint64_t offset, char* to, uint64_t size, const std::string& who,
                 const std::atomic<bool>* cancel) {
  std::vector<char> skip(std::min<uint64_t>(offset, 1 << 16));
  uint64_t at = 0;  // bytes of the stream consumed
  while (at < offset + size) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      throw Error(who + ": cancelled after " + std::to_string(at) + " bytes");
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 50);
    if (r < 0 && errno != EINTR) throw OsError(who + ": poll", errno);
    if (r <= 0) continue;
    const bool skipping = at < offset;
    const uint64_t want = skipping ? std::min<uint64_t>(offset - at, skip.size())
                                   : offset + size - at;
    const ssize_t n = ::read(fd, skipping ? skip.data() : to + (at - offset), want);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) throw OsError(who + ": read at " + std::to_string(at), errno);
    if (n == 0) break;  // the writer closed
    at += uint64_t(n);
  }
  if (at < offset + size) ends_early(who, offset, size, at > offset ? at - offset : 0);
}

}  // namespace

void read_range(const std::string& path, uint64_t offset, void* to, uint64_t size,
                const std::string& who, uint64_t chunk, uint32_t depth,
                const std::atomic<bool>* cancel) {
  if (chunk == 0 || depth == 0) throw InvalidInput(who + ": reads need a nonzero size and depth");
  Fd f;
  // Non-blocking: opening a FIFO blocks until a writer comes, which may be never.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw OsError(who, errno);
  struct stat st {};
  if (::fstat(f.fd, &st) < 0) throw OsError(who + ": fstat", errno);
  if (size == 0) return;
  if (!S_ISREG(st.st_mode))
    return read_stream(f.fd, offset, static_cast<char*>(to), size, who, cancel);
  // Each read is [start, end) of the range; a short one is read on from where it stopped.
  std::vector<std::pair<uint64_t, uint64_t>> reads;
  Reader r(f.fd, depth);
  auto start = [&](uint64_t tag) {
    auto [s, e] = reads[tag];
    r.start(static_cast<char*>(to) + s, e - s, offset + s, tag);
  };
  uint64_t next = 0;
  uint32_t in_flight = 0;
  std::string error;  // the first read error; the reads in flight finish before it is thrown
  int error_code = 0;
  uint64_t end = size;  // where the file ended, if before the range's end (the lowest seen)
  for (; next < size && in_flight < depth; next += chunk, in_flight++) {
    reads.push_back({next, std::min(size, next + chunk)});
    start(reads.size() - 1);
  }
  while (in_flight) {
    auto [tag, got] = r.next();
    in_flight--;
    auto& [s, e] = reads[tag];
    if (error_code) continue;
    if (got < 0) {
      error = who + ": read at " + std::to_string(offset + s);
      error_code = int(-got);
    } else if (got == 0) {
      end = std::min(end, s);
    } else if (s + uint64_t(got) < e) {
      s += uint64_t(got);  // short: read the rest (a pipe, or the file's end)
      start(tag);
      in_flight++;
    } else if (next < size && next < end) {
      reads[tag] = {next, std::min(size, next + chunk)};
      next += chunk;
      start(tag);
      in_flight++;
    }
  }
  if (error_code) throw OsError(error, error_code);
  if (end < size) ends_early(who, offset, size, end);
}

LoadResult load_file(Device& dev, const Buffer& dst, uint64_t dst_offset, const std::string& path,
                     uint64_t file_offset, uint64_t size, const LoadOptions& options) {
  const std::string who = dev.name() + ": load_file " + path + ": ";
  if (!dst) throw InvalidInput(who + "an empty Buffer (freed or moved from)");
  if (dst_offset > dst.size() || size > dst.size() - dst_offset)
    throw InvalidInput(who + "[" + std::to_string(dst_offset) + ", " +
                       std::to_string(dst_offset + size) + ") is past the end of the " +
                       std::to_string(dst.size()) + "-byte buffer");
  if (options.slot_bytes % kAlign)
    throw InvalidInput(who + "slots must be multiples of 4096 bytes (0: the device's choice)");
  const bool staged = !(dev.properties().caps.uma && dst.host());
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // opened once: a FIFO pairs only once
  if (f.fd < 0) throw OsError(who + "open", errno);
  struct stat st {};
  if (::fstat(f.fd, &st) < 0) throw OsError(who + "fstat", errno);
  // O_DIRECT needs aligned memory, so only into staging slots; file systems that do not
  // support it refuse the flag. Not into device memory (the staging of a device that cannot
  // reach host memory): a direct read pins the pages it reads into, and BAR-mapped pages
  // (VM_IO | VM_PFNMAP) cannot be pinned (the read fails with EFAULT); buffered reads copy
  // from the page cache with the CPU.
  // A device whose memory the CPU cannot map (USB): the slots are this process's memory and
  // each chunk goes in with copy_in (its staging, or the device's port) once it is read.
  const bool ported = !dev.properties().caps.cpu_maps_memory;
  const bool host_staging = dev.properties().caps.host_reachable && !ported;
  bool direct = false;
  if (options.direct && staged && (host_staging || ported) && S_ISREG(st.st_mode)) {
    const int fl = ::fcntl(f.fd, F_GETFL);
    direct = fl >= 0 && ::fcntl(f.fd, F_SETFL, fl | O_DIRECT) == 0;
  }
  if (S_ISREG(st.st_mode) &&
      (file_offset > uint64_t(st.st_size) || size > uint64_t(st.st_size) - file_offset))
    throw InvalidInput(who + "bytes [" + std::to_string(file_offset) + ", " +
                       std::to_string(file_offset + size) + ") are past the end of the file (" +
                       std::to_string(st.st_size) + " bytes)");
  LoadResult result{dev.timeline().last(), direct, staged};
  if (size == 0) return result;

  const uint64_t slot_bytes = options.slot_bytes ? options.slot_bytes
                                                 : host_staging ? 16ull << 20 : 4ull << 20;
  const uint32_t slot_count = options.slots ? options.slots : host_staging ? 8 : 4;
  const uint64_t chunk = std::min(slot_bytes, align_up(size));  // no slot larger than the load
  const uint64_t chunks = (size + chunk - 1) / chunk;
  const uint32_t slots = uint32_t(std::min<uint64_t>(slot_count, chunks));
  if (staged) {
    result.slot_bytes = chunk;
    result.slots = slots;
  }
  const uint64_t stride = chunk + 2 * kAlign;  // room to widen a read to aligned ends
  Buffer staging;
  std::unique_ptr<char, decltype(&std::free)> own_slots(nullptr, &std::free);
  char* base;
  if (ported) {
    own_slots.reset(static_cast<char*>(std::aligned_alloc(kAlign, stride * slots)));
    if (!own_slots) throw Error(who + "out of host memory for " + std::to_string(slots) + " slots");
    base = own_slots.get();
  } else if (staged) {
    staging = dev.allocate_visible(stride * slots);  // host memory, or the device's own
    base = static_cast<char*>(staging.host());
  } else {
    dev.synchronize();  // after the work already queued on the buffer
    base = static_cast<char*>(dst.host()) + dst_offset;
  }
  Reader reader(f.fd, slots);
  std::vector<uint64_t> slot_free_at(slots, 0);  // timeline value of the slot's last copy
  std::string error;
  int error_code = 0;
  bool os_error = false;
  // Chunk c covers file bytes [file_offset + c * chunk, + n). A staged read goes to a free
  // slot (the one whose read just finished: reads finish in any order), widened to aligned
  // ends (O_DIRECT); the bytes wanted start `lead` in.
  auto window = [&](uint64_t c, uint64_t& start, uint64_t& len, uint64_t& lead) {
    const uint64_t s = file_offset + c * chunk, n = std::min(chunk, size - c * chunk);
    start = staged ? align_down(s) : s;
    len = staged ? align_up(s + n) - start : n;
    lead = s - start;
  };
  // Reads in flight take at most half the slots, the others wait for their copies: a read
  // goes to the slot whose copy was submitted longest ago, so it seldom waits.
  std::vector<uint32_t> slot_of(chunks, 0);
  std::deque<uint32_t> free_slots;
  for (uint32_t s = 0; s < slots; s++) free_slots.push_back(s);
  const uint32_t depth = staged ? std::max(1u, slots / 2) : slots;
  uint64_t issued = 0, finished = 0;
  auto issue = [&] {
    const uint64_t c = issued++;
    uint64_t start, len, lead;
    window(c, start, len, lead);
    if (staged) {
      const uint32_t slot = free_slots.front();
      free_slots.pop_front();
      slot_of[c] = slot;
      dev.timeline().wait(slot_free_at[slot]);  // the slot's last copy has read it
      reader.start(base + slot * stride, len, start, c);
    } else {
      reader.start(base + c * chunk, len, start, c);
    }
  };
  // A finished read: its copy (staged), and its slot back to the free ones.
  auto finish = [&](uint64_t c, int64_t got) {
    finished++;
    uint64_t start, len, lead;
    window(c, start, len, lead);
    const uint64_t n = std::min(chunk, size - c * chunk);
    const uint32_t slot = slot_of[c];
    if (got < 0) {
      if (error.empty()) {
        error = who + "read at " + std::to_string(start);
        error_code = int(-got);
        os_error = true;
      }
    } else if (uint64_t(got) < lead + n) {
      if (error.empty())
        error = who + "short read at " + std::to_string(start) + ": " + std::to_string(got) +
                " of " + std::to_string(lead + n) + " bytes (did the file shrink?)";
    } else if (ported && error.empty()) {
      dev.copy_in(dst, dst_offset + c * chunk, base + slot * stride + lead, n);  // slot free again
      std::lock_guard lk(dev.submit_mutex());
      result.done = dev.timeline().last();
    } else if (staged && error.empty()) {
      std::lock_guard lk(dev.submit_mutex());
      auto r = dev.timeline().reserve();
      CopyQueue q(dev);
      q.wait(dev.timeline().signal(), r.prev);
      q.copy(dst.va() + dst_offset + c * chunk, staging.va() + slot * stride + lead, n);
      q.signal(dev.timeline().signal(), r.next);
      q.submit();
      r.commit();
      slot_free_at[slot] = r.next;
      result.done = r.next;
    }
    if (staged) free_slots.push_back(slot);
  };
  // Up to `depth` reads in flight; none after an error. A read that has landed already (a
  // buffered read of cached data completes inside its submission) stops the refill: its copy
  // goes out first, as soon as its data is there, so the other slots are all left to the
  // copies under way (with 4 slots, a slot is read into again three copies later).
  auto refill = [&] {
    while (error.empty() && issued < chunks && issued - finished < depth) {
      issue();
      if (reader.ready()) return;
    }
  };
  try {
    refill();
    while (finished < issued) {
      auto [c, got] = reader.next();
      finish(c, got);
      // Reads that have landed get their copies before more reads are issued.
      while (finished < issued && reader.ready()) {
        auto [c2, got2] = reader.next();
        finish(c2, got2);
      }
      refill();
    }
  } catch (...) {
    reader.drain();
    dev.timeline().wait(result.done);  // the copies submitted read the staging slots
    throw;
  }
  if (!error.empty()) {
    reader.drain();
    dev.timeline().wait(result.done);
    if (os_error) throw OsError(error, error_code);
    throw Error(error);
  }
  if (staged) dev.timeline().wait(result.done);  // the staging slots go with this call
  return result;
}

}  // namespace hcq::io
