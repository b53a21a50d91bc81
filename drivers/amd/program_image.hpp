// How an AMDHSA code object lays out in an AMD device's memory: the part of Program both AMD
// drivers (kfd/, am/) share; lib/core's load_program allocates and copies.
//
// Thread safety: a pure function of its arguments; call from any thread.
#pragma once

#include <cstddef>
#include <span>

#include "core/driver.hpp"

namespace hcq::amd {

// Parses and checks an AMDHSA code object for the device `props` describes, and lays it out.
ProgramLayout amd_program_layout(const DeviceProperties& props, std::span<const std::byte> image);

}  // namespace hcq::amd
