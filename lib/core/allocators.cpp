#include "core/allocators.hpp"

#include <algorithm>
#include <sstream>

#include "core/error.hpp"

namespace hcq {
namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
}  // namespace

VaHeap::VaHeap(uint64_t base, uint64_t size, std::string owner)
    : base_(base), size_(size), owner_(std::move(owner)) {
  if (size) insert_free(base, size);
}

void VaHeap::insert_free(uint64_t addr, uint64_t size) {
  free_by_addr_.emplace(addr, size);
  free_by_size_.emplace(size, addr);
}

void VaHeap::erase_free(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_addr_.erase(it);
}

uint64_t VaHeap::largest_free() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

uint64_t VaHeap::allocate(uint64_t size, uint64_t align) {
  if (size == 0) throw InvalidInput(owner_ + ": cannot allocate 0 bytes");
  if (!is_pow2(align))
    throw InvalidInput(owner_ + ": alignment " + std::to_string(align) + " is not a power of two");
  // Best fit: look at a few of the smallest blocks that could hold `size` once aligned;
  // failing that, the smallest block of at least size+align-1 bytes always fits. Both are
  // O(log n).
  auto fits = [&](std::set<std::pair<uint64_t, uint64_t>>::iterator b) {
    uint64_t addr = align_up(b->second, align);
    return addr - b->second <= b->first && b->first - (addr - b->second) >= size;
  };
  auto it = free_by_size_.lower_bound({size, 0});
  for (int tries = 0; it != free_by_size_.end() && tries < 8 && !fits(it); tries++) ++it;
  if (it != free_by_size_.end() && !fits(it)) {
    uint64_t need = size + align - 1;
    it = need < size ? free_by_size_.end() : free_by_size_.lower_bound({need, 0});
  }
  if (it == free_by_size_.end()) {
    throw Error(owner_ + ": out of GPU address space: " + std::to_string(size) +
                " bytes aligned to " + std::to_string(align) + " requested, " +
                std::to_string(size_ - in_use_) + " bytes free, largest free range " +
                std::to_string(largest_free()) + " bytes");
  }
  uint64_t block = it->second, block_size = it->first;
  erase_free(free_by_addr_.find(block));
  uint64_t addr = align_up(block, align);
  if (addr > block) insert_free(block, addr - block);
  uint64_t end = addr + size, block_end = block + block_size;
  if (end < block_end) insert_free(end, block_end - end);
  used_.emplace(addr, size);
  in_use_ += size;
  return addr;
}

void VaHeap::reserve(uint64_t va, uint64_t size) {
  // Appended, not "[" + hex(...): GCC 12 at -O3 warns (-Wrestrict) on that operator+.
  std::string range = "[";
  range += hex(va);
  range += ", ";
  range += hex(va + size);
  range += ")";
  if (size == 0 || va < base_ || va + size < va || va + size > base_ + size_)
    throw InvalidInput(owner_ + ": cannot reserve " + range + ": outside the heap [" +
                       hex(base_) + ", " + hex(base_ + size_) + ")");
  // The free block holding `va`, which must reach to its end.
  auto it = free_by_addr_.upper_bound(va);
  if (it == free_by_addr_.begin() || std::prev(it)->first + std::prev(it)->second < va + size) {
    // The first allocation in the way, for the message.
    uint64_t in_use = va;
    if (it != free_by_addr_.begin() && std::prev(it)->first + std::prev(it)->second > va)
      in_use = std::prev(it)->first + std::prev(it)->second;
    throw InvalidInput(owner_ + ": cannot reserve " + range + ": " + hex(in_use) +
                       " is in use");
  }
  --it;
  const uint64_t block = it->first, block_end = it->first + it->second;
  erase_free(it);
  if (va > block) insert_free(block, va - block);
  if (va + size < block_end) insert_free(va + size, block_end - va - size);
  used_.emplace(va, size);
  in_use_ += size;
}

void VaHeap::free(uint64_t va) {
  auto u = used_.find(va);
  if (u == used_.end())
    throw InvalidInput(owner_ + ": free of " + hex(va) + ", which is not a live allocation");
  uint64_t addr = va, size = u->second;
  in_use_ -= size;
  used_.erase(u);
  // Coalesce with the free neighbours on both sides.
  auto next = free_by_addr_.lower_bound(addr);
  if (next != free_by_addr_.end() && next->first == addr + size) {
    size += next->second;
    erase_free(next);
  }
  auto prev = free_by_addr_.lower_bound(addr);
  if (prev != free_by_addr_.begin()) {
    --prev;
    if (prev->first + prev->second == addr) {
      addr = prev->first;
      size += prev->second;
      erase_free(prev);
    }
  }
  insert_free(addr, size);
}

TaggedRing::TaggedRing(uint64_t capacity, std::function<void(uint64_t)> wait_until)
    : capacity_(capacity), wait_until_(std::move(wait_until)) {}

void TaggedRing::retire_front() {
  wait_until_(live_.front().tag);
  live_.pop_front();
}

uint64_t TaggedRing::allocate(uint64_t size, uint64_t align, uint64_t tag) {
  if (auto off = try_allocate(size, align, tag, false)) return *off;
  throw Error("ring of " + std::to_string(capacity_) + " bytes: a chunk of " +
              std::to_string(size) + " bytes would overwrite one the host still holds");
}

std::optional<uint64_t> TaggedRing::try_allocate(uint64_t size, uint64_t align, uint64_t tag,
                                                 bool hold) {
  if (size == 0 || size > capacity_)
    throw InvalidInput("ring of " + std::to_string(capacity_) + " bytes cannot hold a chunk of " +
                       std::to_string(size) + " bytes");
  if (!is_pow2(align)) throw InvalidInput("ring alignment must be a power of two");
  uint64_t off = align_up(head_, align);
  if (off + size > capacity_) {
    // Wrap: chunks in the skipped tail are older than anything at the start; retire them.
    while (!live_.empty() && live_.front().offset >= head_) {
      if (live_.front().held) return std::nullopt;
      retire_front();
    }
    off = 0;
  }
  // Live chunks lie in ring order starting just past head: retire from the oldest until
  // none overlaps [off, off+size).
  while (!live_.empty()) {
    const Chunk& c = live_.front();
    bool overlaps = c.offset < off + size && off < c.offset + c.size;
    if (!overlaps) break;
    if (c.held) return std::nullopt;
    retire_front();
  }
  live_.push_back({off, size, tag, hold});
  head_ = off + size;
  return off;
}

void TaggedRing::release(uint64_t offset) {
  for (Chunk& c : live_)
    if (c.offset == offset && c.held) {
      c.held = false;
      return;
    }
  throw InvalidInput("ring: no held chunk at offset " + std::to_string(offset));
}

}  // namespace hcq
