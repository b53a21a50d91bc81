#include "amd/kfd/kfd_driver.hpp"
#include "amd/program_image.hpp"
#include "os/address_window.hpp"

#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <sys/mman.h>

#include <libdrm/amdgpu_drm.h>
#include <libdrm/drm.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "amd/code_object.hpp"
#include "amd/decode.hpp"
#include "amd/encoders.hpp"
#include "amd/kfd/kfd_dmabuf.hpp"
#include "amd/ring_queue.hpp"
#include "amd/targets.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"

namespace hcq::amd {
namespace {

constexpr const char* kTopology = "/sys/devices/virtual/kfd/kfd/topology/nodes";
constexpr uint64_t kPage = 4096;
// The driver reserves one range of host address space and uses it as GPU virtual address
// space too (CPU and GPU see buffers at the same address). The first part holds the driver's
// own objects (rings, EOP and context-save areas); lib/core's heap hands out the rest.
constexpr uint64_t kPrivateVa = 4ull << 30;
constexpr uint64_t kHeapVa = 256ull << 30;
constexpr uint64_t kRingBytes = 1 << 20;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::map<std::string, uint64_t> parse_properties(const std::string& text) {
  std::map<std::string, uint64_t> props;
  std::istringstream in(text);
  std::string key;
  uint64_t value;
  while (in >> key >> value) props[key] = value;
  return props;
}

struct NodeInfo {
  uint32_t gpu_id = 0;
  std::string dir;
  std::map<std::string, uint64_t> props;
  bool reaches_cpu = false;  // an io_link leads to a CPU node: the GPU reaches system memory
};

// Whether one of the node's io_links leads to a CPU node (gpu_id 0). Each link is
// io_links/M/properties, "name value" lines with node_from, node_to and type among them
// (Linux drivers/gpu/drm/amd/amdkfd/kfd_topology.c, iolink_show). Any link type counts (PCIe,
// or XGMI to the CPU on APUs); a GPU with none (behind a USB bridge) cannot reach system
// memory.
bool links_to_cpu(os::Kernel& k, const std::string& dir) {
  for (auto& m : k.list_dir(dir + "/io_links")) {
    auto text = k.read_file(dir + "/io_links/" + m + "/properties");
    if (!text) continue;
    auto link = parse_properties(*text);
    if (!link.count("node_to")) continue;
    auto id = k.read_file(std::string(kTopology) + "/" + std::to_string(link["node_to"]) +
                          "/gpu_id");
    if (id && std::strtoul(id->c_str(), nullptr, 10) == 0) return true;
  }
  return false;
}

std::vector<NodeInfo> gpu_nodes(os::Kernel& k) {
  std::vector<NodeInfo> out;
  auto names = k.list_dir(kTopology);
  std::sort(names.begin(), names.end(), [](auto& a, auto& b) {
    return std::strtoul(a.c_str(), nullptr, 10) < std::strtoul(b.c_str(), nullptr, 10);
  });
  for (auto& n : names) {
    std::string dir = std::string(kTopology) + "/" + n;
    auto id = k.read_file(dir + "/gpu_id");
    auto props = k.read_file(dir + "/properties");
    if (!id || !props) continue;
    uint32_t gpu_id = uint32_t(std::strtoul(id->c_str(), nullptr, 10));
    if (gpu_id == 0) continue;  // a CPU node
    out.push_back({gpu_id, dir, parse_properties(*props), links_to_cpu(k, dir)});
  }
  return out;
}

std::string target_name(uint64_t version) {
  if (auto* t = find_target(uint32_t(version))) return t->name;
  return "gfx?" + std::to_string(version);
}

class KfdDriver;

// A KFD user-mode queue: ring, read/write pointers and doorbell mapped into the process;
// KFD creates and destroys it, the ring logic is RingQueue's.
class KfdQueue final : public RingQueue {
 public:
  KfdQueue(KfdDriver& drv, QueueKind kind);
  ~KfdQueue() override;

