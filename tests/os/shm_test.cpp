// lib/os/shm: named segments with a versioned header and a lock that survives its holder,
// between processes made with fork(). The children end with _exit or SIGKILL, as a crashed
// process would: no destructor of theirs runs.
#include "os/shm.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"

namespace hcq::os {
namespace {

using testing_support::error_of;

// A name of its own per test and process, so parallel test runs do not meet.
std::string unique_name(const char* what) {
  return std::string("hcq-test-") + what + "-" + std::to_string(::getpid());
}

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Runs `child` in a forked process that then ends with _exit(its result) (no destructors
// run), or kills itself; returns its wait status.
template <class F>
int in_child(F child) {
  return testing_support::wait_for(testing_support::spawn(child), std::chrono::seconds(60));
}

TEST(SharedSegment, TwoAttachesShareTheBytesAndTheLastOneOutRemovesTheName) {
  const std::string name = unique_name("share");
  {
    SharedSegment a(name, 1, 4096);
    EXPECT_TRUE(a.created());
    EXPECT_EQ(a.replaced(), "");
    EXPECT_EQ(a.header().magic, SegmentHeader::kMagic);
    EXPECT_EQ(a.header().layout_version, 1u);
    EXPECT_EQ(a.header().payload_bytes, 4096u);
    EXPECT_EQ(a.header().creator_pid, ::getpid());
    EXPECT_EQ(a.header().creator_start_time, SharedSegment::process_start_time(::getpid()));
    EXPECT_NE(a.header().creator_start_time, 0u);
    std::memcpy(a.payload(), "hello", 6);
    {
      SharedSegment b(name, 1, 4096);
      EXPECT_FALSE(b.created());
      EXPECT_STREQ(reinterpret_cast<const char*>(b.payload()), "hello");
      // A child attaches too, and sees and writes the same bytes.
      EXPECT_EQ(in_child([&] {
                  SharedSegment c(name, 1, 4096);
                  const bool same = std::strcmp(reinterpret_cast<const char*>(c.payload()), "hello") == 0;
                  std::memcpy(c.payload(), "child", 6);
                  return same && !c.created() ? 0 : 1;
                }),
                0);
      EXPECT_STREQ(reinterpret_cast<const char*>(a.payload()), "child");
    }
    EXPECT_TRUE(exists(name));  // `a` still holds it
  }
  EXPECT_FALSE(exists(name));
}

TEST(SharedSegment, ASegmentLeftByAKilledProcessIsMadeAfresh) {
  const std::string name = unique_name("left");
  const int st = in_child([&] {
    auto* s = new SharedSegment(name, 3, 64);  // never destroyed: as if the process crashed
    std::memset(s->payload(), 0x5a, 64);
    ::kill(::getpid(), SIGKILL);
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(st));
  ASSERT_TRUE(exists(name));
  // The leftover is removed and made anew (another inode), not truncated in place: a process
  // that still had it open would otherwise see it change under it.
  struct stat before {}, after {};
  ASSERT_EQ(::stat(("/dev/shm/" + name).c_str(), &before), 0);
  const int left = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_CLOEXEC);  // keeps the inode
  ASSERT_GE(left, 0);
  SharedSegment again(name, 3, 64);
  ASSERT_EQ(::stat(("/dev/shm/" + name).c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  unsigned char old_byte = 0;
  EXPECT_EQ(::pread(left, &old_byte, 1, sizeof(SegmentHeader)), 1);
  EXPECT_EQ(old_byte, 0x5a);  // the old object kept its bytes
  ::close(left);
  EXPECT_TRUE(again.created());
  EXPECT_EQ(again.header().creator_pid, ::getpid());
  EXPECT_NE(again.replaced().find("left by processes that are gone: layout version 3 (64 bytes), "
                                  "created by pid "),
            std::string::npos)
      << again.replaced();
  for (int i = 0; i < 64; i++) ASSERT_EQ(again.payload()[i], std::byte{0}) << i;
}

TEST(SharedSegment, AnOlderLayoutIsRecreatedWhenUnusedAndRefusedWhileInUse) {
  const std::string name = unique_name("layout");
  {
    SharedSegment old(name, 1, 128);
    EXPECT_EQ(error_of([&] { SharedSegment s(name, 2, 256); }),
              "shared segment " + name + ": layout version 1 (128 bytes), created by pid " +
                  std::to_string(::getpid()) +
                  ", is in use by other processes; this build uses layout version 2 (256 bytes)");
    EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, 256); }),
              "shared segment " + name + ": layout version 1 (128 bytes), created by pid " +
                  std::to_string(::getpid()) +
                  ", is in use by other processes; this build uses layout version 1 (256 bytes)");
  }
  EXPECT_FALSE(exists(name));  // the last one out removed it
  // A process of an older build made version 1 and crashed: it is left behind.
  const int st = in_child([&] {
    new SharedSegment(name, 1, 128);
    ::kill(::getpid(), SIGKILL);
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(st)) << "exit status " << WEXITSTATUS(st);
  ASSERT_TRUE(exists(name));
  SharedSegment now(name, 2, 256);
  EXPECT_TRUE(now.created());
  EXPECT_EQ(now.header().layout_version, 2u);
  EXPECT_NE(now.replaced().find("left by processes that are gone: layout version 1 (128 bytes)"),
            std::string::npos)
      << now.replaced();
}

// The start time of a process that dies and is reaped while it is read is 0 ("gone"), never an
// exception: a read of /proc/<pid>/stat fails with ESRCH then, which std::ifstream turned into
// std::ios_base::failure, ending the rdma/ liveness thread with std::terminate (found by a
// fresh-clone CI run in RdmaLocal.PeerKilledMidTransferIsAnExactErrorWithinABoundedTime).
TEST(SharedSegment, TheStartTimeOfAProcessReapedWhileItIsReadIsZero) {
  for (int round = 0; round < 300; round++) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::pause();
      ::_exit(0);
    }
    std::atomic<bool> reaped{false};
    std::thread reader([&] {
      while (!reaped.load()) (void)SharedSegment::process_start_time(child);
    });
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    reaped = true;
    reader.join();
    EXPECT_EQ(SharedSegment::process_start_time(child), 0u);
  }
}

