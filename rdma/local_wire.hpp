#pragma once
// The shared-memory transport's wire format (rdma/local.cpp): the segment's layout, its byte
// rings and messages, and the checks each side makes of what its peer wrote before using it.
// The peer is another process, possibly hostile or damaged: every offset and length in a
// message is checked here, never trusted. Internal to rdma/ (its tests and fuzzer use it).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "rdma/transport.hpp"

namespace hcq::rdma::wire {

constexpr uint32_t kLayoutVersion = 2;  // 2: Layout at a 64-byte boundary of the payload
constexpr uint64_t kRingBytes = 2 << 20;
constexpr uint64_t kChunkBytes = 256 << 10;  // one message's payload at most
constexpr uint32_t kMaxAdvertised = 16;
constexpr size_t kErrorBytes = 400;

// A byte ring with one producer process and one consumer process.
struct Ring {
  alignas(64) std::atomic<uint64_t> head;  // bytes written
  alignas(64) std::atomic<uint64_t> tail;  // bytes consumed
  alignas(64) std::byte data[kRingBytes];

  // Producer: the room left. A head and tail the consumer damaged read as a full ring.
  uint64_t free_bytes() const {
    uint64_t used = head.load(std::memory_order_relaxed) - tail.load(std::memory_order_acquire);
    return used > kRingBytes ? 0 : kRingBytes - used;
  }
  // Consumer: bytes published; more than the ring holds means the producer damaged it
  // (check_ring says so).
  uint64_t used_bytes() const {
    return head.load(std::memory_order_acquire) - tail.load(std::memory_order_relaxed);
  }
  // Producer: copy at the head (the caller checked free_bytes), publish by storing head.
  void put(uint64_t at, const void* src, uint64_t n) {
    if (n == 0) return;  // src may be null then (an empty payload)
    uint64_t pos = at % kRingBytes, first = std::min(n, kRingBytes - pos);
    std::memcpy(data + pos, src, first);
    std::memcpy(data, static_cast<const std::byte*>(src) + first, n - first);
  }
  // Consumer: n <= kRingBytes (the checks below guarantee it).
  void get(uint64_t at, void* dst, uint64_t n) const {
    if (n == 0) return;
    uint64_t pos = at % kRingBytes, first = std::min(n, kRingBytes - pos);
    std::memcpy(dst, data + pos, first);
    std::memcpy(static_cast<std::byte*>(dst) + first, data, n - first);
  }
};

enum class Op : uint32_t { Write = 1, WriteImm = 2, Read = 3, ReadData = 4 };

struct Message {
  Op op;
  uint32_t imm;
  uint64_t seq;      // the initiator's operation number (1, 2, ...)
  uint64_t addr;     // the target's address of the whole operation
  uint64_t size;     // of the whole operation
  uint64_t offset;   // of this chunk within it
  uint64_t payload;  // bytes following this header
  uint32_t key;
  uint32_t last;     // the operation's last chunk
};

struct Side {
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> start_time;
  std::atomic<uint32_t> wake;        // bumped for anything this side's threads should look at
  std::atomic<uint32_t> closed;      // the side detached cleanly
  std::atomic<uint64_t> done_seq;    // the peer's requests this side has finished
  std::atomic<uint64_t> failed_seq;  // nonzero: the peer's request this side refused
  char failure[kErrorBytes];         // why (written before failed_seq)
  std::atomic<uint32_t> advertised;
  RemoteRegion regions[kMaxAdvertised];
  Ring requests;   // written by this side's posters
  Ring responses;  // written by this side's progress thread
};

// Zeroed by SharedSegment when made: every field starts valid at zero. Both processes find it
// at the first 64-byte boundary of the segment's payload (layout_in).
struct Layout {
  Side side[2];
};
constexpr uint64_t kSegmentBytes = sizeof(Layout) + alignof(Layout);
inline Layout* layout_in(void* payload) {
  const auto at = reinterpret_cast<uintptr_t>(payload);
  return reinterpret_cast<Layout*>((at + alignof(Layout) - 1) & ~uintptr_t(alignof(Layout) - 1));
}

// "" when the consumer may read a message at the ring's tail: `used` published bytes (at least
// a header's worth) no more than the ring holds; else why not.
std::string check_ring(uint64_t used);

// "" when request `m` at the head of `used` published bytes is well formed: a WRITE chunk lies
// inside its operation ([offset, offset + payload) within size, payload at most one chunk and
// wholly published), a READ carries no payload and starts at offset 0. Where it lands (key,
// address, size) is the target's region check. Else why not.
std::string check_request(const Message& m, uint64_t used);

// "" when READ data `m` answers the READ of `size` bytes that has `received` bytes so far:
// the next chunk in order, inside the READ, wholly published. Else why not.
std::string check_read_data(const Message& m, uint64_t used, uint64_t size, uint64_t received);

// Whether [addr, addr + size) lies inside [base, base + length), tested so that no sum wraps.
inline bool inside(uint64_t addr, uint64_t size, uint64_t base, uint64_t length) {
  return addr >= base && addr - base <= length && size <= length - (addr - base);
}

}  // namespace hcq::rdma::wire
