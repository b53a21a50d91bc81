// The emulated KGSL. It checks what the real one checks where hcq's driver could get it wrong
// (sizes, ids, contexts, ranges) and answers with its errnos; memory is SVM only
// (KGSL_MEMFLAGS_USE_CPU_MAP: the GPU address is the address the process maps it at), which is
// how hcq's driver allocates.
#include "qcom/emu/kgsl.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "os/emulated_kernel.hpp"
#include "qcom/emu/engine.hpp"
#include "qcom/kgsl_abi.hpp"

namespace hcq::qcom::emu {
namespace {

using namespace kgsl;

constexpr uint64_t kPage = 4096;

class KgslState final : public GpuEvents {
 public:
  KgslState(const Target& t, bool io_coherent)
      : t_(t), io_coherent_(io_coherent), engine_(t.gen, memory_, *this) {}
  ~KgslState() override {
    for (auto& [id, o] : objects_)
      if (o.dmabuf >= 0) ::close(o.dmabuf);
  }

  int ioctl(unsigned long req, void* arg);
  void* mmap(void* addr, size_t len, int flags, off_t off);
  int munmap(void* addr, size_t len);
  std::string ib_positions() { return engine_.ib_positions(); }
  std::string fault_log() {
    std::lock_guard lk(mu_);
    return fault_log_;
  }

  // GpuEvents (from the engine's thread)
  void retired(uint32_t context, uint32_t timestamp) override {
    std::lock_guard lk(mu_);
    auto it = contexts_.find(context);
    if (it != contexts_.end()) it->second.retired = timestamp;
    cv_.notify_all();
  }
  void fault(uint32_t context, const std::string& what) override {
    std::lock_guard lk(mu_);
    auto it = contexts_.find(context);
    if (it != contexts_.end()) it->second.faulted = true;
    fault_log_ += what + "\n";
    cv_.notify_all();
  }

 private:
  struct Object {
    uint64_t size = 0, flags = 0;
    uint64_t gpuaddr = 0;  // where it is mapped (0 until then)
    bool user = false;     // MAP_USER_MEM: the process's own pages
    int dmabuf = -1;       // GPUOBJ_IMPORT: a dup of the dma-buf (a memfd here) backing it
  };
  int import(GpuobjImport* im);
  struct Context {
    uint32_t queued = 0, retired = 0;
    bool faulted = false;
  };
  static bool reached(uint32_t retired, uint32_t ts) { return int32_t(retired - ts) >= 0; }

