// File descriptors between processes: one message with its descriptors over a Unix socket
// (SCM_RIGHTS, unix(7)). Buffers and signals shared between processes travel this way
// (core/ipc.hpp); a dma-buf or memfd received so is the sender's memory, kept alive by the fd.
//
// Sockets must keep message boundaries: SOCK_SEQPACKET or SOCK_DGRAM (a SOCK_STREAM socket
// is an exact error: a message could arrive split, its descriptors on the wrong piece).
// Threads: the functions keep no state; one socket used from several threads at once
// interleaves whole messages (the kernel sends and receives each message at once).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

namespace hcq::os {

// An owned file descriptor: closed when destroyed. Move-only.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.release()) {}
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() { reset(); }

  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct FdMessage {
  std::vector<std::byte> bytes;
  std::vector<OwnedFd> fds;
};

// At most this many descriptors travel in one message.
inline constexpr size_t kMaxPassedFds = 8;

// Sends `bytes` (1 to 65536) and `fds` as one message, waiting at most `timeout` for room.
// Throws InvalidInput for a socket that does not keep message boundaries or bad sizes,
// OsError when the send fails (EPIPE: the peer closed its end), TimeoutError on timeout.
void send_fds(int sock, std::span<const std::byte> bytes, std::span<const int> fds,
              std::chrono::milliseconds timeout);

// Receives one message of at most `max_bytes` and kMaxPassedFds descriptors, waiting at most
// `timeout`. Throws Error "unix socket: the peer closed the connection" when the peer closed
// it, InvalidInput for a message longer than `max_bytes` or with more descriptors (none of
// which are kept: they are closed), TimeoutError naming the wait when nothing came.
FdMessage receive_fds(int sock, size_t max_bytes, std::chrono::milliseconds timeout);

}  // namespace hcq::os
