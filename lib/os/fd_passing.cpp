#include "os/fd_passing.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/deadline.hpp"
#include "core/error.hpp"

namespace hcq::os {

OwnedFd& OwnedFd::operator=(OwnedFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void OwnedFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

using Clock = std::chrono::steady_clock;

void check_socket(int sock) {
  int type = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
    throw OsError("unix socket: fd " + std::to_string(sock) + " is not a socket", errno);
  if (type != SOCK_SEQPACKET && type != SOCK_DGRAM)
    throw InvalidInput("unix socket: fd " + std::to_string(sock) +
                       " does not keep message boundaries (use SOCK_SEQPACKET or SOCK_DGRAM)");
}

// Waits for `events` on `sock` until `deadline`; false on timeout.
bool wait_for(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    pollfd p{sock, events, 0};
    int r = ::poll(&p, 1, int(left.count()));
    if (r > 0) return true;  // ready, or hung up / in error: the call that follows says which
    if (r == 0) return false;
    if (errno != EINTR) throw OsError("unix socket: poll", errno);
  }
}

}  // namespace

void send_fds(int sock, std::span<const std::byte> bytes, std::span<const int> fds,
              std::chrono::milliseconds timeout) {
  check_socket(sock);
  if (bytes.empty() || bytes.size() > 65536)
    throw InvalidInput("unix socket: a message of " + std::to_string(bytes.size()) +
                       " bytes (1 to 65536 travel)");
  if (fds.size() > kMaxPassedFds)
    throw InvalidInput("unix socket: " + std::to_string(fds.size()) +
                       " descriptors in one message (at most " + std::to_string(kMaxPassedFds) +
                       ")");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  const auto deadline = deadline_after(timeout);
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == ssize_t(bytes.size())) return;
    if (n >= 0)  // a boundary-keeping socket sends all or nothing
      throw Error("unix socket: sent " + std::to_string(n) + " of " +
                  std::to_string(bytes.size()) + " bytes");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      throw OsError(errno == EPIPE || errno == ECONNRESET
                        ? "unix socket: the peer closed the connection"
                        : "unix socket: sendmsg",
                    errno);
    if (!wait_for(sock, POLLOUT, deadline))
      throw TimeoutError("unix socket: no room to send in " + std::to_string(timeout.count()) +
                         " ms");
  }
}

FdMessage receive_fds(int sock, size_t max_bytes, std::chrono::milliseconds timeout) {
  check_socket(sock);
  FdMessage out;
  out.bytes.resize(max_bytes);
  // Room for one more descriptor than we keep: a message with more sets MSG_CTRUNC.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxPassedFds + 1))] = {};
  iovec iov{out.bytes.data(), out.bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const auto deadline = deadline_after(timeout);
  ssize_t n;
  for (;;) {
    n = ::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) throw Error("unix socket: the peer closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw OsError("unix socket: recvmsg", errno);
    if (!wait_for(sock, POLLIN, deadline))
      throw TimeoutError("unix socket: no message received in " +
                         std::to_string(timeout.count()) + " ms");
  }
  // Take every descriptor that came first, so none leaks whatever is wrong with the message.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.emplace_back(fd);
    }
  }
  // A SEQPACKET peer that closed reads as a message of 0 bytes (a datagram cannot be empty:
  // send_fds refuses it).
  if (n == 0 && out.fds.empty()) throw Error("unix socket: the peer closed the connection");
  if (msg.msg_flags & MSG_TRUNC)
    throw InvalidInput("unix socket: a message longer than " + std::to_string(max_bytes) +
                       " bytes");
  if ((msg.msg_flags & MSG_CTRUNC) || out.fds.size() > kMaxPassedFds)
    throw InvalidInput("unix socket: a message with more than " +
                       std::to_string(kMaxPassedFds) + " descriptors");
  out.bytes.resize(size_t(n));
  return out;
}

}  // namespace hcq::os
