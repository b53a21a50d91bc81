// rdma/'s verbs transport against a real kernel: run as the init program's test inside a
// QEMU guest (scripts/qemu_rdma_test.sh) with Soft-RoCE (rdma_rxe) on `lo`. Two endpoints on
// rxe0 in this process connect over TCP on 127.0.0.1 and move 64 MiB both ways with
// write-with-immediate, read back, then: emulated device memory registered directly, dma-buf
// registration refused with EOPNOTSUPP, a bad key and an out-of-bounds read as exact remote
// access errors, and a peer process SIGKILLed mid-transfer as an exact error within 2 s.
//
// In the two-guest run (role "server" / "client" on the kernel command line) only the 64 MiB
// exchange runs, between the guests over their virtio-net link.
//
// Each check prints one PASS or FAIL line; the exit status is the number of failures (capped).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "batch/batch.hpp"
#include "core/hcq.hpp"
#include "rdma/batch_peer.hpp"
#include "rdma/transport.hpp"
#include "rdma/verbs.hpp"

namespace {

using namespace std::chrono_literals;
using namespace hcq;
using namespace hcq::rdma;
constexpr uint64_t kBig = 64ull << 20;

int failures = 0;
void check(bool ok, const std::string& what, const std::string& detail = "") {
  static const auto start = std::chrono::steady_clock::now();
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s %s%s%s (at %.1f s)\n", ok ? "PASS" : "FAIL", what.c_str(),
              detail.empty() ? "" : ": ", detail.c_str(), t);
  std::fflush(stdout);
  if (!ok) failures++;
}

void fill(std::byte* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n / 8; i++) {
    uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    std::memcpy(p + i * 8, &v, 8);
  }
}
bool holds(const std::byte* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n / 8; i++) {
    uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed, got;
    std::memcpy(&got, p + i * 8, 8);
    if (got != v) return false;
  }
  return true;
}

// One side of the exchange: its pattern to the peer's dst with an immediate, 1 MiB of the
// peer's src read back, then a zero-byte "finished" immediate both ways.
std::string exchange(Endpoint& ep, Device& dev, bool listen, const std::string& address,
                     uint64_t seed, uint64_t peer_seed) {
  std::vector<std::byte> src(kBig), dst(kBig), back(1 << 20);
  fill(src.data(), kBig, seed);
  auto rs = ep.register_host(src.data(), kBig), rd = ep.register_host(dst.data(), kBig),
       rb = ep.register_host(back.data(), back.size());
  auto c = listen ? ep.listen(address, 60000ms) : ep.connect(address, 60000ms);
  c->advertise(rd->remote());
  c->advertise(rs->remote());
  RemoteRegion pd = c->peer_region(0, 30000ms), ps = c->peer_region(1, 30000ms);
  Signal s = dev.new_signal(0);
  auto t0 = std::chrono::steady_clock::now();
  c->write_with_immediate(*rs, 0, pd, 0, kBig, uint32_t(seed), s, 1, 60000ms);
  c->read(*rb, 0, ps, kBig - (1 << 20), 1 << 20, s, 2, 60000ms);
  c->wait(s, 2, 60000ms);
  if (c->wait_immediate(60000ms) != uint32_t(peer_seed)) return "wrong immediate";
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!holds(dst.data(), kBig, peer_seed)) return "the written 64 MiB differ";
  std::vector<std::byte> expect(kBig);
  fill(expect.data(), kBig, peer_seed);
  if (std::memcmp(back.data(), expect.data() + kBig - (1 << 20), 1 << 20) != 0)
    return "the read 1 MiB differ";
  c->write_with_immediate(*rb, 0, pd, 0, 0, 7, s, 3, 30000ms);
  c->wait(s, 3, 30000ms);
  if (c->wait_immediate(30000ms) != 7) return "no finished immediate";
  std::printf("  64 MiB each way plus 1 MiB read in %.2f s (%.0f MB/s one way, functional "
              "figure only)\n", secs, double(kBig) / secs / 1e6);
  return "";
}

