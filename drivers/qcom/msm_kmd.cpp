// The Adreno driver's msm DRM side (mainline Linux): GEM buffers placed at GPU addresses the
// process chooses (MSM_INFO_SET_IOVA in its per-process address space) and mapped for the CPU
// at the same address, one submit queue, GEM_SUBMIT of IB lists, fences per queue, and the
// queue's fault count to tell a fault from a retired fence (msm recovers from a fault by
// retiring the faulting submission).
#include <fcntl.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "qcom/kmd.hpp"
#include "qcom/msm_abi.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {
namespace {

using namespace msm;

// The DRM driver name of an open node ("msm", "amdgpu", ...); empty when it does not say.
std::string drm_driver_name(os::Kernel& kernel, int fd) {
  char name[64] = {};
  drm_version_t v{};
  v.name = name;
  v.name_len = sizeof(name) - 1;
  if (kernel.ioctl(fd, DRM_IOCTL_VERSION, &v) < 0) return "";
  return std::string(name, std::min<size_t>(v.name_len, sizeof(name) - 1));
}

int get_param(os::Kernel& kernel, int fd, uint32_t param, uint64_t& value) {
  Param p{};
  p.pipe = MSM_PIPE_3D0;
  p.param = param;
  int r = kernel.ioctl(fd, IOCTL_MSM_GET_PARAM, &p);
  value = p.value;
  return r;
}

class MsmKmd final : public Kmd {
 public:
  MsmKmd(std::shared_ptr<os::Kernel> kernel, const std::string& path, const std::string& device)
      : kernel_(std::move(kernel)), who_(device + ": ") {
    fd_ = kernel_->open(path, O_RDWR | O_CLOEXEC);
    if (fd_ < 0) throw OsError(who_ + "open " + path, -fd_);
    try {
      if (std::string n = drm_driver_name(*kernel_, fd_); n != kDriverName)
        throw InvalidInput(who_ + path + " is a '" + n + "' DRM node, not msm");
      uint64_t chip = 0;
      if (int r = get_param(*kernel_, fd_, MSM_PARAM_CHIP_ID, chip); r < 0)
        throw OsError(who_ + "DRM_IOCTL_MSM_GET_PARAM (MSM_PARAM_CHIP_ID)", -r);
      chip_id_ = uint32_t(chip);  // the upper bits may carry a speed bin
      // The range this process may place buffers in (Linux 6.1+, per-process address spaces).
      if (int r = get_param(*kernel_, fd_, MSM_PARAM_VA_START, va_start_); r < 0)
        throw OsError(who_ + "DRM_IOCTL_MSM_GET_PARAM (MSM_PARAM_VA_START): hcq needs a kernel with "
                      "per-process GPU address spaces (Linux 6.1 or newer)",
                      -r);
      if (int r = get_param(*kernel_, fd_, MSM_PARAM_VA_SIZE, va_size_); r < 0)
        throw OsError(who_ + "DRM_IOCTL_MSM_GET_PARAM (MSM_PARAM_VA_SIZE)", -r);
      Submitqueue q{};
      if (int r = ioctl(IOCTL_MSM_SUBMITQUEUE_NEW, &q); r < 0)
        throw OsError(who_ + "DRM_IOCTL_MSM_SUBMITQUEUE_NEW", -r);
      queue_ = q.id;
    } catch (...) {
      kernel_->close(fd_);
      throw;
    }
  }
  ~MsmKmd() override {
    ioctl(IOCTL_MSM_SUBMITQUEUE_CLOSE, &queue_);
    kernel_->close(fd_);
  }

  std::string name() const override { return "msm DRM"; }
  std::string context() const override { return "msm submit queue " + std::to_string(queue_); }
  const char* fence_word() const override { return "fence"; }
  uint32_t chip_id() const override { return chip_id_; }
  std::pair<uint64_t, uint64_t> va_window() const override { return {va_start_, va_size_}; }

