// Emulated VFIO (the container/group interface of Linux include/uapi/linux/vfio.h): the
// container /dev/vfio/vfio with a type1 IOMMU and its DMA mappings, a group node per IOMMU
// group with a function bound to vfio-pci, and device fds whose regions are the functions'
// emulated BARs and whose reset restores their registers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "os/emulated_kernel.hpp"

namespace hcq::os {

class EmulatedPciBus;

class EmulatedVfio {
 public:
  EmulatedVfio(EmulatedPciBus& bus, EmulatedKernel& kernel);
  // Makes /dev/vfio/<group> openable (a function of the group was bound to vfio-pci).
  void add_group(int group);
  // The host memory a device address maps to through any container's DMA mappings, as the
  // device side of a DMA sees it; null when [iova, iova + size) is not inside one mapping.
  void* translate(uint64_t iova, uint64_t size) const;
  int resets(const std::string& address) const;

  // Used by the emulated nodes.
  struct Dma {
    uint64_t vaddr, size;
  };
  std::map<uint64_t, Dma>& dma() { return dma_; }  // iova -> mapping, under mu()
  std::mutex& mu() const { return mu_; }
  void count_reset(const std::string& address);
  EmulatedPciBus& bus() { return bus_; }
  EmulatedKernel& kernel() { return kernel_; }

 private:
  EmulatedPciBus& bus_;
  EmulatedKernel& kernel_;
  mutable std::mutex mu_;
  std::set<int> groups_;
  std::map<uint64_t, Dma> dma_;
  std::map<std::string, int> resets_;
};

}  // namespace hcq::os
