#include "os/emulated_kernel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "os/kernel.hpp"

namespace hcq::os {

void* EmulatedNode::mmap(void*, size_t, int, int, int, off_t) {
  errno = ENODEV;
  return MAP_FAILED;
}

int EmulatedNode::munmap(void*, size_t) { return 0; }

ssize_t EmulatedNode::pread(int, void*, size_t, off_t) { return -EINVAL; }
ssize_t EmulatedNode::pwrite(int, const void*, size_t, off_t) { return -EINVAL; }
ssize_t EmulatedNode::read(int, void*, size_t) { return -EINVAL; }
int EmulatedNode::passable_fd(int) { return -EOPNOTSUPP; }
int EmulatedNode::poll(int, short) { return 0; }
void EmulatedNode::wait(int, short, std::chrono::microseconds at_most) {
  std::this_thread::sleep_for(at_most);
}

// eventfd(2): a read takes the whole counter as 8 bytes; a smaller buffer is EINVAL.
ssize_t EmulatedEventfd::read(int, void* buf, size_t size) {
  if (size < 8) return -EINVAL;
  std::lock_guard lk(mu_);
  if (count_ == 0) return -EAGAIN;
  std::memcpy(buf, &count_, 8);
  count_ = 0;
  return 8;
}

int EmulatedEventfd::poll(int, short events) {
  std::lock_guard lk(mu_);
  return count_ > 0 ? events & POLLIN : 0;
}

void EmulatedEventfd::wait(int, short events, std::chrono::microseconds at_most) {
  std::function<void()> on_wait;
  {
    std::lock_guard lk(mu_);
    if (count_ > 0 || !(events & POLLIN)) return;
    on_wait = on_wait_;
  }
  if (on_wait) on_wait();  // outside the lock: the device may signal at once
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, at_most, [&] { return count_ > 0; });
}

void EmulatedEventfd::signal(uint64_t n) {
  {
    std::lock_guard lk(mu_);
    count_ += n;
  }
  cv_.notify_all();
}

void EmulatedEventfd::set_on_wait(std::function<void()> on_wait) {
  std::lock_guard lk(mu_);
  on_wait_ = std::move(on_wait);
}

void EmulatedKernel::add_node(const std::string& path, std::shared_ptr<EmulatedNode> node) {
  std::lock_guard lk(mu_);
  nodes_[path] = std::move(node);
}

void EmulatedKernel::add_file(const std::string& path, std::string content) {
  std::lock_guard lk(mu_);
  files_[path] = std::move(content);
}

int EmulatedKernel::open(const std::string& path, int) {
  std::shared_ptr<EmulatedNode> node;
  {
    std::lock_guard lk(mu_);
    if (auto d = denied_.find(path); d != denied_.end()) return -d->second;
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return -ENOENT;
    node = it->second;
  }
  return open_node(std::move(node));
}

int EmulatedKernel::open_node(std::shared_ptr<EmulatedNode> node) {
  int fd;
  {
    std::lock_guard lk(mu_);
    fd = next_fd_++;
    fds_[fd] = node;
  }
  node->on_open(fd);
  return fd;
}

std::shared_ptr<EmulatedNode> EmulatedKernel::node_of(int fd) {
  std::lock_guard lk(mu_);
  auto it = fds_.find(fd);
  return it == fds_.end() ? nullptr : it->second;
}