  uint64_t allocate(uint64_t va, uint64_t size, MemoryKind kind) override {
    // Device memory write-combined; host memory cached where the GPU snoops the CPU's caches
    // (CACHED_COHERENT), else write-combined too: either way host copies need no cache
    // maintenance. drm/msm refuses flags it cannot give with EINVAL: without NO_SHARE (before
    // Linux 6.5) or coherence (a GPU that does not snoop), in that order of preference; what
    // works is kept for good.
    GemNew g{};
    g.size = size;
    const bool want_cached = kind == MemoryKind::Host && host_cached_;
    const bool want_private = no_share_;
    int r = -EINVAL;
    for (auto [cached, priv] : {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
      if ((cached && !want_cached) || (priv && !want_private)) continue;
      g.flags = (cached ? MSM_BO_CACHED_COHERENT : MSM_BO_WC) | (priv ? MSM_BO_NO_SHARE : 0);
      r = ioctl(IOCTL_MSM_GEM_NEW, &g);
      if (r == -EINVAL) continue;
      if (r == 0 && want_cached && !cached) host_cached_ = false;
      if (r == 0 && want_private && !priv) no_share_ = false;
      break;
    }
    if (r < 0)
      throw OsError(who_ + "DRM_IOCTL_MSM_GEM_NEW (" + std::to_string(size) + " bytes of " +
                        to_string(kind) + " memory)",
                    -r);
    auto fail = [&](const std::string& what, int err) {
      free(g.handle);
      throw OsError(who_ + what, err);
    };
    GemInfo set{g.handle, MSM_INFO_SET_IOVA, va, 0, 0};
    if (int e = ioctl(IOCTL_MSM_GEM_INFO, &set); e < 0)
      fail("DRM_IOCTL_MSM_GEM_INFO (MSM_INFO_SET_IOVA " + hex(va) + ")", -e);
    GemInfo off{g.handle, MSM_INFO_GET_OFFSET, 0, 0, 0};
    if (int e = ioctl(IOCTL_MSM_GEM_INFO, &off); e < 0)
      fail("DRM_IOCTL_MSM_GEM_INFO (MSM_INFO_GET_OFFSET)", -e);
    void* p = kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_FIXED, fd_, off_t(off.value));
    if (p == MAP_FAILED) fail("mmap of GEM buffer " + std::to_string(g.handle) + " at " + hex(va), errno);
    std::lock_guard lk(mu_);
    objects_[va] = {g.handle, size};
    handle_va_[g.handle] = va;
    return g.handle;
  }
  bool host_memory_cached() const override { return host_cached_; }
  void free(uint64_t handle) override {
    {
      std::lock_guard lk(mu_);
      auto it = handle_va_.find(uint32_t(handle));
      if (it != handle_va_.end()) {
        objects_.erase(it->second);
        handle_va_.erase(it);
      }
    }
    drm_gem_close c{uint32_t(handle), 0};
    ioctl(DRM_IOCTL_GEM_CLOSE, &c);
  }
  bool maps_user_memory() const override { return false; }
  uint64_t map_user(void*, uint64_t) override {
    throw InvalidInput(who_ + "msm DRM cannot map the process's own memory for the GPU (no userptr "
                       "buffers); allocate host memory from the device instead");
  }
  void free_user(uint64_t, uint64_t) override {}

