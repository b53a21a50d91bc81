#include "amd/am/gpu_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/error.hpp"
#include "os/address_window.hpp"

namespace hcq::amd::am {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBigPage = 2ull << 20;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
void* ptr(uint64_t va) { return reinterpret_cast<void*>(va); }

// Host memory pages: system pages the CPU caches, so snooped; uncached (MTYPE UC) as tinygrad
// maps host memory for AM (runtime/support/system.py).
MapFlags host_flags(bool executable) {
  MapFlags f;
  f.memory = Memory::System;
  f.snooped = true;
  f.uncached = true;
  f.executable = executable;
  return f;
}

}  // namespace

const char* vm_hub_name(VmHub hub) { return hub == VmHub::Gc ? "GC" : "MM"; }

uint64_t* MappedVram::at(uint64_t pa) const {
  if (pa % 8) throw Error("VRAM BAR: address " + hex(pa) + " is not 8-byte aligned");
  if (pa > size_ || size_ - pa < 8)
    throw Error("VRAM BAR: address " + hex(pa) + " is outside its " + hex(size_) + " bytes");
  return reinterpret_cast<uint64_t*>(base_ + pa);
}

uint64_t MappedVram::read64(uint64_t pa) { return *static_cast<volatile uint64_t*>(at(pa)); }

void MappedVram::write64(uint64_t pa, uint64_t value) {
  *static_cast<volatile uint64_t*>(at(pa)) = value;
}

// A byte range of the BAR, checked as one access.
static std::byte* mapped_range(std::byte* base, uint64_t size, uint64_t pa, uint64_t bytes) {
  if (pa > size || size - pa < bytes)
    throw Error("VRAM BAR: " + hex(bytes) + " bytes at " + hex(pa) + " are outside its " +
                hex(size) + " bytes");
  return base + pa;
}

void MappedVram::write(uint64_t pa, std::span<const std::byte> data) {
  std::byte* at = mapped_range(base_, size_, pa, data.size());
  if (!data.empty()) std::memcpy(at, data.data(), data.size());
}

void MappedVram::read(uint64_t pa, std::span<std::byte> out) {
  const std::byte* at = mapped_range(base_, size_, pa, out.size());
  if (!out.empty()) std::memcpy(out.data(), at, out.size());
}

GpuMemory::GpuMemory(std::shared_ptr<os::Kernel> kernel, DeviceWindows& device,
                     VramAccess& vram, VramAllocator& allocator, uint64_t heap_bytes,
                     std::string device_name, GpuMemoryReach reach)
    : kernel_(std::move(kernel)),
      device_(device),
      allocator_(allocator),
      name_(std::move(device_name)),
      reach_(reach),
      tables_(vram, allocator) {
  if (reach_.window_bytes % kPage || reach_.window_address % kPage)
    throw InvalidInput(name_ + ": host window " + where(reach_.window_address, reach_.window_bytes) +
                       " is not page aligned");
  // 2 MiB more than needed, so that the range can start on a 2 MiB boundary (the page
  // tables use 2 MiB pages only where the address is aligned to them).
  mapping_size_ = kPrivateBytes + heap_bytes + kBigPage;
  mapping_base_ = os::reserve_window(*kernel_, mapping_size_, kPrivateBytes, name_);
  private_base_ = align_up(mapping_base_, kBigPage);
  heap_base_ = private_base_ + kPrivateBytes;
  heap_size_ = heap_bytes;
  private_heap_.emplace(private_base_, kPrivateBytes, name_ + " driver-private GPU address space");
}

GpuMemory::~GpuMemory() {
  std::lock_guard lk(mu_);
  try {
    for (auto& [va, r] : records_) tables_.unmap(va, r.size);
    invalidate_locked();
    for (auto& [va, r] : records_) release(va, r);
  } catch (...) {
    // Closing: a hub that does not acknowledge leaves nothing better to do than to go on.
  }
  records_.clear();
  kernel_->munmap(ptr(mapping_base_), mapping_size_);
}

void GpuMemory::set_invalidate(Invalidate invalidate) {
  std::lock_guard lk(mu_);
  invalidate_ = std::move(invalidate);
}

uint64_t GpuMemory::page_table_base() const {
  std::lock_guard lk(mu_);
  return tables_.page_table_base();
}

std::string GpuMemory::where(uint64_t va, uint64_t size) const {
  // Appended piece by piece: GCC 12 -O3 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string out = "[";
  out += hex(va);
  out += ", +";
  out += hex(size);
  out += ")";
  return out;
}

