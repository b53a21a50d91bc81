// lib/os/cleanup (issue 33, item 12): temporary trees under one per-user directory, swept once
// their process is gone; emulated machines' segments of dead processes reclaimed; and the
// SIGINT/SIGTERM handler that removes both before the signal ends the process. Children are
// forked and end by the signal, or by SIGKILL as a crashed process would.
#include "os/cleanup.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/shm.hpp"

namespace hcq::os {
namespace {

namespace fs = std::filesystem;
using testing_support::error_of;

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// A child that reports a string through a pipe, then waits to be killed.
struct Reporting {
  int fd[2] = {-1, -1};
  pid_t pid = -1;
  template <class F>
  explicit Reporting(F f) {
    EXPECT_EQ(::pipe(fd), 0);
    pid = testing_support::spawn([&] {
      ::close(fd[0]);
      const std::string said = f();
      if (::write(fd[1], said.data(), said.size()) != ssize_t(said.size())) return 98;
      ::close(fd[1]);
      for (int i = 0; i < 300; i++) ::usleep(100000);  // killed long before 30 s
      return 97;
    });
    ::close(fd[1]);
  }
  std::string said() {
    std::string out;
    char buf[1024];
    ssize_t n;
    while ((n = ::read(fd[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
    ::close(fd[0]);
    return out;
  }
};

TEST(TempTree, LivesInAPrivatePerUserDirectoryAndGoesWithItsObject) {
  const std::string dir = user_temp_directory();
  EXPECT_EQ(fs::path(dir).filename().string(), "hcq-" + std::to_string(::geteuid()));
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::string path;
  {
    TempTree t("sysfs");
    path = t.path();
    const std::string prefix = dir + "/sysfs-" + std::to_string(::getpid()) + "-" +
                               std::to_string(SharedSegment::process_start_time(::getpid())) +
                               "-";
    EXPECT_EQ(path.rfind(prefix, 0), 0u) << path;
    EXPECT_EQ(path.size(), prefix.size() + 6);
    fs::create_directories(path + "/a/b");
    std::ofstream(path + "/a/b/f") << "x";
  }
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(error_of([] { TempTree t("a/b"); }),
            "temporary tree 'a/b': a name is letters, digits and '-'");
}

// A tree whose process was killed (SIGKILL: no destructor, no handler) is removed when the
// next tree is made; a live process's tree is kept.
TEST(TempTree, TreesOfProcessesThatAreGoneAreSweptWhenTheNextIsMade) {
  Reporting child([] { return (new TempTree("am-firmware"))->path(); });
  const std::string left = child.said();
  ASSERT_TRUE(exists(left)) << left;
  ::kill(child.pid, SIGKILL);
  testing_support::wait_for(child.pid);
  ASSERT_TRUE(exists(left));
  TempTree mine("keep");
  EXPECT_FALSE(exists(left)) << left;
  TempTree next("next");  // sweeps again, and keeps this process's own
  EXPECT_TRUE(exists(mine.path()));
}

// Under a TMPDIR of its own (the shared per-user directory stays as it is for other tests).
TEST(TempTree, ADirectoryOthersCanEnterOrAnotherUserOwnsOrALinkIsRefused) {
  std::string base = "/tmp/hcq-cleanup-test-XXXXXX";
  ASSERT_NE(::mkdtemp(base.data()), nullptr);
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was ? was : "";
  ::setenv("TMPDIR", base.c_str(), 1);
  const std::string me = std::to_string(::geteuid()), dir = base + "/hcq-" + me;
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_EQ(error_of([] { TempTree t("x"); }),
            "temporary directory " + dir + ": it belongs to uid " + me +
                " with mode 0777; hcq uses only a directory of its own user (uid " + me +
                ") that others cannot enter (mode 0700)");
  if (::geteuid() == 0) {  // root can give it away
    ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir.c_str(), 12345, 12345), 0);
    EXPECT_EQ(error_of([] { TempTree t("x"); }),
              "temporary directory " + dir + ": it belongs to uid 12345 with mode 0700; hcq uses "
              "only a directory of its own user (uid 0) that others cannot enter (mode 0700)");
  }
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  ASSERT_EQ(::symlink("/tmp", dir.c_str()), 0);
  EXPECT_EQ(error_of([] { TempTree t("x"); }),
            "temporary directory " + dir + ": not a directory (a symbolic link?)");
  ::unlink(dir.c_str());
  {
    TempTree t("x");  // made afresh, 0700
    EXPECT_EQ(t.path().rfind(dir + "/x-", 0), 0u);
  }
  if (was)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  std::error_code ec;
  fs::remove_all(base, ec);
}

// A segment of an emulated machine (named for its process) whose process was killed is
// removed by the next process's first SharedSegment; one a live process holds stays.
TEST(SharedSegmentSweep, AKilledProcesssEmulatedSegmentsAreReclaimed) {
  std::string name;
  {
    Reporting child([] {
      const std::string n = "hcq.emu.p" + std::to_string(::getpid()) + "-1.dev.test";
      new SharedSegment(n, 1, 64);  // never detached: the process is killed
      return n;
    });
    name = child.said();
    ::kill(child.pid, SIGKILL);
    testing_support::wait_for(child.pid);
  }
  ASSERT_TRUE(exists("/dev/shm/" + name));
  const std::string live = "hcq.emu.p" + std::to_string(::getpid()) + "-2.dev.test";
  SharedSegment held(live, 1, 64);  // a process's first one sweeps
  sweep_shared_segments();
  EXPECT_FALSE(exists("/dev/shm/" + name));
  EXPECT_TRUE(exists("/dev/shm/" + live));
}

// SIGINT and SIGTERM: the handler removes the process's trees and the segments it alone
// holds, then the signal ends the process as it would have.
class OnSignal : public testing::TestWithParam<int> {};

TEST_P(OnSignal, TreesAndSegmentsGoAndTheSignalEndsTheProcess) {
  const int sig = GetParam();
  const std::string seg = "hcq-test-onsignal-" + std::to_string(::getpid()) + "-" +
                          std::to_string(sig);
  Reporting child([&] {
    cleanup_on_signals();
    auto* tree = new TempTree("sig");
    std::ofstream(tree->path() + "/firmware.bin") << "x";
    new SharedSegment(seg, 1, 4096);
    return tree->path();
  });
  const std::string tree = child.said();
  ASSERT_TRUE(exists(tree));
  ASSERT_TRUE(exists("/dev/shm/" + seg));
  ::kill(child.pid, sig);
  const int st = testing_support::wait_for(child.pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
  EXPECT_FALSE(exists(tree));
  EXPECT_FALSE(exists("/dev/shm/" + seg));
}

// A segment another process still holds keeps its name when one holder is interrupted.
TEST_P(OnSignal, ASegmentAnotherProcessHoldsStays) {
  const int sig = GetParam();
  const std::string seg = "hcq-test-shared-" + std::to_string(::getpid()) + "-" +
                          std::to_string(sig);
  SharedSegment mine(seg, 1, 4096);
  Reporting child([&] {
    cleanup_on_signals();
    new SharedSegment(seg, 1, 4096);
    return std::string("attached");
  });
  ASSERT_EQ(child.said(), "attached");
  ::kill(child.pid, sig);
  const int st = testing_support::wait_for(child.pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
  EXPECT_TRUE(exists("/dev/shm/" + seg));
}

INSTANTIATE_TEST_SUITE_P(Signals, OnSignal, testing::Values(SIGINT, SIGTERM),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::string(i.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

}  // namespace
}  // namespace hcq::os
