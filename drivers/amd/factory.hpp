#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/registry.hpp"
#include "os/device_owner.hpp"
#include "os/kernel.hpp"
namespace hcq::amd {
DriverFactory factory();

namespace am {
class AmDriver;
}
// A GPU hcq boots itself: "am:<PCI address>" (bound to vfio-pci) or "emu:gfx1100_am" (the
// register-level emulated RX 7900 XTX, with its own emulated system); null for another name.
// `force_reset`: a mode-1 reset whatever state the GPU is found in.
std::unique_ptr<am::AmDriver> open_am_driver(const std::string& name, bool force_reset = false);

// "usb:<bus>-<port>" ("usb:2-1"): the GPU behind an ASM2464 bridge with tinygrad's custom
// firmware on that USB port of `kernel`, booted by the AM driver over the bridge
// (am/usb_function.hpp). InvalidInput for a malformed name: "bad device name 'usb:x':
// expected usb:<bus>-<port>, e.g. usb:2-1"; the other errors are open_usb_function's.
// `firmware_dir` as AmDriver takes it (empty: $HCQ_AM_FIRMWARE_DIR or /lib/firmware/amdgpu).
std::unique_ptr<am::AmDriver> open_usb_am_driver(std::shared_ptr<os::Kernel> kernel,
                                                 const std::string& name,
                                                 const std::string& firmware_dir = {},
                                                 bool force_reset = false);
// Who holds a device hcq drives itself, by the name it is opened by (os/device_owner.hpp):
// "am:<PCI address>", "usb:<port>" (HCQ_EMULATED_USB=1: the emulated machine's), and
// "emu:gfx1100_am" / "emu:gfx1100_usb", whose records are scoped to one emulated machine and
// so are found only with the holder's scope ($HCQ_EMULATED_SCOPE). Nothing for other names
// or when nobody holds it.
std::optional<os::DeviceHolder> device_holder(const std::string& name);
// Whether `port` is a USB port as sysfs names it: bus, '-', then port numbers joined by '.'
// ("2-1", "3-1.4").
bool is_usb_port(const std::string& port);
}