  const Target t_;
  const bool io_coherent_;
  hcq::emu::Memory memory_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Object> objects_;
  std::map<uint32_t, Context> contexts_;
  uint32_t next_id_ = 1, next_context_ = 1;
  uint64_t used_ = 0;  // bytes of GPU objects not yet freed (the process's own pages aside)
  std::string fault_log_;
  Engine engine_;  // last: its thread stops before the state it reports to goes
};

int KgslState::ioctl(unsigned long req, void* arg) {
  switch (req) {
    case IOCTL_KGSL_DEVICE_GETPROPERTY: {
      auto* g = static_cast<DeviceGetProperty*>(arg);
      if (g->type == KGSL_PROP_DEVICE_INFO) {
        if (g->sizebytes != sizeof(DevInfo)) return -EINVAL;
        DevInfo d{};
        d.device_id = 1;
        d.chip_id = t_.chip_id;
        d.mmu_enabled = 1;
        d.gmem_sizebytes = t_.gmem_bytes;
        std::memcpy(reinterpret_cast<void*>(g->value), &d, sizeof d);
        return 0;
      }
      if (g->type == KGSL_PROP_GPU_RESET_STAT) {
        if (g->sizebytes != 4) return -EINVAL;
        auto* v = reinterpret_cast<uint32_t*>(g->value);
        std::lock_guard lk(mu_);
        auto it = contexts_.find(*v);
        if (it == contexts_.end()) return -EINVAL;
        *v = it->second.faulted ? KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT : KGSL_CTX_STAT_NO_ERROR;
        return 0;
      }
      return -EINVAL;
    }
    case IOCTL_KGSL_DRAWCTXT_CREATE: {
      auto* c = static_cast<DrawctxtCreate*>(arg);
      std::lock_guard lk(mu_);
      c->drawctxt_id = next_context_++;
      contexts_[c->drawctxt_id] = Context{};
      return 0;
    }
    case IOCTL_KGSL_DRAWCTXT_DESTROY: {
      auto* c = static_cast<DrawctxtDestroy*>(arg);
      {
        std::lock_guard lk(mu_);
        if (!contexts_.erase(c->drawctxt_id)) return -EINVAL;
      }
      engine_.remove_context(c->drawctxt_id);
      return 0;
    }
    case IOCTL_KGSL_GPUOBJ_ALLOC: {
      auto* a = static_cast<GpuobjAlloc*>(arg);
      if (a->size == 0) return -EINVAL;
      if (!(a->flags & KGSL_MEMFLAGS_USE_CPU_MAP)) return -EINVAL;  // the emulator does SVM only
      if (!io_coherent_) a->flags &= ~KGSL_MEMFLAGS_IOCOHERENT;  // the answer says what it got
      std::lock_guard lk(mu_);
      const uint64_t size = (a->size + kPage - 1) / kPage * kPage;
      // The GPU shares the SoC's memory, as much as the target has: KGSL allocates an
      // object's pages at once and fails with -ENOMEM when they run out (kgsl_sharedmem.c).
      if (size > t_.memory_bytes - used_) return -ENOMEM;
      used_ += size;
      a->id = next_id_++;
      a->mmapsize = size;
      objects_[a->id] = {a->mmapsize, a->flags, 0, false};
      return 0;
    }
    case IOCTL_KGSL_GPUOBJ_INFO: {
      auto* i = static_cast<GpuobjInfo*>(arg);
      std::lock_guard lk(mu_);
      auto it = objects_.find(i->id);
      if (it == objects_.end()) return -EINVAL;
      i->gpuaddr = it->second.gpuaddr;
      i->flags = it->second.flags;
      i->size = it->second.size;
      i->va_len = it->second.size;
      i->va_addr = it->second.gpuaddr;
      return 0;
    }
    case IOCTL_KGSL_GPUOBJ_FREE: {
      auto* f = static_cast<GpuobjFree*>(arg);
      std::lock_guard lk(mu_);
      auto it = objects_.find(f->id);
      if (it == objects_.end()) return -EINVAL;
      if (it->second.gpuaddr) memory_.unmap(it->second.gpuaddr);
      if (it->second.dmabuf >= 0) ::close(it->second.dmabuf);
      used_ -= it->second.size;
      objects_.erase(it);
      return 0;
    }
    case IOCTL_KGSL_GPUOBJ_IMPORT:
      return import(static_cast<GpuobjImport*>(arg));
    case IOCTL_KGSL_MAP_USER_MEM: {
      auto* m = static_cast<MapUserMem*>(arg);
      if (m->memtype != KGSL_USER_MEM_TYPE_ADDR || m->hostptr % kPage || m->len % kPage || !m->len)
        return -EINVAL;
      std::lock_guard lk(mu_);
      try {
        memory_.map(m->hostptr, m->len);
      } catch (const Error&) {
        return -EEXIST;
      }
      objects_[next_id_++] = {m->len, m->flags, m->hostptr, true};
      m->gpuaddr = m->hostptr;
      return 0;
    }
    case IOCTL_KGSL_SHAREDMEM_FREE: {
      auto* f = static_cast<SharedmemFree*>(arg);
      std::lock_guard lk(mu_);
      for (auto it = objects_.begin(); it != objects_.end(); ++it)
        if (it->second.user && it->second.gpuaddr == f->gpuaddr) {
          memory_.unmap(f->gpuaddr);
          objects_.erase(it);
          return 0;
        }
      return -EINVAL;
    }
    case IOCTL_KGSL_GPU_COMMAND: {
      auto* g = static_cast<GpuCommand*>(arg);
      if (g->numcmds == 0 || g->cmdsize != sizeof(CommandObject)) return -EINVAL;
      const auto* cmds = reinterpret_cast<const CommandObject*>(g->cmdlist);
      std::vector<Ib> ibs;
      for (uint32_t i = 0; i < g->numcmds; i++) {
        if (cmds[i].flags != KGSL_CMDLIST_IB || cmds[i].size % 4 || !cmds[i].size) return -EINVAL;
        ibs.push_back({cmds[i].gpuaddr, uint32_t(cmds[i].size / 4)});
      }
      uint32_t ts;
      {
        std::lock_guard lk(mu_);
        auto it = contexts_.find(g->context_id);
        if (it == contexts_.end()) return -EINVAL;
        if (it->second.faulted) return -EDEADLK;  // an invalidated context takes no more
        ts = ++it->second.queued;
      }
      g->timestamp = ts;
      engine_.submit(g->context_id, ts, std::move(ibs));  // not under mu_: the engine reports back
      return 0;
    }
    case IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID: {
      auto* w = static_cast<DeviceWaittimestampCtxtid*>(arg);
      std::unique_lock lk(mu_);
      auto done = [&] {
        auto it = contexts_.find(w->context_id);
        return it == contexts_.end() || it->second.faulted || reached(it->second.retired, w->timestamp);
      };
      cv_.wait_for(lk, std::chrono::milliseconds(w->timeout), done);
      auto it = contexts_.find(w->context_id);
      if (it == contexts_.end()) return -EINVAL;
      if (it->second.faulted) return -EDEADLK;
      return reached(it->second.retired, w->timestamp) ? 0 : -ETIMEDOUT;
    }
    case IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID: {
      auto* r = static_cast<CmdstreamReadtimestampCtxtid*>(arg);
      std::lock_guard lk(mu_);
      auto it = contexts_.find(r->context_id);
      if (it == contexts_.end()) return -EINVAL;
      r->timestamp = r->type == KGSL_TIMESTAMP_QUEUED ? it->second.queued : it->second.retired;
      return 0;
    }
  }
  return -ENOTTY;
}

// kgsl.c kgsl_ioctl_gpuobj_import / _gpuobj_map_dma_buf: the dma-buf's fd from priv, the
// whole buffer as a new object (mapped, SVM, by mmap at its id's offset). The emulator takes
// only dma-bufs (KGSL also takes KGSL_USER_MEM_TYPE_ADDR) with USE_CPU_MAP, as hcq imports.
int KgslState::import(GpuobjImport* im) {
  if (im->type != KGSL_USER_MEM_TYPE_DMABUF || im->priv_len < sizeof(GpuobjImportDmaBuf) ||
      !(im->flags & KGSL_MEMFLAGS_USE_CPU_MAP))
    return -EINVAL;
  const int fd = reinterpret_cast<const GpuobjImportDmaBuf*>(im->priv)->fd;
  if (fd < 0) return -EINVAL;
  // dma_buf_get: -EBADF for no file, -EINVAL for a file that is no dma-buf (the emulated
  // heap's buffers are memfds: regular files of whole pages).
  const int64_t sealed = os::sealed_buffer_fd_size(fd, kPage);
  if (sealed < 0) return int(sealed);
  const uint64_t size = uint64_t(sealed);
  if (!io_coherent_) im->flags &= ~KGSL_MEMFLAGS_IOCOHERENT;
  std::lock_guard lk(mu_);
  // The heap's pages are the SoC's memory the GPU objects share: counted as allocations are.
  if (size > t_.memory_bytes - used_) return -ENOMEM;
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // KGSL holds the dma-buf until the free
  if (dup < 0) return -errno;
  used_ += size;
  im->id = next_id_++;
  objects_[im->id] = {size, im->flags, 0, false, dup};
  return 0;
}

void* KgslState::mmap(void* addr, size_t len, int flags, off_t off) {
  std::lock_guard lk(mu_);
  auto it = objects_.find(uint32_t(uint64_t(off) / kPage));
  if (it == objects_.end() || it->second.user || len > it->second.size || it->second.gpuaddr ||
      !(flags & MAP_FIXED) || reinterpret_cast<uint64_t>(addr) % kPage) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  // The GPU sees the object where the process maps it (USE_CPU_MAP); back it there: by its
  // dma-buf, shared (another process maps the same pages), or anonymous memory.
  const int buf = it->second.dmabuf;
  void* p = buf >= 0 ? ::mmap(addr, it->second.size, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_FIXED | MAP_NORESERVE, buf, 0)
                     : ::mmap(addr, it->second.size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return MAP_FAILED;
  it->second.gpuaddr = reinterpret_cast<uint64_t>(p);
  memory_.map(it->second.gpuaddr, it->second.size);
  return p;
}

int KgslState::munmap(void* addr, size_t len) { return ::munmap(addr, len) < 0 ? -errno : 0; }

class KgslNode final : public os::EmulatedNode {
 public:
  explicit KgslNode(std::shared_ptr<KgslState> s) : s_(std::move(s)) {}
  int ioctl(int, unsigned long req, void* arg) override { return s_->ioctl(req, arg); }
  void* mmap(void* addr, size_t len, int, int flags, int, off_t off) override {
    return s_->mmap(addr, len, flags, off);
  }
  int munmap(void* addr, size_t len) override { return s_->munmap(addr, len); }

 private:
  std::shared_ptr<KgslState> s_;
};

// The system dma-buf heap (drivers/dma-buf/dma-heap.c dma_heap_ioctl_allocate, heaps/
// system_heap.c): each buffer a memfd of whole pages, given back as a real fd, so another
// process's emulated kernel maps the same pages when it is passed on.
class DmaHeapNode final : public os::EmulatedNode {
 public:
  int ioctl(int, unsigned long req, void* arg) override {
    if (req != DMA_HEAP_IOCTL_ALLOC) return -ENOTTY;
    auto* a = static_cast<dma_heap_allocation_data*>(arg);
    if (a->fd || (a->fd_flags & ~uint32_t(DMA_HEAP_VALID_FD_FLAGS)) ||
        (a->heap_flags & ~uint64_t(DMA_HEAP_VALID_HEAP_FLAGS)))
      return -EINVAL;
    const uint64_t len = (a->len + kPage - 1) / kPage * kPage;  // PAGE_ALIGN
    if (!len) return -EINVAL;
    const int fd = os::make_sealed_buffer_fd("hcq-emu-dma-heap", len, a->fd_flags & O_CLOEXEC);
    if (fd < 0) return fd == -ENOSPC ? -ENOMEM : fd;
    a->fd = uint32_t(fd);
    return 0;
  }
};

}  // namespace

std::shared_ptr<os::Kernel> make_emulated_system(const Target& target, bool io_coherent) {
  auto k = std::make_shared<os::EmulatedKernel>();
  auto state = std::make_shared<KgslState>(target, io_coherent);
  k->add_node("/dev/kgsl-3d0", std::make_shared<KgslNode>(state));
  k->add_node(kDmaHeapSystem, std::make_shared<DmaHeapNode>());
  std::weak_ptr<KgslState> weak = state;
  k->set_emulator_report(os::EmulatorReport::FaultLog, [weak] {
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
