// The AMD driver over KFD: topology from sysfs, memory, PM4 compute and SDMA copy queues
// mapped into the process and written directly, KFD events for host sleeps and faults.
// Everything goes through the kernel boundary, so the same code drives /dev/kfd on a real
// card and the emulated KFD.
#pragma once

#include <memory>
#include <string>

#include "core/driver.hpp"
#include "os/kernel.hpp"

namespace hcq {
class Device;
}

namespace hcq::amd {

// Opens the `index`-th GPU node of the KFD topology the kernel shows; `device_name` is the
// name it reports ("amd:0", "emu:gfx1100").
std::unique_ptr<DeviceDriver> open_kfd_device(std::shared_ptr<os::Kernel> kernel, int index,
                                              const std::string& device_name);

// GPU nodes in the KFD topology: {gpu_id, name line} per node, in topology order.
struct KfdNode {
  uint32_t gpu_id;
  std::string target;  // "gfx1100", or "gfx?<version>" for an unknown target
};
std::vector<KfdNode> kfd_gpu_nodes(os::Kernel& kernel);

}  // namespace hcq::amd
