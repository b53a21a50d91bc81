// An emulated NVIDIA kernel driver behind the kernel boundary: /dev/nvidiactl and
// /dev/nvidia0 (RM: the object tree, controls, memory and its CPU mappings) and
// /dev/nvidia-uvm (GPU mappings at the addresses the driver chose), for one GPU of a chosen
// target, with the emulated GPU (Engine) running its channels.
#pragma once

#include <memory>

#include "nv/targets.hpp"
#include "os/kernel.hpp"

namespace hcq::nv::emu {

// `rm_version`: what the emulated module reports; the layouts that changed between 580 and
// 595 (nv/rm_abi.hpp) follow it.
std::shared_ptr<os::Kernel> make_emulated_system(const Target& target,
                                                 const std::string& rm_version = "595.45.04");

}  // namespace hcq::nv::emu