  int submit(std::span<const IbRef> ibs, uint32_t& fence) override {
    // Each IB names its buffer in the bo table; other buffers need not be listed: they are
    // private (NO_SHARE) or pinned at their iova since SET_IOVA.
    std::vector<SubmitBo> bos;
    std::vector<SubmitCmd> cmds;
    {
      std::lock_guard lk(mu_);
      for (const IbRef& ib : ibs) {
        auto it = objects_.upper_bound(ib.va);
        if (it == objects_.begin()) return -EFAULT;
        --it;
        const uint64_t base = it->first;
        if (ib.va + ib.bytes > base + it->second.size) return -EFAULT;
        uint32_t idx = 0;
        while (idx < bos.size() && bos[idx].handle != it->second.handle) idx++;
        if (idx == bos.size()) bos.push_back({MSM_SUBMIT_BO_READ, it->second.handle, base});
        cmds.push_back({MSM_SUBMIT_CMD_BUF, idx, uint32_t(ib.va - base), uint32_t(ib.bytes), 0, 0, 0});
      }
    }
    GemSubmit s{};
    s.flags = MSM_PIPE_3D0 | MSM_SUBMIT_NO_IMPLICIT;
    s.nr_bos = uint32_t(bos.size());
    s.nr_cmds = uint32_t(cmds.size());
    s.bos = reinterpret_cast<uint64_t>(bos.data());
    s.cmds = reinterpret_cast<uint64_t>(cmds.data());
    s.fence_fd = -1;
    s.queueid = queue_;
    if (int r = ioctl(IOCTL_MSM_GEM_SUBMIT, &s); r < 0) return r == -EPIPE ? -EDEADLK : r;
    fence = s.fence;
    return 0;
  }

  int wait(uint32_t fence, std::chrono::milliseconds timeout) override {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t ns = int64_t(now.tv_nsec) + std::max<int64_t>(timeout.count(), 0) * 1'000'000;
    WaitFence w{};
    w.fence = fence;
    w.timeout = {now.tv_sec + ns / 1'000'000'000, ns % 1'000'000'000};
    w.queueid = queue_;
    int r = ioctl(IOCTL_MSM_WAIT_FENCE, &w);
    if (r < 0 && r != -ETIMEDOUT) return r;
    // A faulting submission retires too (the kernel recovers past it): the queue's fault
    // count tells.
    uint32_t faults = 0;
    SubmitqueueQuery q{reinterpret_cast<uint64_t>(&faults), queue_, MSM_SUBMITQUEUE_PARAM_FAULTS,
                       sizeof(faults), 0};
    if (int e = ioctl(IOCTL_MSM_SUBMITQUEUE_QUERY, &q); e < 0) return e;
    return faults ? -EDEADLK : r;
  }

 private:
  struct Object {
    uint32_t handle;
    uint64_t size;
  };
  int ioctl(unsigned long req, void* arg) { return kernel_->ioctl(fd_, req, arg); }
  std::shared_ptr<os::Kernel> kernel_;
  std::string who_;  // "qcom:0: ": errors name the device
  int fd_ = -1;
  uint32_t chip_id_ = 0, queue_ = 0;
  std::atomic<bool> no_share_{true};  // MSM_BO_NO_SHARE
  std::atomic<bool> host_cached_{true};
  uint64_t va_start_ = 0, va_size_ = 0;
  std::mutex mu_;
  std::map<uint64_t, Object> objects_;  // by GPU address: to find an IB's buffer
  std::map<uint32_t, uint64_t> handle_va_;
};

}  // namespace

std::vector<KmdNode> msm_nodes(os::Kernel& kernel) {
  std::vector<KmdNode> out;
  for (const std::string& n : kernel.list_dir("/dev/dri")) {
    if (n.rfind("renderD", 0) != 0) continue;
    const std::string path = "/dev/dri/" + n;
    int fd = kernel.open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    uint64_t chip = 0;
    if (drm_driver_name(kernel, fd) == kDriverName && get_param(kernel, fd, MSM_PARAM_CHIP_ID, chip) == 0)
      out.push_back({path, "Adreno " + chip_name(uint32_t(chip)) + " (msm DRM, " + path + ")"});
    kernel.close(fd);
  }
  return out;
}

std::unique_ptr<Kmd> open_msm(std::shared_ptr<os::Kernel> kernel, const std::string& path,
                              const std::string& device) {
  return std::make_unique<MsmKmd>(std::move(kernel), path, device);
}

}  // namespace hcq::qcom
