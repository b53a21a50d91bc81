// The am: driver (issue 17 item 7): an AMD GPU that hcq boots itself, with no kernel GPU
// driver, through its PCI function (AmFunction: VFIO, or a PcieTransport behind a USB bridge):
// BAR0 (VRAM), BAR2 (64-bit doorbells), BAR5 (registers), DMA to host memory. It implements
// the same DeviceDriver as the KFD driver and reuses its encoders (Pm4Encoder, SdmaEncoder),
// ring queues (RingQueue), program layout and hang reports.
//
// Opening: the function is opened (VFIO: bus mastering enabled, the BARs mapped), the GPU
// booted (AmBoot over the function's VramPort: discovery, reset of a previous boot, the
// phases), the memory set up (GpuMemory: VMID 0's page tables built before the GMC phase needs
// their root). Closing: the queues the caller still holds must be gone; the boot's shutdown
// hook, the memory, then the function (its BARs, then the VFIO device).
//
// The GPU is an ASIC of IP blocks (asic.hpp), found from its discovery table: the boot and the
// shutdown walk its block list, its GFX and SDMA blocks program the hardware queues, its GMC
// invalidates TLBs and reads faults, its IH brings interrupts, and hang reports end with each
// block's status line. A queue kind no block programs cannot be created.
//
// Interrupts: the GPU's MSI (the IH ring's ENABLE_INTR) reaches the driver as an eventfd
// VFIO signals (VFIO_DEVICE_SET_IRQS, as a VFIO user receives any device interrupt); the
// driver then looks at the IH ring's write pointer in memory and reads registers only when it
// moved.
//
// Memory the CPU cannot map (a function whose VRAM has no CPU mapping or that reaches host
// memory only through a window: a USB bridge): caps.cpu_maps_memory is false and every CPU
// access is a request through the port (write_memory/read_memory). The rings, their pointers,
// the EOP buffers and the wake mailbox are then in VRAM: a queue keeps a host copy of its ring
// and publishes what a submission wrote in one write (two where it wraps), then the write
// pointer, before the doorbell (through the function where BAR2 is not mapped).
//
// Threads: as DeviceDriver: allocate/free/map_user, create_queue and the queues' submissions,
// wait_interrupt, check_faults and hang_report may be called from several threads at once
// (each waiter sleeps on the same eventfd; one of them takes a wake-up's mailbox write).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amd/am/am_function.hpp"
#include "amd/am/asic.hpp"
#include "amd/am/boot.hpp"
#include "amd/am/gpu_memory.hpp"
#include "amd/ring_queue.hpp"
#include "core/driver.hpp"
#include "core/fault.hpp"
#include "os/device_owner.hpp"
#include "os/kernel.hpp"
#include "os/mmio.hpp"
#include "os/vfio.hpp"

