#pragma once
// rdma/: device and host memory moved between processes and machines with one-sided
// operations (issue 20). An Endpoint is a NIC (or, for the shared-memory transport, this
// process); a Region is a registered range peers may write and read (address, key, length);
// a Connection is a reliable, in-order link to one peer (a reliable-connected queue pair)
// with RDMA WRITE, READ and WRITE-with-immediate, whose completions set hcq::Signal values.
//
// Semantics shared by every transport (see docs/rdma.md):
//   - Operations on one Connection complete in the order they were posted.
//   - A remote address is the peer's region address (Region::addr) plus an offset; the
//     peer checks key and bounds, and a bad one is a RemoteAccessError that puts the
//     connection in the error state (as an RC queue pair does): every operation not yet
//     complete then fails with that error, and so does every later post.
//   - A peer that dies or closes fails the connection with ConnectionError, within about
//     100 ms of its death, whatever is in flight.
//
// Thread safety: every Endpoint and Connection member may be called from several threads at
// once (registration, posts and waits are serialised inside). A Region is immutable after
// registration; it must outlive every operation that uses it, and so must the Signal an
// operation sets. Destroying a Connection or Endpoint must not race with its other calls.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"

namespace hcq::rdma {

// The peer refused an access: a key it did not register, or a range outside the region.
class RemoteAccessError : public Error {
 public:
  using Error::Error;
};

// The connection is gone: the peer died or closed, or setup failed.
class ConnectionError : public Error {
 public:
  using Error::Error;
};

// What a peer needs to address a region: sent to it during or after connection setup.
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t key = 0;
  bool operator==(const RemoteRegion&) const = default;
};

// A registered range. addr is what peers address it by: the host address for host memory,
// the buffer's device address for an hcq::Buffer.
class Region {
 public:
  virtual ~Region() = default;
  uint64_t addr() const { return addr_; }
  uint64_t length() const { return length_; }
  uint32_t key() const { return key_; }
  RemoteRegion remote() const { return {addr_, length_, key_}; }
  // Where this process reaches the memory with the CPU.
  std::byte* host() const { return host_; }
  // How it was registered, for logs and `hcq rdma bench`: "host memory", "dma-buf",
  // "host staging (REASON)", see docs/rdma.md.
  const std::string& how() const { return how_; }

 protected:
  uint64_t addr_ = 0, length_ = 0;
  uint32_t key_ = 0;
  std::byte* host_ = nullptr;
  std::string how_;
};

class Connection {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{10000};
  virtual ~Connection() = default;

