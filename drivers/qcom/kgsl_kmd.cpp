// The Adreno driver's KGSL side: a compute draw context, SVM GPU objects (the GPU address is
// where the process maps them), GPU_COMMAND submissions of IB lists and context timestamps.
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "qcom/kgsl_abi.hpp"
#include "qcom/kmd.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {
namespace {

using namespace kgsl;

constexpr uint64_t kPage = 4096;

// 0 and the chip id from the device info, or -errno.
int read_chip_id(os::Kernel& kernel, int fd, uint32_t& chip_id) {
  DevInfo info{};
  DeviceGetProperty prop{};
  prop.type = KGSL_PROP_DEVICE_INFO;
  prop.value = reinterpret_cast<uint64_t>(&info);
  prop.sizebytes = sizeof(info);
  int r = kernel.ioctl(fd, IOCTL_KGSL_DEVICE_GETPROPERTY, &prop);
  chip_id = info.chip_id;
  return r;
}

class KgslKmd final : public Kmd {
 public:
  KgslKmd(std::shared_ptr<os::Kernel> kernel, const std::string& path, const std::string& device)
      : kernel_(std::move(kernel)), who_(device + ": ") {
    fd_ = kernel_->open(path, O_RDWR | O_CLOEXEC);
    if (fd_ < 0) throw OsError(who_ + "open " + path, -fd_);
    if (int r = read_chip_id(*kernel_, fd_, chip_id_); r < 0) {
      kernel_->close(fd_);
      throw OsError(who_ + "IOCTL_KGSL_DEVICE_GETPROPERTY (device info)", -r);
    }
    // A compute context without GMEM, one fault and it is done (tinygrad ops_qcom.py's flags).
    DrawctxtCreate c{};
    c.flags = KGSL_CONTEXT_NO_GMEM_ALLOC | KGSL_CONTEXT_PREAMBLE | KGSL_CONTEXT_NO_FAULT_TOLERANCE |
              context_type(KGSL_CONTEXT_TYPE_CL) | context_priority(8);
    if (int r = ioctl(IOCTL_KGSL_DRAWCTXT_CREATE, &c); r < 0) {
      kernel_->close(fd_);
      throw OsError(who_ + "IOCTL_KGSL_DRAWCTXT_CREATE", -r);
    }
    context_ = c.drawctxt_id;
    // Without the heap (an older Android, no dma-heap) objects are KGSL's own: not shareable.
    heap_fd_ = kernel_->open(kDmaHeapSystem, O_RDONLY | O_CLOEXEC);
  }
  ~KgslKmd() override {
    DrawctxtDestroy d{context_};
    ioctl(IOCTL_KGSL_DRAWCTXT_DESTROY, &d);
    for (auto& [id, buf] : dmabufs_) kernel_->close(buf);  // KGSL holds what is still imported
    if (heap_fd_ >= 0) kernel_->close(heap_fd_);
    kernel_->close(fd_);
  }

  std::string name() const override { return "KGSL"; }
  std::string context() const override { return "KGSL context " + std::to_string(context_); }
  const char* fence_word() const override { return "timestamp"; }
  uint32_t chip_id() const override { return chip_id_; }
  // SVM: any address the process can map (below the 47-bit user space limit).
  std::pair<uint64_t, uint64_t> va_window() const override { return {kPage, (1ull << 47) - kPage}; }

