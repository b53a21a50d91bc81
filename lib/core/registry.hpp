// How lib/core finds drivers without naming vendors: each driver in drivers/ registers a
// factory; drivers/registry.cpp lists them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"

namespace hcq {

struct DriverFactory {
  std::string name;  // "amd"
  // Devices this driver can open here (real first, then emulated).
  std::function<std::vector<Device::Listing>()> list;
  // The driver for `device_name`, or null when the name is not this driver's.
  std::function<std::unique_ptr<DeviceDriver>(const std::string& device_name)> open;
};

// Defined in drivers/registry.cpp.
const std::vector<DriverFactory>& builtin_drivers();

}  // namespace hcq
