// Allocators used by a Device: a GPU virtual-address heap, a cache of freed buffers, and a
// wrap-around ring whose chunks are tagged with the timeline value that frees them (used
// for kernel arguments and for host staging).
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace hcq {

// Best-fit address heap over [base, base+size): O(log n) allocate and free, coalescing,
// never hands out overlapping ranges.
class VaHeap {
 public:
  VaHeap(uint64_t base, uint64_t size, std::string owner);

  // Throws hcq::Error naming the owner, the request and what is free when it cannot fit.
  uint64_t allocate(uint64_t size, uint64_t align);
  // Hands out exactly [va, va + size); throws InvalidInput naming the owner and the range
  // when any of it is outside the heap or in use.
  void reserve(uint64_t va, uint64_t size);
  // Throws hcq::Error for an address that is not a live allocation.
  void free(uint64_t va);

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t bytes_in_use() const { return in_use_; }
  size_t live_allocations() const { return used_.size(); }
  uint64_t largest_free() const;

 private:
  void insert_free(uint64_t addr, uint64_t size);
  void erase_free(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t base_, size_, in_use_ = 0;
  std::string owner_;
  std::map<uint64_t, uint64_t> free_by_addr_;              // addr -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;   // (size, addr)
  std::unordered_map<uint64_t, uint64_t> used_;            // addr -> size
};

// Freed allocations kept by exact size for reuse, up to a byte budget; least recently
// freed are dropped first.
template <class Entry>
class SizeCache {
 public:
  explicit SizeCache(uint64_t budget) : budget_(budget) {}
  // An entry of exactly `size`, if one is cached.
  bool take(uint64_t size, Entry& out) {
    auto it = by_size_.find(size);
    if (it == by_size_.end()) return false;
    out = std::move(it->second);
    cached_ -= size;
    order_.erase(std::find(order_.begin(), order_.end(), it->second.va));
    by_size_.erase(it);
    return true;
  }
  // Keeps `e`; returns the entries evicted to stay within budget (the caller frees them).
  std::vector<Entry> put(uint64_t size, Entry e) {
    std::vector<Entry> evicted;
    if (size > budget_) {
      evicted.push_back(std::move(e));
      return evicted;
    }
    order_.push_back(e.va);
    by_size_.emplace(size, std::move(e));
    cached_ += size;
    while (cached_ > budget_) {
      uint64_t va = order_.front();
      order_.pop_front();
      for (auto it = by_size_.begin(); it != by_size_.end(); ++it)
        if (it->second.va == va) {
          cached_ -= it->first;
          evicted.push_back(std::move(it->second));
          by_size_.erase(it);
          break;
        }
    }
    return evicted;
  }
  std::vector<Entry> drain() {
    std::vector<Entry> all;
    for (auto& [_, e] : by_size_) all.push_back(std::move(e));
    by_size_.clear();
    order_.clear();
    cached_ = 0;
    return all;
  }
  uint64_t cached_bytes() const { return cached_; }

 private:
  uint64_t budget_, cached_ = 0;
  std::multimap<uint64_t, Entry> by_size_;
  std::deque<uint64_t> order_;
};

// A wrap-around ring of `capacity` bytes. Each chunk is tagged with the timeline value after
// which the device no longer uses it; handing out a chunk that overlaps a live one first
// waits (through `wait_until`) for that chunk's tag. A chunk may also be held by the host
// (a copy-out's data not yet read): it is not handed out again until release().
// Not thread-safe: the owner serialises every call.
class TaggedRing {
 public:
  TaggedRing(uint64_t capacity, std::function<void(uint64_t tag)> wait_until);
  // Offset of a chunk of `size` bytes aligned to `align`, freed once the timeline reaches `tag`.
  // Throws Error when it would need a held chunk back (use try_allocate with holds).
  uint64_t allocate(uint64_t size, uint64_t align, uint64_t tag);
  // The same, also held when `hold`; nullopt when the chunk would overlap a held one (the
  // caller releases what it holds, then asks again).
  std::optional<uint64_t> try_allocate(uint64_t size, uint64_t align, uint64_t tag, bool hold);
  // The host is done with the held chunk at `offset` (InvalidInput when none is held there).
  void release(uint64_t offset);
  uint64_t capacity() const { return capacity_; }
  size_t live_chunks() const { return live_.size(); }

 private:
  struct Chunk {
    uint64_t offset, size, tag;
    bool held;
  };
  void retire_front();
  uint64_t capacity_, head_ = 0;
  std::function<void(uint64_t)> wait_until_;
  std::deque<Chunk> live_;
};

}  // namespace hcq