// A schedule's remote read and remote signal over verbs (docs/rdma.md, "Pulling"): `b`
// advertises a 1 MiB emu:gfx1100 buffer holding a pattern and a signal; `a`'s schedule reads
// the buffer into its own buffer and raises the signal, twice, the second run reusing the
// destination's cached registration.
std::string batch_pull(Endpoint& a, Endpoint& b, Device& dev) {
  const uint64_t n = 1 << 20;
  Buffer x = dev.allocate(n), y = dev.allocate(n);
  fill(static_cast<std::byte*>(x.host()), n, 0x3333);
  auto rx = b.register_buffer(x);
  Signal consumed = dev.new_signal(0);
  rdma::SignalRegion sr(b, consumed);
  auto served = std::async(std::launch::async, [&] {
    auto c = b.listen(":18523", 60000ms);
    c->advertise(rx->remote());
    c->advertise(sr.remote());
    while (c->error().empty()) std::this_thread::sleep_for(20ms);  // until `a` closes
  });
  std::string result;
  {
    auto c = a.connect("127.0.0.1:18523", 60000ms);
    RemoteRegion px = c->peer_region(0, 30000ms), psig = c->peer_region(1, 30000ms);
    rdma::BatchPeer peer(dev, a, *c, {px}, psig);
    batch::Schedule s(dev);
    batch::Mem dst = s.input(n);
    auto addr = s.scalar<uint64_t>(), value = s.scalar<uint64_t>();
    s.remote_read(peer, addr, dst, 0, n);
    s.remote_signal(peer, value, {batch::Access::read(dst, 0, n)});
    batch::Executable exe = s.compile();
    const auto before = a.cache_stats();
    for (uint64_t r = 1; r <= 2 && result.empty(); r++) {
      std::memset(y.host(), 0, n);
      exe.run(batch::Bindings().input(dst, y).scalar(addr, px.addr).scalar(value, r));
      exe.wait(60000ms);
      if (!holds(static_cast<const std::byte*>(y.host()), n, 0x3333))
        result = "run " + std::to_string(r) + ": the read 1 MiB differ";
      else if (consumed.value() != r)
        result = "run " + std::to_string(r) + ": the peer's signal is " +
                 std::to_string(consumed.value());
    }
    const auto after = a.cache_stats();
    if (result.empty() && (after.registrations - before.registrations != 1 ||
                           after.hits - before.hits != 1))
      result = std::to_string(after.registrations - before.registrations) +
               " registrations and " + std::to_string(after.hits - before.hits) +
               " hits for two runs, not 1 and 1";
  }
  served.get();
  return result;
}

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("another error: ") + e.what();
  }
  return "no error";
}

// The passive side of access_errors: a 64 KiB region advertised on ports 18520 and 18521,
// each connection kept until the active side closes it.
void serve_access_errors(Endpoint& ep) {
  std::vector<std::byte> mem(64 << 10);
  auto r = ep.register_host(mem.data(), mem.size());
  for (int port = 18520; port <= 18521; port++) {
    auto c = ep.listen(":" + std::to_string(port), 60000ms);
    c->advertise(r->remote());
    // The active side's connection closing ends it (a refused access fails only the
    // requester's work; the responder's posted receives are flushed).
    error_of<Error>([&] { c->wait_immediate(60000ms); });
  }
}

// A bad key and an out-of-bounds READ against serve_access_errors at `host`: exact errors.
void access_errors(Endpoint& ep, Device& dev, const std::string& host) {
  std::vector<std::byte> small(64 << 10);
  auto rs = ep.register_host(small.data(), small.size());
  for (int oob = 0; oob < 2; oob++) {
    std::string address = host + ":" + std::to_string(18520 + oob);
    auto c = ep.connect(address, 60000ms);
    RemoteRegion pr = c->peer_region(0, 30000ms), bad = pr;
    Signal s = dev.new_signal(0);
    std::string expect;
    if (oob) {
      c->read(*rs, 0, pr, pr.length - 100, 4096, s, 1);
      expect = "rdma: remote access error on connection '" + address +
               "': remote access error (read of 4096 bytes at " + hex(pr.addr + pr.length - 100) +
               ")";
    } else {
      bad.key ^= 0x80u;
      c->write(*rs, 0, bad, 0, 4096, s, 1);
      expect = "rdma: remote access error on connection '" + address +
               "': remote access error (write of 4096 bytes at " + hex(pr.addr) + ")";
    }
    std::string got = error_of<RemoteAccessError>([&] { c->wait(s, 1, 30000ms); });
    check(got == expect, oob ? "out-of-bounds read: exact error" : "bad key: exact error", got);
  }
}

