#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "os/kernel.hpp"

namespace hcq::os {
namespace {

class RealKernel final : public Kernel {
 public:
  int open(const std::string& path, int flags) override {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }
  int close(int fd) override { return ::close(fd) < 0 ? -errno : 0; }
  int ioctl(int fd, unsigned long request, void* arg) override {
    int r;
    do {
      r = ::ioctl(fd, request, arg);
    } while (r < 0 && (errno == EINTR || errno == EAGAIN));
    return r < 0 ? -errno : r;
  }
  void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override {
    return ::mmap(addr, length, prot, flags, fd, offset);
  }
  int munmap(void* addr, size_t length) override {
    return ::munmap(addr, length) < 0 ? -errno : 0;
  }
  ssize_t pread(int fd, void* buf, size_t size, off_t offset) override {
    ssize_t n;
    do {
      n = ::pread(fd, buf, size, offset);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }
  ssize_t pwrite(int fd, const void* buf, size_t size, off_t offset) override {
    ssize_t n;
    do {
      n = ::pwrite(fd, buf, size, offset);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }
  ssize_t read(int fd, void* buf, size_t size) override {
    ssize_t n;
    do {
      n = ::read(fd, buf, size);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }
  int passable_fd(int fd) override {
    int r = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return r < 0 ? -errno : r;
  }
  int eventfd(unsigned initval, int flags) override {
    int fd = ::eventfd(initval, flags | EFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }
  int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) override {
    // A signal cuts the wait short; polling again with the whole timeout keeps it bounded
    // (at most one timeout per signal) without a clock here.
    int n;
    do {
      n = ::poll(fds, nfds, timeout_ms);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }
  std::optional<std::string> read_file(const std::string& path) override {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> list_dir(const std::string& path) override {
    std::vector<std::string> names;
    DIR* d = ::opendir(path.c_str());
    if (!d) return names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }
  int write_file(const std::string& path, const std::string& data) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = ::write(fd, data.data(), data.size());
    int err = n < 0 ? errno : (size_t(n) != data.size() ? EIO : 0);
    ::close(fd);
    return -err;
  }
  std::string sysfs_root() const override { return "/sys"; }
  bool emulated() const override { return false; }
};

}  // namespace

std::shared_ptr<Kernel> real_kernel() {
  static std::shared_ptr<Kernel> k = std::make_shared<RealKernel>();
  return k;
}

}  // namespace hcq::os
