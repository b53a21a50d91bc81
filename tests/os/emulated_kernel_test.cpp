#include "os/emulated_kernel.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>

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

TEST(RealKernel, ReadsFilesAndListsDirectories) {
  auto k = real_kernel();
  EXPECT_FALSE(k->emulated());
  EXPECT_TRUE(k->read_file("/proc/self/stat").has_value());
  EXPECT_FALSE(k->read_file("/nonexistent/file").has_value());
  EXPECT_FALSE(k->list_dir("/proc/self").empty());
  EXPECT_EQ(k->open("/nonexistent/dev", O_RDWR), -ENOENT);
}

}  // namespace
}  // namespace hcq::os
