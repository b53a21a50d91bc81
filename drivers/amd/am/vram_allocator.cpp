#include "amd/am/vram_allocator.hpp"

#include <string>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace {
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

VramAllocator::VramAllocator(uint64_t base, uint64_t size)
    : base_(base), size_(size), heap_(base, size, "VRAM") {
  if (base % kGranule || size % kGranule)
    throw InvalidInput("VRAM: range " + hex(base) + " + " + hex(size) +
                       " is not a multiple of 4 KiB");
}

uint64_t VramAllocator::alloc(uint64_t size, uint64_t align) {
  if (size == 0) throw InvalidInput("VRAM: cannot allocate 0 bytes");
  if (align == 0 || (align & (align - 1)))
    throw InvalidInput("VRAM: alignment " + hex(align) + " is not a power of two");
  const uint64_t alignment = align < kGranule ? kGranule : align;
  std::lock_guard lock(mu_);
  const uint64_t largest = heap_.largest_free();
  auto out_of_memory = [&](uint64_t bytes) {
    return Error("VRAM: out of memory: " + hex(bytes) + " bytes aligned to " + hex(alignment) +
                 " requested, " + hex(heap_.size() - heap_.bytes_in_use()) +
                 " bytes free, largest free range " + hex(largest) + " bytes");
  };
  const uint64_t bytes = size > ~0ull - kGranule ? size : round_up(size, kGranule);
  if (bytes > largest) throw out_of_memory(bytes);
  try {
    return heap_.allocate(bytes, alignment);
  } catch (const Error&) {
    // The heap's own message speaks of address space; VRAM's names the same figures.
    throw out_of_memory(bytes);
  }
}

void VramAllocator::free(uint64_t addr) {
  std::lock_guard lock(mu_);
  if (addr < base_ || addr - base_ >= size_)
    throw InvalidInput("VRAM: free of " + hex(addr) + ", outside VRAM [" + hex(base_) + ", " +
                       hex(base_ + size_) + ")");
  try {
    heap_.free(addr);
  } catch (const InvalidInput&) {
    throw InvalidInput("VRAM: free of " + hex(addr) + ", which is not an allocation");
  }
}

uint64_t VramAllocator::bytes_free() const {
  std::lock_guard lock(mu_);
  return heap_.size() - heap_.bytes_in_use();
}
uint64_t VramAllocator::largest_free() const {
  std::lock_guard lock(mu_);
  return heap_.largest_free();
}
size_t VramAllocator::live_allocations() const {
  std::lock_guard lock(mu_);
  return heap_.live_allocations();
}

}  // namespace hcq::amd::am
