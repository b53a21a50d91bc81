// lib/os/device_owner: device claims and mailbox sections between processes made with fork().
// Children end with _exit or SIGKILL, as a crashed process would: no destructor of theirs
// runs. Every wait for a child has a limit (alarm in the child, WNOHANG polls in the parent).
#include "os/device_owner.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/emulated_kernel.hpp"

namespace hcq::os {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;

// A forked child (common/child_process.hpp) that SIGALRM ends after 10 s, whatever it waits on.
template <class F>
pid_t start_child(F child) {
  return testing_support::spawn([&] {
    ::alarm(10);
    return child();
  });
}

int wait_child(pid_t pid) { return testing_support::wait_for(pid); }

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Every emulated kernel of this test process (and its children) in one scope of its own.
class DeviceOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_emulated_scope("test-owner-" + std::to_string(::getpid()));
    segment = device_segment_name(kernel, key);
    ASSERT_EQ(segment, "hcq.emu.test-owner-" + std::to_string(::getpid()) + ".dev.0000_03_00.0");
  }
  void TearDown() override { set_emulated_scope(""); }
  EmulatedKernel kernel;
  const std::string key = "0000:03:00.0";
  std::string segment;
};

// One byte from `fd` within 10 s; -1 on timeout or end of file.
int read_byte(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return -1;
  char c;
  return ::read(fd, &c, 1) == 1 ? c : -1;
}

void write_byte(int fd, char c) { ASSERT_EQ(::write(fd, &c, 1), 1); }

TEST(DeviceOwnerNames, SegmentsAreNamedAfterTheDeviceWithinTheKernelsScope) {
  EXPECT_EQ(device_segment_name(*real_kernel(), "0000:03:00.0"), "hcq.dev.0000_03_00.0");
  EXPECT_EQ(device_segment_name(*real_kernel(), "usb.2-1"), "hcq.dev.usb.2-1");
  set_emulated_scope("s1");
  EmulatedKernel a, b;
  EXPECT_EQ(device_segment_name(a, "0000:03:00.0"), "hcq.emu.s1.dev.0000_03_00.0");
  set_emulated_scope("");
  // Without a scope each emulated machine is its own.
  EXPECT_NE(shared_name_prefix(a), shared_name_prefix(b));
  EXPECT_EQ(shared_name_prefix(a).rfind("hcq.emu.p" + std::to_string(::getpid()) + "-", 0), 0u);
  // A scope that makes a bad name is refused by the segment's name rules.
  set_emulated_scope("a/b");
  EmulatedKernel c;
  EXPECT_EQ(error_of([&] { DeviceOwner o(c, "0000:03:00.0", "emu:x"); }),
            "shared segment 'hcq.emu.a/b.dev.0000_03_00.0': a name is letters, digits, '.', '_' "
            "and '-' (1 to 200)");
  set_emulated_scope("");
}

TEST(DeviceOwnerNames, TheCommandLineIsTheArgumentsJoinedBySpaces) {
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  ASSERT_NE(f, nullptr);
  char buf[4096];
  std::string raw(buf, std::fread(buf, 1, sizeof buf, f));
  std::fclose(f);
  std::string want;
  for (char c : raw) want += c ? c : ' ';
  while (!want.empty() && want.back() == ' ') want.pop_back();
  want = want.substr(0, DeviceRecord::kCommandBytes - 1);
  EXPECT_EQ(own_command_line(), want);
  EXPECT_NE(own_command_line().find("tests"), std::string::npos);  // hcq_tests' path
}

TEST_F(DeviceOwnerTest, ASecondOpenerGetsTheHoldersPidAndCommandLine) {
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = start_child([&] {
    DeviceOwner owner(kernel, key, "emu:gfx1100_am");
    write_byte(ready[1], 'c');
    return read_byte(release[0]) == 'r' ? 0 : 1;
  });
  ASSERT_EQ(read_byte(ready[0]), 'c');
  const std::string message = error_of([&] { DeviceOwner second(kernel, key, "emu:gfx1100_am"); });
  const std::string prefix = "emu:gfx1100_am: in use by pid " + std::to_string(child) + " (" +
                             own_command_line() + "), since ";
  EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
  EXPECT_EQ(message.size(), prefix.size() + 23) << message;  // "2026-12-02 11:42:20 UTC"
  EXPECT_EQ(message.substr(message.size() - 4), " UTC");
  const std::optional<DeviceHolder> h = device_holder(kernel, key);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->pid, child);
  EXPECT_EQ(h->device, "emu:gfx1100_am");
  EXPECT_EQ(h->start_time, SharedSegment::process_start_time(child));
  EXPECT_EQ(message, "emu:gfx1100_am: in use by " + h->describe());
  write_byte(release[1], 'r');
  const int st = wait_child(child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  // The child released its claim as it left.
  EXPECT_FALSE(device_holder(kernel, key));
  { DeviceOwner mine(kernel, key, "emu:gfx1100_am"); }
  EXPECT_FALSE(exists(segment));
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
}

