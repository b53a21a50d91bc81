#include "amd/emu/kfd.hpp"

#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libdrm/amdgpu_drm.h>
#include <libdrm/drm.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "amd/emu/engine.hpp"
#include "amd/kfd/kfd_dmabuf.hpp"
#include "os/emulated_kernel.hpp"

namespace hcq::amd::emu {
namespace {

constexpr uint32_t kGpuId = 0x6a5c;           // any non-zero id (real ids hash the PCI location)
constexpr int kRenderMinor = 128;
constexpr uint64_t kDoorbellMmapOffset = 1ull << 40;  // where /dev/kfd maps the doorbell page
constexpr uint64_t kUnsignaledSlot = ~0ull;           // KFD's empty event-mailbox value

// State of the emulated KFD: one process, one GPU.
class KfdState final : public GpuEvents {
 public:
  KfdState(const Target& t, bool host_link) : host_link_(host_link), vram_bytes_(t.vram_bytes) {
    doorbells_ = static_cast<uint64_t*>(::mmap(nullptr, 0x2000, PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    engine_ = std::make_unique<Engine>(t.gen, memory_, *this);
  }
  ~KfdState() override {
    engine_.reset();
    // What the process did not free goes with the device. Unmapped, not re-reserved: the
    // driver's reservation around it may be gone already, and a reservation made here would
    // be nobody's to release.
    for (auto& [h, a] : allocs_)
      if (!(a.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)) {
        ::munmap(reinterpret_cast<void*>(a.va), a.size);
        if (a.memfd >= 0) ::close(a.memfd);
      }
    ::munmap(doorbells_, 0x2000);
  }

  int ioctl(unsigned long req, void* arg);
  void* mmap_kfd(uint64_t offset, size_t length) {
    if (offset != kDoorbellMmapOffset || length != 0x2000) {
      errno = EINVAL;
      return MAP_FAILED;
    }
    return doorbells_;
  }
  void* mmap_render(void* addr, uint64_t offset, size_t length, int flags) {
    std::lock_guard lk(mu_);
    for (auto& [h, a] : allocs_)
      if (a.mmap_offset == offset) {
        if (length > a.size || ((flags & MAP_FIXED) && addr != reinterpret_cast<void*>(a.va))) {
          errno = EINVAL;
          return MAP_FAILED;
        }
        return reinterpret_cast<void*>(a.va);  // backed at the GPU address since ALLOC
      }
    errno = EINVAL;
    return MAP_FAILED;
  }

  // What the emulated GPU reported for its faults (os::EmulatorReport::FaultLog; a real KFD has none).
  std::string fault_log() {
    std::lock_guard lk(mu_);
    return fault_log_;
  }

  std::string ib_positions() { return engine_->ib_positions(); }

  // GpuEvents
  void interrupt(uint32_t context_id) override { signal_event(context_id); }
  void fault(uint32_t, bool memory_fault, uint64_t address, const std::string& what) override {
    std::lock_guard lk(mu_);
    fault_log_ += what + "\n";  // the engine's message names the queue
    for (auto& [id, e] : events_) {
      if (memory_fault && e.type == KFD_IOC_EVENT_MEMORY) {
        e.data = {};
        e.data.memory_exception_data.gpu_id = kGpuId;
        e.data.memory_exception_data.va = address;
        e.data.memory_exception_data.failure.NotPresent = 1;
        e.signaled = true;
      } else if (!memory_fault && e.type == KFD_IOC_EVENT_HW_EXCEPTION) {
        e.data = {};
        e.data.hw_exception_data.gpu_id = kGpuId;
        e.data.hw_exception_data.reset_type = 1;
        e.data.hw_exception_data.reset_cause = 1;  // hang
        e.signaled = true;
      }
    }
    cv_.notify_all();
  }

 private:
  struct Alloc {
    uint64_t va, size, mmap_offset;
    uint32_t flags;
    bool gpu_mapped;
    int memfd = -1;  // what backs it (VRAM and GTT): the dma-buf AMDKFD_IOC_EXPORT_DMABUF dups
  };
  int export_dmabuf(kfd_ioctl_export_dmabuf_args* a);
  int import_dmabuf(kfd_ioctl_import_dmabuf_args* a);
  struct Event {
    uint32_t type;
    bool auto_reset;
    bool signaled = false;
    uint32_t slot = 0;
    kfd_event_data data{};
  };

  void signal_event(uint32_t id) {
    std::lock_guard lk(mu_);
    auto it = events_.find(id);
    if (it == events_.end()) return;
    it->second.signaled = true;
    cv_.notify_all();
  }
  int wait_events(kfd_ioctl_wait_events_args* a);

  const bool host_link_;  // the GPU reaches system memory (GTT, userptr)
  const uint64_t vram_bytes_;
  uint64_t vram_used_ = 0;  // VRAM allocations not yet freed (under mu_)
  hcq::emu::Memory memory_;
  std::unique_ptr<Engine> engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool vm_acquired_ = false;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, Alloc> allocs_;
  std::map<uint32_t, Event> events_;
  uint32_t next_event_ = 1;
  uint64_t* event_page_ = nullptr;
  uint32_t next_slot_ = 0;
  std::map<uint32_t, QueueDesc> queues_;
  std::string fault_log_;  // what the emulated GPU said about each fault
  uint32_t next_queue_ = 0;
  uint64_t* doorbells_;
};

int KfdState::ioctl(unsigned long req, void* arg) {
  switch (req) {
    case AMDKFD_IOC_GET_VERSION: {
      auto* a = static_cast<kfd_ioctl_get_version_args*>(arg);
      a->major_version = KFD_IOCTL_MAJOR_VERSION;
      a->minor_version = KFD_IOCTL_MINOR_VERSION;
      return 0;
    }
    case AMDKFD_IOC_ACQUIRE_VM: {
      auto* a = static_cast<kfd_ioctl_acquire_vm_args*>(arg);
      if (a->gpu_id != kGpuId) return -EINVAL;
      vm_acquired_ = true;
      return 0;
    }
    case AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: {
      auto* a = static_cast<kfd_ioctl_alloc_memory_of_gpu_args*>(arg);
      if (!vm_acquired_ || a->gpu_id != kGpuId) return -EINVAL;
      if (a->size == 0 || (a->size & 4095) || (a->va_addr & 4095)) return -EINVAL;
      // No path to system memory: amdgpu has no GTT for this GPU (its GTT size is 0) and
      // cannot map a userptr for it. ENOMEM, what amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu
      // returns when it cannot reserve the memory a buffer needs (amdgpu_amdkfd_reserve_
      // mem_limit, "Insufficient memory"): the errno a full GTT pool gives, and this pool
      // holds nothing. EINVAL would tell the caller its arguments were wrong; they are not.
      if (!host_link_ &&
          (a->flags & (KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)))
        return -ENOMEM;
      if (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
        // The emulated GPU sees host memory at host addresses, so a userptr must be mapped
        // at its own CPU address (as hcq and tinygrad do on real KFD).
        if (a->mmap_offset != a->va_addr || (a->mmap_offset & 4095)) return -EINVAL;
        std::lock_guard lk(mu_);
        uint64_t h = next_handle_++;
        allocs_[h] = {a->va_addr, a->size, 0, a->flags, false};
        a->handle = h;
        return 0;
      }
      if (!(a->flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT)))
        return -EINVAL;  // doorbell and MMIO allocations are not emulated
      const bool vram = a->flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
      {
        // VRAM is as large as the card says: amdgpu_amdkfd_reserve_mem_limit refuses a buffer
        // beyond what is left with -ENOMEM. GTT (system memory) is bounded by the host.
        std::lock_guard lk(mu_);
        if (vram && a->size > vram_bytes_ - vram_used_) return -ENOMEM;
        if (vram) vram_used_ += a->size;
      }
      // Back the range at its GPU address: the emulated GPU and the CPU share it. A memfd,
      // shared: what the dma-buf of a real buffer object is, so another process's emulated
      // GPU maps the same pages once this one is exported (AMDKFD_IOC_EXPORT_DMABUF).
      int memfd = os::make_sealed_buffer_fd("hcq-emu-kfd", a->size);
      void* p = MAP_FAILED;
      if (memfd >= 0)
        p = ::mmap(reinterpret_cast<void*>(a->va_addr), a->size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_NORESERVE, memfd, 0);
      std::lock_guard lk(mu_);
      if (p == MAP_FAILED) {
        if (memfd >= 0) ::close(memfd);
        if (vram) vram_used_ -= a->size;
        return -ENOMEM;
      }
      if (a->size >= (2u << 20)) ::madvise(p, a->size, MADV_HUGEPAGE);
      uint64_t h = next_handle_++;
      uint64_t off = h << 32;  // render-node mmap offset, one per allocation
      allocs_[h] = {a->va_addr, a->size, off, a->flags, false, memfd};
      a->handle = h;
      a->mmap_offset = off;
      return 0;
    }
    case AMDKFD_IOC_AVAILABLE_MEMORY: {
      // The VRAM a new buffer may still take (kfd_ioctl_get_available_memory).
      auto* a = static_cast<kfd_ioctl_get_available_memory_args*>(arg);
      if (a->gpu_id != kGpuId) return -EINVAL;
      std::lock_guard lk(mu_);
      a->available = vram_bytes_ - vram_used_;
      return 0;
    }
    case AMDKFD_IOC_MAP_MEMORY_TO_GPU:
    case AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: {
      auto* a = static_cast<kfd_ioctl_map_memory_to_gpu_args*>(arg);
      std::lock_guard lk(mu_);
      auto it = allocs_.find(a->handle);
      if (it == allocs_.end() || a->n_devices != 1) return -EINVAL;
      if (*reinterpret_cast<const uint32_t*>(a->device_ids_array_ptr) != kGpuId) return -EINVAL;
      bool map = req == AMDKFD_IOC_MAP_MEMORY_TO_GPU;
      if (map && !it->second.gpu_mapped) memory_.map(it->second.va, it->second.size);
      if (!map && it->second.gpu_mapped) memory_.unmap(it->second.va);
      it->second.gpu_mapped = map;
      a->n_success = 1;
      return 0;
    }
    case AMDKFD_IOC_FREE_MEMORY_OF_GPU: {
      auto* a = static_cast<kfd_ioctl_free_memory_of_gpu_args*>(arg);
      std::lock_guard lk(mu_);
      auto it = allocs_.find(a->handle);
      if (it == allocs_.end()) return -EINVAL;
      if (it->second.gpu_mapped) memory_.unmap(it->second.va);
      if (!(it->second.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR))  // the caller's memory stays
        ::mmap(reinterpret_cast<void*>(it->second.va), it->second.size, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      if (it->second.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) vram_used_ -= it->second.size;
      if (it->second.memfd >= 0) ::close(it->second.memfd);
      allocs_.erase(it);
      return 0;
    }
    case AMDKFD_IOC_EXPORT_DMABUF:
      return export_dmabuf(static_cast<kfd_ioctl_export_dmabuf_args*>(arg));
    case AMDKFD_IOC_IMPORT_DMABUF:
      return import_dmabuf(static_cast<kfd_ioctl_import_dmabuf_args*>(arg));
    case AMDKFD_IOC_GET_DMABUF_INFO: {
      // Only the size and GPU of what came (no metadata): a memfd stands for the dma-buf.
      auto* a = static_cast<kfd_ioctl_get_dmabuf_info_args*>(arg);
      const int64_t size = os::sealed_buffer_fd_size(int(a->dmabuf_fd), 1);
      if (size < 0) return int(size);  // not a buffer's fd
      a->size = uint64_t(size);
      a->gpu_id = kGpuId;
      a->flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
      a->metadata_size = 0;
      return 0;
    }
    case AMDKFD_IOC_CREATE_QUEUE: {
      auto* a = static_cast<kfd_ioctl_create_queue_args*>(arg);
      if (a->gpu_id != kGpuId) return -EINVAL;
      if (a->ring_size < 1024 || (a->ring_size & (a->ring_size - 1))) return -EINVAL;
      if (a->queue_type != KFD_IOC_QUEUE_TYPE_COMPUTE && a->queue_type != KFD_IOC_QUEUE_TYPE_SDMA)
        return -EINVAL;  // AQL queues are not emulated
      if (a->queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE && a->eop_buffer_size != 4096)
        return -EINVAL;
      try {
        memory_.translate(a->ring_base_address, a->ring_size);
        memory_.translate(a->read_pointer_address, 8);
        memory_.translate(a->write_pointer_address, 8);
      } catch (const hcq::emu::Fault&) {
        return -EINVAL;  // KFD checks the ring and pointers are mapped buffers
      }
      std::lock_guard lk(mu_);
      if (next_queue_ >= 0x2000 / 8) return -ENOSPC;
      uint32_t id = next_queue_++;
      QueueDesc q;
      q.type = a->queue_type == KFD_IOC_QUEUE_TYPE_SDMA ? QueueDesc::Type::Sdma
                                                        : QueueDesc::Type::Pm4;
      q.id = id;
      q.ring_va = a->ring_base_address;
      q.ring_bytes = a->ring_size;
      q.rptr_va = a->read_pointer_address;
      q.wptr_va = a->write_pointer_address;
      doorbells_[id] = 0;
      q.doorbell = &doorbells_[id];
      queues_[id] = q;
      engine_->add_queue(q);
      a->queue_id = id;
      a->doorbell_offset = kDoorbellMmapOffset + id * 8;
      return 0;
    }
    case AMDKFD_IOC_DESTROY_QUEUE: {
      auto* a = static_cast<kfd_ioctl_destroy_queue_args*>(arg);
      {
        std::lock_guard lk(mu_);
        if (!queues_.erase(a->queue_id)) return -EINVAL;
      }
      engine_->remove_queue(a->queue_id);
      return 0;
    }
    case AMDKFD_IOC_CREATE_EVENT: {
      auto* a = static_cast<kfd_ioctl_create_event_args*>(arg);
      std::lock_guard lk(mu_);
      if (a->event_page_offset && !event_page_) {
        auto it = allocs_.find(a->event_page_offset);
        if (it == allocs_.end()) return -EINVAL;
        event_page_ = reinterpret_cast<uint64_t*>(it->second.va);
        for (size_t i = 0; i < it->second.size / 8; i++) event_page_[i] = kUnsignaledSlot;
      }
      Event e{a->event_type, a->auto_reset != 0};
      if (a->event_type == KFD_IOC_EVENT_SIGNAL) {
        if (!event_page_) return -EINVAL;  // dGPUs need the event page first
        e.slot = next_slot_++;
        a->event_slot_index = e.slot;
        a->event_trigger_data = next_event_;
      }
      a->event_id = next_event_++;
      events_[a->event_id] = e;
      return 0;
    }
    case AMDKFD_IOC_DESTROY_EVENT: {
      auto* a = static_cast<kfd_ioctl_destroy_event_args*>(arg);
      std::lock_guard lk(mu_);
      return events_.erase(a->event_id) ? 0 : -EINVAL;
    }
    case AMDKFD_IOC_SET_EVENT: {
      signal_event(static_cast<kfd_ioctl_set_event_args*>(arg)->event_id);
      return 0;
    }
    case AMDKFD_IOC_RESET_EVENT: {
      auto* a = static_cast<kfd_ioctl_reset_event_args*>(arg);
      std::lock_guard lk(mu_);
      auto it = events_.find(a->event_id);
      if (it == events_.end()) return -EINVAL;
      it->second.signaled = false;
      return 0;
    }
    case AMDKFD_IOC_WAIT_EVENTS:
      return wait_events(static_cast<kfd_ioctl_wait_events_args*>(arg));
    case AMDKFD_IOC_GET_CLOCK_COUNTERS: {
      auto* a = static_cast<kfd_ioctl_get_clock_counters_args*>(arg);
      a->gpu_clock_counter = engine_->timestamp();
      a->cpu_clock_counter = a->system_clock_counter = uint64_t(
          std::chrono::steady_clock::now().time_since_epoch().count());
      a->system_clock_freq = 1'000'000'000;
      return 0;
    }
    default:
      return -ENOTTY;
  }
}

// kfd_ioctl_export_dmabuf (Linux amdkfd): a userptr is EPERM, an unknown handle EINVAL; the
// new fd takes the flags given (O_CLOEXEC, nothing else).
int KfdState::export_dmabuf(kfd_ioctl_export_dmabuf_args* a) {
  if (a->flags & ~uint32_t(O_CLOEXEC | O_RDWR)) return -EINVAL;
  std::lock_guard lk(mu_);
  auto it = allocs_.find(a->handle);
  if (it == allocs_.end()) return -EINVAL;
  if (it->second.memfd < 0) return -EPERM;
  int fd = ::fcntl(it->second.memfd, (a->flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
  if (fd < 0) return -errno;
  a->dmabuf_fd = uint32_t(fd);
  return 0;
}

// kfd_ioctl_import_dmabuf: the whole dma-buf at va_addr, a new handle to map and free as any
// other. The pages stay alive through the fd kept here, whatever the exporter does.
int KfdState::import_dmabuf(kfd_ioctl_import_dmabuf_args* a) {
  if (!vm_acquired_ || a->gpu_id != kGpuId || (a->va_addr & 4095)) return -EINVAL;
  const int64_t sealed = os::sealed_buffer_fd_size(int(a->dmabuf_fd), 4096);
  if (sealed < 0) return int(sealed);
  const uint64_t size = uint64_t(sealed);
  int fd = ::fcntl(int(a->dmabuf_fd), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return -errno;
  void* p = ::mmap(reinterpret_cast<void*>(a->va_addr), size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return -ENOMEM;
  }
  std::lock_guard lk(mu_);
  uint64_t h = next_handle_++;
  allocs_[h] = {a->va_addr, size, h << 32, KFD_IOC_ALLOC_MEM_FLAGS_GTT, false, fd};
  a->handle = h;
  return 0;
}

int KfdState::wait_events(kfd_ioctl_wait_events_args* a) {
  auto* evs = reinterpret_cast<kfd_event_data*>(a->events_ptr);
  engine_->kick();
  std::unique_lock lk(mu_);
  for (uint32_t i = 0; i < a->num_events; i++)
    if (!events_.count(evs[i].event_id)) return -EINVAL;
  auto ready = [&] {
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->num_events; i++) n += events_[evs[i].event_id].signaled;
    return a->wait_for_all ? n == a->num_events : n > 0;
  };
  bool ok = cv_.wait_for(lk, std::chrono::milliseconds(a->timeout), ready);
  a->wait_result = ok ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT;
  for (uint32_t i = 0; i < a->num_events; i++) {
    Event& e = events_[evs[i].event_id];
    if (!e.signaled) continue;
    if (e.type == KFD_IOC_EVENT_MEMORY || e.type == KFD_IOC_EVENT_HW_EXCEPTION) {
      uint32_t id = evs[i].event_id;
      evs[i] = e.data;
      evs[i].event_id = id;
    }
    if (e.type == KFD_IOC_EVENT_SIGNAL && event_page_) event_page_[e.slot] = kUnsignaledSlot;
    if (e.auto_reset) e.signaled = false;
  }
  return 0;
}

class KfdNode final : public os::EmulatedNode {
 public:
  explicit KfdNode(std::shared_ptr<KfdState> s) : s_(std::move(s)) {}
  int ioctl(int, unsigned long req, void* arg) override { return s_->ioctl(req, arg); }
  void* mmap(void*, size_t len, int, int, int, off_t off) override {
    return s_->mmap_kfd(uint64_t(off), len);
  }

 private:
  std::shared_ptr<KfdState> s_;
};

class RenderNode final : public os::EmulatedNode {
 public:
  RenderNode(std::shared_ptr<KfdState> s, uint64_t vram, uint64_t gtt)
      : s_(std::move(s)), vram_(vram), gtt_(gtt) {}
  int ioctl(int, unsigned long req, void* arg) override {
    if (req == DRM_IOCTL_AMDGPU_INFO) {
      auto* info = static_cast<drm_amdgpu_info*>(arg);
      if (info->query != AMDGPU_INFO_VRAM_GTT) return -EINVAL;  // the one query emulated
      drm_amdgpu_info_vram_gtt v{};
      v.vram_size = v.vram_cpu_accessible_size = vram_;  // a resizable-BAR card
      v.gtt_size = gtt_;
      std::memcpy(reinterpret_cast<void*>(info->return_pointer), &v,
                  std::min<size_t>(info->return_size, sizeof(v)));
      return 0;
    }
    if (req != DRM_IOCTL_VERSION) return -ENOTTY;
    auto* v = static_cast<drm_version_t*>(arg);
    static const char name[] = "amdgpu";
    v->version_major = 3;
    v->version_minor = 57;
    if (v->name && v->name_len) std::strncpy(v->name, name, v->name_len);
    v->name_len = sizeof(name) - 1;
    return 0;
  }
  void* mmap(void* addr, size_t len, int, int flags, int, off_t off) override {
    return s_->mmap_render(addr, uint64_t(off), len, flags);
  }

 private:
  std::shared_ptr<KfdState> s_;
  uint64_t vram_, gtt_;
};

// One io_link's sysfs properties, the names and order of Linux amdkfd's iolink_show
// (drivers/gpu/drm/amd/amdkfd/kfd_topology.c); type 2 is CRAT_IOLINK_TYPE_PCIEXPRESS
// (kfd_crat.h), weight 20 what KFD gives a PCIe link.
std::string io_link(uint32_t from, uint32_t to) {
  std::string s;
  for (auto [k, v] : {std::pair<const char*, uint32_t>{"type", 2}, {"version_major", 0},
                      {"version_minor", 0}, {"node_from", from}, {"node_to", to},
                      {"weight", 20}, {"min_latency", 0}, {"max_latency", 0},
                      {"min_bandwidth", 0}, {"max_bandwidth", 0},
                      {"recommended_transfer_size", 0}, {"flags", 1}})
    s += std::string(k) + " " + std::to_string(v) + "\n";
  return s;
}

std::string gpu_properties(const Target& t, bool host_link) {
  auto line = [](const char* k, uint64_t v) { return std::string(k) + " " + std::to_string(v) + "\n"; };
  std::string s;
  s += line("cpu_cores_count", 0);
  s += line("simd_count", uint64_t(t.cu_count) * t.simd_per_cu);
  s += line("lds_size_in_kb", t.lds_size_in_kb);
  s += line("gds_size_in_kb", 0);
  s += line("wave_front_size", t.wave_size);
  s += line("array_count", t.array_count);
  s += line("simd_arrays_per_engine", t.simd_arrays_per_engine);
  s += line("cu_per_simd_array", t.cu_count / std::max(1u, t.array_count));
  s += line("simd_per_cu", t.simd_per_cu);
  s += line("max_waves_per_simd", t.gen == Gen::Gfx9 ? 8 : 16);
  s += line("vendor_id", 0x1002);
  s += line("device_id", t.device_id);
  s += line("drm_render_minor", kRenderMinor);
  s += line("gfx_target_version", t.gfx_target_version);
  s += line("num_sdma_engines", t.num_sdma_engines);
  s += line("num_sdma_xgmi_engines", 0);
  s += line("num_cp_queues", 24);
  s += line("num_xcc", t.num_xcc);
  s += line("local_mem_size", 0);  // as current kernels report it; amdgpu knows the size
  s += line("io_links_count", host_link ? 1 : 0);
  return s;
}

}  // namespace

std::shared_ptr<os::Kernel> make_emulated_system(const Target& target,
                                                 const SystemOptions& options) {
  auto k = std::make_shared<os::EmulatedKernel>();
  auto state = std::make_shared<KfdState>(target, options.host_link);
  k->add_node("/dev/kfd", std::make_shared<KfdNode>(state));
  std::weak_ptr<KfdState> weak = state;
  k->set_emulator_report(os::EmulatorReport::FaultLog, [weak] {
    auto s = weak.lock();
    return s ? s->fault_log() : std::string();
  });
  k->set_emulator_report(os::EmulatorReport::IbPositions, [weak] {
    auto s = weak.lock();
    return s ? s->ib_positions() : std::string();
  });
  k->add_node("/dev/dri/renderD" + std::to_string(kRenderMinor),
              std::make_shared<RenderNode>(state, target.vram_bytes,
                                           options.host_link ? 16ull << 30 : 0));
  const std::string nodes = "/sys/devices/virtual/kfd/kfd/topology/nodes/";
  k->add_file(nodes + "0/gpu_id", "0\n");
  k->add_file(nodes + "0/name", "\n");
  const int links = options.host_link ? 1 : 0;
  k->add_file(nodes + "0/properties", "cpu_cores_count 2\nsimd_count 0\nio_links_count " +
                                          std::to_string(links) + "\n");
  k->add_file(nodes + "1/gpu_id", std::to_string(kGpuId) + "\n");
  k->add_file(nodes + "1/name", target.name + "\n");
  k->add_file(nodes + "1/properties", gpu_properties(target, options.host_link));
  if (options.host_link) {  // KFD lists a link in both directions
    k->add_file(nodes + "0/io_links/0/properties", io_link(0, 1));
    k->add_file(nodes + "1/io_links/0/properties", io_link(1, 0));
  }
  return k;
}

}  // namespace hcq::amd::emu
