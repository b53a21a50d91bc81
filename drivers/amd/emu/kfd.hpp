// An emulated KFD and amdgpu render node behind the kernel boundary, with the sysfs KFD
// topology of one GPU of a chosen target and the emulated GPU (Engine) that runs its queues.
#pragma once

#include <memory>

#include "amd/targets.hpp"
#include "os/kernel.hpp"

namespace hcq::amd::emu {

struct SystemOptions {
  // The GPU has an io_link to the CPU node. Without one (a GPU behind a USB bridge) the KFD
  // refuses GTT and userptr memory for it and the GPU reaches only its VRAM.
  bool host_link = true;
};

// A kernel with /dev/kfd, /dev/dri/renderD128 and
// /sys/devices/virtual/kfd/kfd/topology/nodes/{0 (CPU), 1 (the GPU)}.
std::shared_ptr<os::Kernel> make_emulated_system(const Target& target,
                                                 const SystemOptions& options = {});

}  // namespace hcq::amd::emu
