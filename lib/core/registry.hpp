// How lib/core finds drivers without naming vendors: each driver in drivers/ registers a
// factory; drivers/registry.cpp lists them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "os/pci.hpp"

namespace hcq {

// What a driver knows about its vendor's GPUs on the PCI bus (hcq ls, hcq pci, hcq reg).
struct PciSupport {
  uint16_t vendor = 0;      // PCI vendor ID; 0 when the driver's GPUs are not PCI functions
  std::string vendor_name;  // "NVIDIA"
  // The kernel drivers hcq opens this vendor's GPUs through, with the path each gives:
  // {"amdgpu", "KFD (amd:N)"}. (A GPU on vfio-pci opens through VFIO whatever its vendor.)
  std::vector<std::pair<std::string, std::string>> paths;
  // What to do when the GPU is on none of them: "hcq opens AMD GPUs through ...".
  std::string how;
  struct Register {
    std::string name;
    int bar = 0;
    uint64_t offset = 0;
    struct Field {
      std::string name;
      uint8_t lo = 0, width = 1;
      uint32_t get(uint32_t value) const {
        return (value >> lo) & (width == 32 ? 0xffffffffu : ((1u << width) - 1));
      }
    };
    std::vector<Field> fields;
    // Non-empty: why hcq will not touch it on this GPU (its BAR offset is not established
    // for the GPU's generation); the name is known so that the refusal can say so.
    std::string refused;
  };
  // The registers hcq knows on the vendor's GPU with PCI device ID `device`, in BAR order
  // of offset where readable.
  std::function<std::vector<Register>(uint16_t device)> registers;
  // Registers whose offsets the GPU itself tells (AMD: its IP discovery table), read through
  // its BARs; throws Error saying why they cannot be read. Unset: none.
  std::function<std::vector<Register>(std::shared_ptr<os::Kernel>, const os::PciFunction&)>
      discovered_registers;
  // The BAR a bare offset goes to without --bar.
  int register_bar = 0;
  // What a register value means, in a few words; empty when nothing is known.
  std::function<std::string(const std::string& name, uint32_t value)> describe;
  // The device name under which hcq boots the function itself, without a vendor kernel driver
  // ("am:0000:03:00.0"); empty when hcq cannot boot that device (or unset).
  std::function<std::string(const std::string& address, uint16_t device)> boot_name;
};

struct DriverFactory {
  std::string name;  // "amd"
  // Devices this driver can open here (real first, then emulated).
  std::function<std::vector<Device::Listing>()> list;
  // The driver for `device_name`, or null when the name is not this driver's.
  std::function<std::unique_ptr<DeviceDriver>(const std::string& device_name)> open;
  PciSupport pci;
};

// Defined in drivers/registry.cpp.
const std::vector<DriverFactory>& builtin_drivers();

}  // namespace hcq
