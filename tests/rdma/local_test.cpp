// The shared-memory transport between two processes made with fork(): 64 MiB both ways
// (host memory and emulated device memory), READ, WRITE-with-immediate, and the exact errors
// for a bad key, an out-of-bounds access and a peer killed mid-transfer. Every child ends
// with _exit and is reaped with a bounded wait; alarm() ends a stuck child.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "batch/batch.hpp"
#include "core/hcq.hpp"
#include "kernels.hpp"
#include "os/shm.hpp"
#include "rdma/batch_peer.hpp"
#include "rdma/local_wire.hpp"
#include "rdma/transport.hpp"

namespace hcq::rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kBig = 64ull << 20;

std::string unique_name(const char* what) {
  return std::string("test-") + what + "-" + std::to_string(::getpid());
}

// A pattern that differs per side and per word.
void fill(std::byte* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n / 8; i++) {
    uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    std::memcpy(p + i * 8, &v, 8);
  }
}
// "" when [p, p+n) holds fill(seed)'s pattern, else the first word that differs.
std::string check(const std::byte* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n / 8; i++) {
    uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed, got;
    std::memcpy(&got, p + i * 8, 8);
    if (got != v) return "word " + std::to_string(i) + " is " + hex(got) + ", not " + hex(v);
  }
  return "";
}

// A forked child running `fn`; its result ("" for success, else why) comes back on a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};
template <class F>
Child spawn(F fn) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::close(p[0]);
    ::alarm(30);  // a stuck child ends rather than hanging the test
    std::string r;
    try {
      r = fn();
    } catch (const std::exception& e) {
      r = std::string("child threw: ") + e.what();
    }
    if (r.empty()) r = "ok";
    (void)!::write(p[1], r.data(), r.size());
    ::_exit(0);
  }
  ::close(p[1]);
  c.fd = p[0];
  return c;
}
// Reaps the child (at most `timeout`, then SIGKILL) and returns what it said.
std::string finish(Child c, std::chrono::milliseconds timeout = 30000ms) {
  auto until = Clock::now() + timeout;
  int st = 0;
  while (::waitpid(c.pid, &st, WNOHANG) == 0) {
    if (Clock::now() >= until) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &st, 0);
      ::close(c.fd);
      return "child did not finish in time";
    }
    std::this_thread::sleep_for(2ms);
  }
  std::string r;
  char buf[512];
  ssize_t n;
  while ((n = ::read(c.fd, buf, sizeof buf)) > 0) r.append(buf, size_t(n));
  ::close(c.fd);
  return r.empty() ? "child said nothing (status " + std::to_string(st) + ")" : r;
}

// One side of the both-ways exchange over regions `src` (this side's pattern) and `dst`
// (where the peer writes): writes all of src to the peer's dst with an immediate, reads
// 1 MiB of the peer's src back, checks what arrived, then a zero-byte "finished" immediate so
// neither side closes while the other still reads.
std::string exchange(Connection& c, Device& dev, const Region& src, const Region& dst,
                     const std::byte* dst_host, uint64_t seed, uint64_t peer_seed,
                     const Region& scratch) {
  c.advertise(dst.remote());
  c.advertise(src.remote());
  RemoteRegion peer_dst = c.peer_region(0, 10000ms), peer_src = c.peer_region(1, 10000ms);
  if (peer_dst.length != kBig) return "peer region has " + std::to_string(peer_dst.length);
  Signal s = dev.new_signal(0);
  c.write_with_immediate(src, 0, peer_dst, 0, kBig, uint32_t(seed), s, 1);
  c.read(scratch, 0, peer_src, kBig - (1 << 20), 1 << 20, s, 2);
  c.wait(s, 2, 20000ms);
  if (c.wait_immediate(20000ms) != uint32_t(peer_seed)) return "wrong immediate";
  std::string bad = check(dst_host, kBig, peer_seed);
  if (!bad.empty()) return "written data: " + bad;
  std::vector<std::byte> expect(kBig);
  fill(expect.data(), kBig, peer_seed);
  if (std::memcmp(scratch.host(), expect.data() + kBig - (1 << 20), 1 << 20) != 0)
    return "read data differs";
  c.write_with_immediate(scratch, 0, peer_dst, 0, 0, 7, s, 3);
  c.wait(s, 3, 10000ms);
  if (c.wait_immediate(10000ms) != 7) return "no finished immediate";
  return "";
}

std::string host_side(bool listen, const std::string& name) {
  auto dev = Device::open("emu:gfx1100");  // for its signals
  auto ep = open_local();
  std::vector<std::byte> src(kBig), dst(kBig), scratch(1 << 20);
  uint64_t seed = listen ? 0x1111 : 0x2222, peer_seed = listen ? 0x2222 : 0x1111;
  fill(src.data(), kBig, seed);
  auto rs = ep->register_host(src.data(), kBig), rd = ep->register_host(dst.data(), kBig),
       rx = ep->register_host(scratch.data(), scratch.size());
  auto c = listen ? ep->listen(name, 10000ms) : ep->connect(name, 10000ms);
  return exchange(*c, *dev, *rs, *rd, dst.data(), seed, peer_seed, *rx);
}

