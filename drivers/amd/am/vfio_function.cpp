#include "amd/am/vfio_function.hpp"

#include <linux/pci_regs.h>

#include "core/error.hpp"

namespace hcq::amd::am {

VfioFunction::Bar::~Bar() {
  if (base) device->unmap_region(base, size);
}

VfioFunction::VfioFunction(std::shared_ptr<os::Kernel> kernel, const os::PciFunction& fn,
                           const RegisterWindow& register_window)
    : name_(fn.address), device_(std::make_unique<os::VfioDevice>(std::move(kernel), fn)) {
  device_->enable_bus_master();
  for (auto [bar, index] : {std::pair{&vram_bar_, kVramBar}, {&doorbells_, kDoorbellBar}}) {
    bar->device = device_.get();
    bar->size = device_->region(uint32_t(index)).size;
    bar->base = device_->map_region(uint32_t(index));
  }
  vram_ = std::make_unique<MappedVram>(static_cast<std::byte*>(vram_bar_.base), vram_bar_.size);
  // The register window: mapped where VFIO lets BAR5 be mapped, else pread/pwrite.
  regs_ = register_window ? register_window(*device_, kRegisterBar)
                          : os::open_register_window(*device_, kRegisterBar);
}

// The register window and the BARs go before the device that maps them (members in reverse).
VfioFunction::~VfioFunction() = default;

volatile uint64_t* VfioFunction::doorbell_mapping(uint32_t index) {
  if ((uint64_t(index) + 1) * 8 > doorbells_.size)
    throw InvalidInput(name_ + ": doorbell " + std::to_string(index) + " is past the " +
                       hex(doorbells_.size) + " bytes of BAR2");
  return reinterpret_cast<volatile uint64_t*>(static_cast<char*>(doorbells_.base) +
                                              uint64_t(index) * 8);
}

void VfioFunction::ring_doorbell(uint32_t index, uint64_t value) {
  *doorbell_mapping(index) = value;
}

void VfioFunction::set_bus_master(bool on) {
  const uint16_t cmd = device_->config16(PCI_COMMAND);
  device_->set_config16(PCI_COMMAND, on ? cmd | PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY
                                        : cmd & ~PCI_COMMAND_MASTER);
}

void VfioFunction::map_dma(void* host, uint64_t iova, uint64_t size) {
  device_->map_dma(host, iova, size);
}

void VfioFunction::unmap_dma(uint64_t iova, uint64_t size) { device_->unmap_dma(iova, size); }

void VfioFunction::map_vram(void* at, uint64_t pa, uint64_t size) {
  device_->map_region_at(kVramBar, pa, size, at);
}

void VfioFunction::write_host_window(uint64_t, std::span<const std::byte>) {
  throw InvalidInput(name_ + ": no host window: the device reaches host memory through the IOMMU");
}

void VfioFunction::read_host_window(uint64_t, std::span<std::byte>) {
  throw InvalidInput(name_ + ": no host window: the device reaches host memory through the IOMMU");
}

bool VfioFunction::enable_msi(int eventfd) { return device_->enable_msi(eventfd); }

void VfioFunction::disable_msi() { device_->disable_msi(); }

}  // namespace hcq::amd::am
