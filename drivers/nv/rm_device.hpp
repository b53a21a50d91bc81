// The NVIDIA driver's device (internal to drivers/nv): the RM client and its object tree
// (root client, device, subdevice, usermode page, VA space, channel group, context share),
// memory allocated through RM and mapped through UVM, and the device's faults and hang report.
// Its channels (rm_channel.hpp) and program images (rm_program.hpp) build on it.
//
// Threads: as DeviceDriver says; alloc_object, control, uvm and private_alloc may be called
// from several threads (handles and the private range are taken under the driver's lock).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "core/fault.hpp"
#include "nv/options.hpp"
#include "nv/push.hpp"
#include "nv/rm_abi.hpp"
#include "nv/targets.hpp"
#include "os/kernel.hpp"

namespace hcq::nv {

inline constexpr uint64_t kPage = 4096;
// Where the shared and local memory windows sit in every kernel's address space: 4 GiB
// aligned and far above the driver's range (tinygrad ops_nv.py's addresses). Hopper refuses a
// shared window at 0xfe000000 (seen on an H200, RM 580.159: Xid 69, class error on
// SET_SHADER_SHARED_MEMORY_WINDOW_B with that value). Host memory mapped for the GPU at its
// own address must stay out of both windows.
inline constexpr uint64_t kSharedWindow = 0x729400000000, kLocalWindow = 0x729300000000;
inline constexpr uint64_t kWindowBytes = 4ull << 30;

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class GpfifoChannel;

class RmDriver final : public DeviceDriver {
 public:
  RmDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name,
           const NvOptions& options);
  ~RmDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return reserve_base_ + private_bytes_; }
  uint64_t va_size() const override { return heap_bytes_; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  int export_memory(const Allocation& a) override;
  Allocation import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<Encoder> encoder(QueueKind kind) override;
  void submit_indirect(std::span<const IndirectRun> runs) override;
  ProgramLayout program_layout(std::span<const std::byte> image) override;
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  // Its waits are 50 us sleeps: nothing to end.
  bool can_wake_waiters() const override { return true; }
  std::string hang_report() override;

  // Driver-private memory, freed when the driver closes.
  Allocation private_alloc(uint64_t size, MemoryKind kind);
  uint64_t private_va(uint64_t size, uint64_t align);
  rm::NvHandle alloc_object(rm::NvHandle parent, uint32_t cls, void* params, uint32_t size,
                        const char* what);
  void free_object(rm::NvHandle h);
  void control(rm::NvHandle obj, uint32_t cmd, void* params, uint32_t size, const char* what);
  void uvm(unsigned long req, void* params, rm::NvStatus* status, const char* what);
  // UVM_FREE and UVM_UNREGISTER_CHANNEL, whose layouts changed in 590.
  void uvm_free(uint64_t va, uint64_t length);
  void uvm_unregister_channel(rm::NvHandle channel);
  void ring_doorbell(uint32_t token) {
    __atomic_store_n(doorbell_, token, __ATOMIC_RELEASE);
  }
  const ClassSet& classes() const { return classes_; }
  const NvOptions& options() const { return options_; }
  os::Kernel& kernel() { return *kernel_; }
  QmdVersion qmd_version() const { return qmd_; }
  Gen gen() const { return gen_; }
  rm::NvHandle root() const { return root_; }
  rm::NvHandle channel_group() const { return group_; }
  rm::NvHandle ctxshare() const { return ctxshare_; }
  int ctl_fd() const { return ctl_; }
  const rm::NvProcessorUuid& uuid() const { return uuid_; }
  void register_channel(GpfifoChannel* c) {
    std::lock_guard lk(mu_);
    channels_.push_back(c);
  }
  void unregister_channel(GpfifoChannel* c) {
    std::lock_guard lk(mu_);
    std::erase(channels_, c);
  }
  // The host view of [va, va+bytes) when the driver knows one (for hang reports, and for
  // QMDs written into kernarg memory with HCQ_NV_QMD_BY_ADDRESS).
  const void* host_view(uint64_t va, uint64_t bytes);

 private:
  Allocation alloc_at(uint64_t va, uint64_t size, MemoryKind kind);
  // Maps memory object `h` at va for the CPU (where it can) and the GPU, and records it;
  // frees the object when that fails.
  Allocation map_object(rm::NvHandle h, uint64_t va, uint64_t size, MemoryKind kind);
  void map_for_cpu(rm::NvHandle mem, uint64_t va, uint64_t size, bool system, uint32_t flags);
  void map_for_gpu(rm::NvHandle mem, uint64_t va, uint64_t size);
  int open_gpu_fd();
  void reserve(uint64_t va, uint64_t size);
  uint32_t enabled_sms(uint32_t sm_per_tpc, uint32_t die_sms);
  [[noreturn]] void raise_fault(const std::string& what);

  std::shared_ptr<os::Kernel> kernel_;
  NvOptions options_;  // read once, at open
  DeviceProperties props_;
  unsigned rm_major_ = 0;  // the kernel module's version, which picks a few layouts
  int ctl_ = -1, uvm_ = -1, uvm2_ = -1, gpu_fd_ = -1;
  uint32_t minor_ = 0;
  rm::NvHandle root_ = 0, device_ = 0, subdevice_ = 0, usermode_ = 0, vaspace_ = 0, group_ = 0,
           ctxshare_ = 0;
  rm::NvHandle next_handle_ = 0xcaf00001;
  rm::NvProcessorUuid uuid_{};
  ClassSet classes_;
  Gen gen_ = Gen::Hopper;
  QmdVersion qmd_ = QmdVersion::V03;
  volatile uint32_t* doorbell_ = nullptr;
  void* usermode_map_ = nullptr;
  uint64_t reserve_base_ = 0, reserve_size_ = 0, private_next_ = 0;
  uint64_t private_bytes_ = 0, heap_bytes_ = 0;  // the reservation: driver objects, then heap
  std::mutex mu_;  // private allocations, the allocation map, channels
  std::vector<Allocation> private_allocs_;
  std::map<uint64_t, Allocation> allocs_;  // by VA: what the driver knows to be CPU-visible
  std::vector<GpfifoChannel*> channels_;
  StickyFault fault_;
};

}  // namespace hcq::nv
