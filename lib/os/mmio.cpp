#include "os/mmio.hpp"

#include "core/error.hpp"
#include "os/vfio.hpp"

namespace hcq::os {

void Mmio::check(uint64_t offset, uint64_t bytes) const {
  if (offset % 4) throw InvalidInput(hex(offset) + " is not a 32-bit register offset (" + name() + ")");
  const uint64_t window = size();
  if (offset >= window || window - offset < bytes) {
    if (bytes == 4) throw InvalidInput(hex(offset) + " is outside " + name() + " (" + hex(window) + " bytes)");
    throw InvalidInput("[" + hex(offset) + ", +" + hex(bytes) + ") is outside " + name() + " (" +
                       hex(window) + " bytes)");
  }
}

uint32_t Mmio::read32(uint64_t offset) {
  check(offset, 4);
  return do_read32(offset);
}

void Mmio::write32(uint64_t offset, uint32_t value) {
  check(offset, 4);
  do_write32(offset, value);
}

void Mmio::read(uint64_t offset, std::span<uint32_t> out) {
  if (out.empty()) return;
  check(offset, out.size_bytes());
  for (size_t i = 0; i < out.size(); ++i) out[i] = do_read32(offset + 4 * i);
}

void Mmio::write(uint64_t offset, std::span<const uint32_t> values) {
  if (values.empty()) return;
  check(offset, values.size_bytes());
  for (size_t i = 0; i < values.size(); ++i) do_write32(offset + 4 * i, values[i]);
}

namespace {
void check_bar(const VfioDevice& device, int bar) {
  if (bar < 0 || bar > 5) throw InvalidInput(device.address() + ": BAR" + std::to_string(bar) + " does not exist (0 to 5)");
}
}  // namespace

VfioRegionMmio::VfioRegionMmio(VfioDevice& device, int bar)
    : MappedMmio("BAR" + std::to_string(bar) + " of " + device.address()), device_(device) {
  check_bar(device, bar);
  // vfio-pci numbers its regions BAR0..BAR5 first (VFIO_PCI_BAR0_REGION_INDEX = 0).
  const uint64_t size = device.region(uint32_t(bar)).size;
  attach(device.map_region(uint32_t(bar)), size);
}

VfioRegionMmio::~VfioRegionMmio() { device_.unmap_region(base(), size()); }

VfioRegionRwMmio::VfioRegionRwMmio(VfioDevice& device, int bar)
    : device_(device), name_("BAR" + std::to_string(bar) + " of " + device.address()) {
  check_bar(device, bar);
  region_ = device.region(uint32_t(bar));
  if (!region_.readable || !region_.writable || !region_.size)
    throw InvalidInput(device.address() + ": VFIO region " + std::to_string(bar) + " cannot be read and written");
}

uint32_t VfioRegionRwMmio::do_read32(uint64_t offset) {
  return device_.read_region32(region_, offset);
}

void VfioRegionRwMmio::do_write32(uint64_t offset, uint32_t value) {
  device_.write_region32(region_, offset, value);
}

std::unique_ptr<Mmio> open_register_window(VfioDevice& device, int bar) {
  check_bar(device, bar);
  if (device.region(uint32_t(bar)).mappable) return std::make_unique<VfioRegionMmio>(device, bar);
  return std::make_unique<VfioRegionRwMmio>(device, bar);
}

IndexDataRegs::IndexDataRegs(Mmio& mmio, IndexDataLayout layout) : mmio_(mmio), layout_(std::move(layout)) {
  auto in_window = [&](uint64_t reg) {
    if (reg % 4 || reg >= mmio_.size() || mmio_.size() - reg < 4)
      throw InvalidInput(layout_.name + ": register " + hex(reg) + " is outside " + mmio_.name() +
                         " (" + hex(mmio_.size()) + " bytes)");
  };
  in_window(layout_.index);
  in_window(layout_.data);
  if (layout_.index_hi) in_window(layout_.index_hi);
  if (layout_.reaches_vram) {
    in_window(layout_.vram_index_hi);
    const uint64_t select = layout_.address_limit;
    if (select == 0 || (select & (select - 1)) || select > (uint64_t(1) << 31))
      throw InvalidInput(layout_.name + ": address limit " + hex(select) +
                         " cannot select VRAM (a power of two up to 0x80000000)");
  }
}

void IndexDataRegs::select(uint64_t address) {
  if (address >= layout_.address_limit)
    throw InvalidInput(layout_.name + ": address " + hex(address) + " is beyond the index's reach (below " +
                       hex(layout_.address_limit) + ")");
  if (address >> 32) {
    mmio_.write32(layout_.index_hi, uint32_t(address >> 32));
    if (layout_.read_back_index) mmio_.read32(layout_.index_hi);
  }
  mmio_.write32(layout_.index, uint32_t(address));
  if (layout_.read_back_index) mmio_.read32(layout_.index);
}

void IndexDataRegs::unselect_hi(uint64_t address) {
  // Linux clears PCIE_INDEX2_HI after an access above 4 GiB so plain 32-bit accesses that
  // follow see a zero high part (amdgpu_device_indirect_rreg_ext).
  if (address >> 32) {
    mmio_.write32(layout_.index_hi, 0);
    if (layout_.read_back_index) mmio_.read32(layout_.index_hi);
  }
}

uint32_t IndexDataRegs::read32(uint64_t address) {
  std::lock_guard lock(mutex_);
  select(address);
  const uint32_t value = mmio_.read32(layout_.data);
  unselect_hi(address);
  return value;
}

void IndexDataRegs::write32(uint64_t address, uint32_t value) {
  std::lock_guard lock(mutex_);
  select(address);
  mmio_.write32(layout_.data, value);
  if (layout_.read_back_data) mmio_.read32(layout_.data);
  unselect_hi(address);
}

namespace {

void check_vram_access(const IndexDataLayout& l, uint64_t address) {
  if (!l.reaches_vram) throw InvalidInput(l.name + " does not reach VRAM");
  if (address % 4) throw InvalidInput(l.name + ": VRAM address " + hex(address) + " is not 4-byte aligned");
}

}  // namespace

// The index: the address's bits below the select bit (address_limit), and that bit; the high
// index: the address from the select bit up.
void IndexDataRegs::select_vram(uint64_t address) {
  const uint64_t select = layout_.address_limit;
  mmio_.write32(layout_.index, uint32_t((address & (select - 1)) | select));
  mmio_.write32(layout_.vram_index_hi, uint32_t(address / select));
}

uint32_t IndexDataRegs::read_vram32(uint64_t address) {
  check_vram_access(layout_, address);
  std::lock_guard lock(mutex_);
  select_vram(address);
  return mmio_.read32(layout_.data);
}

void IndexDataRegs::write_vram32(uint64_t address, uint32_t value) {
  check_vram_access(layout_, address);
  std::lock_guard lock(mutex_);
  select_vram(address);
  mmio_.write32(layout_.data, value);
}

}  // namespace hcq::os
