// The AM driver's memory (issue 17 item 5): one reserved range of the process's address space
// is also the GPU's virtual address space (VMID 0), so CPU and GPU see every buffer at the same
// address, as the KFD driver and tinygrad's AM do.
//   Device memory: VRAM from the VRAM allocator, mapped for the CPU through the VRAM BAR at
//                  the buffer's address (replacing the reservation there) and in the GPU's
//                  page tables at that address.
//   Host memory:   anonymous pages at the buffer's address, mapped for the device's DMA at
//                  IOVA = that address (the IOMMU stays on) and in the page tables as system
//                  pages, snooped and uncached (tinygrad runtime/support/system.py maps host
//                  memory for AM with snooped=True, uncached=True).
//   User memory:   the caller's pages, the same way at the caller's address.
// Where the CPU cannot map VRAM (a GPU behind a USB bridge), device memory has no host pointer
// and the CPU reaches it through the device-memory port (locate gives VRAM's address); where
// the device reaches host memory only as a small window (the bridge's SRAM), host memory is
// carved from that window (first fit, 4 KiB pages) and mapped as system pages at the window's
// device address + offset, and the caller's memory cannot be mapped.
// Every unmap is followed by the TLB invalidation of both hubs that cache VMID 0 (GC and MM;
// tinygrad AMMemoryManager.on_range_mapped flushes both) through a callback the GMC fills,
// before the memory behind the range is released.
//
// Threads: every member may be called from several threads at once (one VM lock held around
// the page-table change and the invalidation after it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "amd/am/am_function.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/am/vram_allocator.hpp"
#include "core/allocators.hpp"
#include "core/driver.hpp"
#include "os/kernel.hpp"

namespace hcq::amd::am {

// The hubs whose TLBs hold VMID 0's translations (Linux gmc_v11_0.c: the GFX hub and MMHUB 0).
enum class VmHub : uint8_t { Gc, Mm };
const char* vm_hub_name(VmHub hub);  // "GC", "MM"

// VRAM as the VRAM BAR maps it into the process: physical address = offset in the BAR (the
// VramPort of a mapped BAR0). An access outside the BAR, or a 64-bit one not 8-byte aligned,
// throws hcq::Error naming the address.
class MappedVram final : public VramPort {
 public:
  MappedVram(std::byte* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t read64(uint64_t pa) override;
  void write64(uint64_t pa, uint64_t value) override;
  void write(uint64_t pa, std::span<const std::byte> data) override;
  void read(uint64_t pa, std::span<std::byte> out) override;
  std::byte* mapping() const override { return base_; }
  std::byte* base() const { return base_; }
  uint64_t size() const override { return size_; }

 private:
  uint64_t* at(uint64_t pa) const;
  std::byte* base_;
  uint64_t size_;
};

// What the memory needs of the device besides VRAM access: VFIO on a GPU, a memfd in tests.
class DeviceWindows {
 public:
  virtual ~DeviceWindows() = default;
  // Maps VRAM [pa, pa + size) for the CPU exactly at `at`, replacing what is there.
  virtual void map_vram(void* at, uint64_t pa, uint64_t size) = 0;
  // Lets the device reach [host, host + size) at `iova`, and stops it.
  virtual void map_dma(void* host, uint64_t iova, uint64_t size) = 0;
  virtual void unmap_dma(uint64_t iova, uint64_t size) = 0;
};

// How the CPU and the device reach each other's memory; the default is VFIO's: VRAM mapped
// for the CPU, any host page mapped for the device's DMA.
struct GpuMemoryReach {
  bool cpu_maps_vram = true;  // false: device allocations get no host pointer (no map_vram)
  // Host memory the device reaches only at [window_address, + window_bytes), which the CPU
  // writes through the function: host allocations are carved from it. 0 bytes: no window.
  uint64_t window_address = 0, window_bytes = 0;
};

// Where the bytes of an allocation are, for the device-memory port.
struct MemoryPlace {
  enum class In : uint8_t { Vram, HostWindow, Host };
  In in = In::Vram;
  // Vram: the physical address; HostWindow: the offset in the window; Host: the CPU address.
  uint64_t address = 0;
};

class GpuMemory {
 public:
  // Invalidates `hub`'s TLB for VMID 0 after `ranges` were unmapped; throws on a timeout.
  using Invalidate = std::function<void(VmHub hub, std::span<const VaRange> ranges)>;
  // The first part of the reservation holds the driver's own objects (rings, EOP buffers);
  // lib/core's heap hands out the rest.
  static constexpr uint64_t kPrivateBytes = 4ull << 30;

