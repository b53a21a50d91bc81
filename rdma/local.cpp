// The shared-memory transport: the semantics of rdma/transport.hpp between processes of one
// machine, through one os::SharedSegment per connection (docs/rdma.md, "Shared memory").
//
// Regions stay private to their process; data is staged through rings in the segment and a
// progress thread on the target side applies it (checking key and bounds) — so unlike a NIC
// the peer's CPU is in the data path. Each side owns two single-producer rings toward the
// other: requests (its posters write WRITE and READ messages) and responses (its progress
// thread writes READ data). Progress threads never block on a full ring (a READ response
// waits in the thread's state while it keeps draining), so two sides writing or reading at
// once cannot deadlock. The target publishes how many requests it has finished (done_seq);
// the initiator completes its operations in posting order from that count.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <thread>

#include "core/deadline.hpp"
#include "os/shm.hpp"
#include "rdma/connection_base.hpp"
#include "rdma/local_wire.hpp"

namespace hcq::rdma {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A futex on a word of shared memory (not FUTEX_PRIVATE: other processes wake it).
void futex_wait(std::atomic<uint32_t>& w, uint32_t seen, std::chrono::nanoseconds t) {
  timespec ts{time_t(t.count() / 1000000000), long(t.count() % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>& w) {
  w.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
            0);
}

using namespace wire;

std::string hexs(uint64_t v) { return hex(v); }

// The process's regions by key, which the progress threads check peers' accesses against.
struct Registry {
  std::shared_mutex mu;
  std::map<uint32_t, Region*> by_key;
  std::mt19937 rng{std::random_device{}()};
};

class LocalRegion : public Region {
 public:
  LocalRegion(std::shared_ptr<Registry> reg, uint64_t addr, uint64_t length, std::byte* host,
              std::string how)
      : reg_(std::move(reg)) {
    addr_ = addr;
    length_ = length;
    host_ = host;
    how_ = std::move(how);
    std::unique_lock l(reg_->mu);
    do key_ = uint32_t(reg_->rng());
    while (key_ == 0 || reg_->by_key.count(key_));
    reg_->by_key[key_] = this;
  }
  ~LocalRegion() override {
    std::unique_lock l(reg_->mu);
    reg_->by_key.erase(key_);
  }

 private:
  std::shared_ptr<Registry> reg_;
};

class LocalConnection : public ConnectionBase {
 public:
  LocalConnection(std::shared_ptr<Registry> reg, const std::string& name, int side,
                  std::chrono::milliseconds timeout)
      : ConnectionBase(name), reg_(std::move(reg)), me_(side) {
    // The payload follows the segment's 40-byte header: Layout (64-byte aligned members)
    // starts at the first 64-byte boundary in it, the same offset in every process since
    // mappings are page-aligned.
    seg_ = std::make_unique<os::SharedSegment>("hcq-rdma-" + name, kLayoutVersion, kSegmentBytes,
                                               timeout);
    lay_ = layout_in(seg_->payload());
    claim();
    mine_ = &lay_->side[me_];
    peer_ = &lay_->side[1 - me_];
    // Wait for the peer to claim its side.
    auto until = deadline_after(timeout);
    while (peer_->pid.load(std::memory_order_acquire) == 0) {
      if (Clock::now() >= until)
        throw ConnectionError("rdma: no peer on connection '" + name_ + "' in " +
                              std::to_string(timeout.count()) + " ms");
      uint32_t seen = mine_->wake.load(std::memory_order_acquire);
      if (peer_->pid.load(std::memory_order_acquire) != 0) break;
      futex_wait(mine_->wake, seen, 5ms);
    }
    peer_pid_ = peer_->pid.load(std::memory_order_acquire);
    peer_start_ = peer_->start_time.load(std::memory_order_acquire);
    progress_ = std::thread([this] { progress_loop(); });
  }

  ~LocalConnection() override {
    stop_.store(true);
    futex_wake(mine_->wake);
    progress_.join();
    mine_->closed.store(1, std::memory_order_release);
    futex_wake(peer_->wake);
  }

  void write(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
             uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
             std::chrono::milliseconds timeout) override {
    post(Op::Write, local, local_offset, remote, remote_offset, size, 0, done, value, timeout);
  }
  void write_with_immediate(const Region& local, uint64_t local_offset,
                            const RemoteRegion& remote, uint64_t remote_offset, uint64_t size,
                            uint32_t imm, Signal& done, uint64_t value,
                            std::chrono::milliseconds timeout) override {
    post(Op::WriteImm, local, local_offset, remote, remote_offset, size, imm, done, value,
         timeout);
  }
  void read(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
            uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
            std::chrono::milliseconds timeout) override {
    post(Op::Read, local, local_offset, remote, remote_offset, size, 0, done, value, timeout);
  }

  void advertise(const RemoteRegion& r) override {
    std::lock_guard l(post_mu_);
    uint32_t n = mine_->advertised.load(std::memory_order_relaxed);
    if (n == kMaxAdvertised)
      throw InvalidInput("rdma: at most " + std::to_string(kMaxAdvertised) +
                         " regions are advertised on one connection");
    mine_->regions[n] = r;
    mine_->advertised.store(n + 1, std::memory_order_release);
    futex_wake(peer_->wake);
  }

  RemoteRegion peer_region(uint32_t index, std::chrono::milliseconds timeout) override {
    if (index >= kMaxAdvertised)
      throw InvalidInput("rdma: connection '" + name_ + "': no region " +
                         std::to_string(index) + ": a peer advertises at most " +
                         std::to_string(kMaxAdvertised) + ", numbered from 0");
    auto until = deadline_after(timeout);
    while (peer_->advertised.load(std::memory_order_acquire) <= index) {
      {
        std::lock_guard l(mu_);
        if (!error_.empty()) throw_error();
      }
      if (Clock::now() >= until)
        throw TimeoutError("rdma: connection '" + name_ + "': the peer advertised no region " +
                           std::to_string(index) + " in " + std::to_string(timeout.count()) +
                           " ms");
      std::this_thread::sleep_for(1ms);
    }
    return peer_->regions[index];
  }

private:
  struct Pending {
    uint64_t seq;
    Op op;
    Signal* done;
    uint64_t value;
    std::byte* dst;  // a READ's local destination
    uint64_t size, received;
  };

  // Takes side me_ with a compare-and-swap on its pid: free (0) or left by a process that is
  // gone. (A lock would need constructing by whoever made the segment, racing the peer.)
  void claim() {
    Side& s = lay_->side[me_];
    int32_t self = ::getpid();
    int32_t pid = s.pid.load(std::memory_order_acquire);
    while (true) {
      if (pid != 0 && s.start_time.load() == os::SharedSegment::process_start_time(pid) &&
          s.closed.load() == 0)
        throw ConnectionError("rdma: connection '" + name_ + "' already has a " +
                              (me_ == 0 ? "listener" : "connecting peer") + " (pid " +
                              std::to_string(pid) + ")");
      // Publish the start time first: the peer reads it once it sees the pid.
      s.start_time.store(os::SharedSegment::process_start_time(self));
      s.closed.store(0);
      if (s.pid.compare_exchange_strong(pid, self, std::memory_order_acq_rel)) break;
    }
    futex_wake(lay_->side[1 - me_].wake);
  }

  void failed() override {
    pending_.clear();
    futex_wake(mine_->wake);  // posters waiting for ring space
  }

  // The same process (pid and start time) and not a zombie: a killed peer whose parent has
  // not reaped it yet still has its /proc entry.
  bool peer_alive() const {
    if (os::SharedSegment::process_start_time(peer_pid_) != peer_start_) return false;
    const std::string all = os::SharedSegment::process_stat(peer_pid_);
    size_t paren = all.rfind(')');
    return paren != std::string::npos && paren + 2 < all.size() && all[paren + 2] != 'Z' &&
           all[paren + 2] != 'X';
  }

  // Waits until the request ring has `n` free bytes; throws the connection's error.
  void wait_room(uint64_t n, Clock::time_point until, std::chrono::milliseconds timeout) {
    while (mine_->requests.free_bytes() < n) {
      {
        std::lock_guard l(mu_);
        if (!error_.empty()) throw_error();
      }
      if (Clock::now() >= until)
        throw TimeoutError("rdma: connection '" + name_ + "': no room to post for " +
                           std::to_string(timeout.count()) + " ms");
      uint32_t seen = mine_->wake.load(std::memory_order_acquire);
      if (mine_->requests.free_bytes() >= n) break;
      futex_wait(mine_->wake, seen, kPollInterval);
    }
  }

  void post(Op op, const Region& local, uint64_t local_offset, const RemoteRegion& remote,
            uint64_t remote_offset, uint64_t size, uint32_t imm, Signal& done, uint64_t value,
            std::chrono::milliseconds timeout) {
    check_local(local, local_offset, size);
    auto until = deadline_after(timeout);
    std::lock_guard pl(post_mu_);
    uint64_t seq;
    {
      std::lock_guard l(mu_);
      if (!error_.empty()) throw_error();
      seq = ++next_seq_;
      pending_.push_back({seq, op, &done, value, local.host() + local_offset, size, 0});
    }
    Message m{op, imm, seq, remote.addr + remote_offset, size, 0, 0, remote.key, 0};
    Ring& r = mine_->requests;
    if (op == Op::Read) {
      m.last = 1;
      wait_room(sizeof m, until, timeout);
      uint64_t h = r.head.load(std::memory_order_relaxed);
      r.put(h, &m, sizeof m);
      r.head.store(h + sizeof m, std::memory_order_release);
      futex_wake(peer_->wake);
      return;
    }
    const std::byte* src = local.host() + local_offset;
    uint64_t off = 0;
    do {
      m.offset = off;
      m.payload = std::min(kChunkBytes, size - off);
      m.last = off + m.payload == size;
      wait_room(sizeof m + m.payload, until, timeout);
      uint64_t h = r.head.load(std::memory_order_relaxed);
      r.put(h, &m, sizeof m);
      r.put(h + sizeof m, src + off, m.payload);
      r.head.store(h + sizeof m + m.payload, std::memory_order_release);
      futex_wake(peer_->wake);
      off += m.payload;
    } while (off < size);
  }

  // The target's check of a peer's access; "" when allowed, else the error's text. The
  // registry's lock is held by the caller while it copies.
  std::string check_access(const Message& m, std::byte** host) {
    auto it = reg_->by_key.find(m.key);
    const char* what = m.op == Op::Read ? "read" : "write";
    std::string access = std::string(what) + " of " + std::to_string(m.size) + " bytes at " +
                         hexs(m.addr);
    if (it == reg_->by_key.end())
      return "rdma: remote access error on connection '" + name_ + "': key " + hexs(m.key) +
             " is not registered at the peer (" + access + ")";
    const Region& r = *it->second;
    if (!inside(m.addr, m.size, r.addr(), r.length()))
      return "rdma: remote access error on connection '" + name_ + "': " + access +
             " is outside region key " + hexs(m.key) + " [" + hexs(r.addr()) + ", " +
             hexs(r.addr() + r.length()) + ")";
    *host = r.host() + (m.addr - r.addr());
    return "";
  }

  // The peer refused request `seq` (its text in the peer's failure).
  void refuse(uint64_t seq, const std::string& why) {
    std::memset(mine_->failure, 0, kErrorBytes);
    std::memcpy(mine_->failure, why.data(), std::min(why.size(), kErrorBytes - 1));
    mine_->failed_seq.store(seq, std::memory_order_release);
    futex_wake(peer_->wake);
  }

  // One step of the target side: handles the peer's next request. False when there was none
  // (or a READ response is still waiting for room).
  bool serve_request() {
    if (refused_) return false;  // an RC queue pair in the error state takes nothing more
    if (reading_) return push_read_data();
    Ring& in = peer_->requests;
    const uint64_t used = in.used_bytes();
    if (used < sizeof(Message)) return false;
    uint64_t t = in.tail.load(std::memory_order_relaxed);
    Message m{};
    std::string malformed = check_ring(used);
    if (malformed.empty()) {
      in.get(t, &m, sizeof m);
      malformed = check_request(m, used);
    }
    if (!malformed.empty()) {
      // The peer broke the protocol: nothing of it is applied, and nothing more is taken.
      const std::string why = "rdma: connection '" + name_ + "': the peer sent a malformed " +
                              "request: " + malformed;
      refused_ = true;
      refuse(m.seq, why);
      std::lock_guard l(mu_);
      fail(why, false);
      return false;
    }
    std::byte* host = nullptr;
    {
      std::shared_lock l(reg_->mu);
      std::string why = check_access(m, &host);
      if (!why.empty()) {
        refused_ = true;
        refuse(m.seq, why);
        return false;
      }
      if (m.op != Op::Read) in.get(t + sizeof m, host + m.offset, m.payload);
    }
    in.tail.store(t + sizeof m + m.payload, std::memory_order_release);
    futex_wake(peer_->wake);  // its posters wait for room
    if (m.op == Op::Read) {
      reading_ = m;
      read_src_ = host;
      return push_read_data() || true;
    }
    if (m.last) {
      if (m.op == Op::WriteImm) {
        std::lock_guard l(mu_);
        deliver_immediate(m.imm);
      }
      mine_->done_seq.store(m.seq, std::memory_order_release);
      futex_wake(peer_->wake);
    }
    return true;
  }

  // Sends as much of the READ being answered as the response ring takes.
  bool push_read_data() {
    Message& m = *reading_;
    Ring& out = mine_->responses;
    bool moved = false;
    while (true) {
      uint64_t n = std::min(kChunkBytes, m.size - m.offset);
      if (out.free_bytes() < sizeof(Message) + n) break;
      Message d = m;
      d.op = Op::ReadData;
      d.payload = n;
      d.last = m.offset + n == m.size;
      uint64_t h = out.head.load(std::memory_order_relaxed);
      out.put(h, &d, sizeof d);
      {
        std::shared_lock l(reg_->mu);
        out.put(h + sizeof d, read_src_ + m.offset, n);
      }
      out.head.store(h + sizeof d + n, std::memory_order_release);
      m.offset += n;
      moved = true;
      if (d.last) {
        mine_->done_seq.store(m.seq, std::memory_order_release);
        reading_.reset();
        break;
      }
    }
    if (moved) futex_wake(peer_->wake);
    return moved;
  }

  // The initiator side: READ data arriving, then completions in posting order.
  bool take_responses() {
    Ring& in = peer_->responses;
    bool any = false;
    uint64_t used;
    while (!broken_ && (used = in.used_bytes()) >= sizeof(Message)) {
      uint64_t t = in.tail.load(std::memory_order_relaxed);
      Message m{};
      std::string malformed = check_ring(used);
      if (malformed.empty()) in.get(t, &m, sizeof m);
      {
        std::lock_guard l(mu_);
        auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
          return p.seq == m.seq && p.op == Op::Read;
        });
        if (malformed.empty())
          malformed = it == pending_.end()
                          ? "READ data for " + std::to_string(m.seq) + ", which is no READ " +
                                "in flight"
                          : check_read_data(m, used, it->size, it->received);
        if (!malformed.empty()) {
          // Nothing of it is written, and the ring is read no more.
          broken_ = true;
          fail("rdma: connection '" + name_ + "': the peer sent a malformed response: " +
                   malformed,
               false);
          return true;
        }
        in.get(t + sizeof m, it->dst + m.offset, m.payload);
        it->received += m.payload;
      }
      in.tail.store(t + sizeof m + m.payload, std::memory_order_release);
      futex_wake(peer_->wake);
      any = true;
    }
    uint64_t done = peer_->done_seq.load(std::memory_order_acquire);
    std::lock_guard l(mu_);
    while (!pending_.empty() && pending_.front().seq <= done &&
           (pending_.front().op != Op::Read || pending_.front().received == pending_.front().size)) {
      pending_.front().done->set(pending_.front().value);
      pending_.pop_front();
      any = true;
    }
    if (any) cv_.notify_all();
    if (peer_->failed_seq.load(std::memory_order_acquire) && error_.empty()) {
      fail(std::string(peer_->failure, strnlen(peer_->failure, kErrorBytes)), true);
      any = true;
    }
    return any;
  }