 private:
  void check_faults() override;
  const void* host_view(uint64_t va, uint64_t bytes) override;
  // The emulated KFD publishes where each queue's engine is inside its IB (os::EmulatorReport::IbPositions).
  std::optional<IbPosition> ib_position() override;
  KfdDriver& drv_;
  uint32_t queue_id_ = 0;
};

class KfdDriver final : public DeviceDriver {
 public:
  KfdDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name);
  ~KfdDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return reserve_base_ + kPrivateVa; }
  uint64_t va_size() const override { return kHeapVa; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  int export_memory(const Allocation& a) override;
  Allocation import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<Encoder> encoder(QueueKind kind) override;
  ProgramLayout program_layout(std::span<const std::byte> image) override {
    return amd_program_layout(props_, image);
  }
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  // AMDKFD_IOC_SET_EVENT on the interrupt's signal event ends AMDKFD_IOC_WAIT_EVENTS (as
  // ROCr's hsaKmtSetEvent does for a host-set signal).
  bool can_wake_waiters() const override { return true; }
  void wake_waiters() override;

  // Driver-private memory (rings, EOP, context save areas): never freed before close.
  Allocation private_alloc(uint64_t size, MemoryKind kind, bool uncached = false);
  // Where memory the CPU writes and the GPU reads goes (rings, their pointers, the event
  // page): host memory, or VRAM (through the BAR) for a GPU that cannot reach host memory.
  MemoryKind shared_kind() const {
    return node_.reaches_cpu ? MemoryKind::Host : MemoryKind::Device;
  }
  volatile uint64_t* doorbell(uint64_t doorbell_offset);
  os::Kernel& kernel() { return *kernel_; }
  // The CPU's view of [va, va+bytes) when one allocation mapped for the CPU holds it, else null
  // (device memory without a CPU mapping is a PROT_NONE reservation: never read it).
  const void* host_view(uint64_t va, uint64_t bytes);
  int kfd_fd() const { return kfd_fd_; }
  uint32_t gpu_id() const { return node_.gpu_id; }
  Gen gen() const { return gen_; }
  const NodeInfo& node() const { return node_; }
  void register_queue(KfdQueue* q) {
    std::lock_guard lk(queues_mu_);
    queues_.push_back(q);
  }
  void unregister_queue(KfdQueue* q) {
    std::lock_guard lk(queues_mu_);
    queues_.erase(std::remove(queues_.begin(), queues_.end(), q), queues_.end());
  }

 private:
  int ioctl(unsigned long req, void* arg, const char* what);
  Allocation alloc_at(uint64_t va, uint64_t size, uint32_t flags, MemoryKind kind);
  // MAP_MEMORY_TO_GPU on this GPU; frees the allocation when that fails.
  void map_to_gpu(uint64_t handle, const char* what);
  void unmap_and_free(uint64_t handle);
  void reserve(uint64_t va, uint64_t size);
  [[noreturn]] void raise_fault(const std::string& what);
  std::string hang_report() override;

  std::shared_ptr<os::Kernel> kernel_;
  NodeInfo node_;
  Gen gen_ = Gen::Gfx11;
  DeviceProperties props_;
  int kfd_fd_ = -1, drm_fd_ = -1;
  uint64_t reserve_base_ = 0, reserve_size_ = 0;
  uint64_t private_next_ = 0;
  std::mutex private_mu_;
  std::vector<Allocation> private_allocs_;
  std::mutex visible_mu_;
  std::map<uint64_t, uint64_t> visible_;  // CPU-mapped allocations: va -> size
  void* doorbell_page_ = nullptr;
  uint64_t doorbell_base_ = 0;
  Allocation event_page_;
  InterruptTarget irq_;
  uint32_t memory_event_ = 0, hw_event_ = 0;
  std::mutex queues_mu_;
  StickyFault fault_;
  std::vector<KfdQueue*> queues_;
};

// ---- driver ---------------------------------------------------------------------------

KfdDriver::KfdDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name)
    : kernel_(std::move(kernel)) {
  auto nodes = gpu_nodes(*kernel_);
  if (index < 0 || size_t(index) >= nodes.size())
    throw InvalidInput(name + ": no such AMD GPU (KFD topology lists " +
                       std::to_string(nodes.size()) + ")");
  node_ = nodes[size_t(index)];
  auto& p = node_.props;
  uint64_t version = p["gfx_target_version"];
  const Target* target = find_target(uint32_t(version));
  if (!target) {
    std::string known;  // targets.cpp's, so that a new row needs no edit here
    for (auto& t : targets()) {
      if (!known.empty()) known += ", ";
      known += t.name;
    }
    throw InvalidInput(name + ": GPU target " + target_name(version) + " (gfx_target_version " +
                       std::to_string(version) + ") is not one hcq emits packets for (" + known +
                       ")");
  }
  gen_ = target->gen;

  kfd_fd_ = kernel_->open("/dev/kfd", O_RDWR);
  if (kfd_fd_ < 0) throw OsError(name + ": open /dev/kfd", -kfd_fd_);
  kfd_ioctl_get_version_args ver{};
  ioctl(AMDKFD_IOC_GET_VERSION, &ver, "AMDKFD_IOC_GET_VERSION");
  if (ver.major_version != KFD_IOCTL_MAJOR_VERSION)
    throw Error(name + ": KFD interface version " + std::to_string(ver.major_version) + "." +
                std::to_string(ver.minor_version) + " is not the " +
                std::to_string(KFD_IOCTL_MAJOR_VERSION) + ".x hcq was built for");

  std::string render = "/dev/dri/renderD" + std::to_string(p["drm_render_minor"]);
  drm_fd_ = kernel_->open(render, O_RDWR);
  if (drm_fd_ < 0) throw OsError(name + ": open " + render, -drm_fd_);
  char drv_name[32] = {};
  drm_version_t dv{};
  dv.name = drv_name;
  dv.name_len = sizeof(drv_name) - 1;
  if (int r = kernel_->ioctl(drm_fd_, DRM_IOCTL_VERSION, &dv); r < 0)
    throw OsError(name + ": DRM_IOCTL_VERSION on " + render, -r);
  if (std::string(drv_name) != "amdgpu")
    throw Error(name + ": " + render + " is driven by '" + drv_name + "', not amdgpu");

  // Memory sizes from amdgpu (KFD's topology reports local_mem_size 0 on current kernels).
  drm_amdgpu_info_vram_gtt sizes{};
  drm_amdgpu_info info{};
  info.return_pointer = reinterpret_cast<uint64_t>(&sizes);
  info.return_size = sizeof(sizes);
  info.query = AMDGPU_INFO_VRAM_GTT;
  if (int r = kernel_->ioctl(drm_fd_, DRM_IOCTL_AMDGPU_INFO, &info); r < 0)
    throw OsError(name + ": DRM_IOCTL_AMDGPU_INFO (VRAM_GTT) on " + render, -r);

  kfd_ioctl_acquire_vm_args vm{};
  vm.drm_fd = uint32_t(drm_fd_);
  vm.gpu_id = node_.gpu_id;
  ioctl(AMDKFD_IOC_ACQUIRE_VM, &vm, "AMDKFD_IOC_ACQUIRE_VM");

  // One host address range serves as GPU virtual addresses (as tinygrad and ROCr do).
  reserve_size_ = kPrivateVa + kHeapVa;
  reserve_base_ = os::reserve_window(*kernel_, reserve_size_, kPrivateVa, name);
  private_next_ = reserve_base_;

  // Signal event with its mailbox page; memory and hardware exception events for faults.
  event_page_ = private_alloc(0x8000, shared_kind(), true);
  kfd_ioctl_create_event_args ev{};
  ev.event_page_offset = event_page_.handle;
  ev.event_type = KFD_IOC_EVENT_SIGNAL;
  ev.auto_reset = 1;
  ioctl(AMDKFD_IOC_CREATE_EVENT, &ev, "AMDKFD_IOC_CREATE_EVENT (signal)");
  irq_.event_id = ev.event_id;
  irq_.mailbox_va = event_page_.va + uint64_t(ev.event_slot_index) * 8;
  kfd_ioctl_create_event_args mem{};
  mem.event_type = KFD_IOC_EVENT_MEMORY;
  ioctl(AMDKFD_IOC_CREATE_EVENT, &mem, "AMDKFD_IOC_CREATE_EVENT (memory)");
  memory_event_ = mem.event_id;
  kfd_ioctl_create_event_args hw{};
  hw.event_type = KFD_IOC_EVENT_HW_EXCEPTION;
  ioctl(AMDKFD_IOC_CREATE_EVENT, &hw, "AMDKFD_IOC_CREATE_EVENT (hw exception)");
  hw_event_ = hw.event_id;

  props_.name = name;
  props_.vendor = "AMD";
  props_.arch = target->name;
  props_.emulated = kernel_->emulated();
  props_.description = kernel_->emulated() ? target->marketing_name
                                           : "AMD " + target->name + " (KFD gpu_id " +
                                                 std::to_string(node_.gpu_id) + ")";
  props_.timestamp_hz = 100'000'000;  // the GPU clock counter runs at 100 MHz (tinygrad, ROCr)
  uint64_t simd_per_cu = std::max<uint64_t>(1, p["simd_per_cu"]);
  props_.compute_units = uint32_t(p["simd_count"] / simd_per_cu);
  props_.wave_size = uint32_t(p["wave_front_size"]);
  props_.device_memory_bytes = sizes.vram_size;
  props_.caps = Capabilities{};
  props_.caps.host_reachable = props_.caps.map_host = node_.reaches_cpu;
  if (!node_.reaches_cpu) props_.description += ", no host memory access";
}

