// The AmFunction of a GPU behind a USB-to-PCIe bridge (issue 18): every access is a request
// on a usb::PcieTransport (the ASM2464 bridge, or the emulated hierarchy directly). The BAR
// addresses are the ones enumerate_pcie gave the GPU:
//   registers  usb::TransportMmio on BAR5 (one memory request per register access);
//   VRAM       BAR0 through streamed memory reads and writes; the CPU cannot map it
//              (vram().mapping() is null), so map_vram refuses;
//   doorbells  one 8-byte memory write at BAR2 + 8 * index (doorbell_mapping is null);
//   DMA        only into the transport's DMA window (the bridge's SRAM: tinygrad
//              USBPCIDevice's sram at PCI 0x200000), which the CPU writes through the bridge
//              (Asm2464Transport::sram_write) and cannot read back; no other host memory;
//   MSI        none: an interrupt cannot cross the bridge to the host, so the driver polls.
//
// Threads: as AmFunction (the transport serialises each request).
#pragma once

#include <functional>
#include <memory>
#include <vector>
#include <mutex>
#include <optional>
#include <string>

#include "amd/am/am_function.hpp"
#include "os/kernel.hpp"
#include "usb/asm2464.hpp"
#include "usb/pcie_enumerate.hpp"
#include "usb/pcie_transport.hpp"

namespace hcq::amd::am {

// VRAM through BAR0 at `bar0` on the transport. Any byte range: the dwords a range only
// partly covers are read, merged and written back (the transport moves whole dwords).
class TransportVram final : public VramPort {
 public:
  TransportVram(usb::PcieTransport& transport, uint64_t bar0, uint64_t size)
      : transport_(transport), bar0_(bar0), size_(size) {}
  uint64_t size() const override { return size_; }
  uint64_t read64(uint64_t pa) override;
  void write64(uint64_t pa, uint64_t value) override;
  void write(uint64_t pa, std::span<const std::byte> data) override;
  void read(uint64_t pa, std::span<std::byte> out) override;
  std::byte* mapping() const override { return nullptr; }

 private:
  void check(uint64_t pa, uint64_t bytes) const;
  usb::PcieTransport& transport_;
  uint64_t bar0_, size_;
};

class UsbFunction final : public AmFunction {
 public:
  // How the CPU writes [offset, offset + data.size()) of the host window.
  using WindowWriter = std::function<void(uint64_t offset, std::span<const std::byte> data)>;

  // `gpu` as enumerate_pcie left it: InvalidInput naming it when BAR0, BAR2 or BAR5 is not
  // assigned. `name` names it in errors ("usb 2-1 04:00.0"). `write_window` writes the host
  // window; empty: the bridge's SRAM write where `transport` is an Asm2464Transport, else
  // write_host_window throws InvalidInput (the emulated hierarchy has no SRAM: a test passes
  // its own writer). The transport must outlive the function; `owner` is kept alive as long
  // as the function (what holds the transport, the USB device, the kernel).
  UsbFunction(usb::PcieTransport& transport, const usb::PcieFunctionInfo& gpu, std::string name,
              WindowWriter write_window = {}, std::shared_ptr<void> owner = {});

  const std::string& name() const override { return name_; }
  os::Mmio& registers() override { return registers_; }
  VramPort& vram() override { return vram_; }
  uint64_t doorbell_bytes() const override { return doorbell_bytes_; }
  volatile uint64_t* doorbell_mapping(uint32_t) override { return nullptr; }
  // One 64-bit memory write; InvalidInput for a doorbell past BAR2.
  void ring_doorbell(uint32_t index, uint64_t value) override;
  void set_bus_master(bool on) override;
  bool maps_host_memory() const override { return false; }
  // InvalidInput: the device reaches host memory only through the host window.
  void map_dma(void* host, uint64_t iova, uint64_t size) override;
  void unmap_dma(uint64_t iova, uint64_t size) override;
  void map_vram(void* at, uint64_t pa, uint64_t size) override;
  std::optional<HostWindow> host_window() const override { return window_; }
  // Any range of the window. The bridge writes only from the start of a 16 KiB slot and in
  // whole 512-byte units (Asm2464Transport::sram_write) and cannot read its SRAM back, so the
  // function keeps a copy of everything written to the window and sends the copy from the
  // slot holding `offset` to the 512-byte boundary after the data: the bytes around the data
  // stay what they were.
  void write_host_window(uint64_t offset, std::span<const std::byte> data) override;
  // InvalidInput: the bridge cannot read its SRAM back on request.
  void read_host_window(uint64_t offset, std::span<std::byte> out) override;
  bool enable_msi(int) override { return false; }
  void disable_msi() override {}

  const usb::PcieFunctionInfo& gpu() const { return gpu_; }

 private:
  std::shared_ptr<void> owner_;
  usb::PcieTransport& transport_;
  usb::PcieFunctionInfo gpu_;
  std::string name_;
  uint64_t doorbell_base_ = 0, doorbell_bytes_ = 0;
  TransportVram vram_;
  usb::TransportMmio registers_;
  std::optional<HostWindow> window_;
  WindowWriter write_window_;
  std::mutex window_mu_;
  std::vector<std::byte> window_copy_;  // what the CPU wrote to the window; guarded by window_mu_
};

// The USB ids of an ASM2464 running tinygrad's custom firmware (runtime/support/usb.py:
// USBIface looks for add1:0001 first).
inline constexpr uint16_t kBridgeVendor = 0xadd1, kBridgeProduct = 0x0001;

// The GPU behind the bridge on USB port `port` ("2-1", as sysfs names it) of `kernel`: the
// device opened through usbfs, the bridge protocol (Asm2464Transport), the hierarchy
// enumerated (enumerate_pcie), its AMD display function. Errors start with `device_name`:
//   "usb:2-1: no USB device on port 2-1"
//   "usb:2-1: usb 2-1 (174c:2464) is not an ASM2464 with tinygrad's custom firmware (add1:0001)"
//   "usb:2-1: no AMD GPU behind the bridge on port 2-1"
// and what the USB device, the transport and the enumeration throw.
std::unique_ptr<UsbFunction> open_usb_function(std::shared_ptr<os::Kernel> kernel,
                                               const std::string& port,
                                               const std::string& device_name,
                                               usb::Asm2464Options bridge = {},
                                               usb::EnumerateOptions enumerate = {});

}  // namespace hcq::amd::am