void GpuMemory::reserve(uint64_t va, uint64_t size) {
  // Keep the range ours (PROT_NONE) so that no other host mapping lands there.
  kernel_->mmap(ptr(va), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                -1, 0);
}

Allocation GpuMemory::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) {
  if (size == 0 || va % kPage || size % kPage || va < heap_base_ || size > heap_size_ ||
      va - heap_base_ > heap_size_ - size)
    throw InvalidInput(name_ + ": " + where(va, size) +
                       " is not a page-aligned range of the GPU heap " +
                       where(heap_base_, heap_size_));
  std::lock_guard lk(mu_);
  return back(va, size, kind, executable, false);
}

Allocation GpuMemory::private_alloc(uint64_t size, MemoryKind kind) {
  size = align_up(size == 0 ? 1 : size, kPage);
  // Power-of-two sizes are aligned to themselves (rings need it).
  const uint64_t align = (size & (size - 1)) == 0 ? std::min(size, kBigPage) : kPage;
  std::lock_guard lk(mu_);
  const uint64_t va = private_heap_->allocate(size, align);
  try {
    return back(va, size, kind, true, true);
  } catch (...) {
    private_heap_->free(va);
    throw;
  }
}

Allocation GpuMemory::back(uint64_t va, uint64_t size, MemoryKind kind, bool executable,
                           bool priv) {
  Record r;
  r.size = size;
  r.kind = kind;
  r.priv = priv;
  void* host = ptr(va);
  if (kind == MemoryKind::Host && reach_.window_bytes) {
    // The device reaches only the window: the pages are the window's, which the CPU writes
    // through the function (no host pointer).
    r.window = true;
    r.pa = window_alloc(size);
    try {
      tables_.map(va, reach_.window_address + r.pa, size, host_flags(executable));
    } catch (...) {
      window_used_.erase(r.pa);
      throw;
    }
    host = nullptr;
  } else if (kind == MemoryKind::Device) {
    // 2 MiB-aligned VRAM where the buffer can take 2 MiB pages.
    try {
      r.pa = allocator_.alloc(size, size >= kBigPage && va % kBigPage == 0 ? kBigPage : kPage);
    } catch (const Error& e) {
      throw Error(name_ + ": " + std::to_string(size) + " bytes of device memory: " + e.what());
    }
    try {
      if (reach_.cpu_maps_vram) device_.map_vram(ptr(va), r.pa, size);
      MapFlags f;
      f.executable = executable;
      tables_.map(va, r.pa, size, f);
    } catch (...) {
      if (reach_.cpu_maps_vram) reserve(va, size);
      allocator_.free(r.pa);
      throw;
    }
    if (!reach_.cpu_maps_vram) host = nullptr;
  } else {
    void* p = kernel_->mmap(ptr(va), size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) throw OsError(name_ + ": host memory at " + where(va, size), errno);
    bool dma = false;
    try {
      device_.map_dma(p, va, size);  // IOVA = the address
      dma = true;
      tables_.map(va, va, size, host_flags(executable));
    } catch (...) {
      if (dma) device_.unmap_dma(va, size);
      reserve(va, size);
      throw;
    }
  }
  records_[va] = r;
  flush_tables_locked();
  return Allocation{va, size, host, kind, r.pa};
}

uint64_t GpuMemory::window_alloc(uint64_t size) {
  // First fit over the window's few pages (0x80000 bytes: 128 of them).
  uint64_t at = 0;
  for (const auto& [offset, bytes] : window_used_) {
    if (offset - at >= size) break;
    at = offset + bytes;
  }
  if (at > reach_.window_bytes || reach_.window_bytes - at < size)
    throw Error(name_ + ": " + hex(size) + " bytes of host memory do not fit the host window (" +
                hex(reach_.window_bytes) + " bytes at " + hex(reach_.window_address) + "): " +
                hex(window_bytes_free_locked()) + " bytes free, largest free range " +
                hex(window_largest_free()));
  window_used_[at] = size;
  return at;
}

uint64_t GpuMemory::window_largest_free() const {
  uint64_t at = 0, largest = 0;
  for (const auto& [offset, bytes] : window_used_) {
    largest = std::max(largest, offset - at);
    at = offset + bytes;
  }
  return std::max(largest, reach_.window_bytes - at);
}

uint64_t GpuMemory::window_bytes_free_locked() const {
  uint64_t used = 0;
  for (const auto& [offset, bytes] : window_used_) used += bytes;
  return reach_.window_bytes - used;
}

