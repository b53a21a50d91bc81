// A PCI BAR mapped into the process through its sysfs resource file (resourceN, or
// resourceN_wc for a write-combined map of a prefetchable BAR), with bounds-checked 32-bit
// register access: the MMIO peek and poke of bring-up. It is an os::Mmio register window
// (os/mmio.hpp: its checks, range accesses and thread rules).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "os/kernel.hpp"
#include "os/mmio.hpp"
#include "os/pci.hpp"

namespace hcq::os {

class PciBarMap : public MappedMmio {
 public:
  // Throws InvalidInput when the function has no such memory BAR, OsError naming the file
  // when the kernel refuses (EACCES: mapping BARs needs root).
  PciBarMap(std::shared_ptr<Kernel> k, const PciFunction& fn, int bar, bool write_combined = false);
  ~PciBarMap() override;
  PciBarMap(const PciBarMap&) = delete;
  PciBarMap& operator=(const PciBarMap&) = delete;

 private:
  std::shared_ptr<Kernel> k_;
};

}  // namespace hcq::os