KfdDriver::~KfdDriver() {
  for (auto& a : private_allocs_) unmap_and_free(a.handle);
  if (doorbell_page_) kernel_->munmap(doorbell_page_, 0x2000);
  if (reserve_base_) kernel_->munmap(reinterpret_cast<void*>(reserve_base_), reserve_size_);
  if (drm_fd_ >= 0) kernel_->close(drm_fd_);
  if (kfd_fd_ >= 0) kernel_->close(kfd_fd_);
}

int KfdDriver::ioctl(unsigned long req, void* arg, const char* what) {
  int r = kernel_->ioctl(kfd_fd_, req, arg);
  if (r < 0) throw OsError(props_.name.empty() ? what : props_.name + ": " + what, -r);
  return r;
}

void KfdDriver::reserve(uint64_t va, uint64_t size) {
  kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

Allocation KfdDriver::alloc_at(uint64_t va, uint64_t size, uint32_t flags, MemoryKind kind) {
  kfd_ioctl_alloc_memory_of_gpu_args a{};
  a.va_addr = va;
  a.size = size;
  a.gpu_id = node_.gpu_id;
  a.flags = flags;
  const std::string what = "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (" + std::to_string(size) +
                           " bytes of " + to_string(kind) + " memory)";
  if (int r = kernel_->ioctl(kfd_fd_, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a); r < 0) {
    if (r == -ENOMEM && (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)) {
      kfd_ioctl_get_available_memory_args avail{};
      avail.gpu_id = node_.gpu_id;
      // KFD 1.10+ says how much VRAM is left (AMDKFD_IOC_AVAILABLE_MEMORY).
      std::string free = "unknown";
      if (kernel_->ioctl(kfd_fd_, AMDKFD_IOC_AVAILABLE_MEMORY, &avail) == 0)
        free = std::to_string(avail.available) + " bytes";
      throw OsError(props_.name + ": out of device memory: " + what + "; free: " + free +
                        " of " + std::to_string(props_.device_memory_bytes) + " bytes",
                    ENOMEM);
    }
    throw OsError(props_.name.empty() ? what : props_.name + ": " + what, -r);
  }
  Allocation out{va, size, nullptr, kind, a.handle};
  // Map for the CPU at the GPU address; VRAM outside a small BAR may refuse (no CPU view).
  void* p = kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_FIXED, drm_fd_, off_t(a.mmap_offset));
  if (p != MAP_FAILED) out.host = p;
  if (out.host) {
    std::lock_guard lk(visible_mu_);
    visible_[va] = size;
  }
  try {
    map_to_gpu(a.handle, "AMDKFD_IOC_MAP_MEMORY_TO_GPU");
  } catch (...) {
    reserve(va, size);
    throw;
  }
  return out;
}

