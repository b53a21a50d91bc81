// The emulated msm DRM driver. It checks what the real one checks where hcq's driver could get
// it wrong (handles, flags, iova ranges and overlaps, bo tables, command buffer bounds, queue
// ids) and answers with its errnos. Like drm/msm it recovers from a GPU fault: the faulting
// submission and those after it retire and the queue's fault count goes up.
//
// Emulator limit: the emulated GPU reaches a buffer once the process maps it at its iova (the
// GPU sees host memory at the same address), which is how hcq's driver maps every buffer; a
// mapping elsewhere is refused.
#include "qcom/emu/msm.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "os/emulated_kernel.hpp"
#include "qcom/emu/engine.hpp"
#include "qcom/kgsl_abi.hpp"
#include "qcom/msm_abi.hpp"

namespace hcq::qcom::emu {
namespace {

using namespace msm;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kOffsetShift = 24;  // fake mmap offsets: handle << 24 (buffers under 16 MiB
                                       // apart would not matter: offsets only name handles)

class MsmState final : public GpuEvents {
 public:
  MsmState(const Target& t, bool io_coherent)
      : t_(t), io_coherent_(io_coherent), engine_(t.gen, memory_, *this) {}

  int ioctl(unsigned long req, void* arg);
  void* mmap(void* addr, size_t len, int flags, off_t off);
  std::string ib_positions() { return engine_.ib_positions(); }
  std::string fault_log() {
    std::lock_guard lk(mu_);
    return fault_log_;
  }

  // GpuEvents (from the engine's thread); contexts are submit queue ids.
  void retired(uint32_t queue, uint32_t fence) override {
    std::lock_guard lk(mu_);
    auto it = queues_.find(queue);
    if (it != queues_.end()) it->second.retired = fence;
    cv_.notify_all();
  }
  void fault(uint32_t queue, const std::string& what) override {
    std::lock_guard lk(mu_);
    auto it = queues_.find(queue);
    if (it != queues_.end()) {
      it->second.faults++;
      it->second.retired = it->second.queued;  // recovery retires what was in flight
    }
    fault_log_ += what + "\n";
    cv_.notify_all();
  }

 private:
  struct Bo {
    uint64_t size = 0;
    uint32_t flags = 0;
    uint64_t iova = 0;     // 0 until SET_IOVA
    bool mapped = false;   // backed where the process mapped it
  };
  struct Queue {
    uint32_t queued = 0, retired = 0, faults = 0;
  };
  static bool reached(uint32_t retired, uint32_t fence) { return int32_t(retired - fence) >= 0; }
  bool overlaps(uint64_t iova, uint64_t size) const {
    for (auto& [_, b] : bos_)
      if (b.iova && iova < b.iova + b.size && b.iova < iova + size) return true;
    return false;
  }
  int submit(GemSubmit& s);
  int wait(const WaitFence& w);