// Another local user may create a name first, readable or writable by all (issue 33): hcq
// neither attaches to it nor changes it, and says whose it is and its mode.
TEST(SharedSegment, ASegmentOfAnotherUserOrOpenToOthersIsRefusedAndLeftAsItIs) {
  const std::string name = unique_name("foreign");
  const std::string path = "/dev/shm/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "secret", 6), 6);
  ASSERT_EQ(::fchmod(fd, 0666), 0);
  const std::string me = std::to_string(::geteuid());
  const std::string refused = "; hcq attaches only to segments of its own user (uid " + me +
                              ") with mode 0600 or narrower";
  EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, 64); }),
            "shared segment " + name + ": " + path + " belongs to uid " + me + " with mode 0666" +
                refused);
  ASSERT_EQ(::fchmod(fd, 0640), 0);
  EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, 64); }),
            "shared segment " + name + ": " + path + " belongs to uid " + me + " with mode 0640" +
                refused);
  if (::geteuid() == 0) {  // root can give it to another user, as that user would make it
    ASSERT_EQ(::fchmod(fd, 0600), 0);
    ASSERT_EQ(::fchown(fd, 65534, 65534), 0);
    EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, 64); }),
              "shared segment " + name + ": " + path + " belongs to uid 65534 with mode 0600" +
                  refused);
  }
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 6);  // not truncated, not removed
  char back[6] = {};
  EXPECT_EQ(::pread(fd, back, 6, 0), 6);
  EXPECT_EQ(std::string(back, 6), "secret");
  ::close(fd);
  ::unlink(path.c_str());
  // Made by hcq: mode 0600 whatever the umask.
  const mode_t mask = ::umask(0);
  {
    SharedSegment mine(name, 1, 64);
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  ::umask(mask);
}

// The space is reserved when a segment is made: one larger than /dev/shm is an exact error
// then, not a SIGBUS at a later write, and leaves no name behind.
TEST(SharedSegment, ASegmentLargerThanDevShmIsAnExactErrorAndLeavesNothing) {
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs("/dev/shm", &vfs), 0);
  const uint64_t room = uint64_t(vfs.f_blocks) * vfs.f_frsize;
  if (room == 0 || room * 2 > SharedSegment::kMaxPayloadBytes)
    GTEST_SKIP() << "/dev/shm has no size limit below " << SharedSegment::kMaxPayloadBytes;
  const std::string name = unique_name("full");
  const uint64_t payload = room * 2;
  EXPECT_EQ(error_of<OsError>([&] { SharedSegment s(name, 1, payload); }),
            "shared segment " + name + ": no room for " +
                std::to_string(payload + sizeof(SegmentHeader)) +
                " bytes in /dev/shm: No space left on device (errno 28)");
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, SharedSegment::kMaxPayloadBytes + 1); }),
            "shared segment " + name + ": a payload of 1099511627777 bytes (at most 1099511627776)");
}