void KfdDriver::map_to_gpu(uint64_t handle, const char* what) {
  uint32_t id = node_.gpu_id;
  kfd_ioctl_map_memory_to_gpu_args m{};
  m.handle = handle;
  m.device_ids_array_ptr = reinterpret_cast<uint64_t>(&id);
  m.n_devices = 1;
  try {
    ioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m, what);
  } catch (...) {
    kfd_ioctl_free_memory_of_gpu_args f{handle};
    kernel_->ioctl(kfd_fd_, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f);
    throw;
  }
}

void KfdDriver::unmap_and_free(uint64_t handle) {
  uint32_t id = node_.gpu_id;
  kfd_ioctl_unmap_memory_from_gpu_args um{};
  um.handle = handle;
  um.device_ids_array_ptr = reinterpret_cast<uint64_t>(&id);
  um.n_devices = 1;
  kernel_->ioctl(kfd_fd_, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &um);
  kfd_ioctl_free_memory_of_gpu_args f{handle};
  kernel_->ioctl(kfd_fd_, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f);
}

Allocation KfdDriver::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) {
  uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
  if (executable) flags |= KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
  if (kind == MemoryKind::Device)
    flags |= KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
  else
    flags |= KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
             KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
  return alloc_at(va, size, flags, kind);
}

Allocation KfdDriver::map_user(void* host, uint64_t size) {
  // KFD userptr: mmap_offset carries the CPU address; the GPU address is the same one.
  uint64_t addr = reinterpret_cast<uint64_t>(host);
  kfd_ioctl_alloc_memory_of_gpu_args a{};
  a.va_addr = addr;
  a.size = size;
  a.gpu_id = node_.gpu_id;
  a.mmap_offset = addr;
  a.flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
            KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
  ioctl(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (userptr)");
  map_to_gpu(a.handle, "AMDKFD_IOC_MAP_MEMORY_TO_GPU (userptr)");
  Allocation out{addr, size, host, MemoryKind::Host, a.handle};
  out.user = true;
  return out;
}

// Sharing with another process: a dma-buf of the buffer object, exported and imported through
// KFD (as ROCr's IPC does); the CPU maps an import through the dma-buf itself (amdgpu's
// dma-bufs take mmap), at the GPU address as everything here is.
int KfdDriver::export_memory(const Allocation& a) {
  if (a.user)  // KFD refuses a userptr's export (EPERM): the pages are the caller's
    throw InvalidInput(props_.name + ": the caller's host memory at " + hex(a.va) +
                       " cannot be exported");
  kfd_ioctl_export_dmabuf_args e{};
  e.handle = a.handle;
  e.flags = O_CLOEXEC;
  ioctl(AMDKFD_IOC_EXPORT_DMABUF, &e, "AMDKFD_IOC_EXPORT_DMABUF (KFD 1.12, Linux 6.2)");
  return int(e.dmabuf_fd);
}

Allocation KfdDriver::import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) {
  kfd_ioctl_get_dmabuf_info_args info{};
  info.dmabuf_fd = uint32_t(fd);
  if (int r = kernel_->ioctl(kfd_fd_, AMDKFD_IOC_GET_DMABUF_INFO, &info); r < 0)
    throw InvalidInput(props_.name + ": the imported fd is not a buffer amdgpu exported "
                       "(AMDKFD_IOC_GET_DMABUF_INFO: " + std::strerror(-r) + ")");
  if (info.size != size)  // KFD maps the whole dma-buf at va: exactly the range reserved
    throw InvalidInput(props_.name + ": the imported memory holds " +
                       std::to_string(info.size) + " bytes, the handle says " +
                       std::to_string(size));
  kfd_ioctl_import_dmabuf_args im{};
  im.va_addr = va;
  im.gpu_id = node_.gpu_id;
  im.dmabuf_fd = uint32_t(fd);
  ioctl(AMDKFD_IOC_IMPORT_DMABUF, &im, "AMDKFD_IOC_IMPORT_DMABUF");
  Allocation out{va, size, nullptr, kind, im.handle};
  void* p = kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_FIXED, fd, 0);
  if (p != MAP_FAILED) {
    out.host = p;
    std::lock_guard lk(visible_mu_);
    visible_[va] = size;
  }
  try {
    map_to_gpu(im.handle, "AMDKFD_IOC_MAP_MEMORY_TO_GPU (imported dma-buf)");
  } catch (...) {
    std::lock_guard lk(visible_mu_);
    visible_.erase(va);
    reserve(va, size);
    throw;
  }
  return out;
}

