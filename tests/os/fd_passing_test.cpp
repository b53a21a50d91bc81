// lib/os/fd_passing: one message and its descriptors over a Unix socket (SCM_RIGHTS).
#include "os/fd_passing.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error_of.hpp"
#include "core/error.hpp"

namespace hcq::os {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;

struct Pair {
  explicit Pair(int type = SOCK_SEQPACKET) {
    int s[2];
    EXPECT_EQ(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, s), 0);
    a = OwnedFd(s[0]);
    b = OwnedFd(s[1]);
  }
  OwnedFd a, b;
};

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(FdPassing, AMemfdArrivesAsANewDescriptorOfTheSameFile) {
  Pair p;
  OwnedFd mem(::memfd_create("fd-passing-test", MFD_CLOEXEC));
  ASSERT_TRUE(mem);
  ASSERT_EQ(::write(mem.get(), "pages", 5), 5);
  const int fds[] = {mem.get()};
  send_fds(p.a.get(), bytes_of("hello"), fds, 1000ms);
  mem.reset();  // the message holds the file now
  FdMessage m = receive_fds(p.b.get(), 64, 1000ms);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.bytes.data()), m.bytes.size()), "hello");
  ASSERT_EQ(m.fds.size(), 1u);
  char buf[8] = {};
  EXPECT_EQ(::pread(m.fds[0].get(), buf, 5, 0), 5);
  EXPECT_STREQ(buf, "pages");
}

TEST(FdPassing, ExactErrors) {
  {
    Pair p;
    p.a.reset();
    EXPECT_EQ(error_of<Error>([&] { receive_fds(p.b.get(), 64, 1000ms); }),
              "unix socket: the peer closed the connection");
  }
  {
    Pair p;
    EXPECT_EQ(error_of<TimeoutError>([&] { receive_fds(p.b.get(), 64, 20ms); }),
              "unix socket: no message received in 20 ms");
  }
  {
    Pair p(SOCK_STREAM);
    EXPECT_EQ(error_of([&] { receive_fds(p.b.get(), 64, 20ms); }),
              "unix socket: fd " + std::to_string(p.b.get()) +
                  " does not keep message boundaries (use SOCK_SEQPACKET or SOCK_DGRAM)");
  }
  {
    Pair p;
    send_fds(p.a.get(), bytes_of("a longer message"), {}, 1000ms);
    EXPECT_EQ(error_of([&] { receive_fds(p.b.get(), 4, 1000ms); }),
              "unix socket: a message longer than 4 bytes");
  }
  {
    Pair p;
    std::vector<int> many(kMaxPassedFds + 1, p.a.get());
    EXPECT_EQ(error_of([&] { send_fds(p.a.get(), bytes_of("x"), many, 1000ms); }),
              "unix socket: 9 descriptors in one message (at most 8)");
    EXPECT_EQ(error_of([&] { send_fds(p.a.get(), {}, {}, 1000ms); }),
              "unix socket: a message of 0 bytes (1 to 65536 travel)");
    p.b.reset();
    EXPECT_EQ(error_of<OsError>([&] { send_fds(p.a.get(), bytes_of("x"), {}, 1000ms); }),
              "unix socket: the peer closed the connection: Broken pipe (errno 32)");
  }
}

TEST(FdPassing, MessagesFromSeveralThreadsArriveWhole) {
  Pair p;
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; i++) {
        std::string msg = std::to_string(t) + ":" + std::to_string(i);
        const int fds[] = {p.a.get()};
        send_fds(p.a.get(), bytes_of(msg), fds, 5000ms);
      }
    });
  std::set<std::string> got;
  for (int i = 0; i < kThreads * kEach; i++) {
    FdMessage m = receive_fds(p.b.get(), 64, 5000ms);
    EXPECT_EQ(m.fds.size(), 1u);
    got.insert(std::string(reinterpret_cast<const char*>(m.bytes.data()), m.bytes.size()));
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(got.size(), size_t(kThreads * kEach));
}

}  // namespace
}  // namespace hcq::os
