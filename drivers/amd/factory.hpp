#pragma once
#include <memory>
#include <string>

#include "core/registry.hpp"
namespace hcq::amd {
DriverFactory factory();

namespace am {
class AmDriver;
}
// A GPU hcq boots itself: "am:<PCI address>" (bound to vfio-pci) or "emu:gfx1100_am" (the
// register-level emulated RX 7900 XTX, with its own emulated system); null for another name.
// `force_reset`: a mode-1 reset whatever state the GPU is found in.
std::unique_ptr<am::AmDriver> open_am_driver(const std::string& name, bool force_reset = false);
}