uint64_t GpuMemory::window_bytes_free() const {
  std::lock_guard lk(mu_);
  return window_bytes_free_locked();
}

Allocation GpuMemory::map_user(void* host, uint64_t size) {
  const uint64_t va = reinterpret_cast<uint64_t>(host);
  if (size == 0 || va % kPage || size % kPage)
    throw InvalidInput(name_ + ": user memory " + where(va, size) + " is not page aligned");
  if (reach_.window_bytes)
    throw InvalidInput(name_ + ": cannot map user memory " + where(va, size) +
                       ": the device cannot reach host memory outside the bridge's SRAM window (" +
                       hex(reach_.window_bytes) + " bytes at " + hex(reach_.window_address) + ")");
  std::lock_guard lk(mu_);
  device_.map_dma(host, va, size);
  try {
    tables_.map(va, va, size, host_flags(false));
  } catch (...) {
    device_.unmap_dma(va, size);
    throw;
  }
  Record r;
  r.size = size;
  r.kind = MemoryKind::Host;
  r.user = true;
  records_[va] = r;
  flush_tables_locked();
  Allocation a{va, size, host, MemoryKind::Host, 0};
  a.user = true;
  return a;
}

void GpuMemory::set_flush_tables(std::function<void()> flush) {
  std::lock_guard lk(mu_);
  flush_tables_ = std::move(flush);
}

void GpuMemory::flush_tables_locked() {
  if (flush_tables_) flush_tables_();
}

void GpuMemory::invalidate_locked() {
  if (!tables_.needs_invalidate()) return;
  flush_tables_locked();
  const std::vector<VaRange> ranges = tables_.take_invalidations();
  if (!invalidate_) return;
  invalidate_(VmHub::Gc, ranges);
  invalidate_(VmHub::Mm, ranges);
}

void GpuMemory::release(uint64_t va, const Record& r) {
  if (r.window) {
    window_used_.erase(r.pa);
  } else if (r.kind == MemoryKind::Device) {
    if (reach_.cpu_maps_vram) reserve(va, r.size);
    allocator_.free(r.pa);
  } else {
    device_.unmap_dma(va, r.size);
    if (!r.user) reserve(va, r.size);  // the caller's memory stays mapped
  }
  if (r.priv) private_heap_->free(va);
}

void GpuMemory::free(const Allocation& a) {
  std::lock_guard lk(mu_);
  auto it = records_.find(a.va);
  if (it == records_.end())
    throw InvalidInput(name_ + ": free of " + hex(a.va) + ", which is no allocation");
  const Record r = it->second;
  tables_.unmap(a.va, r.size);
  records_.erase(it);
  // The GPU may still translate the range until both hubs have dropped it: only then does the
  // memory behind it go (a failed invalidation leaves it allocated).
  invalidate_locked();
  release(a.va, r);
}

const void* GpuMemory::host_view(uint64_t va, uint64_t bytes) {
  std::lock_guard lk(mu_);
  auto it = records_.upper_bound(va);
  if (it == records_.begin()) return nullptr;
  --it;
  const Record& r = it->second;
  if (va - it->first >= r.size || bytes > r.size - (va - it->first)) return nullptr;
  if (r.window || (r.kind == MemoryKind::Device && !reach_.cpu_maps_vram)) return nullptr;
  return ptr(va);  // mapped at the GPU address
}

MemoryPlace GpuMemory::locate(uint64_t va, uint64_t bytes) const {
  std::lock_guard lk(mu_);
  auto it = records_.upper_bound(va);
  if (it == records_.begin() || va - std::prev(it)->first >= std::prev(it)->second.size)
    throw InvalidInput(name_ + ": " + where(va, bytes) + " is in no allocation");
  --it;
  const Record& r = it->second;
  const uint64_t offset = va - it->first;
  if (bytes > r.size - offset)
    throw InvalidInput(name_ + ": " + where(va, bytes) + " leaves the allocation " +
                       where(it->first, r.size));
  if (r.window) return {MemoryPlace::In::HostWindow, r.pa + offset};
  if (r.kind == MemoryKind::Device) return {MemoryPlace::In::Vram, r.pa + offset};
  return {MemoryPlace::In::Host, va};
}

size_t GpuMemory::live_allocations() const {
  std::lock_guard lk(mu_);
  return records_.size();
}

}  // namespace hcq::amd::am