void KfdDriver::free(const Allocation& a) {
  {
    std::lock_guard lk(visible_mu_);
    visible_.erase(a.va);
  }
  if (a.host && !a.user) kernel_->munmap(a.host, a.size);  // the caller's memory stays mapped
  unmap_and_free(a.handle);
  if (!a.user) reserve(a.va, a.size);  // keep the range ours so no host mapping lands there
}

Allocation KfdDriver::private_alloc(uint64_t size, MemoryKind kind, bool uncached) {
  std::lock_guard lk(private_mu_);
  size = align_up(size, kPage);
  // Power-of-two sizes are aligned to themselves (rings need it; KFD checks exact mappings).
  uint64_t align = (size & (size - 1)) == 0 ? std::min<uint64_t>(size, 2 << 20) : kPage;
  uint64_t va = align_up(private_next_, align);
  if (va + size > reserve_base_ + kPrivateVa)
    throw Error(props_.name + ": driver-private GPU address space exhausted");
  private_next_ = va + size;
  uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE |
                   KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
  flags |= kind == MemoryKind::Device
               ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
               : KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
  if (uncached) flags |= KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
  Allocation a = alloc_at(va, size, flags, kind);
  private_allocs_.push_back(a);
  return a;
}

volatile uint64_t* KfdDriver::doorbell(uint64_t offset) {
  std::lock_guard lk(private_mu_);
  // Doorbells live in a two-page (8 KiB) doorbell aperture mapped from /dev/kfd.
  if (!doorbell_page_) {
    doorbell_base_ = offset & ~uint64_t(0x1fff);
    void* p = kernel_->mmap(nullptr, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, kfd_fd_,
                            off_t(doorbell_base_));
    if (p == MAP_FAILED) throw OsError(props_.name + ": mapping the doorbell page", errno);
    doorbell_page_ = p;
  }
  return reinterpret_cast<volatile uint64_t*>(static_cast<char*>(doorbell_page_) +
                                              (offset & 0x1fff));
}

