#include "amd/emu/am_system.hpp"

#include <sys/mman.h>

#include "os/emulated_vfio.hpp"

namespace hcq::amd::emu {

AmEmulatedSystem::AmEmulatedSystem(AmSystemOptions options)
    : registers_(std::make_shared<AmRegisterBar>()), vram_bytes_(options.vram_bytes) {
  using F = os::EmulatedPciFunction;
  F host;
  host.address = "0000:00:00.0";
  host.vendor = 0x8086;
  host.device = 0x9a14;  // Intel Tiger Lake host bridge (pci.ids), as drivers/emulated_pci.cpp
  host.class_code = 0x060000;
  host.port = os::PciPort::None;
  host.iommu_group = 0;
  F port;
  port.address = "0000:00:01.0";
  port.vendor = 0x8086;
  port.device = 0x9a09;  // its PCIe root port
  port.class_code = 0x060400;
  port.port = os::PciPort::RootPort;
  port.link = {4, 16, 4, 16};
  port.driver = "pcieport";
  port.iommu_group = 1;
  F gpu = am_gpu_function(options.vram_bytes, registers_);
  gpu.address = kAddress;
  gpu.parent = port.address;
  gpu.driver = "vfio-pci";
  gpu.iommu_group = kIommuGroup;
  gpu.numa_node = 0;
  gpu.on_reset = [this] { model_->gpu().function_reset(); };
  // MSI through VFIO; a driver going to sleep on it makes the engines look at their
  // doorbells (a real GPU sees a doorbell write at once; the emulated one polls).
  gpu.msi = true;
  gpu.on_interrupt_wait = [this] {
    if (model_) model_->gfx().kick();
  };
  bus_ = std::make_unique<os::EmulatedPciBus>(std::vector<F>{host, port, gpu});

  struct Undo {
    AmEmulatedSystem* s;
    ~Undo() {
      if (!s) return;
      if (s->vram_) ::munmap(s->vram_, s->vram_bytes_);
      if (s->doorbells_) ::munmap(s->doorbells_, AmGpu::kDoorbellBarBytes);
    }
  } undo{this};
  vram_ = map_emulated_bar(bus_->bar(kAddress, 0), options.vram_bytes);
  doorbells_ = map_emulated_bar(bus_->bar(kAddress, 2), AmGpu::kDoorbellBarBytes);
  os::EmulatedVfio* vfio = &bus_->vfio();
  AmGpuWiring wiring;
  wiring.registers = registers_;
  wiring.vram = std::span(static_cast<uint8_t*>(vram_), options.vram_bytes);
  wiring.doorbells = std::span(static_cast<uint8_t*>(doorbells_), AmGpu::kDoorbellBarBytes);
  wiring.dma = [vfio](uint64_t iova, uint64_t size) -> void* {
    return vfio->bus_master(kAddress) ? vfio->translate(iova, size) : nullptr;
  };
  // VFIO turns the MSI into the driver's eventfd signal.
  wiring.msi = [vfio] { vfio->interrupt(kAddress); };
  wiring.firmware = options.firmware;
  wiring.discovery = std::move(options.discovery);
  wiring.register_tables = options.register_tables;
  model_ = std::make_unique<AmEmulatedGpu>(std::move(wiring));
  model_->publish(*bus_->kernel());
  undo.s = nullptr;
}

AmEmulatedSystem::~AmEmulatedSystem() {
  // The engines stop first (they read memory through the GMC's MMU and the VFIO mappings).
  model_.reset();
  ::munmap(vram_, vram_bytes_);
  ::munmap(doorbells_, AmGpu::kDoorbellBarBytes);
}

std::unique_ptr<AmEmulatedSystem> make_am_emulated_system(AmSystemOptions options) {
  return std::make_unique<AmEmulatedSystem>(options);
}

}  // namespace hcq::amd::emu
