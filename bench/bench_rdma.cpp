// rdma/ transports between two processes (docs/rdma.md, docs/performance.md): the round trip
// of a small write (posted, applied by the peer, completed here) and the bandwidth of writes
// and reads of 64 KiB, 1 MiB and 64 MiB, over the shared-memory transport, with host memory
// and with emu:gfx1100 device memory on both sides. JSON with --benchmark_format=json.
//
// The peers are forked before anything else starts a thread (one per memory kind); each
// registers a 64 MiB target, advertises it, and lets its progress thread serve until this
// process closes the connection. Built with the benchmarks, never run by the tests.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/hcq.hpp"
#include "rdma/transport.hpp"

namespace {

using namespace hcq;
using namespace std::chrono_literals;
constexpr uint64_t kTarget = 64ull << 20;
enum Kind { kHost = 0, kDevice = 1 };
const char* kind_name(int k) { return k == kHost ? "host" : "emu:gfx1100"; }

std::string connection_name(int kind, pid_t parent) {
  return "bench-rdma-" + std::to_string(parent) + (kind == kHost ? "-host" : "-device");
}

// Memory of one kind, registered: host memory, or an emu:gfx1100 buffer.
struct Memory {
  std::unique_ptr<Device> dev;
  Buffer buf;
  std::vector<std::byte> host;
  std::unique_ptr<rdma::Region> region;
  Memory(rdma::Endpoint& ep, int kind) {
    if (kind == kHost) {
      host.assign(kTarget, std::byte{1});
      region = ep.register_host(host.data(), kTarget);
    } else {
      dev = Device::open("emu:gfx1100");
      buf = dev->allocate(kTarget);
      std::memset(buf.host(), 1, kTarget);
      region = ep.register_buffer(buf);
    }
  }
};

[[noreturn]] void serve(int kind, pid_t parent) {
  ::alarm(1800);  // a parent that never closes does not leave this behind for long
  int status = 1;
  try {
    auto ep = rdma::open_local();
    Memory m(*ep, kind);
    auto c = ep->listen(connection_name(kind, parent), 30000ms);
    c->advertise(m.region->remote());
    while (c->error().empty()) std::this_thread::sleep_for(20ms);  // until the parent closes
    status = 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_rdma peer (%s): %s\n", kind_name(kind), e.what());
  }
  ::_exit(status);
}

// This side of one kind's connection, made on first use.
struct Side {
  std::unique_ptr<rdma::Endpoint> ep;
  std::unique_ptr<Memory> mem;
  std::unique_ptr<rdma::Connection> conn;
  rdma::RemoteRegion peer;
  std::unique_ptr<Device> sig_dev;
  Signal done;
  uint64_t posted = 0;
};
pid_t g_children[2] = {-1, -1};
std::unique_ptr<Side> g_sides[2];

Side& side(int kind) {
  if (!g_sides[kind]) {
    auto s = std::make_unique<Side>();
    s->ep = rdma::open_local();
    s->mem = std::make_unique<Memory>(*s->ep, kind);
    s->conn = s->ep->connect(connection_name(kind, ::getpid()), 30000ms);
    s->peer = s->conn->peer_region(0, 30000ms);
    s->sig_dev = Device::open("emu:gfx1100");
    s->done = s->sig_dev->new_signal(0);
    g_sides[kind] = std::move(s);
  }
  return *g_sides[kind];
}

void BM_RdmaLocalRoundTrip(benchmark::State& state) {
  Side& s = side(int(state.range(0)));
  for (auto _ : state) {
    s.conn->write(*s.mem->region, 0, s.peer, 0, 8, s.done, ++s.posted);
    s.conn->wait(s.done, s.posted);
  }
  state.SetLabel(kind_name(int(state.range(0))));
}
BENCHMARK(BM_RdmaLocalRoundTrip)->Arg(kHost)->Arg(kDevice)->UseRealTime();

void transfer(benchmark::State& state, bool write) {
  Side& s = side(int(state.range(0)));
  const uint64_t bytes = uint64_t(state.range(1));
  for (auto _ : state) {
    if (write)
      s.conn->write(*s.mem->region, 0, s.peer, 0, bytes, s.done, ++s.posted, 60000ms);
    else
      s.conn->read(*s.mem->region, 0, s.peer, 0, bytes, s.done, ++s.posted, 60000ms);
    s.conn->wait(s.done, s.posted, 60000ms);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.SetLabel(kind_name(int(state.range(0))));
}
void BM_RdmaLocalWrite(benchmark::State& state) { transfer(state, true); }
void BM_RdmaLocalRead(benchmark::State& state) { transfer(state, false); }
void sizes(benchmark::internal::Benchmark* b) {
  for (int k : {kHost, kDevice})
    for (int64_t n : {int64_t(64) << 10, int64_t(1) << 20, int64_t(64) << 20}) b->Args({k, n});
  b->UseRealTime();
}
BENCHMARK(BM_RdmaLocalWrite)->Apply(sizes);
BENCHMARK(BM_RdmaLocalRead)->Apply(sizes);

}  // namespace

int main(int argc, char** argv) {
  const pid_t me = ::getpid();
  for (int k : {kHost, kDevice}) {
    g_children[k] = ::fork();
    if (g_children[k] < 0) {
      std::perror("fork");
      return 1;
    }
    if (g_children[k] == 0) serve(k, me);
  }
  benchmark::Initialize(&argc, argv);
  int rc = 0;
  try {
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_rdma: %s\n", e.what());
    rc = 1;
  }
  benchmark::Shutdown();
  g_sides[0].reset();  // closing the connections ends the peers
  g_sides[1].reset();
  for (pid_t c : g_children) {
    // A peer whose kind was not benchmarked never had a connection: it is killed.
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    pid_t got = 0;
    while ((got = ::waitpid(c, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    if (got == 0) {
      ::kill(c, SIGKILL);
      ::waitpid(c, &status, 0);
    }
  }
  return rc;
}
