#include "amd/am/am_driver.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <cstdio>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include "amd/encoders.hpp"
#include "amd/am/vfio_function.hpp"
#include "amd/program_image.hpp"
#include "amd/ring_queue.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"
#include "os/pci.hpp"

namespace hcq::amd::am {
namespace {

constexpr uint64_t kRingBytes = 1 << 20;
constexpr uint64_t kEopBytes = 4096;
// lib/core's heap, as large as the KFD driver's.
constexpr uint64_t kHeapBytes = 256ull << 30;
constexpr uint16_t kAmdVendor = 0x1002;
// The device record's firmware mailboxes (os/device_owner.hpp), as the AM driver numbers them.
constexpr size_t kSmuMailbox = 0, kPspMailbox = 1;

}  // namespace

std::string am_firmware_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  if (const char* env = std::getenv("HCQ_AM_FIRMWARE_DIR"); env && *env) return env;
  return kDefaultFirmwareDir;
}

bool is_pci_address(std::string_view a) {
  if (a.size() != 12 || a[4] != ':' || a[7] != ':' || a[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!std::isxdigit(static_cast<unsigned char>(a[i]))) return false;
  const unsigned device = unsigned(std::stoul(std::string(a.substr(8, 2)), nullptr, 16));
  return device <= 0x1f && a[11] >= '0' && a[11] <= '7';
}

// ---- the parts over the function ----------------------------------------------------------------

class AmDriver::FunctionWindows final : public DeviceWindows {
 public:
  explicit FunctionWindows(AmFunction& function) : function_(function) {}
  void map_vram(void* at, uint64_t pa, uint64_t size) override {
    function_.map_vram(at, pa, size);
  }
  void map_dma(void* host, uint64_t iova, uint64_t size) override {
    function_.map_dma(host, iova, size);
  }
  void unmap_dma(uint64_t iova, uint64_t size) override { function_.unmap_dma(iova, size); }

 private:
  AmFunction& function_;
};

// ---- queues -----------------------------------------------------------------------------

// A compute (MEC HQD) or copy (SDMA) queue: ring and pointers in host memory, the EOP buffer
// in VRAM, programmed by the ASIC's block for its kind; the ring logic is RingQueue's. Where the CPU maps no
// device memory, ring and pointers are in VRAM too and the ring is published from a host copy
// through the port (RingMemory::published).
class AmDriver::Queue final : public RingQueue {
 public:
  Queue(AmDriver& drv, QueueKind kind, uint32_t index, QueueProgrammer& programmer);
  ~Queue() override;
  uint32_t index() const { return setup_.index; }

 private:
  // Only the fault already recorded: the hubs' registers are read by AmDriver::check_faults
  // (wait_interrupt), never under the queue's lock, whose hang report needs it.
  void check_faults() override { drv_.fault_.check(); }
  const void* host_view(uint64_t va, uint64_t bytes) override {
    return drv_.memory_->host_view(va, bytes);
  }
  std::optional<IbPosition> ib_position() override;
  // What the CPU wrote to VRAM for this submission (kernel arguments, buffers the caller
  // filled through its mapping) must leave the HDP before the engine reads it: tinygrad
  // flushes before every AM doorbell (ops_amd.py signal_doorbell). The ring and its pointers
  // are host memory and need no flush; the write alone is enough (hdp.hpp post_flush).
  void before_doorbell() override { drv_.boot_->hdp().post_flush(); }
  // Through the port (RingMemory::published): the ring at its VRAM address + offset.
  void publish_ring(uint64_t offset, std::span<const uint32_t> words) override {
    drv_.write_memory(setup_.ring_va + offset, std::as_bytes(words));
  }
  void publish_write_pointer(uint64_t wptr) override {
    drv_.write_memory(setup_.wptr_va, std::as_bytes(std::span(&wptr, 1)));
  }
  uint64_t fetch_read_pointer() const override {
    uint64_t rptr = 0;
    drv_.read_memory(setup_.rptr_va, std::as_writable_bytes(std::span(&rptr, 1)));
    return rptr;
  }
  // Where BAR2 is not mapped for the CPU (a USB bridge).
  void write_doorbell(uint64_t value) override { drv_.function_->ring_doorbell(doorbell_, value); }
  // A report's indirect buffer where the CPU does not map it; false where the port cannot
  // (outside every allocation, or a window the CPU cannot read back).
  bool read_device(uint64_t va, std::span<std::byte> out) override {
    try {
      drv_.read_memory(va, out);
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  void release() noexcept;

  AmDriver& drv_;
  QueueProgrammer& programmer_;
  AmQueueSetup setup_;
  bool created_ = false;
  uint32_t doorbell_ = 0;
  std::vector<uint32_t> shadow_;  // the ring's host copy where it is published
  std::vector<Allocation> memory_;
};

// Where the engine is inside an indirect buffer: from the queue's registers where its block
// reads them (compute: CP_HQD_IB_*, on a GPU and on the emulated one alike); else the position
// the emulated GPU publishes per hardware queue (os::EmulatorReport), unknown on a GPU.
std::optional<IbPosition> AmDriver::Queue::ib_position() {
  const std::string hardware_name = programmer_.hardware_name(setup_);
  if (hardware_name.empty()) return programmer_.ib_position(setup_);
  auto lines = drv_.kernel_->emulator_report(os::EmulatorReport::IbPositions);
  if (!lines) return std::nullopt;
  return find_ib_position(*lines, hardware_name);
}

AmDriver::Queue::Queue(AmDriver& drv, QueueKind kind, uint32_t index, QueueProgrammer& programmer)
    : RingQueue(kind, drv.props_.name), drv_(drv), programmer_(programmer) {
  const std::string name = std::string(to_string(kind)) + " queue " + std::to_string(index);
  try {
    // Host memory the CPU writes directly, else VRAM through the port (the bridge's small
    // SRAM window is not for rings).
    const MemoryKind kind_of_ring = drv.through_port_ ? MemoryKind::Device : MemoryKind::Host;
    Allocation ring = drv.memory_->private_alloc(kRingBytes, kind_of_ring);
    memory_.push_back(ring);
    Allocation ptrs = drv.memory_->private_alloc(4096, kind_of_ring);
    memory_.push_back(ptrs);
    setup_.kind = kind;
    setup_.index = index;
    setup_.ring_va = ring.va;
    setup_.ring_bytes = kRingBytes;
    setup_.rptr_va = ptrs.va;
    setup_.wptr_va = ptrs.va + 64;  // a cache line of its own: the GPU writes the read pointer
    if (kind == QueueKind::Compute) {
      Allocation eop = drv.memory_->private_alloc(kEopBytes, MemoryKind::Device);
      memory_.push_back(eop);
      setup_.eop_va = eop.va;
      setup_.eop_bytes = kEopBytes;
    }
    RingMemory m;
    m.ring_bytes = kRingBytes;
    if (drv.through_port_) {
      shadow_.assign(kRingBytes / 4, 0);
      m.ring = shadow_.data();
      m.published = true;
      const std::array<std::byte, 72> zeros{};  // the read pointer at 0, the write pointer at 64
      drv.write_memory(ptrs.va, zeros);
    } else {
      m.ring = static_cast<uint32_t*>(ring.host);
      m.rptr = static_cast<uint64_t*>(ptrs.host);
      m.wptr = m.rptr + 8;
      *m.rptr = *m.wptr = 0;
    }
    const uint32_t doorbell = programmer_.create(setup_);
    created_ = true;
    doorbell_ = doorbell;
    const uint64_t doorbell_bytes = drv.function_->doorbell_bytes();
    if ((uint64_t(doorbell) + 1) * 8 > doorbell_bytes)
      throw Error(drv.props_.name + ": " + name + ": doorbell " + std::to_string(doorbell) +
                  " is past the " + hex(doorbell_bytes) + " bytes of BAR2");
    m.doorbell = drv.function_->doorbell_mapping(doorbell);
    attach(m, name);
  } catch (...) {
    release();
    throw;
  }
}

AmDriver::Queue::~Queue() {
  {
    std::lock_guard lk(drv_.queues_mu_);
    auto& q = drv_.queues_;
    q.erase(std::remove(q.begin(), q.end(), this), q.end());
  }
  release();
}

void AmDriver::Queue::release() noexcept {
  try {
    if (created_) programmer_.destroy(setup_);
  } catch (...) {
    // Destroying: the memory goes anyway (the GPU was told to stop; nothing better to do).
  }
  for (const Allocation& a : memory_) {
    try {
      drv_.memory_->free(a);
    } catch (...) {
    }
  }
  memory_.clear();
}

// ---- driver -----------------------------------------------------------------------------

namespace {

// The VFIO function of `pci_address`, which must be an AMD device.
std::unique_ptr<AmFunction> open_vfio_function(const std::shared_ptr<os::Kernel>& kernel,
                                               const std::string& pci_address,
                                               const std::string& device_name,
                                               const AmDriverOptions& options) {
  const os::PciFunction fn = os::pci_function(*kernel, pci_address);
  if (fn.vendor != kAmdVendor)
    throw InvalidInput(device_name + ": " + fn.address + " is not an AMD device (vendor " +
                       hex(fn.vendor) + ")");
  return std::make_unique<VfioFunction>(kernel, fn, options.register_window);
}

}  // namespace

AmDriver::AmDriver(std::shared_ptr<os::Kernel> kernel, const std::string& pci_address,
                   const std::string& firmware_dir, const std::string& device_name,
                   AmDriverOptions options)
    : AmDriver(kernel, std::make_unique<os::DeviceOwner>(*kernel, pci_address, device_name),
               pci_address, firmware_dir, device_name, std::move(options)) {}

// The claim first (its own delegation step: arguments of one call are unordered), then VFIO.
AmDriver::AmDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<os::DeviceOwner> owner,
                   const std::string& pci_address, const std::string& firmware_dir,
                   const std::string& device_name, AmDriverOptions options)
    : AmDriver(kernel, open_vfio_function(kernel, pci_address, device_name, options),
               firmware_dir, device_name, options,  // copied: the function reads it first
               std::move(owner)) {}

AmDriver::AmDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<AmFunction> function,
                   const std::string& firmware_dir, const std::string& device_name,
                   AmDriverOptions options, std::unique_ptr<os::DeviceOwner> owner)
    : kernel_(std::move(kernel)),
      owner_(std::move(owner)),
      options_(std::move(options)),
      function_(std::move(function)) {
  props_.name = device_name;
  BootOptions boot_options = options_.boot;
  if (owner_) {
    boot_options.smu_mailbox = &owner_->mailbox(kSmuMailbox);
    boot_options.psp_mailbox = &owner_->mailbox(kPspMailbox);
  }
  boot_options.firmware_dir = am_firmware_dir(firmware_dir);
  boot_options.bus_master = [this](bool on) { function_->set_bus_master(on); };
  VramPort& vram = function_->vram();
  boot_ = std::make_unique<AmBoot>(
      function_->registers(), vram, boot_options,
      options_.asics.empty() ? known_asics() : std::span<const AsicDescription* const>(options_.asics));
  asic_ = std::make_unique<AmAsic>(boot_->asic(), options_.make_block);

  // VMID 0's page tables exist before the GMC phase points the hubs at their root.
  allocator_ = std::make_unique<VramAllocator>(0, boot_->allocatable_vram());
  windows_ = std::make_unique<FunctionWindows>(*function_);
  // What the CPU and the device reach of each other: behind a USB bridge neither VRAM
  // mapped for the CPU nor any host page but the bridge's SRAM window for the device.
  GpuMemoryReach reach;
  reach.cpu_maps_vram = vram.mapping() != nullptr;
  if (!function_->maps_host_memory())
    if (const std::optional<HostWindow> window = function_->host_window()) {
      reach.window_address = window->device_address;
      reach.window_bytes = window->size;
    }
  through_port_ = !reach.cpu_maps_vram || !function_->maps_host_memory();
  memory_ = std::make_unique<GpuMemory>(kernel_, *windows_, vram, *allocator_, kHeapBytes,
                                        device_name, reach);
  memory_->set_invalidate([asic = asic_.get()](VmHub hub, std::span<const VaRange>) {
    asic->invalidate(hub);
  });
  boot_->run(*asic_, memory_->page_table_base());
  // From now on every page-table write is flushed (the soc phase flushed what came before).
  memory_->set_flush_tables([this] { boot_->hdp().flush(); });
  // Host memory the CPU reads directly, else VRAM through the port (zeroed there).
  mailbox_ = memory_->private_alloc(4096, through_port_ ? MemoryKind::Device : MemoryKind::Host);
  if (through_port_) write_memory(mailbox_.va, std::array<std::byte, 8>{});
  // The GPU's MSI through an eventfd (the IH raises it for every entry it writes).
  const int fd = kernel_->eventfd(0, EFD_NONBLOCK);
  if (fd < 0) throw OsError(device_name + ": eventfd for the GPU's interrupts", -fd);
  try {
    if (function_->enable_msi(fd)) msi_fd_ = fd;
  } catch (...) {
    kernel_->close(fd);
    throw;
  }
  if (msi_fd_ < 0) kernel_->close(fd);

  const Target* target = find_target(boot_->asic().name);
  if (!target) throw Error(device_name + ": no target " + boot_->asic().name);
  gen_ = target->gen;
  props_.vendor = "AMD";
  props_.arch = target->name;
  props_.emulated = kernel_->emulated();
  props_.description = "AMD " + target->name + " at " + function_->name() + ", booted by hcq";
  props_.timestamp_hz = 100'000'000;  // the GPU clock counter runs at 100 MHz (tinygrad, ROCr)
  // Compute units from the GC table (tinygrad ops_amd.py _compute_props), else the target's.
  const auto& gc = boot_->discovery().gc;
  props_.compute_units =
      gc && gc->num_se ? gc->num_se * gc->num_sh_per_se * gc->num_cu_per_sh : target->cu_count;
  props_.wave_size = target->wave_size;
  props_.device_memory_bytes = boot_->vram_size();
  props_.caps = Capabilities{};
  props_.caps.max_copy_queues = uint32_t(boot_->asic().sdma_doorbells.size());  // ring 0 of each engine
  // Behind a USB bridge: every CPU access through the port, host memory only the window.
  props_.caps.cpu_maps_memory = !through_port_;
  props_.caps.host_window_bytes = reach.window_bytes;
  if (!function_->maps_host_memory()) props_.caps.map_host = false;
}

AmDriver::~AmDriver() {
  try {
    boot_->shutdown(*asic_);
  } catch (...) {
    // Closing: the memory and the BARs go whatever the GPU answered.
  }
  if (msi_fd_ >= 0) {
    try {
      function_->disable_msi();
    } catch (...) {
      // Closing the device fd turns it off anyway (vfio_pci_core_disable).
    }
    kernel_->close(msi_fd_);
  }
  memory_.reset();  // every mapping unmapped and invalidated, then the reservation
}

Allocation AmDriver::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) {
  return memory_->allocate(va, size, kind, executable);
}

