// The emulated RM and UVM. They check what the real ones check where hcq's driver could get
// it wrong (parents, classes, parameter sizes, handles, ranges), answer with NV_STATUS codes
// in the parameter structs as RM does, and back memory with host memory at the GPU address
// (the emulated GPU reads and writes host addresses).
#include "nv/emu/rm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "core/error.hpp"
#include "nv/emu/engine.hpp"
#include "nv/rm_abi.hpp"
#include "os/emulated_kernel.hpp"

namespace hcq::nv::emu {
namespace {

using namespace rm;

constexpr uint32_t kGpuId = 0x100;  // RM's id for the one emulated GPU (CardInfo::gpu_id)
constexpr uint8_t kUuid[16] = {0x47, 0x50, 0x55, 0x2d, 'h', 'c', 'q', '-',
                               'e',  'm',  'u',  '-',  0,   0,   0,   1};
constexpr uint64_t kPage = 4096;

struct Object {
  uint32_t cls = 0;
  NvHandle parent = 0;
};

struct MemObject {
  uint64_t size = 0;
  bool os_descriptor = false;  // the caller's own memory
  uint64_t backing = 0;        // the host (= GPU) address its bytes live at; 0 until placed
  bool usermode = false;
  bool vidmem = false;  // counts against the card's video memory
  int memfd = -1;       // what backs it once placed: shared, so it can be exported
};

class RmState final : public GpuEvents {
 public:
  RmState(const Target& t, const std::string& version)
      : t_(t), version_(version), major_(driver_major(version.c_str())) {
    usermode_fd_ = int(::memfd_create("hcq-emu-usermode", MFD_CLOEXEC));
    if (usermode_fd_ >= 0 && ::ftruncate(usermode_fd_, off_t(kUsermodeMapBytes)) == 0) {
      void* p = ::mmap(nullptr, kUsermodeMapBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                       usermode_fd_, 0);
      if (p != MAP_FAILED) usermode_ = static_cast<uint32_t*>(p);
    }
    if (!usermode_) throw OsError("emulated RM: usermode page", errno);
    usermode_[NVC361_NOTIFY_CHANNEL_PENDING / 4] = kDoorbellIdle;
    GpuClasses c{gen_of_compute_class(t.classes.compute), t.classes.compute, t.classes.copy,
                 qmd_version_for(gen_of_compute_class(t.classes.compute))};
    engine_ = std::make_unique<Engine>(c, memory_, *this);
    engine_->watch_doorbell(usermode_ + NVC361_NOTIFY_CHANNEL_PENDING / 4);
  }
  ~RmState() override {
    engine_.reset();
    for (auto& [h, m] : mems_)
      if (m.memfd >= 0) ::close(m.memfd);
    for (auto& [fd, mem] : exported_) ::close(mem);
    ::munmap(usermode_, kUsermodeMapBytes);
    ::close(usermode_fd_);
  }

  int ioctl(bool ctl, int fd, unsigned long req, void* arg);
  int uvm_ioctl(unsigned long req, void* arg);
  void* mmap(int fd, void* addr, size_t len, int flags);
  void opened(int fd, bool ctl) {
    std::lock_guard lk(mu_);
    fds_[fd] = ctl;
  }
  void closed(int fd) {
    std::lock_guard lk(mu_);
    fds_.erase(fd);
    pending_map_.erase(fd);
    if (auto e = exported_.find(fd); e != exported_.end()) {
      ::close(e->second);
      exported_.erase(e);
    }
  }
  // An nvidiactl fd an object was exported to, as a real fd: the object's memfd.
  int passable_fd(int fd) {
    std::lock_guard lk(mu_);
    auto e = exported_.find(fd);
    if (e == exported_.end()) return -EINVAL;
    int r = ::fcntl(e->second, F_DUPFD_CLOEXEC, 0);
    return r < 0 ? -errno : r;
  }
  std::string fault_log() {
    std::lock_guard lk(log_mu_);
    return fault_log_;
  }

  // GpuEvents
  // Called by the engine thread, which holds its own lock: never take mu_ here (the ioctl
  // path holds mu_ while it adds channels to the engine).
  void channel_error(uint32_t, uint32_t rc, const std::string& what) override {
    std::lock_guard lk(log_mu_);
    fault_log_ += what + " (" + (rc_error_name(rc) ? rc_error_name(rc) : "?") + ")\n";
  }
  void nonstall_interrupt() override {}

