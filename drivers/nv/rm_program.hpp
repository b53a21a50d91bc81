// Cubin program layouts for the NVIDIA driver (internal to drivers/nv): the file placed in
// device memory and relocated there, each kernel's QMD and launch prepared for the device's
// QMD version once placed (lib/core's load_program allocates and copies).
//
// Threads: a loaded image is read-only; kernels may be launched from several threads.
#pragma once

#include <cstddef>
#include <span>

#include "core/driver.hpp"

namespace hcq::nv {

class RmDriver;

ProgramLayout cubin_layout(const RmDriver& drv, std::span<const std::byte> file);

}  // namespace hcq::nv
