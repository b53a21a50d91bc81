// Cubin program images for the NVIDIA driver (internal to drivers/nv): the file loaded and
// relocated in device memory, each kernel's QMD and launch prepared for the device's QMD
// version.
//
// Threads: a loaded image is read-only; kernels may be launched from several threads.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "core/driver.hpp"

namespace hcq {
class Device;
}

namespace hcq::nv {

class RmDriver;

std::unique_ptr<ProgramImage> load_cubin_image(Device& dev, RmDriver& drv,
                                               std::span<const std::byte> file);

}  // namespace hcq::nv