// An object cut shorter than its header says (damaged, or made so by a hostile process) is
// refused before it is mapped: reading past its end would be a SIGBUS.
TEST(SharedSegment, AnObjectShorterThanItsHeaderSaysIsRefused) {
  const std::string name = unique_name("short");
  SharedSegment held(name, 1, 1 << 20);
  ASSERT_EQ(::truncate(("/dev/shm/" + name).c_str(), 4096), 0);
  EXPECT_EQ(error_of([&] { SharedSegment s(name, 1, 1 << 20); }),
            "shared segment " + name + ": the object holds 4096 bytes, fewer than the " +
                std::to_string((1 << 20) + sizeof(SegmentHeader)) +
                " its header gives: damaged, or not made by hcq");
}

// Eight threads attach and detach one name at once, many times: every attach sees the
// segment whole (made afresh only when nobody held it), and the last one out removes it.
TEST(SharedSegment, ThreadsAttachAndDetachOneNameAtOnce) {
  const std::string name = unique_name("threads");
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; i++) {
        try {
          SharedSegment s(name, 7, 64);
          if (s.header().layout_version != 7 || s.payload_bytes() != 64) bad++;
          s.payload()[t] = std::byte(i);
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
          bad++;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_FALSE(exists(name));
}

TEST(SharedSegment, BadNamesAreRefused) {
  for (const char* bad : {"", "a/b", "..", "sp ace"})
    EXPECT_EQ(error_of([&] { SharedSegment s(bad, 1, 8); }),
              std::string("shared segment '") + bad +
                  "': a name is letters, digits, '.', '_' and '-' (1 to 200)");
}

// The state a lock guards: a counter written in two halves, so a holder killed between them
// leaves it inconsistent.
struct Guarded {
  RobustLock lock;
  uint32_t half_a = 0, half_b = 0;
};

TEST(RobustLock, AHolderKilledInsideItsSectionIsRecoveredByTheNextLocker) {
  const std::string name = unique_name("lock");
  SharedSegment seg(name, 1, sizeof(Guarded));
  auto* g = new (seg.payload()) Guarded;
  const int st = in_child([&] {
    SharedSegment mine(name, 1, sizeof(Guarded));
    auto* h = reinterpret_cast<Guarded*>(mine.payload());
    h->lock.lock();
    h->half_a = 1;  // killed before half_b
    ::kill(::getpid(), SIGKILL);
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_TRUE(g->lock.lock(std::chrono::milliseconds(2000)));  // the state may be inconsistent
  EXPECT_NE(g->half_a, g->half_b);
  g->half_b = g->half_a;  // the next holder mends it
  g->lock.unlock();
  EXPECT_FALSE(g->lock.lock());  // consistent again: a plain lock
  g->lock.unlock();
}

TEST(RobustLock, ThreadsOfTwoProcessesCountUnderIt) {
  const std::string name = unique_name("count");
  SharedSegment seg(name, 1, sizeof(Guarded));
  auto* g = new (seg.payload()) Guarded;
  auto count = [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; i++) {
          g->lock.lock();
          g->half_a++;
          g->half_b = g->half_a;
          g->lock.unlock();
        }
      });
    for (auto& th : threads) th.join();
  };
  const pid_t pid = ::fork();
  if (pid == 0) {
    count();
    ::_exit(0);
  }
  count();
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(g->half_a, 8000u);
  EXPECT_EQ(g->half_b, 8000u);
}

TEST(RobustLock, ALockHeldElsewhereTimesOutWithAnExactError) {
  const std::string name = unique_name("held");
  SharedSegment seg(name, 1, sizeof(Guarded));
  auto* g = new (seg.payload()) Guarded;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    g->lock.lock();
    char c = 1;
    if (::write(pipe_fds[1], &c, 1) != 1) ::_exit(2);
    ::pause();  // holds it until killed
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(error_of<TimeoutError>([&] { g->lock.lock(std::chrono::milliseconds(50)); }),
            "shared lock: not acquired in 50 ms");
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_TRUE(g->lock.lock());  // the holder died holding it
  g->lock.unlock();
}

}  // namespace
}  // namespace hcq::os
