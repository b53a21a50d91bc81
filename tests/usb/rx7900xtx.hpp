// The emulated PCI system's RX 7900 XTX description, the GPU the USB tests put behind the
// ASM2464 (asm2464_topology).
#pragma once

#include <stdexcept>

#include "emulated_pci.hpp"

namespace hcq::usb {

inline os::EmulatedPciFunction rx7900xtx() {
  for (auto& f : emulated_pci_functions())
    if (f.address == "0000:01:00.0") return f;
  throw std::logic_error("the emulated PCI system has no RX 7900 XTX at 0000:01:00.0");
}

}  // namespace hcq::usb