const void* KfdDriver::host_view(uint64_t va, uint64_t bytes) {
  std::lock_guard lk(visible_mu_);
  auto it = visible_.upper_bound(va);
  if (it == visible_.begin()) return nullptr;
  --it;
  if (va - it->first >= it->second || bytes > it->second - (va - it->first)) return nullptr;
  return reinterpret_cast<const void*>(va);  // mapped at the GPU address
}

std::unique_ptr<HwQueue> KfdDriver::create_queue(QueueKind kind) {
  return std::make_unique<KfdQueue>(*this, kind);
}

std::unique_ptr<Encoder> KfdDriver::encoder(QueueKind kind) {
  if (kind == QueueKind::Compute) return std::make_unique<Pm4Encoder>(gen_, irq_);
  return std::make_unique<SdmaEncoder>(gen_, irq_);
}

void KfdDriver::check_faults() { fault_.check(); }

void KfdDriver::wake_waiters() {
  kfd_ioctl_set_event_args a{};
  a.event_id = irq_.event_id;
  ioctl(AMDKFD_IOC_SET_EVENT, &a, "AMDKFD_IOC_SET_EVENT");
}

[[noreturn]] void KfdDriver::raise_fault(const std::string& what) {
  fault_.raise(
      [&] { return fault_message(*kernel_, props_.name, what, hang_report()); });
}

