// The emulated side of the kernel boundary: device nodes are served by emulated kernel
// drivers (EmulatedNode), sysfs by an in-memory tree. Anonymous mmaps and munmaps of
// ranges no node mapped go to the real OS, so drivers can reserve address space as usual.
#pragma once

#include <functional>
#include <map>
#include <mutex>

#include "os/kernel.hpp"

namespace hcq::os {

// One emulated kernel driver's device file (/dev/kfd, /dev/dri/renderD128, ...).
class EmulatedNode {
 public:
  virtual ~EmulatedNode() = default;
  virtual void on_open(int /*fd*/) {}
  virtual void on_close(int /*fd*/) {}
  virtual int ioctl(int fd, unsigned long request, void* arg) = 0;
  // Same contract as mmap(2): MAP_FAILED with errno set on failure.
  virtual void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset);
  virtual int munmap(void* addr, size_t length);
};

class EmulatedKernel final : public Kernel {
 public:
  EmulatedKernel() = default;
  EmulatedKernel(const EmulatedKernel&) = delete;
  EmulatedKernel& operator=(const EmulatedKernel&) = delete;

  void add_node(const std::string& path, std::shared_ptr<EmulatedNode> node);
  void add_file(const std::string& path, std::string content);
  // A file whose content is produced when read (debugfs-style state of an emulated driver).
  void add_generated_file(const std::string& path, std::function<std::string()> content);

  int open(const std::string& path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override;
  int munmap(void* addr, size_t length) override;
  std::optional<std::string> read_file(const std::string& path) override;
  std::vector<std::string> list_dir(const std::string& path) override;
  bool emulated() const override { return true; }

 private:
  std::shared_ptr<EmulatedNode> node_of(int fd);

  // Emulated fds start far above real ones so a mix-up fails loudly (EBADF) instead of
  // touching a real file.
  static constexpr int kFirstFd = 1 << 20;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<EmulatedNode>> nodes_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::function<std::string()>> generated_;
  std::map<int, std::shared_ptr<EmulatedNode>> fds_;
  std::map<uintptr_t, std::pair<size_t, std::shared_ptr<EmulatedNode>>> node_maps_;
  int next_fd_ = kFirstFd;
};

}  // namespace hcq::os