 private:
  NvStatus alloc(Nvos21& a);
  NvStatus control(Nvos54& c);
  NvStatus free_object(NvHandle h);
  bool is(NvHandle h, uint32_t cls) const {
    auto it = objects_.find(h);
    return it != objects_.end() && it->second.cls == cls;
  }
  // Back `m` at `va` when it has no place yet; false when it lives elsewhere.
  bool place(MemObject& m, uint64_t va);
  // The memfd backing `m` (made when it has none yet); -1 when none can be made.
  int memfd_of(MemObject& m);
  void start_channels(NvHandle group);

  const Target t_;
  const std::string version_;
  const unsigned major_;
  hcq::emu::Memory memory_;
  std::unique_ptr<Engine> engine_;
  int usermode_fd_ = -1;
  uint32_t* usermode_ = nullptr;
  std::mutex mu_;
  std::map<int, bool> fds_;  // open fds: true for nvidiactl
  // nvidiactl fds an object was exported to (OS_UNIX_EXPORT_OBJECT_TO_FD) -> a dup of the
  // object's memfd, which keeps its pages as RM's reference keeps the object.
  std::map<int, int> exported_;
  std::set<int> registered_;  // nvidiaN fds given NV_ESC_REGISTER_FD
  std::map<NvHandle, Object> objects_;
  std::map<NvHandle, MemObject> mems_;
  std::map<NvHandle, ChannelDesc> channels_;
  std::set<NvHandle> scheduled_groups_;
  std::map<int, NvHandle> pending_map_;  // fd -> memory its next mmap maps
  std::map<uint64_t, uint64_t> uvm_ranges_;  // external ranges: base -> length
  std::map<uint64_t, uint64_t> gpu_maps_;    // GPU mappings: base -> length
  uint64_t vram_used_ = 0;                   // video memory objects not yet freed
  NvHandle next_handle_ = 0xc1d00001;
  uint32_t next_token_ = 0x10;
  bool uvm_ready_ = false, gpu_registered_ = false;
  std::mutex log_mu_;
  std::string fault_log_;
};

int RmState::memfd_of(MemObject& m) {
  if (m.memfd >= 0) return m.memfd;
  const int fd = os::make_sealed_buffer_fd("hcq-emu-rm", m.size);
  if (fd < 0) return -1;
  return m.memfd = fd;
}

bool RmState::place(MemObject& m, uint64_t va) {
  if (m.backing) return m.backing == va;
  if (va % kPage) return false;
  // A memfd mapped shared: another process that imports the object maps the same pages.
  const int fd = memfd_of(m);
  if (fd < 0) return false;
  void* p = ::mmap(reinterpret_cast<void*>(va), m.size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) return false;
  if (m.size >= (2u << 20)) ::madvise(p, m.size, MADV_HUGEPAGE);
  m.backing = va;
  return true;
}

int RmState::ioctl(bool ctl, int fd, unsigned long req, void* arg) {
  if (!esc_is_nv(req)) return -ENOTTY;
  const uint32_t nr = esc_nr(req);
  const size_t size = esc_size(req);
  std::lock_guard lk(mu_);
  auto sized = [&](size_t want) { return size == want; };
  switch (nr) {
    case NV_ESC_CHECK_VERSION_STR: {
      if (!ctl || !sized(sizeof(RmApiVersion))) return -EINVAL;
      auto* v = static_cast<RmApiVersion*>(arg);
      const bool query = v->cmd == NV_RM_API_VERSION_CMD_QUERY;
      const bool same = std::strncmp(v->versionString, version_.c_str(),
                                     sizeof(v->versionString)) == 0;
      v->reply = query || same ? NV_RM_API_VERSION_REPLY_RECOGNIZED
                               : NV_RM_API_VERSION_REPLY_UNRECOGNIZED;
      if (query || !same) {
        std::memset(v->versionString, 0, sizeof(v->versionString));
        std::strncpy(v->versionString, version_.c_str(), sizeof(v->versionString) - 1);
      }
      return 0;
    }
    case NV_ESC_CARD_INFO: {
      if (!ctl || size == 0 || size % sizeof(CardInfo)) return -EINVAL;
      auto* c = static_cast<CardInfo*>(arg);
      std::memset(c, 0, size);
      c[0].valid = 1;
      c[0].pci_info = {0, 0x41, 0, 0, 0x10de, t_.device_id};
      c[0].gpu_id = kGpuId;
      c[0].fb_size = t_.vram_bytes;
      c[0].minor_number = 0;
      return 0;
    }
    case NV_ESC_REGISTER_FD: {
      if (ctl || !sized(sizeof(RegisterFd))) return -EINVAL;
      auto* r = static_cast<RegisterFd*>(arg);
      auto it = fds_.find(r->ctl_fd);
      if (it == fds_.end() || !it->second) return -EINVAL;  // not an nvidiactl fd
      registered_.insert(fd);
      return 0;
    }
    case NV_ESC_RM_ALLOC: {
      if (!ctl || (!sized(sizeof(Nvos21)) && !sized(sizeof(Nvos64)))) return -EINVAL;
      auto* a = static_cast<Nvos21*>(arg);  // Nvos64 starts with the same fields
      a->status = alloc(*a);
      return 0;
    }
    case NV_ESC_RM_FREE: {
      if (!ctl || !sized(sizeof(Nvos00))) return -EINVAL;
      auto* f = static_cast<Nvos00*>(arg);
      f->status = free_object(f->hObjectOld);
      return 0;
    }
    case NV_ESC_RM_CONTROL: {
      if (!ctl || !sized(sizeof(Nvos54))) return -EINVAL;
      auto* c = static_cast<Nvos54*>(arg);
      c->status = control(*c);
      return 0;
    }
    case NV_ESC_RM_ALLOC_MEMORY: {
      if (ctl || !sized(sizeof(Nvos02WithFd)) || !registered_.count(fd)) return -EINVAL;
      auto& p = static_cast<Nvos02WithFd*>(arg)->params;
      if (p.hClass != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR) {
        p.status = NV_ERR_INVALID_CLASS;
        return 0;
      }
      if (!is(p.hObjectParent, NV01_DEVICE_0) || p.hObjectNew == 0 || objects_.count(p.hObjectNew)) {
        p.status = p.hObjectNew == 0 || objects_.count(p.hObjectNew) ? NV_ERR_INVALID_OBJECT_HANDLE
                                                                      : NV_ERR_INVALID_OBJECT_PARENT;
        return 0;
      }
      if (p.pMemory % kPage || (p.limit + 1) % kPage || p.limit == 0) {
        p.status = NV_ERR_INVALID_ARGUMENT;
        return 0;
      }
      objects_[p.hObjectNew] = {p.hClass, p.hObjectParent};
      mems_[p.hObjectNew] = {p.limit + 1, true, p.pMemory, false};
      p.status = NV_OK;
      return 0;
    }
    case NV_ESC_RM_MAP_MEMORY: {
      if (!ctl || !sized(sizeof(Nvos33WithFd))) return -EINVAL;
      auto* m = static_cast<Nvos33WithFd*>(arg);
      auto& p = m->params;
      auto fit = fds_.find(m->fd);
      auto mem = mems_.find(p.hMemory);
      if (fit == fds_.end() || (!fit->second && !registered_.count(m->fd)))
        p.status = NV_ERR_INVALID_ARGUMENT;  // not an nvidia fd, or one not registered
      else if (mem == mems_.end())
        p.status = NV_ERR_INVALID_OBJECT_HANDLE;
      else if (p.offset + p.length > mem->second.size || p.length == 0)
        p.status = NV_ERR_INVALID_LIMIT;
      else {
        pending_map_[m->fd] = p.hMemory;
        p.pLinearAddress = 0;
        p.status = NV_OK;
      }
      return 0;
    }
    case NV_ESC_RM_UNMAP_MEMORY: {
      if (!ctl || !sized(sizeof(Nvos34))) return -EINVAL;
      static_cast<Nvos34*>(arg)->status = NV_OK;
      return 0;
    }
  }
  return -EINVAL;
}

NvStatus RmState::alloc(Nvos21& a) {
  if (a.hClass == NV01_ROOT_CLIENT) {
    NvHandle h = a.hObjectNew ? a.hObjectNew : next_handle_++;
    if (objects_.count(h)) return NV_ERR_INVALID_OBJECT_HANDLE;
    objects_[h] = {a.hClass, 0};
    a.hObjectNew = h;
    return NV_OK;
  }
  if (!is(a.hRoot, NV01_ROOT_CLIENT)) return NV_ERR_INVALID_CLIENT;
  auto parent = objects_.find(a.hObjectParent);
  if (parent == objects_.end()) return NV_ERR_INVALID_OBJECT_PARENT;
  const uint32_t pcls = parent->second.cls;
  const NvHandle h = a.hObjectNew ? a.hObjectNew : next_handle_++;
  if (objects_.count(h)) return NV_ERR_INVALID_OBJECT_HANDLE;
  auto params = [&]<class T>(T*& out) {
    if (a.paramsSize != sizeof(T) || !a.pAllocParms) return false;
    out = reinterpret_cast<T*>(a.pAllocParms);
    return true;
  };
  const uint32_t c = a.hClass;
  const ClassSet& k = t_.classes;
  if (c == NV01_DEVICE_0) {
    DeviceAllocParams* p;
    if (pcls != NV01_ROOT_CLIENT) return NV_ERR_INVALID_OBJECT_PARENT;
    if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
    if (p->deviceId != 0) return NV_ERR_INVALID_ARGUMENT;
  } else if (c == NV20_SUBDEVICE_0 || c == FERMI_VASPACE_A || c == KEPLER_CHANNEL_GROUP_A) {
    if (pcls != NV01_DEVICE_0 && !(c == NV20_SUBDEVICE_0 && pcls == NV01_DEVICE_0))
      return NV_ERR_INVALID_OBJECT_PARENT;
    if (c == FERMI_VASPACE_A) {
      VaspaceAllocParams* p;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
    }
    if (c == KEPLER_CHANNEL_GROUP_A) {
      ChannelGroupAllocParams* p;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      if (p->engineType != NV2080_ENGINE_TYPE_GRAPHICS) return NV_ERR_INVALID_ARGUMENT;
    }
  } else if (c == k.usermode) {
    if (pcls != NV20_SUBDEVICE_0) return NV_ERR_INVALID_OBJECT_PARENT;
    mems_[h] = {kUsermodeMapBytes, false, 0, true};
  } else if (c == FERMI_CONTEXT_SHARE_A) {
    CtxshareAllocParams* p;
    if (pcls != KEPLER_CHANNEL_GROUP_A) return NV_ERR_INVALID_OBJECT_PARENT;
    if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
    if (!is(p->hVASpace, FERMI_VASPACE_A)) return NV_ERR_INVALID_OBJECT_HANDLE;
  } else if (c == k.gpfifo) {
    ChannelAllocParams* p;
    if (pcls != KEPLER_CHANNEL_GROUP_A) return NV_ERR_INVALID_OBJECT_PARENT;
    if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
    if (!is(p->hContextShare, FERMI_CONTEXT_SHARE_A)) return NV_ERR_INVALID_OBJECT_HANDLE;
    auto userd = mems_.find(p->hUserdMemory[0]);
    auto notifier = mems_.find(p->hObjectError);
    if (userd == mems_.end() || notifier == mems_.end()) return NV_ERR_INVALID_OBJECT_HANDLE;
    if (!userd->second.backing || !notifier->second.backing ||
        p->userdOffset[0] + kUserdBytes > userd->second.size || p->userdOffset[0] % kUserdBytes)
      return NV_ERR_INVALID_ARGUMENT;
    if (p->gpFifoEntries == 0 || (p->gpFifoEntries & (p->gpFifoEntries - 1))) return NV_ERR_INVALID_ARGUMENT;
    // The ring lies in the memory hObjectBuffer names, video memory or system memory alike
    // (UVM's own channels keep theirs in system memory: uvm_channel_gpfifo_loc). USERD may
    // be either too (uvm_channel_gpput_loc); the engine reads both wherever they are.
    auto ring = mems_.find(p->hObjectBuffer);
    if (ring == mems_.end() || ring->second.usermode) return NV_ERR_INVALID_OBJECT_HANDLE;
    if (!ring->second.backing || p->gpFifoOffset < ring->second.backing ||
        p->gpFifoOffset + uint64_t(p->gpFifoEntries) * 8 > ring->second.backing + ring->second.size)
      return NV_ERR_INVALID_ARGUMENT;
    try {
      memory_.translate(p->gpFifoOffset, uint64_t(p->gpFifoEntries) * 8);
    } catch (const hcq::emu::Fault&) {
      return NV_ERR_INVALID_ADDRESS;  // the ring must be GPU-mapped
    }
    ChannelDesc d;
    d.id = h;
    d.token = next_token_++;
    d.gpfifo_va = p->gpFifoOffset;
    d.entries = p->gpFifoEntries;
    d.userd_va = userd->second.backing + p->userdOffset[0];
    d.notifier_va = notifier->second.backing;
    d.name = "channel " + hex(h);
    channels_[h] = d;
    if (scheduled_groups_.count(a.hObjectParent)) engine_->add_channel(d);
  } else if (c == k.compute || c == k.copy) {
    if (pcls != k.gpfifo) return NV_ERR_INVALID_OBJECT_PARENT;
  } else if (c == NV01_MEMORY_LOCAL_USER || c == NV01_MEMORY_SYSTEM) {
    MemoryAllocParams* p;
    if (pcls != NV01_DEVICE_0) return NV_ERR_INVALID_OBJECT_PARENT;
    if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
    if (p->size == 0 || p->size % kPage) return NV_ERR_INVALID_ARGUMENT;
    // Video memory is as large as the card says: RM's heap refuses what does not fit with
    // NV_ERR_NO_MEMORY (open-gpu-kernel-modules, heapAlloc). System memory is the host's.
    const bool vidmem = c == NV01_MEMORY_LOCAL_USER;
    if (vidmem && p->size > t_.vram_bytes - vram_used_) return NV_ERR_NO_MEMORY;
    if (vidmem) vram_used_ += p->size;
    mems_[h] = {p->size, false, 0, false, vidmem};
  } else {
    return NV_ERR_INVALID_CLASS;
  }
  objects_[h] = {c, a.hObjectParent};
  a.hObjectNew = h;
  return NV_OK;
}

void RmState::start_channels(NvHandle group) {
  scheduled_groups_.insert(group);
  for (auto& [h, d] : channels_)
    if (objects_[h].parent == group) engine_->add_channel(d);
}

NvStatus RmState::free_object(NvHandle h) {
  auto it = objects_.find(h);
  if (it == objects_.end()) return NV_ERR_INVALID_OBJECT_HANDLE;
  std::vector<NvHandle> children;
  for (auto& [c, o] : objects_)
    if (o.parent == h && c != h) children.push_back(c);
  for (NvHandle c : children) free_object(c);
  if (channels_.erase(h)) engine_->remove_channel(h);
  if (auto m = mems_.find(h); m != mems_.end()) {
    if (m->second.vidmem) vram_used_ -= m->second.size;
    if (m->second.memfd >= 0) ::close(m->second.memfd);
    mems_.erase(m);
  }
  scheduled_groups_.erase(h);
  objects_.erase(h);
  return NV_OK;
}

NvStatus RmState::control(Nvos54& c) {
  auto params = [&]<class T>(T*& out) {
    if (c.paramsSize != sizeof(T) || !c.params) return false;
    out = reinterpret_cast<T*>(c.params);
    return true;
  };
  auto obj = objects_.find(c.hObject);
  if (!is(c.hClient, NV01_ROOT_CLIENT)) return NV_ERR_INVALID_CLIENT;
  if (obj == objects_.end()) return NV_ERR_INVALID_OBJECT_HANDLE;
  const uint32_t cls = obj->second.cls;
  const uint32_t owner = c.cmd >> 16;  // the class a command belongs to: 0x0000, 0x0080 ...
  auto on = [&](uint32_t want) { return cls == want; };
  switch (c.cmd) {
    case NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD: {
      OsUnixExportObjectToFdParams* p;
      if (!on(NV01_ROOT_CLIENT)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      auto fd = fds_.find(p->fd);
      if (p->object.type != NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM || p->flags != 0 ||
          fd == fds_.end() || !fd->second || exported_.count(p->fd))
        return NV_ERR_INVALID_PARAMETER;  // an nvidiactl fd holding no object yet
      auto mem = mems_.find(p->object.hObject);
      if (mem == mems_.end() || mem->second.os_descriptor || mem->second.usermode)
        return NV_ERR_OBJECT_NOT_FOUND;
      const int backing = memfd_of(mem->second);
      const int dup = backing < 0 ? -1 : ::fcntl(backing, F_DUPFD_CLOEXEC, 0);
      if (dup < 0) return NV_ERR_NO_MEMORY;
      exported_[p->fd] = dup;
      return NV_OK;
    }
    case NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD: {
      // The fd is what passable_fd gave the exporter (a memfd): the emulated form of an
      // nvidiactl fd holding an exported object.
      OsUnixImportObjectFromFdParams* p;
      if (!on(NV01_ROOT_CLIENT)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      if (p->object.type != NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM)
        return NV_ERR_INVALID_PARAMETER;
      if (!is(p->object.hParent, NV01_DEVICE_0)) return NV_ERR_INVALID_OBJECT_PARENT;
      if (p->object.hObject == 0 || objects_.count(p->object.hObject))
        return NV_ERR_INVALID_OBJECT_HANDLE;
      const int64_t size = os::sealed_buffer_fd_size(p->fd, kPage);
      if (size < 0) return NV_ERR_INVALID_PARAMETER;  // no exported object behind it
      const int dup = ::fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
      if (dup < 0) return NV_ERR_NO_MEMORY;
      objects_[p->object.hObject] = {NV01_MEMORY_SYSTEM, p->object.hParent};
      MemObject m;
      m.size = uint64_t(size);
      m.memfd = dup;
      mems_[p->object.hObject] = m;
      return NV_OK;
    }
    case NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: {
      GpuGetIdInfoV2Params* p;
      if (!on(NV01_ROOT_CLIENT)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      if (p->gpuId != kGpuId) return NV_ERR_INVALID_ARGUMENT;
      p->deviceInstance = 0;
      p->subDeviceInstance = 0;
      return NV_OK;
    }
    case NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: {
      ClassListV2Params* p;
      if (!on(NV01_DEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      // What a real class list also holds: older classes the newest supersede.
      const uint32_t list[] = {NV01_MEMORY_SYSTEM, NV01_MEMORY_LOCAL_USER, FERMI_CONTEXT_SHARE_A,
                               FERMI_VASPACE_A, KEPLER_CHANNEL_GROUP_A, TURING_USERMODE_A,
                               AMPERE_DMA_COPY_A, t_.classes.gpfifo, t_.classes.compute,
                               t_.classes.copy, t_.classes.usermode};
      p->numClasses = 0;
      for (uint32_t k : list) p->classList[p->numClasses++] = k;
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GPU_GET_GID_INFO: {
      GpuGetGidInfoParams* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      if (p->flags != NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY) return NV_ERR_NOT_SUPPORTED;
      p->length = 16;
      std::memcpy(p->data, kUuid, 16);
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GPU_GET_NAME_STRING: {
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      uint8_t* ascii;
      if (major_ >= kMajorNameStringAsciiOnly) {
        GpuGetNameStringParams* p;
        if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
        ascii = p->ascii;
      } else {  // 132 bytes: ascii or unicode
        GpuGetNameStringParamsV590* p;
        if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
        ascii = p->gpuNameString.ascii;
      }
      std::memset(ascii, 0, NV2080_GPU_MAX_NAME_STRING_LENGTH);
      std::memcpy(ascii, t_.marketing_name.data(),
                  std::min<size_t>(NV2080_GPU_MAX_NAME_STRING_LENGTH - 1, t_.marketing_name.size()));
      return NV_OK;
    }
    case NV2080_CTRL_CMD_MC_GET_ARCH_INFO: {
      McGetArchInfoParams* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      p->architecture = t_.architecture;
      p->implementation = t_.implementation;
      p->revision = 0xa1;
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GR_GET_INFO: {
      GrGetInfoParams* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p) || !p->grInfoList || p->grInfoListSize > NV2080_CTRL_GR_INFO_INDEX_MAX)
        return NV_ERR_INVALID_PARAM_STRUCT;
      auto* info = reinterpret_cast<GrInfo*>(p->grInfoList);
      for (uint32_t i = 0; i < p->grInfoListSize; i++) {
        switch (info[i].index) {
          case NV2080_CTRL_GR_INFO_INDEX_SM_VERSION:
            info[i].data = (t_.sm / 10) << 8 | (t_.sm % 10);
            break;
          case NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: info[i].data = t_.gpcs; break;
          case NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: info[i].data = t_.tpc_per_gpc; break;
          case NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: info[i].data = t_.sm_per_tpc; break;
          case NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: info[i].data = 64; break;
          default: return NV_ERR_INVALID_ARGUMENT;
        }
      }
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GR_GET_GPC_MASK: {
      GrGetGpcMaskParams* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      p->gpcMask = (1u << t_.gpcs) - 1;
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GR_GET_TPC_MASK: {
      // The enabled TPCs spread evenly over the GPCs, the first GPCs taking one more.
      GrGetTpcMaskParams* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      const uint32_t tpcs = t_.enabled_sms / t_.sm_per_tpc;
      const uint32_t n = p->gpcId >= t_.gpcs ? 0 : tpcs / t_.gpcs + (p->gpcId < tpcs % t_.gpcs);
      p->tpcMask = (1u << n) - 1;
      return NV_OK;
    }
    case NV2080_CTRL_CMD_FB_GET_INFO_V2: {
      FbGetInfoV2Params* p;
      if (!on(NV20_SUBDEVICE_0)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p) || p->fbInfoListSize > NV2080_CTRL_FB_INFO_MAX_LIST_SIZE)
        return NV_ERR_INVALID_PARAM_STRUCT;
      for (uint32_t i = 0; i < p->fbInfoListSize; i++) {
        auto& e = p->fbInfoList[i];
        if (e.index == NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE) {
          e.data = uint32_t((t_.vram_bytes - vram_used_) >> 10);  // KiB
          continue;
        }
        if (e.index != NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE &&
            e.index != NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE)
          return NV_ERR_INVALID_ARGUMENT;
        e.data = uint32_t(t_.vram_bytes >> 10);  // KiB
      }
      return NV_OK;
    }
    case NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: {
      WorkSubmitTokenParams* p;
      auto ch = channels_.find(c.hObject);
      if (ch == channels_.end()) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      p->workSubmitToken = ch->second.token;
      return NV_OK;
    }
    case NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: {
      GpfifoScheduleParams* p;
      if (!on(KEPLER_CHANNEL_GROUP_A)) return NV_ERR_INVALID_OBJECT_HANDLE;
      if (!params(p)) return NV_ERR_INVALID_PARAM_STRUCT;
      if (p->bEnable && !scheduled_groups_.count(c.hObject)) start_channels(c.hObject);
      return NV_OK;
    }
  }
  (void)owner;
  return NV_ERR_NOT_SUPPORTED;
}

void* RmState::mmap(int fd, void* addr, size_t len, int flags) {
  std::lock_guard lk(mu_);
  auto pending = pending_map_.find(fd);
  if (pending == pending_map_.end()) {
    errno = EINVAL;  // no NV_ESC_RM_MAP_MEMORY named this fd
    return MAP_FAILED;
  }
  auto mem = mems_.find(pending->second);
  pending_map_.erase(pending);
  if (mem == mems_.end() || len > mem->second.size) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  if (mem->second.usermode)
    return ::mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | (flags & MAP_FIXED),
                  usermode_fd_, 0);
  // Memory lives at one address, where CPU and emulated GPU both see it.
  if (!(flags & MAP_FIXED) || !place(mem->second, reinterpret_cast<uint64_t>(addr))) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  return addr;
}

int RmState::uvm_ioctl(unsigned long req, void* arg) {
  std::lock_guard lk(mu_);
  auto uuid_ok = [&](const NvProcessorUuid& u) { return std::memcmp(u.uuid, kUuid, 16) == 0; };
  switch (req) {
    case UVM_INITIALIZE:
      uvm_ready_ = true;
      static_cast<UvmInitializeParams*>(arg)->rmStatus = NV_OK;
      return 0;
    case UVM_MM_INITIALIZE:
      static_cast<UvmMmInitializeParams*>(arg)->rmStatus = NV_OK;
      return 0;
    case UVM_DEINITIALIZE:
      return 0;
  }
  if (!uvm_ready_) return -EBADF;  // UVM answers nothing before UVM_INITIALIZE
  switch (req) {
    case UVM_REGISTER_GPU: {
      auto* p = static_cast<UvmRegisterGpuParams*>(arg);
      p->rmStatus = uuid_ok(p->gpu_uuid) ? NV_OK : NV_ERR_GPU_UUID_NOT_FOUND;
      gpu_registered_ |= p->rmStatus == NV_OK;
      return 0;
    }
    case UVM_UNREGISTER_GPU: {
      static_cast<UvmUnregisterGpuParams*>(arg)->rmStatus = NV_OK;
      return 0;
    }
    case UVM_REGISTER_GPU_VASPACE: {
      auto* p = static_cast<UvmRegisterGpuVaspaceParams*>(arg);
      p->rmStatus = !gpu_registered_ || !uuid_ok(p->gpuUuid) ? NV_ERR_GPU_UUID_NOT_FOUND
                    : !is(p->hVaSpace, FERMI_VASPACE_A)       ? NV_ERR_INVALID_OBJECT_HANDLE
                                                              : NV_OK;
      return 0;
    }
    case UVM_UNREGISTER_GPU_VASPACE:
      static_cast<UvmUnregisterGpuVaspaceParams*>(arg)->rmStatus = NV_OK;
      return 0;
    case UVM_REGISTER_CHANNEL: {
      auto* p = static_cast<UvmRegisterChannelParams*>(arg);
      p->rmStatus = channels_.count(p->hChannel) ? NV_OK : NV_ERR_INVALID_CHANNEL;
      return 0;
    }
    case UVM_UNREGISTER_CHANNEL:  // its layout changed in 590
      if (major_ >= kMajorUvmFreeNoLength)
        static_cast<UvmUnregisterChannelParams*>(arg)->rmStatus = NV_OK;
      else
        static_cast<UvmUnregisterChannelParamsV580*>(arg)->rmStatus = NV_OK;
      return 0;
    case UVM_CREATE_EXTERNAL_RANGE: {
      auto* p = static_cast<UvmCreateExternalRangeParams*>(arg);
      auto next = uvm_ranges_.lower_bound(p->base);
      bool overlaps = (next != uvm_ranges_.end() && next->first < p->base + p->length) ||
                      (next != uvm_ranges_.begin() &&
                       std::prev(next)->first + std::prev(next)->second > p->base);
      p->rmStatus = p->length == 0 || p->base % kPage || p->length % kPage ? NV_ERR_INVALID_ADDRESS
                    : overlaps ? NV_ERR_UVM_ADDRESS_IN_USE
                               : NV_OK;
      if (p->rmStatus == NV_OK) uvm_ranges_[p->base] = p->length;
      return 0;
    }
    case UVM_MAP_EXTERNAL_ALLOCATION: {
      auto* p = static_cast<UvmMapExternalAllocationParams*>(arg);
      auto range = uvm_ranges_.upper_bound(p->base);
      auto mem = mems_.find(p->hMemory);
      if (range == uvm_ranges_.begin() ||
          p->base + p->length > std::prev(range)->first + std::prev(range)->second) {
        p->rmStatus = NV_ERR_INVALID_ADDRESS;  // not inside an external range
      } else if (mem == mems_.end() || mem->second.usermode) {
        p->rmStatus = NV_ERR_INVALID_OBJECT_HANDLE;
      } else if (p->gpuAttributesCount != 1 || !uuid_ok(p->perGpuAttributes[0].gpuUuid)) {
        p->rmStatus = NV_ERR_INVALID_DEVICE;
      } else if (p->offset != 0 || p->length > mem->second.size || gpu_maps_.count(p->base) ||
                 !place(mem->second, p->base)) {
        p->rmStatus = NV_ERR_NOT_SUPPORTED;  // the emulator maps whole objects at their place
      } else {
        try {
          memory_.map(p->base, p->length);
          gpu_maps_[p->base] = p->length;
          p->rmStatus = NV_OK;
        } catch (const Error&) {
          p->rmStatus = NV_ERR_UVM_ADDRESS_IN_USE;
        }
      }
      return 0;
    }
    case UVM_FREE: {  // 590 dropped the length field
      const uint64_t base = *static_cast<const uint64_t*>(arg);
      NvStatus* status = major_ >= kMajorUvmFreeNoLength
                             ? &static_cast<UvmFreeParams*>(arg)->rmStatus
                             : &static_cast<UvmFreeParamsV580*>(arg)->rmStatus;
      // Before 590 an external range is freed only whole: uvm_api_free checks the length
      // against the range (open-gpu-kernel-modules 580 kernel-open/nvidia-uvm/uvm_va_space.c).
      auto range = uvm_ranges_.find(base);
      if (range == uvm_ranges_.end() ||
          (major_ < kMajorUvmFreeNoLength &&
           static_cast<const UvmFreeParamsV580*>(arg)->length != range->second)) {
        *status = NV_ERR_INVALID_ADDRESS;
        return 0;
      }
      uvm_ranges_.erase(range);
      if (gpu_maps_.erase(base)) memory_.unmap(base);
      *status = NV_OK;
      return 0;
    }
  }
  return -ENOTTY;
}

class RmNode final : public os::EmulatedNode {
 public:
  RmNode(std::shared_ptr<RmState> s, bool ctl) : s_(std::move(s)), ctl_(ctl) {}
  void on_open(int fd) override { s_->opened(fd, ctl_); }
  void on_close(int fd) override { s_->closed(fd); }
  int passable_fd(int fd) override { return s_->passable_fd(fd); }
  int ioctl(int fd, unsigned long req, void* arg) override { return s_->ioctl(ctl_, fd, req, arg); }
  void* mmap(void* addr, size_t len, int, int flags, int fd, off_t) override {
    return s_->mmap(fd, addr, len, flags);
  }
  // The mappings are the process's own (memory placed at its GPU address, the usermode
  // page): unmapping them is a real munmap.
  int munmap(void* addr, size_t len) override { return ::munmap(addr, len) < 0 ? -errno : 0; }

 private:
  std::shared_ptr<RmState> s_;
  bool ctl_;
};

class UvmNode final : public os::EmulatedNode {
 public:
  explicit UvmNode(std::shared_ptr<RmState> s) : s_(std::move(s)) {}
  int ioctl(int, unsigned long req, void* arg) override { return s_->uvm_ioctl(req, arg); }

 private:
  std::shared_ptr<RmState> s_;
};

}  // namespace

std::shared_ptr<os::Kernel> make_emulated_system(const Target& target,
                                                 const std::string& rm_version) {
  auto k = std::make_shared<os::EmulatedKernel>();
  auto state = std::make_shared<RmState>(target, rm_version);
  k->add_node("/dev/nvidiactl", std::make_shared<RmNode>(state, true));
  k->add_node("/dev/nvidia0", std::make_shared<RmNode>(state, false));
  k->add_node("/dev/nvidia-uvm", std::make_shared<UvmNode>(state));
  std::weak_ptr<RmState> weak = state;
  k->set_emulator_report(os::EmulatorReport::FaultLog, [weak] {
    auto s = weak.lock();
    return s ? s->fault_log() : std::string();
  });
  return k;
}

}  // namespace hcq::nv::emu
