#pragma once
// The verbs transport (rdma/verbs.cpp, libibverbs): NICs as rdma::Endpoints, and what
// `hcq rdma ls` lists. Thread safety as rdma/transport.hpp says; list_verbs_devices may be
// called from any thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma/transport.hpp"

namespace hcq::rdma {

struct GidInfo {
  int index = 0;
  std::string gid;   // "fe80::...", "::ffff:10.0.2.15"
  std::string type;  // "IB", "RoCE v1", "RoCE v2"
};
struct PortInfo {
  uint8_t port = 1;
  std::string state;       // "PORT_ACTIVE" (ibv_port_state_str)
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  uint32_t active_mtu = 0;  // bytes
  std::vector<GidInfo> gids;
};
struct DeviceInfo {
  std::string name;  // "rxe0", "mlx5_0"
  std::vector<PortInfo> ports;
};

// Every RDMA device. OsError (ENOSYS) "rdma: this kernel has no RDMA support
// (/sys/class/infiniband is absent): Function not implemented (errno 38)" where the kernel
// has none; an empty list where it has support but no device.
std::vector<DeviceInfo> list_verbs_devices();
// Why this kernel offers no RDMA ("this kernel has no RDMA support (/sys/class/infiniband is
// absent)"), or "" where it does.
std::string no_rdma_reason();

struct VerbsOptions {
  std::string device;  // "" for the first
  uint8_t port = 1;
  int gid_index = -1;  // -1: RoCE v2 on an IPv4-mapped address, else RoCE v2, else the first
};

class VerbsEndpointBase : public Endpoint {
 public:
  // A dma-buf (from the GPU driver's export) registered with ibv_reg_dmabuf_mr. OsError
  // (EOPNOTSUPP) "rdma: DEVICE has no dma-buf registration" where the NIC's driver has none
  // (rxe).
  virtual std::unique_ptr<Region> register_dmabuf(int fd, uint64_t offset, uint64_t size,
                                                  uint64_t iova, std::byte* host) = 0;
  // The registration register_buffer_range makes of a real GPU's export `fd` ("who" names
  // it in the log): as a dma-buf where it is one and the NIC's driver takes it, else host
  // staging (registered with ibv_reg_mr at `iova`, Region::how() "host staging (REASON)",
  // the line "hcq rdma: WHO: host staging (REASON)" on standard error), which the caller
  // copies through. Reasons: "WHO's export is not a dma-buf (file system magic 0x...)" (an RM
  // object fd), "DEVICE has no dma-buf registration" (rxe), or the export's own error.
  virtual std::unique_ptr<Region> stage_export(int fd, uint64_t offset, uint64_t size,
                                               uint64_t iova, const std::string& who) = 0;
};

// Opens a NIC: device, port and GID chosen, protection domain allocated.
std::unique_ptr<VerbsEndpointBase> open_verbs(const VerbsOptions& o = {});

}  // namespace hcq::rdma