  uint64_t allocate(uint64_t va, uint64_t size, MemoryKind kind) override {
    // USE_CPU_MAP: the GPU address is where the process maps the object. Device memory
    // write-combined; host memory cached and kept coherent by the hardware (IOCOHERENT) where
    // the platform can, else write-combined too: either way no cache maintenance.
    const bool cached = kind == MemoryKind::Host && host_cached_;
    const uint64_t flags =
        KGSL_MEMFLAGS_USE_CPU_MAP |
        (cached ? memflags_cachemode(KGSL_CACHEMODE_WRITEBACK) | KGSL_MEMFLAGS_IOCOHERENT
                : memflags_cachemode(KGSL_CACHEMODE_WRITECOMBINE));
    uint32_t id;
    uint64_t got_flags, mmapsize;
    int heap_buf = -1;
    if (heap_fd_ >= 0) {
      // Shareable: every object's pages come from the dma-buf heap, imported into KGSL, so
      // export_memory has the dma-buf to give (KGSL cannot export its own objects).
      dma_heap_allocation_data h{};
      h.len = size;
      h.fd_flags = O_RDWR | O_CLOEXEC;
      if (int r = kernel_->ioctl(heap_fd_, DMA_HEAP_IOCTL_ALLOC, &h); r < 0)
        throw OsError(who_ + "DMA_HEAP_IOCTL_ALLOC on " + kDmaHeapSystem + " (" +
                          std::to_string(size) + " bytes of " + to_string(kind) + " memory)",
                      -r);
      heap_buf = int(h.fd);
      GpuobjImport im{};
      if (int r = import_dmabuf(heap_buf, flags, im); r < 0) {
        kernel_->close(heap_buf);
        throw OsError(who_ + "IOCTL_KGSL_GPUOBJ_IMPORT (" + std::to_string(size) + " bytes of " +
                          to_string(kind) + " memory from " + kDmaHeapSystem + ")",
                      -r);
      }
      id = im.id, got_flags = im.flags, mmapsize = size;
    } else {
      GpuobjAlloc a{};
      a.size = size;
      a.flags = flags;
      if (int r = ioctl(IOCTL_KGSL_GPUOBJ_ALLOC, &a); r < 0)
        throw OsError(who_ + "IOCTL_KGSL_GPUOBJ_ALLOC (" + std::to_string(size) + " bytes of " +
                          to_string(kind) + " memory)",
                      -r);
      id = a.id, got_flags = a.flags, mmapsize = a.mmapsize;
    }
    if (cached && !(got_flags & KGSL_MEMFLAGS_IOCOHERENT)) {  // KGSL dropped it: not coherent
      if (heap_buf >= 0) kernel_->close(heap_buf);
      free(id);
      host_cached_ = false;
      return allocate(va, size, kind);
    }
    place(id, va, size, mmapsize, heap_buf);
    return id;
  }
  bool shares_memory() const override { return true; }
  int export_memory(uint64_t handle) override {
    int buf = -1;
    {
      std::lock_guard lk(bufs_mu_);
      auto it = dmabufs_.find(uint32_t(handle));
      if (it != dmabufs_.end()) buf = it->second;
    }
    if (buf < 0)
      throw InvalidInput(who_ + "GPU object " + std::to_string(handle) + " is not from " +
                         kDmaHeapSystem + " (it did not open): KGSL cannot export its own "
                         "objects");
    int fd = kernel_->passable_fd(buf);
    if (fd < 0) throw OsError(who_ + "dup of GPU object " + std::to_string(handle) + "'s dma-buf", -fd);
    return fd;
  }
  uint64_t import_memory(int fd, uint64_t va, uint64_t size) override {
    GpuobjImport im{};
    if (int r = import_dmabuf(fd, KGSL_MEMFLAGS_USE_CPU_MAP |
                                      memflags_cachemode(KGSL_CACHEMODE_WRITECOMBINE), im);
        r < 0)
      throw InvalidInput(who_ + "the imported fd is not a dma-buf KGSL takes "
                         "(IOCTL_KGSL_GPUOBJ_IMPORT: " + std::strerror(-r) + ")");
    // KGSL maps the whole dma-buf: it must be exactly the range reserved for it.
    GpuobjInfo info{};
    info.id = im.id;
    if (int r = ioctl(IOCTL_KGSL_GPUOBJ_INFO, &info); r < 0 || info.size != size) {
      free(im.id);
      if (r < 0) throw OsError(who_ + "IOCTL_KGSL_GPUOBJ_INFO of imported object " + std::to_string(im.id), -r);
      throw InvalidInput(who_ + "the imported memory holds " + std::to_string(info.size) +
                         " bytes, the handle says " + std::to_string(size));
    }
    place(im.id, va, size, size, -1);
    return im.id;
  }
  bool host_memory_cached() const override { return host_cached_; }
  void free(uint64_t handle) override {
    GpuobjFree f{};
    f.id = uint32_t(handle);
    ioctl(IOCTL_KGSL_GPUOBJ_FREE, &f);
    int buf = -1;
    {
      std::lock_guard lk(bufs_mu_);
      if (auto it = dmabufs_.find(f.id); it != dmabufs_.end()) {
        buf = it->second;
        dmabufs_.erase(it);
      }
    }
    if (buf >= 0) kernel_->close(buf);
  }
  bool maps_user_memory() const override { return true; }
  uint64_t map_user(void* host, uint64_t size) override {
    MapUserMem m{};
    m.hostptr = reinterpret_cast<uint64_t>(host);
    m.len = size;
    m.memtype = KGSL_USER_MEM_TYPE_ADDR;
    m.flags = uint32_t(KGSL_MEMFLAGS_USE_CPU_MAP);
    if (int r = ioctl(IOCTL_KGSL_MAP_USER_MEM, &m); r < 0)
      throw OsError(who_ + "IOCTL_KGSL_MAP_USER_MEM at " + hex(m.hostptr), -r);
    if (m.gpuaddr != m.hostptr) {
      free_user(0, m.gpuaddr);
      throw Error(who_ + "host memory at " + hex(m.hostptr) + " got GPU address " + hex(m.gpuaddr) +
                  " (hcq needs the same address)");
    }
    return 0;
  }
  void free_user(uint64_t, uint64_t va) override {
    SharedmemFree f{va};
    ioctl(IOCTL_KGSL_SHAREDMEM_FREE, &f);
  }

