#include "amd/am/usb_function.hpp"

#include <algorithm>

#include <linux/pci_regs.h>

#include <cstring>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "os/usb.hpp"
#include "usb/asm2464.hpp"

namespace hcq::amd::am {
namespace {

// The BARs tinygrad's AMDev uses (am/amdev.py: 0 VRAM, 2 doorbells, 5 registers).
constexpr int kVram = 0, kDoorbells = 2, kRegisters = 5;

const usb::PcieBarInfo& assigned_bar(const usb::PcieFunctionInfo& gpu, int index,
                                     const std::string& name) {
  const usb::PcieBarInfo* bar = gpu.bar(index);
  if (!bar || !bar->assigned || bar->io)
    throw InvalidInput(name + ": BAR" + std::to_string(index) +
                       " is not an assigned memory BAR (enumerate the hierarchy first)");
  return *bar;
}

uint64_t align_down4(uint64_t v) { return v & ~uint64_t(3); }
uint64_t align_up4(uint64_t v) { return (v + 3) & ~uint64_t(3); }

}  // namespace

// ---- VRAM through BAR0 --------------------------------------------------------------------

void TransportVram::check(uint64_t pa, uint64_t bytes) const {
  if (pa > size_ || size_ - pa < bytes)
    throw Error("VRAM BAR: " + hex(bytes) + " bytes at " + hex(pa) + " are outside its " +
                hex(size_) + " bytes");
}

uint64_t TransportVram::read64(uint64_t pa) {
  if (pa % 8) throw Error("VRAM BAR: address " + hex(pa) + " is not 8-byte aligned");
  if (pa > size_ || size_ - pa < 8)
    throw Error("VRAM BAR: address " + hex(pa) + " is outside its " + hex(size_) + " bytes");
  uint64_t v = 0;
  transport_.memory_read(bar0_ + pa, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

void TransportVram::write64(uint64_t pa, uint64_t value) {
  if (pa % 8) throw Error("VRAM BAR: address " + hex(pa) + " is not 8-byte aligned");
  if (pa > size_ || size_ - pa < 8)
    throw Error("VRAM BAR: address " + hex(pa) + " is outside its " + hex(size_) + " bytes");
  transport_.memory_write(bar0_ + pa, std::as_bytes(std::span(&value, 1)));
}

void TransportVram::write(uint64_t pa, std::span<const std::byte> data) {
  check(pa, data.size());
  if (data.empty()) return;
  const uint64_t begin = align_down4(pa), end = align_up4(pa + data.size());
  if (begin == pa && end == pa + data.size()) {
    transport_.memory_write(bar0_ + pa, data);
    return;
  }
  // The transport moves whole dwords: the partly covered ones are read and merged. VRAM's
  // size is a multiple of 4, so `end` stays inside the BAR.
  std::vector<std::byte> dwords(end - begin);
  transport_.memory_read(bar0_ + begin, std::span(dwords).first(4));
  if (end - begin > 4) transport_.memory_read(bar0_ + end - 4, std::span(dwords).last(4));
  std::memcpy(dwords.data() + (pa - begin), data.data(), data.size());
  transport_.memory_write(bar0_ + begin, dwords);
}

void TransportVram::read(uint64_t pa, std::span<std::byte> out) {
  check(pa, out.size());
  if (out.empty()) return;
  const uint64_t begin = align_down4(pa), end = align_up4(pa + out.size());
  if (begin == pa && end == pa + out.size()) {
    transport_.memory_read(bar0_ + pa, out);
    return;
  }
  std::vector<std::byte> dwords(end - begin);
  transport_.memory_read(bar0_ + begin, dwords);
  std::memcpy(out.data(), dwords.data() + (pa - begin), out.size());
}

// ---- the function -------------------------------------------------------------------------

UsbFunction::UsbFunction(usb::PcieTransport& transport, const usb::PcieFunctionInfo& gpu,
                         std::string name, WindowWriter write_window,
                         std::shared_ptr<void> owner)
    : owner_(std::move(owner)),
      transport_(transport),
      gpu_(gpu),
      name_(std::move(name)),
      doorbell_base_(assigned_bar(gpu, kDoorbells, name_).address),
      doorbell_bytes_(assigned_bar(gpu, kDoorbells, name_).size),
      vram_(transport, assigned_bar(gpu, kVram, name_).address,
            assigned_bar(gpu, kVram, name_).size),
      registers_(transport, assigned_bar(gpu, kRegisters, name_).address,
                 assigned_bar(gpu, kRegisters, name_).size, "BAR5 of " + name_),
      write_window_(std::move(write_window)) {
  const std::vector<usb::DmaWindow> windows = transport.dma_windows();
  if (!windows.empty()) window_ = HostWindow{windows.front().pci_address, windows.front().size};
  if (!write_window_) {
    if (auto* bridge = dynamic_cast<usb::Asm2464Transport*>(&transport)) {
      write_window_ = [bridge](uint64_t offset, std::span<const std::byte> data) {
        bridge->sram_write(offset, {reinterpret_cast<const uint8_t*>(data.data()), data.size()});
      };
    }
  }
}

void UsbFunction::ring_doorbell(uint32_t index, uint64_t value) {
  if ((uint64_t(index) + 1) * 8 > doorbell_bytes_)
    throw InvalidInput(name_ + ": doorbell " + std::to_string(index) + " is past the " +
                       hex(doorbell_bytes_) + " bytes of BAR2");
  transport_.memory_write(doorbell_base_ + uint64_t(index) * 8,
                          std::as_bytes(std::span(&value, 1)));
}

void UsbFunction::set_bus_master(bool on) {
  const uint32_t cmd = transport_.config_read(gpu_.bdf, PCI_COMMAND, 2);
  transport_.config_write(gpu_.bdf, PCI_COMMAND, 2,
                          on ? cmd | PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY
                             : cmd & ~uint32_t(PCI_COMMAND_MASTER));
}

void UsbFunction::map_dma(void*, uint64_t iova, uint64_t size) {
  throw InvalidInput(name_ + ": DMA to host memory at " + hex(iova) + " (" + hex(size) +
                     " bytes): behind the USB bridge the device reaches only the bridge's SRAM "
                     "window");
}

void UsbFunction::unmap_dma(uint64_t iova, uint64_t size) {
  throw InvalidInput(name_ + ": DMA unmap at " + hex(iova) + " (" + hex(size) +
                     " bytes): behind the USB bridge nothing is mapped for DMA");
}

void UsbFunction::map_vram(void*, uint64_t pa, uint64_t size) {
  throw InvalidInput(name_ + ": VRAM at " + hex(pa) + " (" + hex(size) +
                     " bytes): the CPU cannot map VRAM behind a USB bridge");
}

void UsbFunction::write_host_window(uint64_t offset, std::span<const std::byte> data) {
  if (!window_) throw InvalidInput(name_ + ": the transport has no host window");
  if (offset > window_->size || window_->size - offset < data.size())
    throw InvalidInput(name_ + ": host window write of " + hex(data.size()) + " bytes at " +
                       hex(offset) + ": the window has " + hex(window_->size));
  if (!write_window_)
    throw InvalidInput(name_ + ": the CPU cannot write this transport's host window");
  // tinygrad ops_amd.py writes the SRAM from 16 KiB slots (slot_start); usb.py pads to 512.
  constexpr uint64_t kSlot = 0x4000, kUnit = 512;
  std::lock_guard lk(window_mu_);
  if (window_copy_.empty()) window_copy_.resize(window_->size);
  std::copy(data.begin(), data.end(), window_copy_.begin() + int64_t(offset));
  const uint64_t begin = offset / kSlot * kSlot;
  const uint64_t end = std::min(window_->size, (offset + data.size() + kUnit - 1) / kUnit * kUnit);
  write_window_(begin, std::span<const std::byte>(window_copy_).subspan(begin, end - begin));
}

void UsbFunction::read_host_window(uint64_t offset, std::span<std::byte> out) {
  throw InvalidInput(name_ + ": host window read of " + hex(out.size()) + " bytes at " +
                     hex(offset) + ": the bridge cannot read its SRAM back");
}

namespace {

// What a UsbFunction opened by port keeps alive: the kernel, the USB device, the transport.
struct UsbBridge {
  std::shared_ptr<os::Kernel> kernel;
  std::unique_ptr<os::UsbDevice> device;
  std::unique_ptr<usb::Asm2464Transport> transport;
  ~UsbBridge() {
    transport.reset();  // before the device it speaks through
    device.reset();
  }
};

constexpr uint16_t kAmdVendor = 0x1002;
constexpr uint32_t kDisplayClass = 0x03;  // PCI base class 03h: display controller

}  // namespace

std::unique_ptr<UsbFunction> open_usb_function(std::shared_ptr<os::Kernel> kernel,
                                               const std::string& port,
                                               const std::string& device_name,
                                               usb::Asm2464Options bridge_options,
                                               usb::EnumerateOptions enumerate) {
  std::optional<os::UsbDeviceInfo> info;
  for (os::UsbDeviceInfo& d : os::list_usb_devices(*kernel))
    if (d.port == port) info = std::move(d);
  if (!info) throw Error(device_name + ": no USB device on port " + port);
  if (info->vendor != kBridgeVendor || info->product != kBridgeProduct)
    throw InvalidInput(device_name + ": " + info->name() +
                       " is not an ASM2464 with tinygrad's custom firmware (add1:0001)");
  auto bridge = std::make_shared<UsbBridge>();
  bridge->kernel = kernel;
  bridge->device = std::make_unique<os::UsbDevice>(kernel, *info);
  bridge->transport = std::make_unique<usb::Asm2464Transport>(*bridge->device, bridge_options);
  const usb::PcieHierarchy hierarchy = usb::enumerate_pcie(*bridge->transport, enumerate);
  for (const usb::PcieFunctionInfo& f : hierarchy.functions) {
    if (f.vendor != kAmdVendor || f.class_code >> 16 != kDisplayClass) continue;
    usb::PcieTransport& transport = *bridge->transport;
    return std::make_unique<UsbFunction>(transport, f, "usb " + port + " " + usb::to_string(f.bdf),
                                         UsbFunction::WindowWriter{}, std::move(bridge));
  }
  throw Error(device_name + ": no AMD GPU behind the bridge on port " + port);
}

}  // namespace hcq::amd::am