int EmulatedKernel::close(int fd) {
  // A real file's fd (an emulated dma-buf heap's memfd, one another process passed) closes
  // as the OS closes it, as it maps.
  if (fd >= 0 && fd < kFirstFd) return ::close(fd) < 0 ? -errno : 0;
  std::shared_ptr<EmulatedNode> node;
  {
    std::lock_guard lk(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return -EBADF;
    node = it->second;
    fds_.erase(it);
  }
  node->on_close(fd);
  return 0;
}

int EmulatedKernel::ioctl(int fd, unsigned long request, void* arg) {
  auto node = node_of(fd);
  if (!node) return -EBADF;
  return node->ioctl(fd, request, arg);
}

ssize_t EmulatedKernel::read(int fd, void* buf, size_t size) {
  auto node = node_of(fd);
  return node ? node->read(fd, buf, size) : -EBADF;
}

int EmulatedKernel::passable_fd(int fd) {
  if (fd >= 0 && fd < kFirstFd) {  // a real file's fd: a dup, as on the real OS
    int r = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return r < 0 ? -errno : r;
  }
  auto node = node_of(fd);
  return node ? node->passable_fd(fd) : -EBADF;
}

int EmulatedKernel::eventfd(unsigned initval, int flags) {
  if (!(flags & EFD_NONBLOCK)) return -EINVAL;
  return open_node(std::make_shared<EmulatedEventfd>(initval));
}


ssize_t EmulatedKernel::pread(int fd, void* buf, size_t size, off_t offset) {
  auto node = node_of(fd);
  return node ? node->pread(fd, buf, size, offset) : -EBADF;
}

ssize_t EmulatedKernel::pwrite(int fd, const void* buf, size_t size, off_t offset) {
  auto node = node_of(fd);
  return node ? node->pwrite(fd, buf, size, offset) : -EBADF;
}

int EmulatedKernel::poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  auto step = std::chrono::microseconds(50);
  for (;;) {
    int ready = 0;
    for (nfds_t i = 0; i < nfds; i++) {
      fds[i].revents = 0;
      if (fds[i].fd < 0) continue;  // poll(2) ignores negative fds
      auto node = node_of(fds[i].fd);
      fds[i].revents = node ? short(node->poll(fds[i].fd, fds[i].events) &
                                    (fds[i].events | POLLHUP | POLLERR))
                            : short(POLLNVAL);
      ready += fds[i].revents != 0;
    }
    if (ready || timeout_ms == 0 || (timeout_ms > 0 && clock::now() >= deadline)) return ready;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock::now());
    const auto nap = timeout_ms < 0 ? step : std::min(step, std::max(left, std::chrono::microseconds(1)));
    // One fd: its node may wake the poller early (an eventfd its device signals).
    auto node = nfds == 1 && fds[0].fd >= 0 ? node_of(fds[0].fd) : nullptr;
    if (node)
      node->wait(fds[0].fd, fds[0].events, nap);
    else
      std::this_thread::sleep_for(nap);
    step = std::min(step * 2, std::chrono::microseconds(500));
  }
}

void* EmulatedKernel::mmap(void* addr, size_t length, int prot, int flags, int fd,
                           off_t offset) {
  // A real file's fd (a memfd or dma-buf another process passed over a socket: emulated
  // kernels export memory as real memfds) maps as the OS maps it.
  if (fd < 0 || (flags & MAP_ANONYMOUS) || fd < kFirstFd) {
    const bool anon = fd < 0 || (flags & MAP_ANONYMOUS);
    void* p = ::mmap(addr, length, prot, flags, anon ? -1 : fd, anon ? 0 : offset);
    // MAP_FIXED replaced whatever was there, node mappings included (mmap(2)).
    if (p != MAP_FAILED && (flags & MAP_FIXED)) take_node_maps(uintptr_t(p), length);
    return p;
  }
  auto node = node_of(fd);
  if (!node) {
    errno = EBADF;
    return MAP_FAILED;
  }
  void* p = node->mmap(addr, length, prot, flags, fd, offset);
  if (p != MAP_FAILED) {
    take_node_maps(reinterpret_cast<uintptr_t>(p), length);  // replaced, as by MAP_FIXED
    std::lock_guard lk(mu_);
    node_maps_[reinterpret_cast<uintptr_t>(p)] = {length, node};
  }
  return p;
}

std::vector<EmulatedKernel::NodeMap> EmulatedKernel::take_node_maps(uintptr_t start,
                                                                    size_t length) {
  std::vector<NodeMap> out;
  std::lock_guard lk(mu_);
  auto it = node_maps_.lower_bound(start);
  if (it != node_maps_.begin() && std::prev(it)->first + std::prev(it)->second.first > start)
    --it;
  while (it != node_maps_.end() && it->first < start + length) {
    out.push_back({it->first, it->second.first, it->second.second});
    it = node_maps_.erase(it);
  }
  return out;
}

int EmulatedKernel::munmap(void* addr, size_t length) {
  const auto start = reinterpret_cast<uintptr_t>(addr);
  auto gone = take_node_maps(start, length);
  // Exactly one node mapping: its node decides what unmapping it means.
  if (gone.size() == 1 && gone[0].start == start && gone[0].length == length)
    return gone[0].node->munmap(addr, length);
  // A wider range (a driver's address-space reservation with node mappings left inside it):
  // the nodes hear of theirs, and the whole range goes, as munmap(2) unmaps everything in it.
  for (auto& m : gone) m.node->munmap(reinterpret_cast<void*>(m.start), m.length);
  return ::munmap(addr, length) < 0 ? -errno : 0;
}

void EmulatedKernel::add_generated_file(const std::string& path,
                                        std::function<std::string()> content) {
  std::lock_guard lk(mu_);
  generated_[path] = std::move(content);
}

