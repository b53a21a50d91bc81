// The physical VRAM allocator of the AM driver: aligned ranges of VRAM (page tables, rings,
// firmware, buffers), freed by address, coalescing with free neighbours.
//
// Threads: every member may be called from several threads at once (one mutex).
#pragma once

#include <cstdint>
#include <mutex>

#include "core/allocators.hpp"

namespace hcq::amd::am {

class VramAllocator {
 public:
  // The smallest unit handed out: the GPU's 4 KiB page (pte.hpp kPageBytes).
  static constexpr uint64_t kGranule = 4096;

  // Manages the VRAM physical range [base, base + size); both multiples of 4 KiB.
  VramAllocator(uint64_t base, uint64_t size);

  // The address of `size` bytes (rounded up to 4 KiB) aligned to `align` (a power of two;
  // at least 4 KiB is used). Throws hcq::InvalidInput for a size of 0 or a bad alignment and
  // hcq::Error "VRAM: out of memory: ..." naming the request, the bytes free and the largest
  // free range when it cannot fit.
  uint64_t alloc(uint64_t size, uint64_t align = kGranule);
  // Frees what `alloc` returned; hcq::InvalidInput for any other address.
  void free(uint64_t addr);

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t bytes_free() const;
  uint64_t largest_free() const;
  size_t live_allocations() const;

 private:
  const uint64_t base_, size_;
  mutable std::mutex mu_;
  VaHeap heap_;  // guarded by mu_
};

}  // namespace hcq::amd::am
