// The Adreno driver's KGSL side: a compute draw context, SVM GPU objects (the GPU address is
// where the process maps them), GPU_COMMAND submissions of IB lists and context timestamps.
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

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
  }
  ~KgslKmd() override {
    DrawctxtDestroy d{context_};
    ioctl(IOCTL_KGSL_DRAWCTXT_DESTROY, &d);
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
    GpuobjAlloc a{};
    a.size = size;
    a.flags = KGSL_MEMFLAGS_USE_CPU_MAP |
              (cached ? memflags_cachemode(KGSL_CACHEMODE_WRITEBACK) | KGSL_MEMFLAGS_IOCOHERENT
                      : memflags_cachemode(KGSL_CACHEMODE_WRITECOMBINE));
    if (int r = ioctl(IOCTL_KGSL_GPUOBJ_ALLOC, &a); r < 0)
      throw OsError(who_ + "IOCTL_KGSL_GPUOBJ_ALLOC (" + std::to_string(size) + " bytes of " +
                        to_string(kind) + " memory)",
                    -r);
    if (cached && !(a.flags & KGSL_MEMFLAGS_IOCOHERENT)) {  // KGSL dropped it: not coherent here
      free(a.id);
      host_cached_ = false;
      return allocate(va, size, kind);
    }
    void* p = kernel_->mmap(reinterpret_cast<void*>(va), a.mmapsize, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_FIXED, fd_, off_t(mmap_offset_of(a.id)));
    if (p == MAP_FAILED) {
      int e = errno;
      free(a.id);
      throw OsError(who_ + "mmap of GPU object " + std::to_string(a.id) + " at " + hex(va), e);
    }
    GpuobjInfo info{};
    info.id = a.id;
    if (int r = ioctl(IOCTL_KGSL_GPUOBJ_INFO, &info); r < 0 || info.gpuaddr != va) {
      reserve_range(*kernel_, va, size);
      free(a.id);
      throw Error(who_ + "GPU object " + std::to_string(a.id) + " is at GPU address " +
                  hex(info.gpuaddr) + ", not at its CPU address " + hex(va) +
                  " (KGSL without SVM support?)");
    }
    return a.id;
  }
  bool host_memory_cached() const override { return host_cached_; }
  void free(uint64_t handle) override {
    GpuobjFree f{};
    f.id = uint32_t(handle);
    ioctl(IOCTL_KGSL_GPUOBJ_FREE, &f);
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
  // KGSL reports an invalidated (faulted) context as EDEADLK, some kernels as EPROTO.
  static int normalize(int r) { return r == -EPROTO ? -EDEADLK : r; }
  std::shared_ptr<os::Kernel> kernel_;
  std::string who_;  // "qcom:0: ": errors name the device
  int fd_ = -1;
  uint32_t chip_id_ = 0, context_ = 0;
  std::atomic<bool> host_cached_{true};
};

}  // namespace

void reserve_range(os::Kernel& kernel, uint64_t va, uint64_t size) {
  kernel.mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
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