void AmDriver::free(const Allocation& a) { memory_->free(a); }

Allocation AmDriver::map_user(void* host, uint64_t size) { return memory_->map_user(host, size); }

void AmDriver::write_memory(uint64_t va, std::span<const std::byte> data) {
  const MemoryPlace at = memory_->locate(va, data.size());
  if (data.empty()) return;
  switch (at.in) {
    case MemoryPlace::In::Vram:
      return function_->vram().write(at.address, data);  // any byte range (VramPort)
    case MemoryPlace::In::HostWindow:
      return function_->write_host_window(at.address, data);
    case MemoryPlace::In::Host:
      std::memcpy(reinterpret_cast<void*>(at.address), data.data(), data.size());
      return;
  }
}

void AmDriver::read_memory(uint64_t va, std::span<std::byte> out) {
  const MemoryPlace at = memory_->locate(va, out.size());
  if (out.empty()) return;
  switch (at.in) {
    case MemoryPlace::In::Vram:
      return function_->vram().read(at.address, out);
    case MemoryPlace::In::HostWindow:
      return function_->read_host_window(at.address, out);
    case MemoryPlace::In::Host:
      std::memcpy(out.data(), reinterpret_cast<const void*>(at.address), out.size());
      return;
  }
}

std::unique_ptr<HwQueue> AmDriver::create_queue(QueueKind kind) {
  QueueProgrammer* programmer = asic_->queues(kind);
  if (!programmer)
    throw Error(props_.name + ": " + to_string(kind) + " queues: no block of this " +
                boot_->asic().name + " programs them");
  std::lock_guard lk(queues_mu_);
  uint32_t index = 0;
  while (std::any_of(queues_.begin(), queues_.end(),
                     [&](Queue* q) { return q->kind() == kind && q->index() == index; }))
    index++;
  auto q = std::make_unique<Queue>(*this, kind, index, *programmer);
  queues_.push_back(q.get());
  return q;
}