std::string KfdDriver::hang_report() {
  std::vector<KfdQueue*> queues;
  {
    std::lock_guard lk(queues_mu_);
    queues = queues_;
  }
  std::string out;
  for (KfdQueue* q : queues) {
    std::string r = q->report(gen_);
    if (!r.empty()) out += (out.empty() ? "" : "\n") + r;
  }
  return out;
}

void KfdDriver::wait_interrupt(std::chrono::milliseconds timeout) {
  check_faults();
  kfd_event_data ev[3]{};
  ev[0].event_id = irq_.event_id;
  ev[1].event_id = memory_event_;
  ev[2].event_id = hw_event_;
  kfd_ioctl_wait_events_args w{};
  w.events_ptr = reinterpret_cast<uint64_t>(ev);
  w.num_events = 3;
  w.wait_for_all = 0;
  w.timeout = uint32_t(std::max<int64_t>(1, timeout.count()));
  ioctl(AMDKFD_IOC_WAIT_EVENTS, &w, "AMDKFD_IOC_WAIT_EVENTS");
  const auto& m = ev[1].memory_exception_data;
  if (m.gpu_id) {
    std::string kind = m.failure.NotPresent ? "page not present"
                       : m.failure.ReadOnly ? "write to read-only page"
                       : m.failure.NoExecute ? "execute of non-executable page"
                                             : "memory fault";
    raise_fault("GPU memory fault at " + hex(m.va) + " (" + kind + ")");
  }
  const auto& h = ev[2].hw_exception_data;
  if (h.gpu_id)
    raise_fault("GPU hardware exception (reset type " + std::to_string(h.reset_type) +
                ", cause " + std::to_string(h.reset_cause) +
                (h.memory_lost ? ", memory lost" : "") + ")");
}

// ---- queues ---------------------------------------------------------------------------

// Context-save area sizes KFD checks at CREATE_QUEUE (Linux amdkfd kfd_queue.c, libhsakmt
// queues.c): computed from the node's topology.
struct CwsrSizes {
  uint64_t ctl_stack, ctx_save, total;
};
CwsrSizes cwsr_sizes(const NodeInfo& n) {
  auto p = n.props;
  uint64_t v = p["gfx_target_version"];
  uint64_t xcc = std::max<uint64_t>(1, p["num_xcc"]);
  uint64_t simd_per_cu = std::max<uint64_t>(1, p["simd_per_cu"]);
  uint64_t cu = p["simd_count"] / simd_per_cu / xcc;
  uint64_t arrays = std::max<uint64_t>(1, p["simd_arrays_per_engine"]);
  uint64_t waves = v < 100100 ? std::min(cu * 40, p["array_count"] / xcc / arrays * 512) : cu * 32;
  uint64_t vgpr = (v == 90010 || v == 90008 || v == 90500 || (v >= 90400 && v < 90500))
                      ? 0x80000
                  : (v == 110000 || v == 110001 || v == 120000 || v == 120001) ? 0x60000
                                                                                : 0x40000;
  uint64_t lds = v == 90500 ? (p["lds_size_in_kb"] << 10) : 0x10000;
  uint64_t wg = align_up(cu * (vgpr + 0x4000 + lds + 0x1000), kPage);
  uint64_t ctl = align_up(40 + waves * (v >= 100100 ? 12 : 8) + 8, kPage);
  if (v >= 100100 && v < 110000) ctl = std::min<uint64_t>(ctl, 0x7000);
  uint64_t debug = align_up(waves * 32, 64);
  uint64_t ctx = ctl + wg;
  return {ctl, ctx, align_up((ctx + debug) * xcc, kPage)};
}

