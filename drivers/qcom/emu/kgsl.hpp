// An emulated KGSL (/dev/kgsl-3d0) behind the kernel boundary for one Adreno GPU of a chosen
// target, with the emulated GPU (Engine) running its contexts' submissions.
#pragma once

#include <memory>

#include "os/kernel.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom::emu {

// `io_coherent` false emulates a platform whose GPU does not snoop the CPU's caches: KGSL
// then drops KGSL_MEMFLAGS_IOCOHERENT from allocations, as the real one does.
std::shared_ptr<os::Kernel> make_emulated_system(const Target& target, bool io_coherent = true);

// Its kernel answers os::EmulatorReport::FaultLog with the emulated GPU's words about each
// context fault.

}  // namespace hcq::qcom::emu
