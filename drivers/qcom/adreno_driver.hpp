// The Adreno driver over a kernel driver (KGSL on Android and Qualcomm Linux kernels, msm DRM
// on mainline Linux; kmd.hpp): buffers at the same address for CPU and GPU inside the range
// the kernel allows, a command ring whose submissions are indirect-buffer lists, fences for
// sleeping and reclaiming, faults and hang reports, ir3 programs from hcq's container.
// Everything goes through the kernel boundary, so the same code drives real kernels and the
// emulated ones.
#pragma once

#include <memory>
#include <string>

#include "core/driver.hpp"
#include "os/kernel.hpp"
#include "qcom/kmd.hpp"

namespace hcq::qcom {

// Opens the Adreno GPU behind `kmd`; `device_name` is the name it reports ("qcom:0",
// "emu:a660"). `kernel` is the boundary the Kmd uses.
std::unique_ptr<DeviceDriver> open_adreno_device(std::shared_ptr<os::Kernel> kernel,
                                                 std::unique_ptr<Kmd> kmd,
                                                 const std::string& device_name);

}  // namespace hcq::qcom