KfdQueue::KfdQueue(KfdDriver& drv, QueueKind kind)
    : RingQueue(kind, drv.properties().name), drv_(drv) {
  Allocation ring = drv.private_alloc(kRingBytes, drv.shared_kind(), true);
  Allocation ptrs = drv.private_alloc(kPage, drv.shared_kind(), true);
  if (!ring.host || !ptrs.host)
    throw Error(drv.properties().name + ": the " + to_string(kind) +
                " queue's ring is not CPU-visible (VRAM past a small BAR)");
  RingMemory m;
  m.ring = static_cast<uint32_t*>(ring.host);
  m.ring_bytes = kRingBytes;
  m.rptr = static_cast<uint64_t*>(ptrs.host);
  m.wptr = m.rptr + 8;  // a cache line of its own: the GPU writes the read pointer meanwhile
  *m.rptr = *m.wptr = 0;
  kfd_ioctl_create_queue_args q{};
  q.ring_base_address = ring.va;
  q.ring_size = uint32_t(kRingBytes);
  q.read_pointer_address = ptrs.va;
  q.write_pointer_address = ptrs.va + 64;
  q.gpu_id = drv.gpu_id();
  q.queue_percentage = 100;
  q.queue_priority = 7;
  if (kind == QueueKind::Compute) {
    q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
    Allocation eop = drv.private_alloc(kPage, MemoryKind::Device);
    CwsrSizes c = cwsr_sizes(drv.node());
    Allocation cwsr = drv.private_alloc(c.total, MemoryKind::Device);
    q.eop_buffer_address = eop.va;
    q.eop_buffer_size = kPage;
    q.ctx_save_restore_address = cwsr.va;
    q.ctx_save_restore_size = uint32_t(c.ctx_save);
    q.ctl_stack_size = uint32_t(c.ctl_stack);
  } else {
    q.queue_type = KFD_IOC_QUEUE_TYPE_SDMA;
  }
  int r = drv.kernel().ioctl(drv.kfd_fd(), AMDKFD_IOC_CREATE_QUEUE, &q);
  if (r < 0)
    throw OsError(drv.properties().name + ": AMDKFD_IOC_CREATE_QUEUE (" + to_string(kind) + ")",
                  -r);
  queue_id_ = q.queue_id;
  m.doorbell = drv.doorbell(q.doorbell_offset);
  attach(m, std::string(to_string(kind)) + " queue " + std::to_string(queue_id_));
  drv.register_queue(this);
}

KfdQueue::~KfdQueue() {
  drv_.unregister_queue(this);
  kfd_ioctl_destroy_queue_args d{};
  d.queue_id = queue_id_;
  drv_.kernel().ioctl(drv_.kfd_fd(), AMDKFD_IOC_DESTROY_QUEUE, &d);
}

void KfdQueue::check_faults() { drv_.check_faults(); }

const void* KfdQueue::host_view(uint64_t va, uint64_t bytes) { return drv_.host_view(va, bytes); }

std::optional<IbPosition> KfdQueue::ib_position() {
  // A real KFD process cannot read where the CP is inside an IB (a real kernel answers no
  // os::EmulatorReport::IbPositions).
  auto lines = drv_.kernel().emulator_report(os::EmulatorReport::IbPositions);
  if (!lines) return std::nullopt;
  return find_ib_position(*lines, "queue " + std::to_string(queue_id_));
}

}  // namespace

std::vector<KfdNode> kfd_gpu_nodes(os::Kernel& kernel) {
  std::vector<KfdNode> out;
  for (auto& n : gpu_nodes(kernel))
    out.push_back({n.gpu_id, target_name(n.props["gfx_target_version"])});
  return out;
}

std::unique_ptr<DeviceDriver> open_kfd_device(std::shared_ptr<os::Kernel> kernel, int index,
                                              const std::string& device_name) {
  return std::make_unique<KfdDriver>(std::move(kernel), index, device_name);
}

}  // namespace hcq::amd