int one_guest() {
  auto devs = list_verbs_devices();
  check(devs.size() == 1 && devs[0].name == "rxe0" && devs[0].ports.size() == 1 &&
            devs[0].ports[0].link_layer == "Ethernet" && !devs[0].ports[0].gids.empty(),
        "list_verbs_devices: rxe0, one Ethernet port with GIDs");

  // The peer killed mid-transfer: a child forked before anything else here has threads.
  pid_t child = ::fork();
  if (child == 0) {
    auto ep = open_verbs();
    std::vector<std::byte> mem(kBig);
    auto r = ep->register_host(mem.data(), kBig);
    // Until the parent gets there, after the checks before it (minutes under a slow TCG).
    auto c = ep->connect("127.0.0.1:18517", 600000ms);
    c->advertise(r->remote());
    std::this_thread::sleep_for(60s);
    ::_exit(0);
  }

  auto dev = Device::open("emu:gfx1100");
  auto a = open_verbs(), b = open_verbs();
  check(a->describe().rfind("rxe0 port 1 gid ", 0) == 0, "describe", a->describe());

  // 64 MiB both ways between two endpoints of this process.
  auto fa = std::async(std::launch::async, [&] {
    return exchange(*a, *dev, true, ":18515", 0x1111, 0x2222);
  });
  std::string rb = exchange(*b, *dev, false, "127.0.0.1:18515", 0x2222, 0x1111);
  std::string ra = fa.get();
  check(ra.empty() && rb.empty(), "64 MiB both ways, write-with-immediate and read, verified",
        ra + rb);

  // Emulated device memory registers directly, at the buffer's device address.
  Buffer buf = dev->allocate(1 << 20);
  auto rbuf = a->register_buffer(buf);
  check(rbuf->addr() == buf.va() && rbuf->how().find("registered directly") != std::string::npos,
        "emulated device memory registers directly", rbuf->how());

  // The registration cache: the same range twice is one ibv_reg_mr, another range another.
  {
    auto c1 = a->register_cached(buf, 0, 1 << 16);
    auto c2 = a->register_cached(buf, 0, 1 << 16);
    auto c3 = a->register_cached(buf, 1 << 16, 1 << 16);
    const auto st = a->cache_stats();
    check(c1.get() == c2.get() && c3.get() != c1.get() && st.registrations == 2 && st.hits == 1 &&
              c3->addr() == buf.va() + (1 << 16),
          "emulated device memory registrations are cached",
          std::to_string(st.registrations) + " registrations, " + std::to_string(st.hits) +
              " hits");
  }
  // A real GPU's export that is not a dma-buf (a memfd stands in for RM's object fd): host
  // staging, with the reason.
  {
    int fd = ::memfd_create("an-rm-object", 0);
    (void)!::ftruncate(fd, 1 << 16);
    auto r = a->stage_export(fd, 0, 1 << 16, 0x100000, "gpu");
    ::close(fd);
    check(r->how() == "host staging (gpu's export is not a dma-buf (file system magic "
                      "0x1021994))" && r->addr() == 0x100000 && r->host() != nullptr,
          "a non-dma-buf export is staged, with the reason", r->how());
  }

  // dma-buf registration: rxe has none (a memfd stands in for the GPU driver's dma-buf).
  int memfd = ::memfd_create("not-a-dmabuf", 0);
  (void)!::ftruncate(memfd, 1 << 20);
  int err = 0;
  std::string msg;
  try {
    a->register_dmabuf(memfd, 0, 1 << 20, 0, nullptr);
  } catch (const OsError& e) {
    err = e.err();
    msg = e.what();
  }
  ::close(memfd);
  check(err == EOPNOTSUPP && msg == "rdma: " + a->describe() + " has no dma-buf registration: " +
                                        std::strerror(EOPNOTSUPP) + " (errno 95)",
        "dma-buf registration refused with EOPNOTSUPP", msg);

  std::string pulled = batch_pull(*a, *b, *dev);
  check(pulled.empty(), "a schedule's remote read and signal over verbs, replayed, registration reused",
        pulled);

  // A bad key and an out-of-bounds read: each on a connection of its own.
  auto passive = std::async(std::launch::async, [&] { serve_access_errors(*b); });
  access_errors(*a, *dev, "127.0.0.1");
  passive.get();

  // The child's connection, then SIGKILL while a thread keeps 64 MiB writes in flight. On
  // rxe a post runs the requester in the posting thread (seconds per 64 MiB under TCG), so
  // what is timed is the connection's own noticing: error() set.
  {
    std::vector<std::byte> big(kBig);
    auto rbig = a->register_host(big.data(), kBig);
    auto c = a->listen(":18517", 60000ms);
    RemoteRegion pr = c->peer_region(0, 30000ms);
    Signal s = dev->new_signal(0);
    std::string poster_error;
    std::thread poster([&] {
      poster_error = error_of<ConnectionError>([&] {
        for (uint64_t i = 1; i <= 1000; i++) c->write(*rbig, 0, pr, 0, kBig, s, i, 30000ms);
      });
    });
    std::this_thread::sleep_for(500ms);
    std::printf("  SIGKILL to the peer (pid %d) with 64 MiB writes in flight\n", int(child));
    std::fflush(stdout);
    ::kill(child, SIGKILL);
    auto t0 = std::chrono::steady_clock::now();
    while (c->error().empty() && std::chrono::steady_clock::now() - t0 < 10s)
      std::this_thread::sleep_for(5ms);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string expect = "rdma: the peer closed connection ':18517'";
    check(c->error() == expect && secs < 2, "peer killed mid-transfer: exact error within 2 s",
          c->error() + " after " + std::to_string(secs) + " s");
    poster.join();  // its next post fails
    check(poster_error == expect, "the poster's next write fails with it", poster_error);
    std::string got = error_of<ConnectionError>([&] { c->wait(s, 1000, 30000ms); });
    check(got == expect, "a wait fails with it", got);
  }
  // Reaped with a bounded wait: the kernel tears the peer's queue pair down as it exits.
  int reaped = 0;
  for (int i = 0; i < 1000 && reaped == 0; i++) {
    reaped = ::waitpid(child, nullptr, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(10ms);
  }
  check(reaped == child, "the killed peer is reaped within 10 s");
  return failures;
}

std::string cmdline_value(const std::string& key) {
  std::ifstream f("/proc/cmdline");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t at = all.find(key + "=");
  if (at == std::string::npos) return "";
  size_t end = all.find_first_of(" \n", at);
  return all.substr(at + key.size() + 1, end - at - key.size() - 1);
}

}  // namespace

int main() {
  try {
    std::string role = cmdline_value("role");
    if (role == "server" || role == "client") {
      auto dev = Device::open("emu:gfx1100");
      auto ep = open_verbs();
      std::printf("  %s on %s\n", role.c_str(), ep->describe().c_str());
      bool server = role == "server";
      std::string r = exchange(*ep, *dev, server, server ? ":18515" : "192.0.2.1:18515",
                               server ? 0x1111 : 0x2222, server ? 0x2222 : 0x1111);
      check(r.empty(), "two guests: 64 MiB both ways, verified", r);
      if (server) serve_access_errors(*ep);
      else access_errors(*ep, *dev, "192.0.2.1");
      return failures;
    }
    return std::min(one_guest(), 100);
  } catch (const std::exception& e) {
    check(false, "unexpected error", e.what());
    return 100;
  }
}
