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

class Memory final : public AddressSpace {
 public:
  // Throws hcq::InvalidInput for an empty, wrapping or overlapping range.
  void map(uint64_t va, uint64_t size);
  void unmap(uint64_t va);
  // Throws Fault naming the address when [va, va+size) is not inside one mapping.
  void* translate(uint64_t va, uint64_t size) const override;
  // The mapping containing va: {base, size}; {0, 0} when none.
  std::pair<uint64_t, uint64_t> mapping_of(uint64_t va) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, uint64_t> maps_;  // base -> size
};

}  // namespace hcq::emu
