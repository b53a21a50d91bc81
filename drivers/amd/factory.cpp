// The AMD driver's entry in the driver registry: "amd:N" opens the N-th KFD GPU of this
// machine, "am:<PCI address>" a GPU on vfio-pci that hcq boots itself (am/am_driver.hpp),
// "usb:<bus>-<port>" a GPU behind an ASM2464 USB bridge that hcq boots itself over the bridge,
// "emu:<gfx target>" an emulated AMD GPU of that target (emu:gfx1100_usb: one behind a USB
// bridge as KFD would see it, which cannot reach host memory).
#include "amd/factory.hpp"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <iterator>

#include "amd/am/am_driver.hpp"
#include "amd/am/usb_function.hpp"
#include "usb/emu/usb_system.hpp"
#include "amd/emu/am_system.hpp"
#include "amd/emu/kfd.hpp"
#include "amd/kfd/kfd_driver.hpp"
#include "amd/pci.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"
#include "os/device_owner.hpp"
#include "os/emulated_kernel.hpp"
#include "os/pci.hpp"

namespace hcq::amd {
namespace {

// The register-level emulated gfx1100 that hcq boots itself: on an emulated vfio-pci
// ("emu:gfx1100_am"), and behind the emulated ASM2464 USB bridge ("emu:gfx1100_usb", the
// same machine usb:2-1 opens with HCQ_EMULATED_USB=1).
constexpr const char* kAmSuffix = "_am";
constexpr const char* kUsbSuffix = "_usb";

// The ownership key of the GPU behind the bridge on USB `port` (os/device_owner.hpp).
std::string usb_owner_key(const std::string& port) { return "usb." + port; }

// The AM driver over the bridge on `port` of `kernel`, its device called `name`.
std::unique_ptr<am::AmDriver> boot_over_usb(std::shared_ptr<os::Kernel> kernel,
                                            const std::string& port, const std::string& name,
                                            const std::string& firmware_dir, bool force_reset) {
  // Claimed before the bridge is touched (os/device_owner.hpp).
  auto owner = std::make_unique<os::DeviceOwner>(*kernel, usb_owner_key(port), name);
  std::unique_ptr<am::UsbFunction> function = am::open_usb_function(kernel, port, name);
  am::AmDriverOptions options;
  options.boot.force_reset = force_reset;
  return std::make_unique<am::AmDriver>(std::move(kernel), std::move(function), firmware_dir,
                                        name, std::move(options), std::move(owner));
}
}  // namespace

std::unique_ptr<am::AmDriver> open_am_driver(const std::string& name, bool force_reset) {
  am::AmDriverOptions options;
  options.boot.force_reset = force_reset;
  if (name.rfind("am:", 0) == 0) {
    if (!am::is_pci_address(name.substr(3)))
      throw InvalidInput("bad device name '" + name +
                         "': expected am:<domain:bus:device.function>, e.g. am:0000:03:00.0");
    return std::make_unique<am::AmDriver>(os::real_kernel(), name.substr(3), "", name,
                                          std::move(options));
  }
  if (name == std::string("emu:gfx1100") + kUsbSuffix) {
    // The same GPU behind the emulated ASM2464 bridge (usb/emu/usb_system.hpp), booted by the
    // am: driver over TLPs: the CPU maps none of its memory and it reaches only the bridge's
    // SRAM window, as over USB 3.
    std::shared_ptr<usb::emu::UsbEmulatedSystem> system = usb::emu::make_usb_emulated_system();
    std::shared_ptr<os::Kernel> kernel(system, system->kernel().get());
    return boot_over_usb(std::move(kernel), usb::emu::UsbEmulatedSystem::kPort, name,
                         system->firmware_dir(), force_reset);
  }
  if (name == std::string("emu:gfx1100") + kAmSuffix) {
    // The register-level emulated RX 7900 XTX on an emulated vfio-pci, booted by the am:
    // driver with the system's synthesized firmware. The driver's kernel keeps the whole
    // system alive.
    std::shared_ptr<emu::AmEmulatedSystem> system = emu::make_am_emulated_system();
    std::shared_ptr<os::Kernel> kernel(system, system->kernel().get());
    const std::string address = emu::AmEmulatedSystem::kAddress, dir = system->firmware_dir();
    return std::make_unique<am::AmDriver>(std::move(kernel), address, dir, name,
                                          std::move(options));
  }
  return nullptr;
}

bool is_usb_port(const std::string& port) {
  // Digits, one '-', then digit groups separated by '.' (Linux drivers/usb/core/usb.c names
  // a device "<bus>-<port>[.<port>...]").
  const size_t dash = port.find('-');
  if (dash == 0 || dash == std::string::npos) return false;
  for (size_t i = 0; i < dash; i++)
    if (!std::isdigit(static_cast<unsigned char>(port[i]))) return false;
  bool digit_before = false;
  for (size_t i = dash + 1; i < port.size(); i++) {
    if (std::isdigit(static_cast<unsigned char>(port[i]))) {
      digit_before = true;
    } else if (port[i] == '.' && digit_before) {
      digit_before = false;
    } else {
      return false;
    }
  }
  return digit_before;
}


std::unique_ptr<am::AmDriver> open_usb_am_driver(std::shared_ptr<os::Kernel> kernel,
                                                 const std::string& name,
                                                 const std::string& firmware_dir,
                                                 bool force_reset) {
  const std::string port = name.rfind("usb:", 0) == 0 ? name.substr(4) : std::string();
  if (!is_usb_port(port))
    throw InvalidInput("bad device name '" + name +
                       "': expected usb:<bus>-<port>, e.g. usb:2-1");
  return boot_over_usb(std::move(kernel), port, name, firmware_dir, force_reset);
}

std::optional<os::DeviceHolder> device_holder(const std::string& name) {
  const auto emulated_holder = [](const std::string& key) {
    const os::EmulatedKernel scope;  // only its kind and scope are looked at
    return os::device_holder(scope, key);
  };
  if (name.rfind("am:", 0) == 0 && am::is_pci_address(name.substr(3)))
    return os::device_holder(*os::real_kernel(), name.substr(3));
  if (name.rfind("usb:", 0) == 0 && is_usb_port(name.substr(4))) {
    if (usb::emu::emulated_usb_requested()) return emulated_holder(usb_owner_key(name.substr(4)));
    return os::device_holder(*os::real_kernel(), usb_owner_key(name.substr(4)));
  }
  if (name == std::string("emu:gfx1100") + kAmSuffix)
    return emulated_holder(emu::AmEmulatedSystem::kAddress);
  if (name == std::string("emu:gfx1100") + kUsbSuffix)
    return emulated_holder(usb_owner_key(usb::emu::UsbEmulatedSystem::kPort));
  return std::nullopt;
}

DriverFactory factory() {
  DriverFactory f;
  f.name = "amd";
  f.pci = pci_support();
  f.list = [] {
    std::vector<Device::Listing> out;
    auto nodes = kfd_gpu_nodes(*os::real_kernel());
    for (size_t i = 0; i < nodes.size(); i++)
      out.push_back({"amd:" + std::to_string(i), "AMD " + nodes[i].target + " (KFD)", false});
    // GPUs on vfio-pci that hcq boots itself (am:<PCI address>); a machine whose PCI bus
    // cannot be read lists none.
    std::vector<os::PciFunction> functions;
    try {
      functions = os::pci_functions(*os::real_kernel());
    } catch (const Error&) {
    }
    for (const os::PciFunction& fn : functions) {
      const std::string boot = fn.driver == "vfio-pci" && fn.vendor == kPciVendor
                                   ? pci_support().boot_name(fn.address, fn.device)
                                   : std::string();
      if (!boot.empty())
        out.push_back({boot, "AMD " + find_target_by_device_id(fn.device)->name +
                                 " on vfio-pci, booted by hcq",
                       false});
    }
    for (auto& t : targets()) out.push_back({"emu:" + t.name, t.marketing_name, true});
    out.push_back({std::string("emu:gfx1100") + kUsbSuffix,
                   find_target("gfx1100")->marketing_name +
                       ", booted by hcq behind an emulated ASM2464 USB bridge",
                   true});
    out.push_back({std::string("emu:gfx1100") + kAmSuffix,
                   find_target("gfx1100")->marketing_name + ", booted by hcq over emulated vfio-pci",
                   true});
    return out;
  };
  f.open = [](const std::string& name) -> std::unique_ptr<DeviceDriver> {
    if (name.rfind("amd:", 0) == 0) {
      std::string idx = name.substr(4);
      if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos)
        throw InvalidInput("bad device name '" + name + "': expected amd:<index>");
      return open_kfd_device(os::real_kernel(), std::stoi(idx), name);
    }
    if (auto am = open_am_driver(name)) return am;
    if (name.rfind("usb:", 0) == 0) {
      // HCQ_EMULATED_USB=1 (as for hcq usb): the emulated machine of usb/emu/usb_system.hpp,
      // its bridge on port 2-1 with the register-level RX 7900 XTX behind it; the driver's
      // kernel keeps the whole system alive.
      if (!usb::emu::emulated_usb_requested()) return open_usb_am_driver(os::real_kernel(), name);
      std::shared_ptr<usb::emu::UsbEmulatedSystem> system = usb::emu::make_usb_emulated_system();
      std::shared_ptr<os::Kernel> kernel(system, system->kernel().get());
      return open_usb_am_driver(std::move(kernel), name, system->firmware_dir());
    }
    if (name.rfind("emu:", 0) == 0) {
      const Target* t = find_target(name.substr(4));
      if (!t) return nullptr;  // maybe another vendor's emulated target
      return open_kfd_device(emu::make_emulated_system(*t), 0, name);
    }
    return nullptr;
  };
  return f;
}

}  // namespace hcq::amd
