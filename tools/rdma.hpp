// The RDMA commands (issue 20): `hcq rdma ls` and `hcq rdma bench`, on rdma/'s transports.
#pragma once

#include <string>

namespace hcq::tools {

// Every RDMA device: ports (state, link layer, MTU) and their GIDs with types; on a host with
// none, why ("no RDMA devices: this kernel has no RDMA support (/sys/class/infiniband is
// absent)"), exit 0.
int cmd_rdma_ls(bool json);

struct RdmaBenchArgs {
  bool listen = false;
  std::string host;       // connect to HOST (verbs) when not listening
  uint32_t port = 18515;  // TCP port of the connection setup (ibv_rc_pingpong's)
  std::string device;     // verbs device; "" for the first
  std::string local;      // a name: the shared-memory transport instead of verbs
  uint32_t rounds = 8;     // of each 64 MiB transfer
  bool json = false;
};
// Latency (8-byte write-with-immediate round trips) and bandwidth (64 MiB writes and reads,
// host memory and emu:gfx1100 device memory), medians; the listener serves, the other side
// measures and prints.
int cmd_rdma_bench(const RdmaBenchArgs& a);

}  // namespace hcq::tools