TEST_F(DeviceOwnerTest, AKilledOwnerDoesNotBlockTheNextOpener) {
  // Nobody else attached when it dies: the segment is made afresh.
  int st = wait_child(start_child([&] {
    new DeviceOwner(kernel, key, "emu:gfx1100_am");  // never released
    ::kill(::getpid(), SIGKILL);
    return 0;
  }));
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_TRUE(exists(segment));
  EXPECT_FALSE(device_holder(kernel, key));
  {
    DeviceOwner mine(kernel, key, "emu:gfx1100_am");
    EXPECT_EQ(mine.reclaimed(), "");
  }
  EXPECT_FALSE(exists(segment));

  // A watcher attached meanwhile keeps the record: the dead owner's pid is seen to be gone.
  SharedSegment watcher(segment, DeviceRecord::kLayoutVersion, sizeof(DeviceRecord),
                        [](std::byte* p) { new (p) DeviceRecord(); });
  pid_t dead = 0;
  st = wait_child(dead = start_child([&] {
    new DeviceOwner(kernel, key, "emu:gfx1100_am");
    ::kill(::getpid(), SIGKILL);
    return 0;
  }));
  ASSERT_TRUE(WIFSIGNALED(st));
  {
    DeviceOwner mine(kernel, key, "emu:gfx1100_am");
    const std::string want = "pid " + std::to_string(dead) + " (" + own_command_line() + "), since ";
    EXPECT_EQ(mine.reclaimed().substr(0, want.size()), want) << mine.reclaimed();
    EXPECT_EQ(mine.reclaimed().substr(mine.reclaimed().size() - 10), " UTC, gone");
    EXPECT_EQ(device_holder(kernel, key)->pid, ::getpid());
  }
  EXPECT_FALSE(device_holder(kernel, key));  // released
}

TEST_F(DeviceOwnerTest, OfProcessesClaimingAtOnceExactlyOneWins) {
  constexpr int kChildren = 4;
  int results[2], go[2], release[2];
  ASSERT_EQ(::pipe(results), 0);
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(release), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; i++)
    children.push_back(start_child([&] {
      ::close(go[1]);
      ::close(release[1]);
      char c;
      if (::read(go[0], &c, 1) != 0) return 2;  // all start when the parent closes `go`
      try {
        DeviceOwner owner(kernel, key, "emu:gfx1100_am");
        write_byte(results[1], 'W');
        return ::read(release[0], &c, 1) == 0 ? 0 : 3;  // held until the parent lets go
      } catch (const InvalidInput& e) {
        write_byte(results[1], std::string(e.what()).find(": in use by pid ") != std::string::npos
                                   ? 'L'
                                   : '?');
        return 0;
      }
    }));
  ::close(go[0]);
  ::close(go[1]);
  std::string got;
  for (int i = 0; i < kChildren; i++) got += char(read_byte(results[0]));
  ::close(release[1]);
  for (pid_t c : children) {
    const int st = wait_child(c);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  EXPECT_EQ(std::count(got.begin(), got.end(), 'W'), 1) << got;
  EXPECT_EQ(std::count(got.begin(), got.end(), 'L'), kChildren - 1) << got;
  for (int fd : {results[0], results[1], release[0]}) ::close(fd);
}

// A SharedMailbox in memory a forked child shares.
SharedMailbox* shared_mailbox() {
  void* p = ::mmap(nullptr, sizeof(SharedMailbox), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) SharedMailbox();
}

TEST(MailboxSection, AHolderKilledInsideIsSeenByTheNextOneAndACleanEndIsNot) {
  SharedMailbox* m = shared_mailbox();
  ASSERT_NE(m, nullptr);
  {
    MailboxSection s(*m);
    EXPECT_FALSE(s.interrupted());
    s.begin();
    s.end();
  }
  const int st = wait_child(start_child([&] {
    MailboxSection s(*m);
    s.begin();
    ::kill(::getpid(), SIGKILL);  // inside its exchange
    return 0;
  }));
  ASSERT_TRUE(WIFSIGNALED(st));
  {
    MailboxSection s(*m, 1000ms);
    EXPECT_TRUE(s.holder_died());
    EXPECT_TRUE(s.interrupted());
    EXPECT_EQ(m->interruptions, 1u);
    s.begin();
    s.end();
  }
  {
    MailboxSection s(*m);
    EXPECT_FALSE(s.interrupted());
    s.begin();  // gives up without end(): the next section mends it
  }
  {
    MailboxSection s(*m);
    EXPECT_FALSE(s.holder_died());
    EXPECT_TRUE(s.interrupted());
    EXPECT_EQ(m->interruptions, 2u);
  }
  ::munmap(m, sizeof(SharedMailbox));
}

TEST(MailboxSection, ThreadsOfTwoProcessesNeverShareTheSection) {
  SharedMailbox* m = shared_mailbox();
  ASSERT_NE(m, nullptr);
  // `inside` counts holders; a second one inside at once is an overlap.
  auto* inside = static_cast<int*>(::mmap(nullptr, 8, PROT_READ | PROT_WRITE,
                                          MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(inside, MAP_FAILED);
  inside[0] = inside[1] = 0;
  auto work = [&] {
    for (int i = 0; i < 100; i++) {
      MailboxSection s(*m);
      if (++inside[0] != 1) inside[1]++;
      std::this_thread::yield();
      inside[0]--;
    }
  };
  const pid_t child = start_child([&] {
    std::thread t(work);
    work();
    t.join();
    return 0;
  });
  std::thread t(work);
  work();
  t.join();
  const int st = wait_child(child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(inside[1], 0);
  EXPECT_EQ(m->interruptions, 0u);
  ::munmap(inside, 8);
  ::munmap(m, sizeof(SharedMailbox));
}

}  // namespace
}  // namespace hcq::os
