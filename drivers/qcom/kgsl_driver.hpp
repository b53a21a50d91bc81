// The Adreno driver over KGSL (/dev/kgsl-3d0, Android and Qualcomm Linux kernels): a draw
// context for compute, GPU objects mapped at the same address for CPU and GPU (SVM), command
// buffers submitted as indirect-buffer lists with GPU_COMMAND, context timestamps for sleeping
// and reclaiming, ir3 programs from hcq's container. Everything goes through the kernel
// boundary, so the same code drives a real KGSL and the emulated one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "os/kernel.hpp"

namespace hcq::qcom {

// Opens the KGSL GPU; `device_name` is the name it reports ("qcom:0", "emu:a660").
std::unique_ptr<DeviceDriver> open_kgsl_device(std::shared_ptr<os::Kernel> kernel,
                                               const std::string& device_name);

// "Adreno 660 (KGSL)" when this machine has /dev/kgsl-3d0; empty otherwise.
std::vector<std::string> kgsl_gpus(os::Kernel& kernel);

}  // namespace hcq::qcom