TEST(RdmaLocal, HostMemorySixtyFourMiBBothWays) {
  std::string name = unique_name("host");
  Child c = spawn([&] { return host_side(false, name); });
  EXPECT_EQ(host_side(true, name), "");
  EXPECT_EQ(finish(c), "ok");
}

// Device memory of an emulated GPU (the CPU maps it): registered as a Buffer, addressed by
// its device address, filled and checked with copy_in / copy_out.
std::string device_side(bool listen, const std::string& name, const std::string& target) {
  auto dev = Device::open(target);
  auto ep = open_local();
  Buffer src = dev->allocate(kBig), dst = dev->allocate(kBig);
  std::vector<std::byte> host(kBig), scratch(1 << 20);
  uint64_t seed = listen ? 0x3333 : 0x4444, peer_seed = listen ? 0x4444 : 0x3333;
  fill(host.data(), kBig, seed);
  dev->copy_in(src, 0, host.data(), kBig);
  std::memset(host.data(), 0, kBig);
  dev->copy_in(dst, 0, host.data(), kBig);
  auto rs = ep->register_buffer(src), rd = ep->register_buffer(dst),
       rx = ep->register_host(scratch.data(), scratch.size());
  if (rd->addr() != dst.va()) return "a buffer's region is not at its device address";
  auto c = listen ? ep->listen(name, 10000ms) : ep->connect(name, 10000ms);
  dev->copy_out(host.data(), dst, 0, kBig);  // dst, as the peer will have written it
  std::string r = exchange(*c, *dev, *rs, *rd, static_cast<std::byte*>(dst.host()), seed,
                           peer_seed, *rx);
  if (!r.empty()) return r;
  dev->copy_out(host.data(), dst, 0, kBig);
  std::string bad = check(host.data(), kBig, peer_seed);
  return bad.empty() ? "" : "copy_out of the written buffer: " + bad;
}

class RdmaLocalDevice : public testing::TestWithParam<const char*> {};

TEST_P(RdmaLocalDevice, DeviceMemorySixtyFourMiBBothWays) {
  std::string name = unique_name(GetParam());
  std::string target = std::string("emu:") + GetParam();
  Child c = spawn([&] { return device_side(false, name, target); });
  EXPECT_EQ(device_side(true, name, target), "");
  EXPECT_EQ(finish(c), "ok");
}
INSTANTIATE_TEST_SUITE_P(Targets, RdmaLocalDevice, testing::Values("gfx1100", "sm_90"));

// The peer registers one 64 KiB region, advertises it and waits for "finished" (or dies).
std::string passive_peer(const std::string& name) {
  auto ep = open_local();
  std::vector<std::byte> mem(64 << 10);
  auto r = ep->register_host(mem.data(), mem.size());
  auto c = ep->connect(name, 10000ms);
  c->advertise(r->remote());
  // The active side's bad access fails this side too (an RC queue pair goes to error).
  try {
    c->wait_immediate(10000ms);
  } catch (const RemoteAccessError&) {
  }
  return "";
}

struct Active {
  std::unique_ptr<Device> dev = Device::open("emu:gfx1100");
  std::unique_ptr<Endpoint> ep = open_local();
  std::vector<std::byte> mem = std::vector<std::byte>(64 << 10);
  std::unique_ptr<Region> r = ep->register_host(mem.data(), mem.size());
  Signal s = dev->new_signal(0);
};

// This process listening, a passive_peer child connected, the child's region received.
struct WithPassivePeer {
  explicit WithPassivePeer(const char* what)
      : name(unique_name(what)), child(spawn([n = name] { return passive_peer(n); })),
        c(a.ep->listen(name, 10000ms)), peer(c->peer_region(0, 10000ms)) {}
  std::string name;
  Child child;
  Active a;
  std::unique_ptr<Connection> c;
  RemoteRegion peer;
};