  // Copies [local_offset, +size) of `local` to the peer's `remote` at `remote_offset`; sets
  // `done` to `value` when the peer has it. Throws RemoteAccessError / ConnectionError when
  // the connection is already in the error state, InvalidInput for a local range outside
  // `local`, TimeoutError when there is no room to post within `timeout`.
  virtual void write(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
                     uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
                     std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // The same, then the peer's wait_immediate() returns `imm` (after the data is there).
  virtual void write_with_immediate(const Region& local, uint64_t local_offset,
                                    const RemoteRegion& remote, uint64_t remote_offset,
                                    uint64_t size, uint32_t imm, Signal& done, uint64_t value,
                                    std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // Copies the peer's range into `local`; `done` gets `value` once the data is here.
  virtual void read(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
                    uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
                    std::chrono::milliseconds timeout = kDefaultTimeout) = 0;

  // Waits until `signal` reaches `value` (an operation on this connection set it), and
  // throws the connection's error if it fails first. TimeoutError after `timeout`.
  virtual void wait(const Signal& signal, uint64_t value,
                    std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // The next immediate a peer's write_with_immediate delivered, in order.
  virtual uint32_t wait_immediate(std::chrono::milliseconds timeout = kDefaultTimeout) = 0;

  // Region exchange: advertise() sends a region description to the peer, which receives the
  // descriptions in order with peer_region(0), peer_region(1) ... (at most 16 per side).
  virtual void advertise(const RemoteRegion& r) = 0;
  virtual RemoteRegion peer_region(uint32_t index,
                                   std::chrono::milliseconds timeout = kDefaultTimeout) = 0;

  // "" while healthy, else the error that failed the connection.
  virtual std::string error() const = 0;
};

// Registrations of buffers kept for reuse (Endpoint::register_cached): registering pins
// pages and costs a system call or more (ibv_reg_mr, ibv_reg_dmabuf_mr), too much for each
// remote write of a replayed batch. Keyed by the memory's identity, not its address: the
// (device, inode) of the buffer's export (Buffer::export_ipc, a dma-buf or memfd per
// allocation) plus offset and length. Each entry keeps its export's fd open, so that object
// (and its inode number) cannot be replaced by another while the entry lives: a buffer freed
// and a new one at the same address never share a registration. Buffers that cannot be
// exported (Device::map_host's) are registered afresh each time. At most `capacity` entries;
// the least recently used goes first. A freed buffer's entry is never hit again, but keeps
// its memory pinned until it is evicted or the cache cleared (lib/core tells no one of
// frees). Thread safety: every member may be called from several threads at once (one
// lock, held across a registration).
// InvalidInput "rdma: an empty buffer cannot be registered" / "rdma: range [O, +S) is not
// inside the buffer of N bytes" (an empty range too).
void check_buffer_range(const Buffer& buf, uint64_t offset, uint64_t size);

class RegistrationCache {
 public:
  struct Stats {
    uint64_t registrations = 0;  // misses: regions made
    uint64_t hits = 0;
    size_t entries = 0;
  };
  explicit RegistrationCache(size_t capacity = 64) : capacity_(capacity) {}
  ~RegistrationCache();
  // The cached region for [offset, +size) of `buf`, or `make()`'s, kept.
  std::shared_ptr<const Region> get(const Buffer& buf, uint64_t offset, uint64_t size,
                                    const std::function<std::unique_ptr<Region>()>& make);
  Stats stats() const;
  void clear();

 private:
  struct Entry;
  size_t capacity_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;  // few: a linear search
  uint64_t clock_ = 0;
  Stats stats_;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Registers host memory the caller keeps mapped while the region lives.
  virtual std::unique_ptr<Region> register_host(void* ptr, uint64_t size) = 0;
  // Registers [offset, +size) of a buffer's memory (see each transport for how), addressed
  // by peers at buf.va() + offset. The buffer must outlive it. InvalidInput for an empty
  // buffer or a range outside it.
  virtual std::unique_ptr<Region> register_buffer_range(const Buffer& buf, uint64_t offset,
                                                        uint64_t size) = 0;
  // The whole buffer.
  std::unique_ptr<Region> register_buffer(const Buffer& buf) {
    return register_buffer_range(buf, 0, buf.size());
  }
  // register_buffer_range through this endpoint's RegistrationCache: the same buffer range
  // again returns the same region. Where the region's host() is not the buffer's memory (host
  // staging, see verbs), the caller copies through it.
  std::shared_ptr<const Region> register_cached(const Buffer& buf, uint64_t offset,
                                                uint64_t size) {
    return cache_.get(buf, offset, size,
                      [&] { return register_buffer_range(buf, offset, size); });
  }
  RegistrationCache::Stats cache_stats() const { return cache_.stats(); }
  // Connection setup. The shared-memory transport takes a name ("job-1"); verbs take
  // "HOST:PORT" to connect and ":PORT" to listen (TCP carries the queue pair's number, GID
  // and PSN). Both wait at most `timeout` for the peer: ConnectionError after it.
  virtual std::unique_ptr<Connection> listen(const std::string& address,
                                             std::chrono::milliseconds timeout) = 0;
  virtual std::unique_ptr<Connection> connect(const std::string& address,
                                              std::chrono::milliseconds timeout) = 0;
  // "local", or the verbs device: "rxe0 port 1 gid 1 (RoCE v2)".
  virtual std::string describe() const = 0;

 protected:
  // Transports clear it first in their destructors, while what regions use still exists.
  RegistrationCache cache_;
};

// The shared-memory transport between processes of one machine (rdma/local.cpp).
std::unique_ptr<Endpoint> open_local();

}  // namespace hcq::rdma
