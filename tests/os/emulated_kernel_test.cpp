#include "os/emulated_kernel.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

namespace hcq::os {
namespace {

class EchoNode : public EmulatedNode {
 public:
  int ioctl(int, unsigned long req, void* arg) override {
    *static_cast<unsigned long*>(arg) = req + 1;
    return 0;
  }
  int opens = 0, closes = 0;
  void on_open(int) override { opens++; }
  void on_close(int) override { closes++; }
};

// What an emulated GPU says of itself is a typed query only an emulated kernel answers; no
// file stands for it, and the real kernel answers nothing.
TEST(EmulatedKernel, AnswersEmulatorReportsAndTheRealKernelNone) {
  EmulatedKernel k;
  EXPECT_EQ(k.emulator_report(EmulatorReport::FaultLog), std::nullopt);
  int asked = 0;
  k.set_emulator_report(EmulatorReport::FaultLog, [&] {
    ++asked;
    return std::string("queue 3: bad opcode\n");
  });
  k.set_emulator_report(EmulatorReport::IbPositions, [] { return std::string("queue 3: IB 0x1000 4 dwords, at dword 2\n"); });
  EXPECT_EQ(k.emulator_report(EmulatorReport::FaultLog), "queue 3: bad opcode\n");
  EXPECT_EQ(k.emulator_report(EmulatorReport::FaultLog), "queue 3: bad opcode\n");
  EXPECT_EQ(asked, 2);  // made when asked, each time
  EXPECT_EQ(k.emulator_report(EmulatorReport::IbPositions), "queue 3: IB 0x1000 4 dwords, at dword 2\n");
  EXPECT_EQ(k.read_file("/sys/kernel/debug/kfd/hcq_emulator_faults"), std::nullopt);
  EXPECT_EQ(real_kernel()->emulator_report(EmulatorReport::FaultLog), std::nullopt);
  EXPECT_EQ(real_kernel()->emulator_report(EmulatorReport::IbPositions), std::nullopt);
}

// Drivers' waiters ask for reports from several threads while the emulated system sets them:
// every answer is one of the texts set, whole.
TEST(EmulatedKernel, EmulatorReportsFromSeveralThreadsAtOnce) {
  EmulatedKernel k;
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, answered{0};
  std::vector<std::thread> askers;
  for (int t = 0; t < 4; ++t)
    askers.emplace_back([&] {
      while (!stop.load()) {
        const auto r = k.emulator_report(EmulatorReport::FaultLog);
        if (!r) continue;
        ++answered;
        if (*r != "first" && *r != "second") ++torn;
      }
    });
  for (int i = 0; i < 2000; ++i)
    k.set_emulator_report(EmulatorReport::FaultLog,
                          [i] { return std::string(i % 2 ? "second" : "first"); });
  while (answered.load() < 100) std::this_thread::yield();
  stop = true;
  for (auto& a : askers) a.join();
  EXPECT_EQ(torn.load(), 0);
}

TEST(EmulatedKernel, RoutesNodesAndServesSysfs) {
  EmulatedKernel k;
  auto node = std::make_shared<EchoNode>();
  k.add_node("/dev/echo", node);
  k.add_file("/sys/a/b/x", "1\n");
  k.add_file("/sys/a/c", "2\n");
  int fd = k.open("/dev/echo", O_RDWR);
  ASSERT_GE(fd, 1 << 20);
  unsigned long v = 0;
  EXPECT_EQ(k.ioctl(fd, 41, &v), 0);
  EXPECT_EQ(v, 42u);
  EXPECT_EQ(k.close(fd), 0);
  EXPECT_EQ(node->opens, 1);
  EXPECT_EQ(node->closes, 1);
  EXPECT_EQ(k.ioctl(fd, 1, &v), -EBADF);
  EXPECT_EQ(k.close(fd), -EBADF);
  EXPECT_EQ(k.open("/dev/missing", O_RDWR), -ENOENT);
  EXPECT_EQ(*k.read_file("/sys/a/b/x"), "1\n");
  EXPECT_FALSE(k.read_file("/sys/a/b").has_value());
  EXPECT_EQ(k.list_dir("/sys/a"), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(k.list_dir("/sys/none").empty());
  EXPECT_TRUE(k.emulated());
}

TEST(EmulatedKernel, MmapOfANodeWithoutMappingsFailsAndAnonymousGoesToTheOs) {
  EmulatedKernel k;
  k.add_node("/dev/echo", std::make_shared<EchoNode>());
  int fd = k.open("/dev/echo", O_RDWR);
  errno = 0;
  EXPECT_EQ(k.mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, ENODEV);
  void* p = k.mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  static_cast<char*>(p)[0] = 1;
  EXPECT_EQ(k.munmap(p, 4096), 0);
}

// A node that maps memory already there (as emulated drivers back buffers at their GPU
// address) and counts the munmaps it hears of.
class InPlaceNode : public EmulatedNode {
 public:
  int ioctl(int, unsigned long, void*) override { return -ENOTTY; }
  void* mmap(void* addr, size_t, int, int, int, off_t) override { return addr; }
  int munmap(void*, size_t) override {
    munmaps++;
    return 0;
  }
  int munmaps = 0;
};

bool is_mapped(void* p, size_t len) {
  std::vector<unsigned char> v((len + 4095) / 4096);
  return mincore(p, len, v.data()) == 0;  // ENOMEM: not mapped
}

// A driver's address-space reservation with node mappings left inside it is unmapped as a
// whole (munmap(2) unmaps everything in the range); one node mapping alone is its node's.
TEST(EmulatedKernel, MunmapOfAReservationWithNodeMappingsInsideUnmapsItAll) {
  EmulatedKernel k;
  auto node = std::make_shared<InPlaceNode>();
  k.add_node("/dev/inplace", node);
  int fd = k.open("/dev/inplace", O_RDWR);
  const size_t len = 64 << 12;
  void* base = k.mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_EQ(k.mmap(base, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0), base);
  char* second = static_cast<char*>(base) + 8 * 4096;
  ASSERT_EQ(k.mmap(second, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0), second);
  EXPECT_EQ(k.munmap(second, 4096), 0);  // exactly one node mapping: the node's business
  EXPECT_EQ(node->munmaps, 1);
  EXPECT_TRUE(is_mapped(base, len));
  EXPECT_EQ(k.munmap(base, len), 0);  // the whole reservation, a node mapping at its start
  EXPECT_EQ(node->munmaps, 2);
  EXPECT_FALSE(is_mapped(base, len));
}

TEST(EmulatedKernel, SysfsWritesDeniedPathsMountsAndPathlessNodes) {
  EmulatedKernel k;
  EXPECT_EQ(k.sysfs_root(), "");
  std::string written;
  k.on_write("/sys/bus/pci/drivers/x/bind", [&](const std::string& d) {
    written = d;
    return d == "bad" ? -ENODEV : 0;
  });
  EXPECT_EQ(k.write_file("/sys/bus/pci/drivers/x/bind", "0000:01:00.0"), 0);
  EXPECT_EQ(written, "0000:01:00.0");
  EXPECT_EQ(k.write_file("/sys/bus/pci/drivers/x/bind", "bad"), -ENODEV);
  k.add_file("/sys/ro", "1\n");
  EXPECT_EQ(k.write_file("/sys/ro", "2"), -EACCES);
  EXPECT_EQ(k.write_file("/sys/missing", "2"), -ENOENT);
  k.deny("/sys/bus/pci/drivers/x/bind", EPERM);
  EXPECT_EQ(k.write_file("/sys/bus/pci/drivers/x/bind", "0000:01:00.0"), -EPERM);
  k.add_node("/dev/echo", std::make_shared<EchoNode>());
  k.deny("/dev/echo", EACCES);
  EXPECT_EQ(k.open("/dev/echo", O_RDWR), -EACCES);

  // A mounted directory serves the /sys paths the in-memory tree lacks.
  char dir[] = "/tmp/hcq-kernel-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string root = dir;
  ASSERT_EQ(::mkdir((root + "/class").c_str(), 0755), 0);
  { std::ofstream(root + "/class/name") << "emu\n"; }
  k.mount_sysfs(root);
  EXPECT_EQ(k.sysfs_root(), root);
  EXPECT_EQ(*k.read_file("/sys/class/name"), "emu\n");
  EXPECT_EQ(*k.read_file("/sys/ro"), "1\n");
  EXPECT_EQ(k.list_dir("/sys"), (std::vector<std::string>{"class", "ro"}));
  EXPECT_FALSE(k.read_file("/proc/self/stat").has_value());  // only /sys is mounted
  EXPECT_EQ(k.write_file("/sys/class/name", "x"), -EACCES);
  ::unlink((root + "/class/name").c_str());
  ::rmdir((root + "/class").c_str());
  ::rmdir(dir);

  auto node = std::make_shared<EchoNode>();
  int fd = k.open_node(node);
  EXPECT_EQ(k.node_of(fd), node);
  EXPECT_EQ(node->opens, 1);
  EXPECT_EQ(k.close(fd), 0);
  EXPECT_EQ(k.node_of(fd), nullptr);
}

// eventfd(2) semantics, the same on both kernels: the count accumulates, a read of 8 bytes
// takes it whole, an empty non-blocking eventfd is EAGAIN, poll sees POLLIN while it is not 0
// and times out otherwise.
void expect_eventfd_semantics(Kernel& k) {
  using clock = std::chrono::steady_clock;
  const int fd = k.eventfd(2, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(k.poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLIN);
  uint64_t n = 0;
  EXPECT_EQ(k.read(fd, &n, 4), -EINVAL);  // a counter is 8 bytes
  EXPECT_EQ(k.read(fd, &n, 8), 8);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(k.read(fd, &n, 8), -EAGAIN);
  const auto t0 = clock::now();
  p.revents = 0;
  EXPECT_EQ(k.poll(&p, 1, 20), 0);
  EXPECT_EQ(p.revents, 0);
  EXPECT_GE(clock::now() - t0, std::chrono::milliseconds(20));
  EXPECT_EQ(k.close(fd), 0);
}

TEST(EmulatedKernel, EventfdCountsReadsAndPollsWithATimeout) {
  EmulatedKernel k;
  expect_eventfd_semantics(k);
  EXPECT_EQ(k.eventfd(0, 0), -EINVAL);  // only non-blocking ones: a read never waits forever
  pollfd two[2] = {{k.eventfd(0, EFD_NONBLOCK), POLLIN, 0}, {k.eventfd(0, EFD_NONBLOCK), POLLIN, 0}};
  EXPECT_EQ(k.poll(two, 2, 0), 0);  // several fds: none ready
  std::dynamic_pointer_cast<EmulatedEventfd>(k.node_of(two[1].fd))->signal();
  EXPECT_EQ(k.poll(two, 2, 1000), 1);
  EXPECT_EQ(two[0].revents, 0);
  EXPECT_EQ(two[1].revents, POLLIN);
  pollfd bad{12345, POLLIN, 0};
  EXPECT_EQ(k.poll(&bad, 1, 0), 1);
  EXPECT_EQ(bad.revents, POLLNVAL);
  uint64_t n;
  EXPECT_EQ(k.read(12345, &n, 8), -EBADF);
}

TEST(RealKernel, EventfdCountsReadsAndPollsWithATimeout) { expect_eventfd_semantics(*real_kernel()); }

// Several threads sleep on one eventfd at once: one signal wakes every one of them (the count
// stays until read), and on_wait runs each time one starts a nap (at least once per thread).
TEST(EmulatedKernel, OneSignalWakesEveryPollerAndEachSleepCallsOnWait) {
  EmulatedKernel k;
  const int fd = k.eventfd(0, EFD_NONBLOCK);
  auto node = std::dynamic_pointer_cast<EmulatedEventfd>(k.node_of(fd));
  ASSERT_TRUE(node);
  std::atomic<int> waits{0}, woken{0};
  node->set_on_wait([&] { ++waits; });
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      pollfd p{fd, POLLIN, 0};
      if (k.poll(&p, 1, 5000) == 1 && p.revents == POLLIN) ++woken;
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (waits < kThreads && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(waits, kThreads);
  node->signal();
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken, kThreads);
  uint64_t n = 0;
  EXPECT_EQ(k.read(fd, &n, 8), 8);
  EXPECT_EQ(n, 1u);
}

TEST(RealKernel, ReadsFilesAndListsDirectories) {
  auto k = real_kernel();
  EXPECT_FALSE(k->emulated());
  EXPECT_TRUE(k->read_file("/proc/self/stat").has_value());
  EXPECT_FALSE(k->read_file("/nonexistent/file").has_value());
  EXPECT_FALSE(k->list_dir("/proc/self").empty());
  EXPECT_EQ(k->open("/nonexistent/dev", O_RDWR), -ENOENT);
  EXPECT_EQ(k->sysfs_root(), "/sys");
  EXPECT_EQ(k->write_file("/nonexistent/attr", "1"), -ENOENT);
}

}  // namespace
}  // namespace hcq::os
