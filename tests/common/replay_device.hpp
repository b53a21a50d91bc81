// The device a replay test captures on, in the process that replays it afterwards.
#pragma once

#include <memory>
#include <string>

#include "core/device.hpp"
#include "core/error.hpp"

namespace hcq::testing_support {

// Where the driver puts its addresses wherever mmap does (KFD, AM, msm), they are placed high
// in the address space instead, where nothing else of this process maps after the device
// closes: the replay, in this same process, needs them free again (`hcq replay` runs in a
// process of its own). Other drivers choose low, fixed ranges and open as usual. `slot` picks
// one of several such places (captures replayed side by side).
inline std::unique_ptr<Device> open_for_capture(const std::string& device, uint32_t slot = 0) {
  Device::Options o;
  o.va_base = ((0x3000ull + 0x100ull * slot) << 32) + (4ull << 30);
  try {
    return Device::open(device, o);
  } catch (const InvalidInput&) {
    return Device::open(device);
  }
}

}  // namespace hcq::testing_support