  const Target t_;
  const bool io_coherent_;
  hcq::emu::Memory memory_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Bo> bos_;
  std::map<uint32_t, Queue> queues_;
  uint32_t next_handle_ = 1, next_queue_ = 1;
  uint64_t used_ = 0;  // bytes of GEM objects not yet closed
  std::string fault_log_;
  Engine engine_;  // last: its thread stops before the state it reports to goes
};

int MsmState::ioctl(unsigned long req, void* arg) {
  switch (req) {
    case DRM_IOCTL_VERSION: {
      auto* v = static_cast<drm_version_t*>(arg);
      const size_t n = std::strlen(kDriverName);
      if (v->name && v->name_len) std::memcpy(v->name, kDriverName, std::min(n, v->name_len));
      v->name_len = n;
      v->version_major = 1;
      v->version_minor = 12;
      return 0;
    }
    case IOCTL_MSM_GET_PARAM: {
      auto* p = static_cast<Param*>(arg);
      if (p->pipe != MSM_PIPE_3D0 || p->len || p->pad) return -EINVAL;
      switch (p->param) {
        case MSM_PARAM_GPU_ID:  // "a660" -> 660; a7xx parts report 0 (chip ids only)
          p->value = t_.gen == Gen::A6xx ? std::stoul(t_.name.substr(1)) : 0;
          return 0;
        case MSM_PARAM_CHIP_ID: p->value = t_.chip_id; return 0;
        case MSM_PARAM_GMEM_SIZE: p->value = t_.gmem_bytes; return 0;
        case MSM_PARAM_VA_START: p->value = kMsmVaStart; return 0;
        case MSM_PARAM_VA_SIZE: p->value = kMsmVaSize; return 0;
        case MSM_PARAM_FAULTS: {
          std::lock_guard lk(mu_);
          p->value = 0;
          for (auto& [_, q] : queues_) p->value += q.faults;
          return 0;
        }
      }
      return -EINVAL;
    }
    case IOCTL_MSM_GEM_NEW: {
      auto* g = static_cast<GemNew*>(arg);
      const uint32_t known = MSM_BO_NO_SHARE | MSM_BO_CACHED | MSM_BO_WC | MSM_BO_CACHED_COHERENT;
      if (!g->size || (g->flags & ~known)) return -EINVAL;
      if ((g->flags & MSM_BO_CACHED_COHERENT) && !io_coherent_) return -EINVAL;
      std::lock_guard lk(mu_);
      const uint64_t size = (g->size + kPage - 1) / kPage * kPage;
      // No more than the SoC's memory the target has. msm takes a buffer's pages when it is
      // first pinned and fails there with -ENOMEM (msm_gem.c, get_pages); the emulator says
      // so at GEM_NEW, where the caller can still name the request.
      if (size > t_.memory_bytes - used_) return -ENOMEM;
      used_ += size;
      g->handle = next_handle_++;
      bos_[g->handle] = {size, g->flags, 0, false};
      return 0;
    }
    case IOCTL_MSM_GEM_INFO: {
      auto* i = static_cast<GemInfo*>(arg);
      std::lock_guard lk(mu_);
      auto it = bos_.find(i->handle);
      if (it == bos_.end()) return -ENOENT;
      Bo& b = it->second;
      switch (i->info) {
        case MSM_INFO_GET_OFFSET: i->value = uint64_t(i->handle) << kOffsetShift; return 0;
        case MSM_INFO_GET_IOVA:
          if (!b.iova) return -EINVAL;  // the emulator leaves placement to the process
          i->value = b.iova;
          return 0;
        case MSM_INFO_SET_IOVA: {
          const uint64_t v = i->value;
          if (b.iova || v % kPage || v < kMsmVaStart || v + b.size > kMsmVaStart + kMsmVaSize)
            return -EINVAL;
          if (overlaps(v, b.size)) return -EBUSY;
          b.iova = v;
          return 0;
        }
      }
      return -EINVAL;
    }
    case DRM_IOCTL_GEM_CLOSE: {
      auto* c = static_cast<drm_gem_close*>(arg);
      std::lock_guard lk(mu_);
      auto it = bos_.find(c->handle);
      if (it == bos_.end()) return -EINVAL;
      if (it->second.mapped) memory_.unmap(it->second.iova);
      used_ -= it->second.size;
      bos_.erase(it);
      return 0;
    }
    case IOCTL_MSM_SUBMITQUEUE_NEW: {
      auto* q = static_cast<Submitqueue*>(arg);
      if (q->flags) return -EINVAL;
      std::lock_guard lk(mu_);
      q->id = next_queue_++;
      queues_[q->id] = Queue{};
      return 0;
    }
    case IOCTL_MSM_SUBMITQUEUE_CLOSE: {
      const uint32_t id = *static_cast<uint32_t*>(arg);
      {
        std::lock_guard lk(mu_);
        if (!queues_.erase(id)) return -ENOENT;
      }
      engine_.remove_context(id);
      return 0;
    }
    case IOCTL_MSM_SUBMITQUEUE_QUERY: {
      auto* q = static_cast<SubmitqueueQuery*>(arg);
      if (q->param != MSM_SUBMITQUEUE_PARAM_FAULTS || q->len != 4 || !q->data) return -EINVAL;
      std::lock_guard lk(mu_);
      auto it = queues_.find(q->id);
      if (it == queues_.end()) return -ENOENT;
      *reinterpret_cast<uint32_t*>(q->data) = it->second.faults;
      return 0;
    }
    case IOCTL_MSM_GEM_SUBMIT: return submit(*static_cast<GemSubmit*>(arg));
    case IOCTL_MSM_WAIT_FENCE: return wait(*static_cast<WaitFence*>(arg));
  }
  return -ENOTTY;
}

int MsmState::submit(GemSubmit& s) {
  if ((s.flags & MSM_PIPE_ID_MASK) != MSM_PIPE_3D0 ||
      (s.flags & ~MSM_PIPE_ID_MASK & ~MSM_SUBMIT_NO_IMPLICIT) ||
      !s.nr_cmds || (s.bos_stride && s.bos_stride != sizeof(SubmitBo)) || s.nr_in_syncobjs ||
      s.nr_out_syncobjs)
    return -EINVAL;
  const auto* bos = reinterpret_cast<const SubmitBo*>(s.bos);
  const auto* cmds = reinterpret_cast<const SubmitCmd*>(s.cmds);
  std::vector<Ib> ibs;
  {
    std::lock_guard lk(mu_);
    auto q = queues_.find(s.queueid);
    if (q == queues_.end()) return -ENOENT;
    for (uint32_t i = 0; i < s.nr_bos; i++) {
      auto b = bos_.find(bos[i].handle);
      if (b == bos_.end() || (bos[i].flags & ~(MSM_SUBMIT_BO_READ | MSM_SUBMIT_BO_WRITE)))
        return -EINVAL;
    }
    for (uint32_t i = 0; i < s.nr_cmds; i++) {
      const SubmitCmd& c = cmds[i];
      if (c.type != MSM_SUBMIT_CMD_BUF || c.submit_idx >= s.nr_bos || c.nr_relocs ||
          c.size % 4 || !c.size || c.submit_offset % 4)
        return -EINVAL;
      const Bo& b = bos_.at(bos[c.submit_idx].handle);
      if (!b.iova || uint64_t(c.submit_offset) + c.size > b.size) return -EINVAL;
      ibs.push_back({b.iova + c.submit_offset, c.size / 4});
    }
    s.fence = ++q->second.queued;
    if (q->second.faults) {  // past a fault the emulated GPU no longer runs this queue
      q->second.retired = s.fence;
      return 0;
    }
  }
  engine_.submit(s.queueid, s.fence, std::move(ibs));  // not under mu_: the engine reports back
  return 0;
}

int MsmState::wait(const WaitFence& w) {
  if (w.flags & ~1u) return -EINVAL;  // MSM_WAIT_FENCE_BOOST only
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t left_ns = (w.timeout.tv_sec - now.tv_sec) * 1'000'000'000 + (w.timeout.tv_nsec - now.tv_nsec);
  std::unique_lock lk(mu_);
  auto it = queues_.find(w.queueid);
  if (it == queues_.end()) return -ENOENT;
  if (int32_t(w.fence - it->second.queued) > 0) return -EINVAL;  // a fence not yet issued
  cv_.wait_for(lk, std::chrono::nanoseconds(std::max<int64_t>(left_ns, 0)), [&] {
    auto q = queues_.find(w.queueid);
    return q == queues_.end() || reached(q->second.retired, w.fence);
  });
  it = queues_.find(w.queueid);
  if (it == queues_.end()) return -ENOENT;
  return reached(it->second.retired, w.fence) ? 0 : -ETIMEDOUT;
}

void* MsmState::mmap(void* addr, size_t len, int flags, off_t off) {
  std::lock_guard lk(mu_);
  const uint64_t where = reinterpret_cast<uint64_t>(addr);
  auto it = bos_.find(uint32_t(uint64_t(off) >> kOffsetShift));
  if (uint64_t(off) & ((1ull << kOffsetShift) - 1) || it == bos_.end() || it->second.mapped ||
      len > it->second.size || !(flags & MAP_FIXED) || !it->second.iova || where != it->second.iova) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  void* p = ::mmap(addr, it->second.size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return MAP_FAILED;
  it->second.mapped = true;
  memory_.map(it->second.iova, it->second.size);
  return p;
}

class MsmNode final : public os::EmulatedNode {
 public:
  explicit MsmNode(std::shared_ptr<MsmState> s) : s_(std::move(s)) {}
  int ioctl(int, unsigned long req, void* arg) override { return s_->ioctl(req, arg); }
  void* mmap(void* addr, size_t len, int, int flags, int, off_t off) override {
    return s_->mmap(addr, len, flags, off);
  }
  int munmap(void* addr, size_t len) override { return ::munmap(addr, len) < 0 ? -errno : 0; }

 private:
  std::shared_ptr<MsmState> s_;
};

}  // namespace

std::shared_ptr<os::Kernel> make_emulated_msm_system(const Target& target, bool io_coherent) {
  auto k = std::make_shared<os::EmulatedKernel>();
  auto state = std::make_shared<MsmState>(target, io_coherent);
  k->add_node(kMsmRenderNode, std::make_shared<MsmNode>(state));
  std::weak_ptr<MsmState> weak = state;
  k->set_emulator_report(os::EmulatorReport::FaultLog, [weak] {  // as KGSL's
    auto s = weak.lock();
    return s ? s->fault_log() : std::string();
  });
  k->set_emulator_report(os::EmulatorReport::IbPositions, [weak] {
    auto s = weak.lock();
    return s ? s->ib_positions() : std::string();
  });
  return k;
}

}  // namespace hcq::qcom::emu