TEST(RdmaLocal, BadKeyIsAnExactRemoteAccessError) {
  WithPassivePeer w("key");
  auto& [name, child, a, c, peer] = w;
  RemoteRegion bad = peer;
  bad.key ^= 0x80000000u;
  std::string expect = "rdma: remote access error on connection '" + name + "': key " +
                       hex(bad.key) + " is not registered at the peer (write of 4096 bytes at " +
                       hex(peer.addr + 64) + ")";
  c->write(*a.r, 0, bad, 64, 4096, a.s, 1);
  try {
    c->wait(a.s, 1, 5000ms);
    ADD_FAILURE() << "no error";
  } catch (const RemoteAccessError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  EXPECT_EQ(c->error(), expect);
  // Later posts fail at once with the same error.
  try {
    c->read(*a.r, 0, peer, 0, 8, a.s, 2);
    ADD_FAILURE() << "no error";
  } catch (const RemoteAccessError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  EXPECT_EQ(a.s.value(), 0u);
  c.reset();
  EXPECT_EQ(finish(child), "ok");
}

TEST(RdmaLocal, OutOfBoundsIsAnExactRemoteAccessError) {
  WithPassivePeer w("oob");
  auto& [name, child, a, c, peer] = w;
  // A local range outside the local region is refused before anything is sent.
  try {
    c->write(*a.r, 60 << 10, peer, 0, 8 << 10, a.s, 1);
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "rdma: local range [" + hex(a.r->addr() + (60 << 10)) + ", " +
                  hex(a.r->addr() + (68 << 10)) + ") is outside region key " +
                  hex(a.r->key()) + " [" + hex(a.r->addr()) + ", " +
                  hex(a.r->addr() + (64 << 10)) + ")");
  }
  // In bounds first (it completes), then 100 bytes past the peer's end.
  c->write(*a.r, 0, peer, 0, 4096, a.s, 1);
  c->wait(a.s, 1, 5000ms);
  c->read(*a.r, 0, peer, peer.length - 4000, 4096, a.s, 2);
  std::string expect = "rdma: remote access error on connection '" + name + "': read of 4096 " +
                       "bytes at " + hex(peer.addr + peer.length - 4000) +
                       " is outside region key " + hex(peer.key) + " [" + hex(peer.addr) +
                       ", " + hex(peer.addr + peer.length) + ")";
  try {
    c->wait(a.s, 2, 5000ms);
    ADD_FAILURE() << "no error";
  } catch (const RemoteAccessError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  EXPECT_EQ(a.s.value(), 1u);
  c.reset();
  EXPECT_EQ(finish(child), "ok");
}

// A forged peer (issue 33, item 4): side 1 of connection `name` taken by hand through the wire
// format, to write what a hostile or damaged process would. The real side listens.
struct ForgedPeer {
  explicit ForgedPeer(const std::string& name)
      : seg("hcq-rdma-" + name, wire::kLayoutVersion, wire::kSegmentBytes, 10000ms),
        lay(wire::layout_in(seg.payload())), me(lay->side[1]), target(lay->side[0]) {
    me.start_time.store(os::SharedSegment::process_start_time(::getpid()));
    me.pid.store(::getpid());
    target.wake.fetch_add(1);
  }
  // The real side's region 0, once advertised.
  RemoteRegion region() {
    auto until = Clock::now() + 10s;
    while (target.advertised.load() == 0 && Clock::now() < until)
      std::this_thread::sleep_for(1ms);
    return target.regions[0];
  }
  // Publishes `m` and `payload` on `ring` (one of this side's).
  void send(wire::Ring& ring, const wire::Message& m, const std::vector<std::byte>& payload) {
    uint64_t h = ring.head.load();
    ring.put(h, &m, sizeof m);
    ring.put(h + sizeof m, payload.data(), payload.size());
    ring.head.store(h + sizeof m + payload.size());
    target.wake.fetch_add(1);
  }
  // What the real side said when it closed (at most 10 s): its refusal, and whether it
  // answered anything.
  std::string until_closed() {
    auto until = Clock::now() + 10s;
    while (target.closed.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(1ms);
    std::string said = target.failed_seq.load() ? "refused " +
                                                      std::to_string(target.failed_seq.load()) +
                                                      ": " + target.failure
                                                : "no refusal";
    if (uint64_t n = target.responses.used_bytes()) said += "; answered " + std::to_string(n);
    return said;
  }
  os::SharedSegment seg;
  wire::Layout* lay;
  wire::Side& me;
  wire::Side& target;
};

// Memory with 4 KiB guards either side of a 64 KiB registered middle, all 0xAB.
struct Guarded {
  static constexpr uint64_t kGuard = 4096, kMiddle = 64 << 10;
  std::vector<std::byte> mem = std::vector<std::byte>(kGuard + kMiddle + kGuard, std::byte{0xAB});
  std::byte* middle() { return mem.data() + kGuard; }
  bool untouched() const {
    return std::count(mem.begin(), mem.end(), std::byte{0xAB}) == std::ptrdiff_t(mem.size());
  }
};

// This process listens with a guarded region, and a forged peer sends `forge(region)` with
// `payload` bytes after it: the connection fails with "the peer sent a malformed request:
// `why`", the peer hears the same refusal, and no byte in or around the region changes.
void expect_forged_request_refused(const char* what,
                                   std::function<wire::Message(const RemoteRegion&)> forge,
                                   uint64_t payload, const std::string& why) {
  std::string name = unique_name(what);
  Child child = spawn([&] {
    ForgedPeer f(name);
    f.send(f.me.requests, forge(f.region()), std::vector<std::byte>(payload, std::byte{0xCD}));
    return f.until_closed();
  });
  Guarded g;
  auto ep = open_local();
  auto r = ep->register_host(g.middle(), Guarded::kMiddle);
  auto c = ep->listen(name, 10000ms);
  c->advertise(r->remote());
  const std::string expect =
      "rdma: connection '" + name + "': the peer sent a malformed request: " + why;
  try {
    c->wait_immediate(10000ms);
    ADD_FAILURE() << "no error";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  EXPECT_EQ(c->error(), expect);
  EXPECT_TRUE(g.untouched());
  c.reset();
  EXPECT_EQ(finish(child), "refused 1: " + expect);
}

// A WRITE chunk whose operation (address, size) lies inside the region but whose offset puts
// its payload just past the region's end: it used to land there, in the target's heap.
TEST(RdmaLocal, AForgedWriteChunkOutsideItsOperationIsRefusedAndNothingWritten) {
  expect_forged_request_refused(
      "forged-write",
      [](const RemoteRegion& r) {
        return wire::Message{wire::Op::Write, 0, 1, r.addr, 64, r.length, 64, r.key, 1};
      },
      64, "WRITE 1 of 64 bytes: payload of 64 bytes at offset 65536 is outside it");
}

// A READ of 64 bytes whose chunk offset is 2^64 - 4096: the target used to answer with the
// 4,160 bytes from 4 KiB before the region.
TEST(RdmaLocal, AForgedReadWithAChunkOffsetIsRefusedAndNothingAnswered) {
  expect_forged_request_refused(
      "forged-read",
      [](const RemoteRegion& r) {
        return wire::Message{wire::Op::Read, 0, 1, r.addr, 64, ~uint64_t(4095), 0, r.key, 1};
      },
      0,
      "READ 1 of 64 bytes: payload of 0 bytes at offset 18446744073709547520; a READ request "
      "carries none");
}

// A request of an operation that is no request (READ data) is refused too.
TEST(RdmaLocal, AForgedRequestOfAnotherOperationIsRefused) {
  expect_forged_request_refused(
      "forged-op",
      [](const RemoteRegion& r) {
        return wire::Message{wire::Op::ReadData, 0, 1, r.addr, 8, 0, 8, r.key, 1};
      },
      8, "request 1 has operation 4, not WRITE, WRITE with immediate or READ");
}

// The initiator's side: a target that answers a 64-byte READ with 4,160 bytes of data. They
// used to be written past the READ's destination.
TEST(RdmaLocal, AForgedReadAnswerLargerThanTheReadIsRefusedAndNothingWritten) {
  std::string name = unique_name("forged-answer");
  Child child = spawn([name] {
    ForgedPeer f(name);
    f.me.regions[0] = RemoteRegion{0x10000, 4096, 5};
    f.me.advertised.store(1);
    f.target.wake.fetch_add(1);
    auto until = Clock::now() + 10s;
    while (f.target.requests.used_bytes() < sizeof(wire::Message) && Clock::now() < until)
      std::this_thread::sleep_for(1ms);
    wire::Message m{};
    f.target.requests.get(0, &m, sizeof m);
    if (m.op != wire::Op::Read || m.size != 64) return std::string("no READ of 64 bytes came");
    wire::Message d{wire::Op::ReadData, 0, m.seq, m.addr, 64, 0, 4160, m.key, 1};
    f.send(f.me.responses, d, std::vector<std::byte>(4160, std::byte{0xCD}));
    f.me.done_seq.store(m.seq);
    return f.until_closed();
  });
  Guarded g;
  auto dev = Device::open("emu:gfx1100");  // for the signal
  auto ep = open_local();
  auto r = ep->register_host(g.middle(), Guarded::kMiddle);
  auto c = ep->listen(name, 10000ms);
  RemoteRegion peer = c->peer_region(0, 10000ms);
  try {
    c->peer_region(wire::kMaxAdvertised, 10ms);  // past the table a peer writes to
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: connection '" + name +
                                         "': no region 16: a peer advertises at most 16, "
                                         "numbered from 0");
  }
  Signal s = dev->new_signal(0);
  c->read(*r, Guarded::kMiddle - 64, peer, 0, 64, s, 1);
  const std::string expect = "rdma: connection '" + name +
                             "': the peer sent a malformed response: READ data for 1 of 64 "
                             "bytes: payload of 4160 bytes at offset 0 is outside it";
  try {
    c->wait(s, 1, 10000ms);
    ADD_FAILURE() << "no error";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  EXPECT_EQ(s.value(), 0u);
  EXPECT_TRUE(g.untouched());
  c.reset();
  EXPECT_EQ(finish(child), "no refusal");
}

TEST(RdmaLocal, PeerKilledMidTransferIsAnExactErrorWithinABoundedTime) {
  std::string name = unique_name("kill");
  // This peer advertises 64 MiB and stops draining once the transfer has begun: SIGSTOP
  // then SIGKILL from this side, so the kill lands mid-transfer.
  Child child = spawn([&] {
    auto ep = open_local();
    std::vector<std::byte> mem(kBig);
    auto r = ep->register_host(mem.data(), mem.size());
    auto c = ep->connect(name, 10000ms);
    c->advertise(r->remote());
    std::this_thread::sleep_for(30s);
    return std::string("not killed");
  });
  Active a;
  std::vector<std::byte> big(kBig);
  auto rb = a.ep->register_host(big.data(), big.size());
  auto c = a.ep->listen(name, 10000ms);
  RemoteRegion peer = c->peer_region(0, 10000ms);
  std::atomic<int64_t> killed_at{0};
  std::thread killer([&] {
    std::this_thread::sleep_for(5ms);
    ::kill(child.pid, SIGKILL);
    killed_at = Clock::now().time_since_epoch().count();
  });
  std::string expect = "rdma: the peer (pid " + std::to_string(child.pid) +
                       ") died on connection '" + name + "'";
  try {
    for (uint64_t i = 1; i <= 20; i++) c->write(*rb, 0, peer, 0, kBig, a.s, i, 10000ms);
    c->wait(a.s, 20, 10000ms);
    ADD_FAILURE() << "no error";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(e.what(), expect);
  }
  killer.join();
  auto after = Clock::now().time_since_epoch().count() - killed_at.load();
  EXPECT_LT(after, std::chrono::nanoseconds(2s).count());
  EXPECT_EQ(c->error(), expect);
  EXPECT_EQ(finish(child, 5000ms), "child said nothing (status 9)");
}

// Several threads post on one connection and wait on their own signals at once.
TEST(RdmaLocal, ThreadsPostAndWaitAtOnce) {
  WithPassivePeer w("threads");
  // (Plain references: clang 14's lambdas do not capture structured bindings.)
  Child& child = w.child;
  Active& a = w.a;
  auto& c = w.c;
  RemoteRegion& peer = w.peer;
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      Signal s = a.dev->new_signal(0);
      try {
        for (uint64_t i = 1; i <= 50; i++) {
          if (i % 2)
            c->write(*a.r, uint64_t(t) << 14, peer, uint64_t(t) << 14, 1 << 14, s, i);
          else
            c->read(*a.r, uint64_t(t) << 14, peer, uint64_t(t) << 14, 1 << 14, s, i);
          c->wait(s, i, 5000ms);
        }
      } catch (const std::exception&) {
        bad++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  Signal s = a.dev->new_signal(0);
  c->write_with_immediate(*a.r, 0, peer, 0, 0, 1, s, 1);
  c->wait(s, 1, 5000ms);
  c.reset();
  EXPECT_EQ(finish(child), "ok");
}

TEST(RdmaLocal, NoPeerIsAnExactErrorAfterTheTimeout) {
  auto ep = open_local();
  std::string name = unique_name("alone");
  try {
    ep->listen(name, 50ms);
    ADD_FAILURE() << "no error";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: no peer on connection '" + name + "' in 50 ms");
  }
}

// Batches across processes (issue 20, item 4). Process A's schedule fills X with a producer
// kernel, then a remote write (BatchPeer over this transport) puts X in process B's buffer Y
// and sets B's signal; B's schedule waits for that signal on its GPU, adds 1 to every element
// of Y (scale_add) and copies Y out. Both schedules run twice with other buffers (X, Y, the
// output), the remote address and signal value being scalars of each run.
constexpr uint32_t kElems = 16 << 10, kBlock = 64;
constexpr uint64_t kBatchBytes = uint64_t(kElems) * 4;
float produced(int run) { return 3.0f + 10.0f * float(run); }

// Every byte of `p` is `v` repeated; "" or what differs.
std::string all_floats(const void* p, float v) {
  std::vector<float> want(kElems, v);
  if (std::memcmp(p, want.data(), kBatchBytes) == 0) return "";
  for (uint32_t i = 0; i < kElems; i++)
    if (std::memcmp(static_cast<const float*>(p) + i, &v, 4) != 0)
      return "element " + std::to_string(i) + " is " +
             std::to_string(static_cast<const float*>(p)[i]) + ", not " + std::to_string(v);
  return "";
}

// emu:ARCH with the test kernels loaded.
std::pair<std::unique_ptr<Device>, std::shared_ptr<const ProgramImage>> open_with_kernels(
    const std::string& arch) {
  kernels::register_cpu_implementations();
  auto dev = Device::open("emu:" + arch);
  auto img = load_program(*dev, kernels::code_object(arch));
  return {std::move(dev), std::move(img)};
}

// Process B: registers Y0, Y1 and its signal, advertises them, runs its schedule twice.
std::string batch_receiver(const std::string& arch, const std::string& name) {
  auto [dev, img] = open_with_kernels(arch);
  Program scale(*dev, img, "scale_add");
  auto ep = open_local();
  Buffer y[2] = {dev->allocate(kBatchBytes), dev->allocate(kBatchBytes)};
  Buffer out[2] = {dev->allocate(kBatchBytes, MemoryKind::Host),
                   dev->allocate(kBatchBytes, MemoryKind::Host)};
  std::unique_ptr<Region> ry[2] = {ep->register_buffer(y[0]), ep->register_buffer(y[1])};
  Signal arrived = dev->new_signal(0);
  SignalRegion sr(*ep, arrived);
  auto c = ep->listen(name, 10000ms);
  c->advertise(ry[0]->remote());
  c->advertise(ry[1]->remote());
  c->advertise(sr.remote());
  batch::Schedule s(*dev);
  batch::Mem yy = s.input(kBatchBytes), o = s.input(kBatchBytes);
  auto value = s.scalar<uint64_t>();
  s.remote_wait(*dev, arrived, value, {batch::Access::written(yy, 0, kBatchBytes)});
  s.launch(scale, {kElems / kBlock, 1, 1}, {kBlock, 1, 1},
           {batch::Arg::buffer(yy), batch::Arg::value(1.0f), batch::Arg::value(1.0f),
            batch::Arg::value(kElems), batch::Arg::value(kBlock)});
  s.copy(o, 0, yy, 0, kBatchBytes);
  batch::Executable exe = s.compile();
  for (int r = 0; r < 2; r++) {
    exe.run(batch::Bindings().input(yy, y[r]).input(o, out[r]).scalar(value, uint64_t(r + 1)));
    exe.wait(10000ms);
    std::string bad = all_floats(out[r].host(), produced(r) + 1.0f);
    if (!bad.empty()) return "run " + std::to_string(r) + ": " + bad;
  }
  return "";
}

class RdmaBatch : public testing::TestWithParam<std::string> {};

TEST_P(RdmaBatch, ProducerRemoteWriteConsumerReplaysWithReboundBuffers) {
  const std::string arch = GetParam();
  if (kernels::code_object(arch).empty()) GTEST_SKIP() << "no code object built for " << arch;
  const std::string name = unique_name("batch");
  Child child = spawn([&] { return batch_receiver(arch, name); });
  auto [dev, img] = open_with_kernels(arch);
  Program fill(*dev, img, "fill_u32");
  auto ep = open_local();
  auto c = ep->connect(name, 10000ms);
  RemoteRegion y[2] = {c->peer_region(0, 10000ms), c->peer_region(1, 10000ms)};
  BatchPeer peer(*dev, *ep, *c, {y[0], y[1]}, c->peer_region(2, 10000ms));
  batch::Schedule s(*dev);
  batch::Mem x = s.input(kBatchBytes);
  auto bits = s.scalar<uint32_t>();
  auto addr = s.scalar<uint64_t>(), value = s.scalar<uint64_t>();
  s.launch(fill, {kElems / kBlock, 1, 1}, {kBlock, 1, 1},
           {batch::Arg::buffer(x), batch::Arg::scalar(bits), batch::Arg::value(kElems),
            batch::Arg::value(kBlock)});
  s.remote_write(peer, x, 0, kBatchBytes, addr, value);
  batch::Executable exe = s.compile();
  Buffer xb[2] = {dev->allocate(kBatchBytes), dev->allocate(kBatchBytes)};
  for (int r = 0; r < 2; r++) {
    exe.run(batch::Bindings()
                .input(x, xb[r])
                .scalar(bits, std::bit_cast<uint32_t>(produced(r)))
                .scalar(addr, y[r].addr)
                .scalar(value, uint64_t(r + 1)));
    exe.wait(10000ms);
    EXPECT_EQ(all_floats(xb[r].host(), produced(r)), "") << "run " << r;
  }
  EXPECT_EQ(finish(child), "ok");
}
INSTANTIATE_TEST_SUITE_P(Targets, RdmaBatch, testing::Values("gfx1100", "sm_90"));

// A run with `b` after the peer `pid` died fails with the connection's exact error within
// 2 s, and the host queue still ends: the device's timeline passes the run.
void expect_peer_died(batch::Executable& exe, const batch::Bindings& b, Device& dev, pid_t pid,
                      const std::string& name) {
  const auto start = Clock::now();
  exe.run(b);
  try {
    exe.wait(10000ms);
    ADD_FAILURE() << "no error";
  } catch (const ConnectionError& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: the peer (pid " + std::to_string(pid) +
                                         ") died on connection '" + name + "'");
  }
  EXPECT_LT(Clock::now() - start, 2s);
  dev.timeline().wait(exe.points()[0].second, 1000ms);
}

// A batch peer that dies with its connection up: advertises a buffer of emu:gfx1100 memory
// holding fill(42)'s pattern and a signal on connection `name`, then exits (without a word)
// once the parent closes its end of the pipe `go`.
std::string peer_until_closed(const std::string& name, const int go[2]) {
  ::close(go[1]);
  auto dev = Device::open("emu:gfx1100");
  auto ep = open_local();
  Buffer buf = dev->allocate(kBatchBytes);
  fill(static_cast<std::byte*>(buf.host()), kBatchBytes, 42);
  auto r = ep->register_buffer(buf);
  Signal s = dev->new_signal(0);
  SignalRegion sr(*ep, s);
  auto c = ep->listen(name, 10000ms);
  c->advertise(r->remote());
  c->advertise(sr.remote());
  char b;
  (void)!::read(go[0], &b, 1);
  ::_exit(0);
}

// The pull direction: process A's schedule fills X with a producer kernel and raises B's
// "ready" signal (remote_signal), then waits on its GPU for B's "consumed"; B's schedule
// waits on its GPU for "ready", reads X into Y (remote_read), adds 1 on its GPU, copies Y
// out and raises A's "consumed". Both replay with other X, Y, outputs, address and values.
std::string batch_pull_producer(const std::string& arch, const std::string& name) {
  auto [dev, img] = open_with_kernels(arch);
  Program fill(*dev, img, "fill_u32");
  auto ep = open_local();
  Buffer xb[2] = {dev->allocate(kBatchBytes), dev->allocate(kBatchBytes)};
  std::unique_ptr<Region> rx[2] = {ep->register_buffer(xb[0]), ep->register_buffer(xb[1])};
  Signal consumed = dev->new_signal(0);
  SignalRegion sr(*ep, consumed);
  auto c = ep->listen(name, 10000ms);
  c->advertise(rx[0]->remote());
  c->advertise(rx[1]->remote());
  c->advertise(sr.remote());
  BatchPeer peer(*dev, *ep, *c, {}, c->peer_region(0, 10000ms), {.flush = false});
  batch::Schedule s(*dev);
  batch::Mem x = s.input(kBatchBytes);
  auto bits = s.scalar<uint32_t>();
  auto ready = s.scalar<uint64_t>(), done = s.scalar<uint64_t>();
  s.launch(fill, {kElems / kBlock, 1, 1}, {kBlock, 1, 1},
           {batch::Arg::buffer(x), batch::Arg::scalar(bits), batch::Arg::value(kElems),
            batch::Arg::value(kBlock)});
  s.remote_signal(peer, ready, {batch::Access::read(x, 0, kBatchBytes)});
  s.remote_wait(*dev, consumed, done, {batch::Access::written(x, 0, kBatchBytes)});
  batch::Executable exe = s.compile();
  for (int r = 0; r < 2; r++) {
    exe.run(batch::Bindings()
                .input(x, xb[r])
                .scalar(bits, std::bit_cast<uint32_t>(produced(r)))
                .scalar(ready, uint64_t(r + 1))
                .scalar(done, uint64_t(r + 1)));
    exe.wait(10000ms);
  }
  return "";
}

TEST_P(RdmaBatch, ConsumerRemoteReadPullsProducersBufferAndReplaysWithReboundBuffers) {
  const std::string arch = GetParam();
  if (kernels::code_object(arch).empty()) GTEST_SKIP() << "no code object built for " << arch;
  const std::string name = unique_name("pull");
  Child child = spawn([&] { return batch_pull_producer(arch, name); });
  auto [dev, img] = open_with_kernels(arch);
  Program scale(*dev, img, "scale_add");
  auto ep = open_local();
  Signal ready = dev->new_signal(0);
  SignalRegion sr(*ep, ready);
  auto c = ep->connect(name, 10000ms);
  RemoteRegion x[2] = {c->peer_region(0, 10000ms), c->peer_region(1, 10000ms)};
  c->advertise(sr.remote());
  BatchPeer peer(*dev, *ep, *c, {x[0], x[1]}, c->peer_region(2, 10000ms), {.flush = false});
  batch::Schedule s(*dev);
  batch::Mem y = s.input(kBatchBytes), o = s.input(kBatchBytes);
  auto addr = s.scalar<uint64_t>(), want = s.scalar<uint64_t>(), done = s.scalar<uint64_t>();
  s.remote_wait(*dev, ready, want, {batch::Access::written(y, 0, kBatchBytes)});
  s.remote_read(peer, addr, y, 0, kBatchBytes);
  s.launch(scale, {kElems / kBlock, 1, 1}, {kBlock, 1, 1},
           {batch::Arg::buffer(y), batch::Arg::value(1.0f), batch::Arg::value(1.0f),
            batch::Arg::value(kElems), batch::Arg::value(kBlock)});
  s.copy(o, 0, y, 0, kBatchBytes);
  s.remote_signal(peer, done, {batch::Access::read(y, 0, kBatchBytes)});
  batch::Executable exe = s.compile();
  Buffer yb[2] = {dev->allocate(kBatchBytes), dev->allocate(kBatchBytes)};
  Buffer out[2] = {dev->allocate(kBatchBytes, MemoryKind::Host),
                   dev->allocate(kBatchBytes, MemoryKind::Host)};
  for (int r = 0; r < 2; r++) {
    exe.run(batch::Bindings()
                .input(y, yb[r])
                .input(o, out[r])
                .scalar(addr, x[r].addr)
                .scalar(want, uint64_t(r + 1))
                .scalar(done, uint64_t(r + 1)));
    exe.wait(10000ms);
    EXPECT_EQ(all_floats(out[r].host(), produced(r) + 1.0f), "") << "run " << r;
    EXPECT_EQ(all_floats(yb[r].host(), produced(r) + 1.0f), "") << "run " << r;
  }
  EXPECT_EQ(finish(child), "ok");
}

// A remote read from a live peer, then one at an address outside what it advertised (the
// exact InvalidInput, from wait()), then one after the peer died (the connection's exact
// ConnectionError within 2 s, the device finishing the run).
TEST(RdmaBatchErrors, RemoteReadOutOfBoundsAndPeerGoneAreExactErrors) {
  const std::string name = unique_name("pull-gone");
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  Child child = spawn([&] { return peer_until_closed(name, go); });
  ::close(go[0]);
  auto dev = Device::open("emu:gfx1100");
  auto ep = open_local();
  auto c = ep->connect(name, 10000ms);
  RemoteRegion x = c->peer_region(0, 10000ms);
  BatchPeer peer(*dev, *ep, *c, {x}, c->peer_region(1, 10000ms), {.flush = false});
  batch::Schedule s(*dev);
  batch::Mem y = s.input(kBatchBytes);
  auto addr = s.scalar<uint64_t>();
  s.remote_read(peer, addr, y, 0, kBatchBytes);
  batch::Executable exe = s.compile();
  Buffer yb = dev->allocate(kBatchBytes);
  exe.run(batch::Bindings().input(y, yb).scalar(addr, x.addr));
  exe.wait(10000ms);
  EXPECT_EQ(check(static_cast<const std::byte*>(yb.host()), kBatchBytes, 42), "");
  exe.run(batch::Bindings().scalar(addr, x.addr + 8));
  try {
    exe.wait(10000ms);
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: batch peer: remote address " + hex(x.addr + 8) +
                                         " (" + std::to_string(kBatchBytes) +
                                         " bytes) is in no region the peer advertised");
  }
  ::close(go[1]);
  const pid_t pid = child.pid;
  EXPECT_EQ(finish(child, 5000ms), "child said nothing (status 0)");
  expect_peer_died(exe, batch::Bindings().scalar(addr, x.addr), *dev, pid, name);
  // Y's registration was made by the first run and reused by the third (the second was
  // refused before registering).
  EXPECT_EQ(ep->cache_stats().registrations, 1u);
  EXPECT_EQ(ep->cache_stats().hits, 1u);
}

// The registration cache (Endpoint::register_cached): one registration per buffer range,
// others for other ranges and buffers, none handed to a buffer made after a free, the least
// recently used entry evicted at the bound, and threads registering at once.
TEST(RdmaRegistrationCache, OneRegistrationPerBufferRangeNoneReusedAfterAFree) {
  auto dev = Device::open("emu:gfx1100");
  auto ep = open_local();
  Buffer a = dev->allocate(64 << 10), b = dev->allocate(64 << 10);
  auto r1 = ep->register_cached(a, 0, 4096);
  auto r2 = ep->register_cached(a, 0, 4096);
  EXPECT_EQ(r1.get(), r2.get());
  EXPECT_EQ(r1->addr(), a.va());
  auto r3 = ep->register_cached(a, 4096, 4096);
  EXPECT_NE(r3.get(), r1.get());
  EXPECT_EQ(r3->addr(), a.va() + 4096);
  EXPECT_EQ(r3->host(), static_cast<std::byte*>(a.host()) + 4096);
  auto r4 = ep->register_cached(b, 0, 4096);
  EXPECT_NE(r4.get(), r1.get());
  EXPECT_EQ(r4->addr(), b.va());
  auto st = ep->cache_stats();
  EXPECT_EQ(st.registrations, 3u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.entries, 3u);
  // A freed buffer: whatever comes at its address or memory next is registered afresh.
  const uint64_t a_va = a.va();
  a.reset();
  Buffer c = dev->allocate(128 << 10);
  auto r5 = ep->register_cached(c, 0, 4096);
  EXPECT_NE(r5.get(), r1.get());
  EXPECT_EQ(r5->addr(), c.va());
  EXPECT_EQ(r5->host(), static_cast<std::byte*>(c.host()));
  EXPECT_EQ(ep->cache_stats().registrations, 4u) << "a at " << hex(a_va) << ", c at " << hex(c.va());
  try {
    ep->register_cached(c, (128 << 10) - 4096, 8192);
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: range [126976, +8192) is not inside the buffer of "
                                     "131072 bytes");
  }
  // Four threads at once: one registration, the same region for all.
  Buffer d = dev->allocate(64 << 10);
  std::vector<std::thread> ts;
  std::vector<const Region*> got(4);
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 50; i++) got[size_t(t)] = ep->register_cached(d, 0, 8192).get();
    });
  for (auto& t : ts) t.join();
  for (const Region* g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(ep->cache_stats().registrations, 5u);
  EXPECT_EQ(ep->cache_stats().hits, 1u + 199u);
  // The bound: with room for two, the least recently used goes.
  RegistrationCache small(2);
  int made = 0;
  auto get = [&](const Buffer& x) {
    return small.get(x, 0, 4096, [&] {
      made++;
      return ep->register_buffer_range(x, 0, 4096);
    });
  };
  get(b);
  get(c);
  get(b);  // c is now the least recently used
  get(d);  // evicts c
  EXPECT_EQ(made, 3);
  get(b);
  EXPECT_EQ(made, 3);
  get(c);
  EXPECT_EQ(made, 4);
  EXPECT_EQ(small.stats().entries, 2u);
}

// The peer is gone when the run's remote write goes out: the run fails with the connection's
// exact error (wait() throws it), within a bounded time, and the device finishes the run.
TEST(RdmaBatchErrors, PeerGoneMidRunIsTheConnectionsExactError) {
  const std::string name = unique_name("batch-gone");
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  Child child = spawn([&] { return peer_until_closed(name, go); });
  ::close(go[0]);
  kernels::register_cpu_implementations();
  auto dev = Device::open("emu:gfx1100");
  std::shared_ptr<const ProgramImage> img = load_program(*dev, kernels::code_object("gfx1100"));
  Program fill(*dev, img, "fill_u32");
  auto ep = open_local();
  auto c = ep->connect(name, 10000ms);
  RemoteRegion y = c->peer_region(0, 10000ms);
  BatchPeer peer(*dev, *ep, *c, {y}, c->peer_region(1, 10000ms));
  batch::Schedule s(*dev);
  batch::Mem x = s.input(kBatchBytes);
  auto addr = s.scalar<uint64_t>(), value = s.scalar<uint64_t>();
  s.launch(fill, {kElems / kBlock, 1, 1}, {kBlock, 1, 1},
           {batch::Arg::buffer(x), batch::Arg::value(7u), batch::Arg::value(kElems),
            batch::Arg::value(kBlock)});
  s.remote_write(peer, x, 0, kBatchBytes, addr, value);
  batch::Executable exe = s.compile();
  ::close(go[1]);
  const pid_t pid = child.pid;
  EXPECT_EQ(finish(child, 5000ms), "child said nothing (status 0)");
  Buffer xb = dev->allocate(kBatchBytes);
  expect_peer_died(exe, batch::Bindings().input(x, xb).scalar(addr, y.addr).scalar(value, uint64_t(1)),
                   *dev, pid, name);
  // An address the peer never advertised: the exact refusal, before anything is posted.
  try {
    peer.write_and_signal({static_cast<std::byte*>(xb.host())}, 8, y.addr + y.length, 1);
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "rdma: batch peer: remote address " +
                                         hex(y.addr + y.length) +
                                         " (8 bytes) is in no region the peer advertised");
  }
}

}  // namespace
}  // namespace hcq::rdma
