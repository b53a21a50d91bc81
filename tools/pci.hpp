// The PCI bring-up commands: the PCI part of `hcq ls`, `hcq pci` and `hcq reg`.
// HCQ_EMULATED_PCI=1 points them at the emulated system of drivers/emulated_pci.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "json.hpp"
#include "os/mmio.hpp"

namespace hcq::tools {

// Every GPU on the bus (every function with `all`), its driver and the hcq path to it.
int cmd_ls_pci(bool all);
// The same as JSON: an array of {address, vendor, device, class, gpu, driver, hcq_path}.
Json ls_pci_json(bool all);

// hcq pci DEVICE [--json] [--unbind|--bind-vfio [--force]]: binding changes take a GPU or
// a processing accelerator; anything else needs --force.
struct PciArgs {
  std::string device;
  bool json = false, unbind = false, bind_vfio = false, force = false;
};
int cmd_pci(const PciArgs& args);

// hcq reg DEVICE read NAME|OFFSET [--count N] [--json] | write NAME|OFFSET VALUE --force |
// list [PATTERN]; --bar N for an offset outside the vendor's register BAR.
struct RegArgs {
  std::string device, action, target;  // target: the register, or list's pattern
  std::optional<uint32_t> value;
  std::optional<int> bar;
  std::optional<uint32_t> count;
  bool force = false, json = false;
};
int cmd_reg(const RegArgs& args);

// What `hcq reg` acts on, wherever the GPU is (the PCI bus, behind a USB bridge): its name in
// messages, its IDs, the registers hcq knows on it (and why the ones its discovery table
// places are missing, if they are) and a way to open a BAR as an os::Mmio.
struct RegDevice {
  std::string address;  // "0000:03:00.0", "usb:2-1 04:00.0"
  uint16_t vendor = 0, device = 0;
  std::vector<PciSupport::Register> known;
  std::string undiscovered;
  std::function<std::unique_ptr<os::Mmio>(int bar)> open_bar;
};
// The usage checks that need no device (usage errors come before any device is opened).
void check_reg_args(const RegArgs& args);
// Registers a GPU's discovery table places replace the known ones of the same name.
void add_discovered(RegDevice& d, std::vector<PciSupport::Register> found);
// read, write or list on `d`, as cmd_reg does on a PCI function.
int reg_on(const RegArgs& args, RegDevice& d);

}  // namespace hcq::tools