  void progress_loop() {
    auto next_check = Clock::now() + kPollInterval;
    while (!stop_.load()) {
      uint32_t seen = mine_->wake.load(std::memory_order_acquire);
      bool any = false;
      try {
        any = take_responses();
        while (serve_request()) any = true;
      } catch (const std::exception& e) {  // a Signal whose device went: fail, never abort
        std::lock_guard l(mu_);
        fail("rdma: connection '" + name_ + "': " + e.what(), false);
      }
      if (refused_) {
        std::lock_guard l(mu_);
        fail(std::string(mine_->failure, strnlen(mine_->failure, kErrorBytes)), true);
      }
      if (Clock::now() >= next_check || !any) {
        next_check = Clock::now() + kPollInterval;
        std::string gone;
        if (peer_->closed.load(std::memory_order_acquire))
          gone = "rdma: the peer closed connection '" + name_ + "'";
        else if (!peer_alive())
          gone = "rdma: the peer (pid " + std::to_string(peer_pid_) +
                 ") died on connection '" + name_ + "'";
        if (!gone.empty()) {
          // What the peer finished before it went still counts: its done_seq is final now,
          // and may have moved since take_responses() above read it. (A failure there is
          // overtaken by this one.)
          ignoring_errors([&] { take_responses(); });
          std::lock_guard l(mu_);
          fail(gone, false);
        }
      }
      if (!any) futex_wait(mine_->wake, seen, kPollInterval);
    }
  }

