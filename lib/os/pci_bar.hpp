// A PCI BAR mapped into the process through its sysfs resource file (resourceN, or
// resourceN_wc for a write-combined map of a prefetchable BAR), with bounds-checked 32-bit
// register access: the MMIO peek and poke of bring-up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "os/kernel.hpp"
#include "os/pci.hpp"

namespace hcq::os {

class PciBarMap {
 public:
  // Throws InvalidInput when the function has no such memory BAR, OsError naming the file
  // when the kernel refuses (EACCES: mapping BARs needs root).
  PciBarMap(std::shared_ptr<Kernel> k, const PciFunction& fn, int bar, bool write_combined = false);
  ~PciBarMap();
  PciBarMap(const PciBarMap&) = delete;
  PciBarMap& operator=(const PciBarMap&) = delete;

  uint64_t size() const { return size_; }
  // Throw InvalidInput for an offset that is not 4-byte aligned or leaves the BAR.
  uint32_t read32(uint64_t offset) const;
  void write32(uint64_t offset, uint32_t value);

 private:
  volatile uint32_t* reg(uint64_t offset) const;
  std::shared_ptr<Kernel> k_;
  std::string what_;  // "BAR0 of 0000:07:00.0"
  void* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace hcq::os
