// The AmFunction of a GPU on vfio-pci (issue 17 item 7, moved out of AmDriver for issue 18):
// opened through VFIO, bus mastering enabled, BAR0 (VRAM) and BAR2 (doorbells) mapped whole,
// BAR5 (registers) mapped where VFIO lets it be, else reached by pread/pwrite
// (os::open_register_window), DMA to any host page through the IOMMU, the MSI through an
// eventfd. tinygrad's AMDev maps the same BARs (am/amdev.py: map_bar(0), map_bar(2),
// map_bar(5)).
//
// Threads: as AmFunction.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "amd/am/am_function.hpp"
#include "amd/am/gpu_memory.hpp"
#include "os/kernel.hpp"
#include "os/mmio.hpp"
#include "os/pci.hpp"
#include "os/vfio.hpp"

namespace hcq::amd::am {

inline constexpr int kVramBar = 0, kDoorbellBar = 2, kRegisterBar = 5;

class VfioFunction final : public AmFunction {
 public:
  // The register window of BAR5; empty: os::open_register_window.
  using RegisterWindow = std::function<std::unique_ptr<os::Mmio>(os::VfioDevice&, int bar)>;

  // Opens `fn` (bound to vfio-pci), enables bus mastering and maps the BARs. Throws what VFIO
  // throws.
  VfioFunction(std::shared_ptr<os::Kernel> kernel, const os::PciFunction& fn,
               const RegisterWindow& register_window = {});
  ~VfioFunction() override;

  const std::string& name() const override { return name_; }
  os::Mmio& registers() override { return *regs_; }
  VramPort& vram() override { return *vram_; }
  uint64_t doorbell_bytes() const override { return doorbells_.size; }
  // InvalidInput for a doorbell past BAR2.
  volatile uint64_t* doorbell_mapping(uint32_t index) override;
  void ring_doorbell(uint32_t index, uint64_t value) override;
  void set_bus_master(bool on) override;
  bool maps_host_memory() const override { return true; }
  void map_dma(void* host, uint64_t iova, uint64_t size) override;
  void unmap_dma(uint64_t iova, uint64_t size) override;
  void map_vram(void* at, uint64_t pa, uint64_t size) override;
  // None: every host page is reachable (maps_host_memory); the window calls throw InvalidInput.
  std::optional<HostWindow> host_window() const override { return std::nullopt; }
  void write_host_window(uint64_t offset, std::span<const std::byte> data) override;
  void read_host_window(uint64_t offset, std::span<std::byte> out) override;
  bool enable_msi(int eventfd) override;
  void disable_msi() override;

  os::VfioDevice& device() { return *device_; }

 private:
  struct Bar {
    os::VfioDevice* device = nullptr;
    void* base = nullptr;
    uint64_t size = 0;
    ~Bar();
  };

  std::string name_;
  std::unique_ptr<os::VfioDevice> device_;
  Bar vram_bar_, doorbells_;
  std::unique_ptr<MappedVram> vram_;
  std::unique_ptr<os::Mmio> regs_;
};

}  // namespace hcq::amd::am