  std::shared_ptr<Registry> reg_;
  int me_;
  std::unique_ptr<os::SharedSegment> seg_;
  Layout* lay_ = nullptr;
  Side* mine_ = nullptr;
  Side* peer_ = nullptr;
  int32_t peer_pid_ = 0;
  uint64_t peer_start_ = 0;

  std::mutex post_mu_;  // one poster at a time: messages are contiguous in the ring
  uint64_t next_seq_ = 0;  // under mu_
  std::deque<Pending> pending_;

  // Progress thread only.
  std::optional<Message> reading_;
  std::byte* read_src_ = nullptr;
  bool refused_ = false;
  bool broken_ = false;  // the peer's responses broke the protocol: none is read any more
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

class LocalEndpoint : public Endpoint {
 public:
  ~LocalEndpoint() override { cache_.clear(); }
  std::unique_ptr<Region> register_host(void* ptr, uint64_t size) override {
    if (!ptr || size == 0)
      throw InvalidInput("rdma: a region needs memory (address " +
                         hexs(reinterpret_cast<uint64_t>(ptr)) + ", " + std::to_string(size) +
                         " bytes)");
    return std::make_unique<LocalRegion>(reg_, reinterpret_cast<uint64_t>(ptr), size,
                                         static_cast<std::byte*>(ptr), "host memory");
  }
  std::unique_ptr<Region> register_buffer_range(const Buffer& buf, uint64_t offset,
                                                uint64_t size) override {
    check_buffer_range(buf, offset, size);
    if (!buf.host())
      throw InvalidInput("rdma: buffer " + hexs(buf.va()) + " on " + buf.device()->name() +
                         " has no CPU mapping; the shared-memory transport reaches device "
                         "memory through the CPU's mapping only");
    // The CPU's mapping of the buffer (emulated devices, BARs): peers address it by its
    // device address.
    return std::make_unique<LocalRegion>(reg_, buf.va() + offset, size,
                                         static_cast<std::byte*>(buf.host()) + offset,
                                         "device memory through the CPU mapping");
  }
  std::unique_ptr<Connection> listen(const std::string& address,
                                     std::chrono::milliseconds timeout) override {
    return std::make_unique<LocalConnection>(reg_, address, 0, timeout);
  }
  std::unique_ptr<Connection> connect(const std::string& address,
                                      std::chrono::milliseconds timeout) override {
    return std::make_unique<LocalConnection>(reg_, address, 1, timeout);
  }
  std::string describe() const override { return "local (shared memory)"; }

 private:
  std::shared_ptr<Registry> reg_ = std::make_shared<Registry>();
};

}  // namespace

std::unique_ptr<Endpoint> open_local() { return std::make_unique<LocalEndpoint>(); }

}  // namespace hcq::rdma