  // Reserves kPrivateBytes + heap_bytes of address space (2 MiB aligned) and builds the page
  // tables' root in VRAM. `vram` and `allocator` cover the VRAM the memory may use; every
  // reference must outlive this object.
  GpuMemory(std::shared_ptr<os::Kernel> kernel, DeviceWindows& device, VramAccess& vram,
            VramAllocator& allocator, uint64_t heap_bytes, std::string device_name,
            GpuMemoryReach reach = {});
  // Unmaps and releases whatever is still allocated (invalidating as every unmap does), then
  // the reservation.
  ~GpuMemory();
  GpuMemory(const GpuMemory&) = delete;
  GpuMemory& operator=(const GpuMemory&) = delete;

  // Called after every unmap (empty: no hub to invalidate yet, as before the GMC is up).
  void set_invalidate(Invalidate invalidate);
  // Called after every page-table write (a map, and an unmap before its invalidation): the
  // tables are in VRAM, written through the VRAM BAR, and the hubs walk them only once the
  // HDP has been flushed (tinygrad AM_GMC.flush_tlb flushes the HDP first; Linux
  // amdgpu_vm_cpu_commit flushes after CPU page-table updates). Empty: nothing.
  void set_flush_tables(std::function<void()> flush);

  // VM_CONTEXT0_PAGE_TABLE_BASE_ADDR's value (PageTables::page_table_base).
  uint64_t page_table_base() const;
  uint64_t heap_base() const { return heap_base_; }
  uint64_t heap_size() const { return heap_size_; }

  // Backs [va, va + size) of the heap (both multiples of 4 KiB) with memory of `kind`, mapped
  // for the CPU at va where the CPU maps it. InvalidInput for a range outside the heap or not
  // page aligned; Error naming the sizes when the host window has no room.
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable);
  // `size` bytes of the driver's private range (rounded up to 4 KiB; power-of-two sizes
  // aligned to themselves up to 2 MiB, as rings need).
  Allocation private_alloc(uint64_t size, MemoryKind kind);
  // The caller's page-aligned memory mapped for the device at its own address. InvalidInput
  // where the device reaches host memory only through the window.
  Allocation map_user(void* host, uint64_t size);
  // Releases what allocate, private_alloc or map_user returned: the GPU mapping goes, both
  // hubs are invalidated, then the memory behind it (the caller's memory stays mapped).
  void free(const Allocation& a);

  // The CPU's view of [va, va + bytes) when one allocation holds it and the CPU maps it, else
  // null.
  const void* host_view(uint64_t va, uint64_t bytes);
  // Where [va, va + bytes) is when one allocation holds it. InvalidInput "<device>: [va, +n)
  // is in no allocation" or "... leaves the allocation [va, +size)".
  MemoryPlace locate(uint64_t va, uint64_t bytes) const;
  const GpuMemoryReach& reach() const { return reach_; }
  size_t live_allocations() const;
  // Bytes of the host window not handed out.
  uint64_t window_bytes_free() const;

 private:
  struct Record {
    uint64_t size = 0;
    MemoryKind kind = MemoryKind::Device;
    uint64_t pa = 0;  // VRAM address of device memory; the offset of window memory
    bool user = false, priv = false, window = false;
  };
  uint64_t window_alloc(uint64_t size);  // first fit; Error naming the sizes when full
  uint64_t window_largest_free() const;
  uint64_t window_bytes_free_locked() const;
  Allocation back(uint64_t va, uint64_t size, MemoryKind kind, bool executable, bool priv);
  void release(uint64_t va, const Record& r);
  void invalidate_locked();
  void flush_tables_locked();
  void reserve(uint64_t va, uint64_t size);
  std::string where(uint64_t va, uint64_t size) const;

  std::shared_ptr<os::Kernel> kernel_;
  DeviceWindows& device_;
  VramAllocator& allocator_;
  std::string name_;
  GpuMemoryReach reach_;
  uint64_t mapping_base_ = 0, mapping_size_ = 0;  // what mmap gave (unaligned)
  uint64_t private_base_ = 0, heap_base_ = 0, heap_size_ = 0;
  mutable std::mutex mu_;  // guards everything below
  PageTables tables_;
  std::optional<VaHeap> private_heap_;
  Invalidate invalidate_;
  std::function<void()> flush_tables_;
  std::map<uint64_t, Record> records_;  // by va
  std::map<uint64_t, uint64_t> window_used_;  // offset -> bytes, in the host window
};

}  // namespace hcq::amd::am
