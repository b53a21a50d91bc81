// GPU virtual memory of an emulated device, shared by every emulated GPU. GPU addresses equal
// the host addresses the emulated kernel driver backed them with, so translation is a bounds
// check against the mappings.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <utility>

#include "emu/kernels.hpp"

namespace hcq::emu {

// A GPU's view of memory as an emulated engine reads it: translation, and the mapping an
// address lies in (the engine reads a whole code object through it). Memory implements it
// for GPUs behind an emulated kernel driver; the register-level AM GPU implements it with its
// MMU walking the driver's page tables.
class GpuAddressSpace : public AddressSpace {
 public:
  // The mapping containing va: {base, size}; {0, 0} when none.
  virtual std::pair<uint64_t, uint64_t> mapping_of(uint64_t va) const = 0;
};

class Memory final : public GpuAddressSpace {
 public:
  // Throws hcq::InvalidInput for an empty, wrapping or overlapping range.
  void map(uint64_t va, uint64_t size);
  void unmap(uint64_t va);
  // Throws Fault naming the address when [va, va+size) is not inside one mapping.
  void* translate(uint64_t va, uint64_t size) const override;
  std::pair<uint64_t, uint64_t> mapping_of(uint64_t va) const override;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, uint64_t> maps_;  // base -> size
};

}  // namespace hcq::emu