  int submit(std::span<const IbRef> ibs, uint32_t& fence) override {
    std::vector<CommandObject> cmds;
    cmds.reserve(ibs.size());
    for (const IbRef& ib : ibs) cmds.push_back({0, ib.va, ib.bytes, KGSL_CMDLIST_IB, 0});
    GpuCommand g{};
    g.cmdlist = reinterpret_cast<uint64_t>(cmds.data());
    g.cmdsize = sizeof(CommandObject);
    g.numcmds = uint32_t(cmds.size());
    g.context_id = context_;
    int r = ioctl(IOCTL_KGSL_GPU_COMMAND, &g);
    if (r < 0) return normalize(r);
    fence = g.timestamp;
    return 0;
  }
  int wait(uint32_t fence, std::chrono::milliseconds timeout) override {
    // A zero timeout reads the retired timestamp instead: KGSL's wait sleeps at least a tick.
    if (timeout.count() == 0) {
      CmdstreamReadtimestampCtxtid t{context_, KGSL_TIMESTAMP_RETIRED, 0};
      if (int r = ioctl(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, &t); r < 0) return normalize(r);
      if (int32_t(t.timestamp - fence) >= 0) return 0;
    }
    DeviceWaittimestampCtxtid w{context_, fence, uint32_t(std::max<int64_t>(timeout.count(), 0))};
    return normalize(ioctl(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, &w));
  }

 private:
  int ioctl(unsigned long req, void* arg) { return kernel_->ioctl(fd_, req, arg); }
  // IOCTL_KGSL_GPUOBJ_IMPORT of a dma-buf (KGSL_USER_MEM_TYPE_DMABUF): 0 or -errno.
  int import_dmabuf(int buf, uint64_t flags, GpuobjImport& im) {
    GpuobjImportDmaBuf d{buf};
    im.priv = reinterpret_cast<uint64_t>(&d);
    im.priv_len = sizeof d;
    im.flags = flags;
    im.type = KGSL_USER_MEM_TYPE_DMABUF;
    return ioctl(IOCTL_KGSL_GPUOBJ_IMPORT, &im);
  }
  // Maps object `id` at `va` through the KGSL fd (mmap at the id's offset: with USE_CPU_MAP
  // the GPU address becomes the CPU's, imported dma-bufs as allocated objects) and checks
  // that KGSL put it there. Frees the object (and closes `heap_buf`) on failure; else keeps
  // `heap_buf` as the object's dma-buf.
  void place(uint32_t id, uint64_t va, uint64_t size, uint64_t mmapsize, int heap_buf) {
    void* p = kernel_->mmap(reinterpret_cast<void*>(va), mmapsize, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_FIXED, fd_, off_t(mmap_offset_of(id)));
    if (p == MAP_FAILED) {
      int e = errno;
      free(id);
      if (heap_buf >= 0) kernel_->close(heap_buf);
      throw OsError(who_ + "mmap of GPU object " + std::to_string(id) + " at " + hex(va), e);
    }
    GpuobjInfo info{};
    info.id = id;
    if (int r = ioctl(IOCTL_KGSL_GPUOBJ_INFO, &info); r < 0 || info.gpuaddr != va) {
      reserve_range(*kernel_, va, size);
      free(id);
      if (heap_buf >= 0) kernel_->close(heap_buf);
      throw Error(who_ + "GPU object " + std::to_string(id) + " is at GPU address " +
                  hex(info.gpuaddr) + ", not at its CPU address " + hex(va) +
                  " (KGSL without SVM support?)");
    }
    if (heap_buf >= 0) {
      std::lock_guard lk(bufs_mu_);
      dmabufs_[id] = heap_buf;
    }
  }
  // KGSL reports an invalidated (faulted) context as EDEADLK, some kernels as EPROTO.
  static int normalize(int r) { return r == -EPROTO ? -EDEADLK : r; }
  std::shared_ptr<os::Kernel> kernel_;
  std::string who_;  // "qcom:0: ": errors name the device
  int fd_ = -1;
  uint32_t chip_id_ = 0, context_ = 0;
  std::atomic<bool> host_cached_{true};
  int heap_fd_ = -1;  // /dev/dma_heap/system where it opens: every object's pages come from it
  std::mutex bufs_mu_;
  std::map<uint32_t, int> dmabufs_;  // object id -> its dma-buf (heap objects), ours to close
};

}  // namespace

void reserve_range(os::Kernel& kernel, uint64_t va, uint64_t size) {
  kernel.mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

// Never called where shares_memory() is false (AdrenoDriver keeps DeviceDriver's refusal).
int Kmd::export_memory(uint64_t) { throw Error(name() + " cannot share memory"); }
uint64_t Kmd::import_memory(int, uint64_t, uint64_t) {
  throw Error(name() + " cannot share memory");
}

std::vector<KmdNode> kgsl_nodes(os::Kernel& kernel) {
  constexpr const char* kNode = "/dev/kgsl-3d0";
  int fd = kernel.open(kNode, O_RDWR | O_CLOEXEC);
  if (fd < 0) return {};
  std::vector<KmdNode> out;
  uint32_t chip = 0;
  if (read_chip_id(kernel, fd, chip) == 0) out.push_back({kNode, "Adreno " + chip_name(chip) + " (KGSL)"});
  kernel.close(fd);
  return out;
}

std::unique_ptr<Kmd> open_kgsl(std::shared_ptr<os::Kernel> kernel, const std::string& path,
                              const std::string& device) {
  return std::make_unique<KgslKmd>(std::move(kernel), path, device);
}

}  // namespace hcq::qcom