void EmulatedKernel::set_emulator_report(EmulatorReport what, std::function<std::string()> report) {
  std::lock_guard lk(mu_);
  reports_[what] = std::move(report);
}

std::optional<std::string> EmulatedKernel::emulator_report(EmulatorReport what) {
  std::function<std::string()> report;
  {
    std::lock_guard lk(mu_);
    auto it = reports_.find(what);
    if (it == reports_.end()) return std::nullopt;
    report = it->second;
  }
  return report();  // outside the lock: the report may take its GPU's locks
}

std::optional<std::string> EmulatedKernel::read_file(const std::string& path) {
  std::function<std::string()> gen;
  {
    std::lock_guard lk(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) return it->second;
    auto g = generated_.find(path);
    if (g == generated_.end()) {
      std::string real = mounted(path);
      return real.empty() ? std::nullopt : real_kernel()->read_file(real);
    }
    gen = g->second;
  }
  return gen();  // outside the lock: the producer may take its own locks
}

void EmulatedKernel::on_write(const std::string& path,
                              std::function<int(const std::string&)> handler) {
  std::lock_guard lk(mu_);
  writers_[path] = std::move(handler);
}

void EmulatedKernel::remove(const std::string& path) {
  std::lock_guard lk(mu_);
  auto under = [&](const std::string& p) {
    return p == path || (p.size() > path.size() && p.compare(0, path.size(), path) == 0 &&
                         p[path.size()] == '/');
  };
  auto drop = [&](auto& map) {
    for (auto it = map.begin(); it != map.end();) it = under(it->first) ? map.erase(it) : std::next(it);
  };
  drop(nodes_);
  drop(files_);
  drop(generated_);
  drop(writers_);
}

void EmulatedKernel::deny(const std::string& path, int err) {
  std::lock_guard lk(mu_);
  denied_[path] = err;
}

void EmulatedKernel::mount_sysfs(const std::string& dir) {
  std::lock_guard lk(mu_);
  sysfs_dir_ = dir;
}

std::string EmulatedKernel::sysfs_root() const {
  std::lock_guard lk(mu_);
  return sysfs_dir_;
}

std::string EmulatedKernel::mounted(const std::string& path) const {
  if (sysfs_dir_.empty() || (path != "/sys" && path.rfind("/sys/", 0) != 0)) return {};
  return sysfs_dir_ + path.substr(4);
}

int EmulatedKernel::write_file(const std::string& path, const std::string& data) {
  std::function<int(const std::string&)> handler;
  {
    std::lock_guard lk(mu_);
    if (auto d = denied_.find(path); d != denied_.end()) return -d->second;
    auto it = writers_.find(path);
    if (it != writers_.end()) handler = it->second;
  }
  if (handler) return handler(data);  // outside the lock: the handler may change the tree
  return read_file(path) ? -EACCES : -ENOENT;  // a read-only attribute, or none
}

std::vector<std::string> EmulatedKernel::list_dir(const std::string& path) {
  std::lock_guard lk(mu_);
  std::string prefix = path;
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  std::vector<std::string> names;
  auto add = [&](const std::string& full) {
    if (full.compare(0, prefix.size(), prefix) != 0) return;
    std::string rest = full.substr(prefix.size());
    std::string name = rest.substr(0, rest.find('/'));
    if (!name.empty() && (names.empty() || names.back() != name)) names.push_back(name);
  };
  for (auto& [p, _] : files_) add(p);
  for (auto& [p, _] : nodes_) add(p);
  for (auto& [p, _] : generated_) add(p);
  if (std::string real = mounted(path); !real.empty())
    for (auto& n : real_kernel()->list_dir(real)) names.push_back(n);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

int make_sealed_buffer_fd(const char* name, uint64_t size, bool cloexec) {
  const int fd = ::memfd_create(name, MFD_ALLOW_SEALING | (cloexec ? MFD_CLOEXEC : 0));
  if (fd < 0) return -errno;
  if (::ftruncate(fd, off_t(size)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  return fd;
}

int64_t sealed_buffer_fd_size(int fd, uint64_t align) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) < 0) return -EBADF;
  constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW;
  const int seals = ::fcntl(fd, F_GET_SEALS);  // EINVAL for a file that is no memfd
  if (!S_ISREG(st.st_mode) || seals < 0 || (seals & kSeals) != kSeals || st.st_size <= 0 ||
      uint64_t(st.st_size) % align)
    return -EINVAL;
  return st.st_size;
}

}  // namespace hcq::os
