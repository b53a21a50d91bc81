// The PCI bring-up commands: the PCI part of `hcq ls`, `hcq pci` and `hcq reg`.
// HCQ_EMULATED_PCI=1 points them at the emulated system of drivers/emulated_pci.hpp.
#pragma once

#include <string>
#include <vector>

namespace hcq::tools {

// Every GPU on the bus (every function with `all`), its driver and the hcq path to it.
int cmd_ls_pci(bool all);
// hcq pci DEVICE [--json] [--unbind|--bind-vfio [--force]]: binding changes take a GPU or
// a processing accelerator; anything else needs --force.
int cmd_pci(const std::vector<std::string>& args);
// hcq reg DEVICE read|write OFFSET|NAME [VALUE] [--bar N] [--force]
int cmd_reg(const std::vector<std::string>& args);

}  // namespace hcq::tools