std::unique_ptr<Encoder> AmDriver::encoder(QueueKind kind) {
  const InterruptTarget irq{mailbox_.va, event_id_};
  if (kind == QueueKind::Compute) return std::make_unique<Pm4Encoder>(gen_, irq);
  return std::make_unique<SdmaEncoder>(gen_, irq);
}

ProgramLayout AmDriver::program_layout(std::span<const std::byte> image) {
  return amd_program_layout(props_, image);
}

void AmDriver::raise_fault(const std::string& fault) {
  fault_.raise(
      [&] { return fault_message(*kernel_, props_.name, fault, hang_report()); });
}

void AmDriver::check_faults() {
  fault_.check();
  read_faults();
}

void AmDriver::read_faults() {
  fault_.check_in_flight();
  if (const std::optional<std::string> fault = asic_->read_fault()) raise_fault(*fault);
}

void AmDriver::wait_msi(std::chrono::steady_clock::duration left) {
  // poll's timeout is whole ms: round up, so a short wait still sleeps instead of spinning.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  pollfd p{msi_fd_, POLLIN, 0};
  const int r = kernel_->poll(&p, 1, int(std::clamp<int64_t>(ms, 1, 1000)));
  if (r < 0) throw OsError(props_.name + ": poll of the interrupt eventfd", -r);
  if (r == 0 || !(p.revents & POLLIN)) return;
  uint64_t count;
  const ssize_t n = kernel_->read(msi_fd_, &count, sizeof count);
  // -EAGAIN: another waiter took the count first.
  if (n < 0 && n != -EAGAIN) throw OsError(props_.name + ": read of the interrupt eventfd", int(-n));
}

