#include "rdma.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/hcq.hpp"
#include "json.hpp"
#include "numbers.hpp"
#include "rdma/transport.hpp"
#include "rdma/verbs.hpp"
#include "usage.hpp"

namespace hcq::tools {

int cmd_rdma_ls(bool json) {
  std::string reason = rdma::no_rdma_reason();
  std::vector<rdma::DeviceInfo> devs;
  if (reason.empty()) devs = rdma::list_verbs_devices();
  if (reason.empty() && devs.empty())
    reason = "the kernel has RDMA support but no device (Soft-RoCE: modprobe rdma_rxe; rdma "
             "link add rxe0 type rxe netdev eth0)";
  Json out = Json::array();
  for (const auto& d : devs) {
    Json ports = Json::array();
    if (!json) std::printf("%s\n", d.name.c_str());
    for (const auto& p : d.ports) {
      Json gids = Json::array();
      if (!json)
        std::printf("  port %u  %s  %s  mtu %u\n", unsigned(p.port), p.state.c_str(),
                    p.link_layer.c_str(), p.active_mtu);
      for (const auto& g : p.gids) {
        gids.push_back({{"index", g.index}, {"gid", g.gid}, {"type", g.type}});
        if (!json) std::printf("    gid %d  %s  %s\n", g.index, g.gid.c_str(), g.type.c_str());
      }
      ports.push_back({{"port", p.port}, {"state", p.state}, {"link_layer", p.link_layer},
                       {"active_mtu", p.active_mtu}, {"gids", gids}});
    }
    out.push_back({{"name", d.name}, {"ports", ports}});
  }
  if (json) {
    Json j = {{"devices", out}};
    if (!reason.empty()) j["none_because"] = reason;
    std::printf("%s\n", json_line(j).c_str());
  } else if (!reason.empty()) {
    std::printf("no RDMA devices: %s\n", reason.c_str());
  }
  return 0;
}

namespace {

using namespace std::chrono_literals;
constexpr uint64_t kBig = 64ull << 20;
constexpr int kPings = 1000;
constexpr uint32_t kPing = 1, kDone = 2;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_rdma_bench(const RdmaBenchArgs& a) {
  if (a.listen == !a.host.empty() && a.local.empty())
    throw UsageError("rdma bench: give --listen or HOST");
  std::unique_ptr<rdma::Endpoint> ep;
  if (!a.local.empty()) ep = rdma::open_local();
  else ep = rdma::open_verbs({a.device, 1, -1});
  auto dev = Device::open("emu:gfx1100");  // its signals, and device memory to move
  std::vector<std::byte> host(kBig), small(64);
  Buffer dbuf = dev->allocate(kBig);
  auto rh = ep->register_host(host.data(), kBig), rs = ep->register_host(small.data(), 64);
  auto rd = ep->register_buffer(dbuf);
  std::string address = !a.local.empty() ? a.local
                        : a.listen       ? ":" + std::to_string(a.port)
                                         : a.host + ":" + std::to_string(a.port);
  auto c = a.listen ? ep->listen(address, 60000ms) : ep->connect(address, 60000ms);
  c->advertise(rh->remote());
  c->advertise(rd->remote());
  c->advertise(rs->remote());
  rdma::RemoteRegion ph = c->peer_region(0), pd = c->peer_region(1), ps = c->peer_region(2);
  Signal s = dev->new_signal(0);
  uint64_t v = 0;
  if (a.listen) {  // serve: answer pings until done
    while (true) {
      uint32_t imm = c->wait_immediate(60000ms);
      if (imm == kDone) break;
      c->write_with_immediate(*rs, 0, ps, 0, 8, kPing, s, ++v);
    }
    c->wait(s, v);
    std::printf("rdma bench: served %s over %s\n", address.c_str(), ep->describe().c_str());
    return 0;
  }
  std::vector<double> rtt;
  for (int i = 0; i < kPings; i++) {
    auto t0 = std::chrono::steady_clock::now();
    c->write_with_immediate(*rs, 0, ps, 0, 8, kPing, s, ++v);
    c->wait_immediate();
    rtt.push_back(since(t0));
  }
  struct Figure {
    const char* op;
    std::string memory;
    double gbs;
  };
  std::vector<Figure> figs;
  auto bw = [&](const char* op, const std::string& memory, const rdma::Region& local,
                const rdma::RemoteRegion& remote) {
    std::vector<double> t;
    for (uint32_t i = 0; i < a.rounds; i++) {
      auto t0 = std::chrono::steady_clock::now();
      if (op[0] == 'w') c->write(local, 0, remote, 0, kBig, s, ++v);
      else c->read(local, 0, remote, 0, kBig, s, ++v);
      c->wait(s, v);
      t.push_back(since(t0));
    }
    figs.push_back({op, memory, double(kBig) / median(t) / 1e9});
  };
  bw("write", "host", *rh, ph);
  bw("read", "host", *rh, ph);
  bw("write", "device (emu:gfx1100)", *rd, pd);
  bw("read", "device (emu:gfx1100)", *rd, pd);
  c->write_with_immediate(*rs, 0, ps, 0, 0, kDone, s, ++v);
  c->wait(s, v);
  double rtt_us = median(rtt) * 1e6;
  if (a.json) {
    Json j = {{"transport", ep->describe()}, {"round_trip_us", rtt_us}, {"pings", kPings},
              {"bytes", kBig}, {"rounds", a.rounds}};
    Json bws = Json::array();
    for (auto& f : figs) bws.push_back({{"op", f.op}, {"memory", f.memory}, {"gb_per_s", f.gbs}});
    j["bandwidth"] = bws;
    std::printf("%s\n", json_line(j).c_str());
    return 0;
  }
  std::printf("%s, medians:\n", ep->describe().c_str());
  std::printf("  8-byte write-with-immediate round trip  %.1f us (%d pings)\n", rtt_us, kPings);
  for (auto& f : figs)
    std::printf("  %-5s 64 MiB %-22s %.2f GB/s (%u rounds)\n", f.op, f.memory.c_str(), f.gbs,
                a.rounds);
  return 0;
}

}  // namespace hcq::tools
