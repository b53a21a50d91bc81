// The emulated side of the kernel boundary: device nodes are served by emulated kernel
// drivers (EmulatedNode), sysfs by an in-memory tree and, where one is mounted, a real
// directory standing for /sys (libpci reads its files itself). Anonymous mmaps and munmaps
// of ranges no node mapped go to the real OS, so drivers can reserve address space as usual.
// So do mmaps, closes and passable_fd of a real file's fd (a memfd or dma-buf passed from
// another process, or an emulated dma-buf heap's buffer).
#pragma once

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
  // Same contract as Kernel::pread/pwrite; by default the node takes no reads or writes.
  virtual ssize_t pread(int fd, void* buf, size_t size, off_t offset);
  virtual ssize_t pwrite(int fd, const void* buf, size_t size, off_t offset);
  // Same contract as Kernel::read; by default -EINVAL.
  virtual ssize_t read(int fd, void* buf, size_t size);
  // Kernel::passable_fd for an fd of this node: a real fd standing for what it holds (an
  // emulated RM export fd: the memory's memfd); by default -EOPNOTSUPP.
  virtual int passable_fd(int fd);
  // The poll(2) events ready on `fd` now, out of `events` plus POLLHUP/POLLERR, which are
  // always reported; it never waits (EmulatedKernel::poll waits). By default nothing is
  // ever ready.
  virtual int poll(int fd, short events);
  // Sleeps until `fd` may have some of `events`, at most `at_most` (EmulatedKernel::poll calls
  // it between looks). By default it just sleeps: most nodes have no wait queue.
  virtual void wait(int fd, short events, std::chrono::microseconds at_most);
};

// An eventfd (eventfd(2)) of the emulated kernel: a 64-bit counter that signal() adds to and a
// read returns and zeroes (-EAGAIN while it is 0). Only non-blocking eventfds exist here (a
// blocking read would wait without a timeout). What waits for it polls; on_wait, when set, is
// called as a poll starts to sleep: an emulated device that signals through this eventfd
// takes it as its cue to look at its doorbells (the emulated KFD kicks its engine from
// AMDKFD_IOC_WAIT_EVENTS the same way).
// Threads: every member may be called from several threads at once.
class EmulatedEventfd final : public EmulatedNode {
 public:
  explicit EmulatedEventfd(uint64_t initial) : count_(initial) {}
  int ioctl(int, unsigned long, void*) override { return -ENOTTY; }
  ssize_t read(int fd, void* buf, size_t size) override;
  int poll(int fd, short events) override;
  void wait(int fd, short events, std::chrono::microseconds at_most) override;
  void signal(uint64_t n = 1);
  void set_on_wait(std::function<void()> on_wait);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_;
  std::function<void()> on_wait_;
};

class EmulatedKernel final : public Kernel {
 public:
  EmulatedKernel() = default;
  EmulatedKernel(const EmulatedKernel&) = delete;
  EmulatedKernel& operator=(const EmulatedKernel&) = delete;

  void add_node(const std::string& path, std::shared_ptr<EmulatedNode> node);
  void add_file(const std::string& path, std::string content);
  // A file whose content is produced when read (sysfs state of an emulated device).
  void add_generated_file(const std::string& path, std::function<std::string()> content);
  // What emulator_report(what) answers from now on: `report`'s text when asked.
  void set_emulator_report(EmulatorReport what, std::function<std::string()> report);
  // A sysfs attribute that takes writes: the handler returns 0 or -errno. Writes to other
  // files fail with EACCES, as read-only attributes do, and to missing ones with ENOENT.
  void on_write(const std::string& path, std::function<int(const std::string&)> handler);
  // Removes the nodes, files, generated files and write handlers at `path` and under
  // `path`/ (a device that went away: its /dev node and sysfs directory disappear). Open
  // fds keep their node.
  void remove(const std::string& path);
  // open and write_file of `path` fail with -err (a permission the caller lacks).
  void deny(const std::string& path, int err);
  // Serves /sys paths the in-memory tree lacks from the real directory `dir`.
  void mount_sysfs(const std::string& dir);
  // A new fd for a node that has no path (VFIO device fds, DRM-style handles).
  int open_node(std::shared_ptr<EmulatedNode> node);
  // The node behind an fd this kernel handed out; null for any other fd.
  std::shared_ptr<EmulatedNode> node_of(int fd);

  int open(const std::string& path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override;
  int munmap(void* addr, size_t length) override;
  ssize_t pread(int fd, void* buf, size_t size, off_t offset) override;
  ssize_t pwrite(int fd, const void* buf, size_t size, off_t offset) override;
  ssize_t read(int fd, void* buf, size_t size) override;
  int passable_fd(int fd) override;
  // An EmulatedEventfd; flags must include EFD_NONBLOCK (-EINVAL otherwise).
  int eventfd(unsigned initval, int flags) override;
  // Asks each fd's node for its ready events until one has some or timeout_ms passes
  // (checked every few hundred microseconds: a node with a
  // wait queue, as an eventfd, wakes a poller of that one fd early).
  // An fd no node stands for reports POLLNVAL, as poll(2) does.
  int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) override;
  std::optional<std::string> read_file(const std::string& path) override;
  std::optional<std::string> emulator_report(EmulatorReport what) override;
  std::vector<std::string> list_dir(const std::string& path) override;
  int write_file(const std::string& path, const std::string& data) override;
  // The mounted directory; empty when there is none (no PCI bus to enumerate).
  std::string sysfs_root() const override;
  bool emulated() const override { return true; }

 private:
  struct NodeMap {
    uintptr_t start;
    size_t length;
    std::shared_ptr<EmulatedNode> node;
  };
  // Forgets the node mappings overlapping [start, start + length) and returns them.
  std::vector<NodeMap> take_node_maps(uintptr_t start, size_t length);
  // The real path a /sys path stands for under the mounted directory; empty when none.
  std::string mounted(const std::string& path) const;

  // Emulated fds start far above real ones so a mix-up fails loudly (EBADF) instead of
  // touching a real file.
  static constexpr int kFirstFd = 1 << 20;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<EmulatedNode>> nodes_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::function<std::string()>> generated_;
  std::map<EmulatorReport, std::function<std::string()>> reports_;
  std::map<std::string, std::function<int(const std::string&)>> writers_;
  std::map<std::string, int> denied_;
  std::string sysfs_dir_;
  std::map<int, std::shared_ptr<EmulatedNode>> fds_;
  std::map<uintptr_t, std::pair<size_t, std::shared_ptr<EmulatedNode>>> node_maps_;
  int next_fd_ = kFirstFd;
};

// Buffers the emulated kernels export (a dma-buf, an RM object's fd): a memfd of `size` bytes
// sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW), so an exporter can never
// cut the pages under an importer's mapping (a SIGBUS there). Returns the fd, or -errno.
int make_sealed_buffer_fd(const char* name, uint64_t size, bool cloexec = true);
// The size of such an fd as an emulated kernel's import takes it, or -EBADF for no open file
// and -EINVAL for anything else: a regular file on disk, a memfd without both seals, an empty
// one, a size that is not a multiple of `align` (as dma_buf_get refuses a file that is no
// dma-buf, and RM an fd no object was exported to).
int64_t sealed_buffer_fd_size(int fd, uint64_t align);

}  // namespace hcq::os