bool AmDriver::take_mailbox() {
  if (mailbox_.host)
    return __atomic_exchange_n(static_cast<uint64_t*>(mailbox_.host), 0, __ATOMIC_ACQ_REL) != 0;
  // Through the port: a read, and a clear only when it was written. A wake-up the GPU writes
  // between the two merges into this one (both happened before the waiter returns).
  std::lock_guard lk(mailbox_mu_);
  uint64_t value = 0;
  read_memory(mailbox_.va, std::as_writable_bytes(std::span(&value, 1)));
  if (value == 0) return false;
  const uint64_t zero = 0;
  write_memory(mailbox_.va, std::as_bytes(std::span(&zero, 1)));
  return true;
}

void AmDriver::wait_interrupt(std::chrono::milliseconds timeout) {
  // A wake signal writes the event id into the mailbox (Pm4Encoder/SdmaEncoder) and raises an
  // end-of-pipe or SDMA trap interrupt, so the mailbox is written when the MSI arrives.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::chrono::microseconds step{10};
  fault_.check();  // a fault before this wait began; one that comes during it is its own
  for (;;) {
    fault_.check_in_flight();
    if (const std::optional<std::string> fault = asic_->poll_fault()) raise_fault(*fault);
    if (take_mailbox()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      read_faults();  // the registers: a fault whose ring entry was lost (ring full or off)
      return;
    }
    if (msi_fd_ >= 0) {
      wait_msi(deadline - now);
      continue;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(step, deadline - now));
    step = std::min<std::chrono::microseconds>(step * 2, std::chrono::milliseconds(1));
  }
}

std::string AmDriver::hang_report() {
  std::string out;
  {
    std::lock_guard lk(queues_mu_);
    for (Queue* q : queues_) {
      std::string r = q->report(gen_);
      if (!r.empty()) out += (out.empty() ? "" : "\n") + r;
    }
  }
  // With a queue stuck, the blocks' state after the queues' (asic.hpp status): what a queue
  // report cannot say. Idle stays empty.
  if (!out.empty())
    if (std::string blocks = asic_->status(); !blocks.empty()) out += "\n" + blocks;
  return out;
}

}  // namespace hcq::amd::am
