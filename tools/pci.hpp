// The PCI bring-up commands: the PCI part of `hcq ls`, `hcq pci` and `hcq reg`.
// HCQ_EMULATED_PCI=1 points them at the emulated system of drivers/emulated_pci.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "json.hpp"

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

}  // namespace hcq::tools
