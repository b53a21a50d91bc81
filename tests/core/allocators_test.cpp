#include "core/allocators.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/error.hpp"

namespace hcq {
namespace {

TEST(VaHeap, RandomAllocFreeNeverOverlapsAndRespectsAlignment) {
  VaHeap heap(0x100000, 64 << 20, "test heap");
  std::mt19937_64 rng(42);
  std::map<uint64_t, uint64_t> live;  // va -> size
  for (int i = 0; i < 20000; i++) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t size = 1 + rng() % 65536;
      uint64_t align = uint64_t(1) << (rng() % 16);
      uint64_t va;
      try {
        va = heap.allocate(size, align);
      } catch (const Error&) {
        continue;  // full: fine, keep freeing
      }
      ASSERT_EQ(va % align, 0u);
      ASSERT_GE(va, heap.base());
      ASSERT_LE(va + size, heap.base() + heap.size());
      auto next = live.lower_bound(va);
      if (next != live.end()) {
        ASSERT_LE(va + size, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, va);
      }
      live[va] = size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      heap.free(it->first);
      live.erase(it);
    }
  }
  for (auto& [va, _] : live) heap.free(va);
  EXPECT_EQ(heap.bytes_in_use(), 0u);
  EXPECT_EQ(heap.largest_free(), heap.size());  // everything coalesced back
}

TEST(VaHeap, ExhaustionNamesTheRequestAndWhatIsFree) {
  VaHeap heap(0x1000, 0x10000, "emu:test");
  heap.allocate(0x8000, 0x1000);
  try {
    heap.allocate(0x9000, 0x1000);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "emu:test: out of GPU address space: 36864 bytes aligned to 4096 requested, "
                 "32768 bytes free, largest free range 32768 bytes");
  }
}

TEST(VaHeap, BadInputsAreClearErrors) {
  VaHeap heap(0x1000, 0x10000, "h");
  EXPECT_THROW(heap.allocate(0, 16), InvalidInput);
  EXPECT_THROW(heap.allocate(16, 3), InvalidInput);
  try {
    heap.free(0x2000);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "h: free of 0x2000, which is not a live allocation");
  }
  uint64_t a = heap.allocate(16, 16);
  heap.free(a);
  EXPECT_THROW(heap.free(a), InvalidInput);  // double free
}

// hcq replay puts a capture's buffers back where they were: reserve() hands out exactly the
// range asked for, and names what is in the way.
TEST(VaHeap, ReserveTakesExactlyTheRangeOrNamesWhatIsInTheWay) {
  VaHeap heap(0x10000, 0x10000, "emu:test");
  heap.reserve(0x14000, 0x2000);
  EXPECT_EQ(heap.bytes_in_use(), 0x2000u);
  auto error = [&](uint64_t va, uint64_t size) {
    try {
      heap.reserve(va, size);
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(0x13000, 0x2000), "emu:test: cannot reserve [0x13000, 0x15000): 0x14000 is in use");
  EXPECT_EQ(error(0x15000, 0x1000), "emu:test: cannot reserve [0x15000, 0x16000): 0x15000 is in use");
  EXPECT_EQ(error(0xf000, 0x2000),
            "emu:test: cannot reserve [0xf000, 0x11000): outside the heap [0x10000, 0x20000)");
  EXPECT_EQ(error(0x1f000, 0x2000),
            "emu:test: cannot reserve [0x1f000, 0x21000): outside the heap [0x10000, 0x20000)");
  EXPECT_EQ(error(0x10000, 0), "emu:test: cannot reserve [0x10000, 0x10000): outside the heap [0x10000, 0x20000)");
  // Both sides of the reserved range stay free and usable, and it frees like any other.
  heap.reserve(0x10000, 0x4000);
  heap.reserve(0x16000, 0xa000);
  EXPECT_EQ(heap.largest_free(), 0u);
  heap.free(0x14000);
  EXPECT_EQ(heap.allocate(0x2000, 0x1000), 0x14000u);
}

TEST(VaHeap, ExactFitAndCoalescing) {
  VaHeap heap(0, 0x4000, "h");
  uint64_t a = heap.allocate(0x1000, 0x1000), b = heap.allocate(0x1000, 0x1000),
           c = heap.allocate(0x2000, 0x1000);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 0x1000u);
  EXPECT_EQ(c, 0x2000u);
  EXPECT_THROW(heap.allocate(1, 1), Error);
  heap.free(a);
  heap.free(b);
  EXPECT_EQ(heap.largest_free(), 0x2000u);
  EXPECT_EQ(heap.allocate(0x2000, 0x2000), 0u);
}

struct Entry {
  uint64_t va;
};

TEST(SizeCache, ReusesExactSizesAndEvictsOldestOverBudget) {
  SizeCache<Entry> cache(300);
  EXPECT_TRUE(cache.put(100, {1}).empty());
  EXPECT_TRUE(cache.put(200, {2}).empty());
  Entry e{};
  EXPECT_FALSE(cache.take(150, e));
  EXPECT_TRUE(cache.take(100, e));
  EXPECT_EQ(e.va, 1u);
  EXPECT_TRUE(cache.put(100, {3}).empty());
  auto evicted = cache.put(100, {4});  // 400 > 300: the oldest (va 2) goes
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].va, 2u);
  EXPECT_EQ(cache.cached_bytes(), 200u);
  auto big = cache.put(1000, {5});  // larger than the budget: handed straight back
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].va, 5u);
}

TEST(TaggedRing, WaitsForTheTagOfEveryChunkItReuses) {
  std::vector<uint64_t> waited;
  TaggedRing ring(1000, [&](uint64_t tag) { waited.push_back(tag); });
  EXPECT_EQ(ring.allocate(400, 1, 1), 0u);
  EXPECT_EQ(ring.allocate(400, 1, 2), 400u);
  EXPECT_TRUE(waited.empty());
  // 300 bytes do not fit at 800: wrap to 0, which overlaps chunk 1 only.
  EXPECT_EQ(ring.allocate(300, 1, 3), 0u);
  EXPECT_EQ(waited, (std::vector<uint64_t>{1}));
  // 200 bytes at 300..500 overlap chunk 2.
  EXPECT_EQ(ring.allocate(200, 1, 4), 300u);
  EXPECT_EQ(waited, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(ring.live_chunks(), 2u);
}

TEST(TaggedRing, AlignmentAndBadSizes) {
  TaggedRing ring(1024, [](uint64_t) {});
  EXPECT_EQ(ring.allocate(1, 1, 1), 0u);
  EXPECT_EQ(ring.allocate(8, 256, 1), 256u);
  EXPECT_THROW(ring.allocate(0, 1, 1), InvalidInput);
  EXPECT_THROW(ring.allocate(1025, 1, 1), InvalidInput);
  EXPECT_THROW(ring.allocate(8, 3, 1), InvalidInput);
}

}  // namespace
}  // namespace hcq