namespace hcq::amd::am {

struct AmDriverOptions {
  // Boot settings (timeouts, forced reset); firmware_dir comes from the driver's argument.
  BootOptions boot;
  // The register window of BAR5; empty: mapped through VFIO (os::VfioRegionMmio).
  std::function<std::unique_ptr<os::Mmio>(os::VfioDevice&, int bar)> register_window;
  // The ASICs the discovery table is matched against (find_asic); empty: known_asics().
  std::vector<const AsicDescription*> asics;
  // The maker of the ASIC's blocks; empty: AmAsic::standard_block.
  BlockFactory make_block;
};

// `dir` when not empty, else $HCQ_AM_FIRMWARE_DIR when set and not empty, else
// kDefaultFirmwareDir (/lib/firmware/amdgpu).
std::string am_firmware_dir(const std::string& dir = {});

// Whether `address` is a full PCI address, domain:bus:device.function in hex with 4, 2, 2
// and 1 digits, device at most 0x1f and function at most 7 ("0000:03:00.0").
bool is_pci_address(std::string_view address);

class AmDriver final : public DeviceDriver {
 public:
  // Claims `pci_address` for this process (os::DeviceOwner, before anything touches the
  // device: InvalidInput "am:0000:03:00.0: in use by pid 1234 (hcq run am:0000:03:00.0),
  // since 2026-12-02 11:42:20 UTC" while another process holds it), opens it (bound to
  // vfio-pci) as a VfioFunction and boots it, its SMU and PSP mailboxes under the claim's
  // locks; `device_name` is what it is opened by ("am:0000:03:00.0"). Throws what VFIO, the
  // boot or the memory set-up throws.
  AmDriver(std::shared_ptr<os::Kernel> kernel, const std::string& pci_address,
           const std::string& firmware_dir, const std::string& device_name,
           AmDriverOptions options = {});
  // Boots the GPU behind `function` (options.register_window is not used: the function has its
  // registers). `owner`: the claim the caller made before opening the function (its mailbox
  // locks are used, and it is released last); null: none (the mailboxes are this process's).
  AmDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<AmFunction> function,
           const std::string& firmware_dir, const std::string& device_name,
           AmDriverOptions options = {}, std::unique_ptr<os::DeviceOwner> owner = {});
  ~AmDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return memory_->heap_base(); }
  uint64_t va_size() const override { return memory_->heap_size(); }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  // The device-memory port: [va, va + size) of one allocation; VRAM through the function's
  // VramPort (in whole dwords: the dwords around bytes that are not read, merged and written
  // back), the host window through the function, other host memory by memcpy. InvalidInput
  // (GpuMemory::locate) for a range in no allocation or leaving it.
  void write_memory(uint64_t va, std::span<const std::byte> data) override;
  void read_memory(uint64_t va, std::span<std::byte> out) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<Encoder> encoder(QueueKind kind) override;
  ProgramLayout program_layout(std::span<const std::byte> image) override;
  // Returns when the wake mailbox was written, throws GpuFaultError when the interrupt ring
  // brought a fault (poll_fault), else returns after `timeout` with the fault registers read
  // (read_fault: a fault whose ring entry was lost). Between looks it sleeps on the GPU's MSI
  // through a VFIO eventfd (poll with the time left); a function without MSI (a USB bridge)
  // is looked at in sleeps of 10 µs doubling to 1 ms. Where the CPU maps no device memory the
  // mailbox is in VRAM, read (and cleared when set) through the port.
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  std::string hang_report() override;

  const BootReport& boot_report() const { return boot_->report(); }
  // The ASIC's blocks as booted (its faults, its status).
  AmAsic& asic() { return *asic_; }

  class Queue;

 private:
  friend class Queue;
  class FunctionWindows;
  AmDriver(std::shared_ptr<os::Kernel> kernel, std::unique_ptr<os::DeviceOwner> owner,
           const std::string& pci_address, const std::string& firmware_dir,
           const std::string& device_name, AmDriverOptions options);
  [[noreturn]] void raise_fault(const std::string& fault);
  // A fault recorded or latched in the hubs' registers, as a wait under way hears of it.
  void read_faults();
  // Whether the wake mailbox was written since the last look (and clears it).
  bool take_mailbox();
  // Sleeps until the MSI eventfd is signalled or `left` passes, and takes its count.
  void wait_msi(std::chrono::steady_clock::duration left);

  std::shared_ptr<os::Kernel> kernel_;
  std::unique_ptr<os::DeviceOwner> owner_;  // first in, last out: the device is ours until then
  AmDriverOptions options_;
  DeviceProperties props_;
  std::unique_ptr<AmFunction> function_;
  std::unique_ptr<AmBoot> boot_;
  std::unique_ptr<AmAsic> asic_;
  Gen gen_ = Gen::Gfx11;  // the ASIC's target's: its packets and hang reports
  std::unique_ptr<VramAllocator> allocator_;
  std::unique_ptr<FunctionWindows> windows_;
  std::unique_ptr<GpuMemory> memory_;
  // The CPU maps no device memory: rings, pointers and the mailbox go through the port.
  bool through_port_ = false;
  Allocation mailbox_;  // where a wake signal writes its event id
  std::mutex mailbox_mu_;  // through the port: one waiter reads and clears it at a time
  uint32_t event_id_ = 1;
  int msi_fd_ = -1;  // the eventfd the function signals the GPU's MSI through; -1: none (sleep-poll)
  StickyFault fault_;
  std::mutex queues_mu_;
  std::vector<Queue*> queues_;  // guarded by queues_mu_
};

}  // namespace hcq::amd::am
