// An emulated machine with one ASM2464 enclosure (tinygrad custom firmware, add1:0001) on USB
// port "2-1" (bus 2, device 3; sysfs /sys/bus/usb/devices/2-1, node /dev/bus/usb/002/003),
// holding the register-level RX 7900 XTX (the AmGpu model of emu:gfx1100_am, assembled as
// amd/emu/am_emulated_gpu.hpp does for every system) at 04:00.0 behind asm2464_topology's
// bridges (issue 18 item 6):
//   - BAR0 is VRAM (64-bit prefetchable, resizable as the RX 7900 XTX's: 256 MiB at reset,
//     up to the power of two that holds all of VRAM; the bytes past VRAM are plain memory),
//   - BAR2 the doorbells (64-bit prefetchable, 2 MiB): a write stores into the memory the
//     engines watch and makes them look at once (a real GPU notices a doorbell write at once;
//     the emulated engines otherwise poll),
//   - BAR5 the registers (32-bit, 1 MiB): every access calls AmGpu.
// The GPU's DMA addresses are PCI bus addresses: only the bridge's SRAM window (PCI 0x200000,
// 0x80000 bytes, asm2464_sram_window()) is reachable, and it is the firmware's SRAM (the
// bytes 0xF2 writes fill). Anything else is a DMA fault the model reports (AmAddressSpace's
// "has no DMA mapping" Fault, in the engines' fault log). The GPU's bus master bit is not
// consulted (the DMA path may run inside a request the hierarchy is serving). No MSI: the
// driver polls.
//
// A 64-bit doorbell written as two 32-bit TLPs (low dword first) is seen by the engines
// between the two writes with the new low and the old high dword: only a write pointer that
// crosses a multiple of 2^32 is misread.
//
// Threads: the kernel, the firmware and the topology may be used from several threads as
// their headers allow; the GPU as AmGpu says. The system must outlive every use of its kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "amd/emu/am_emulated_gpu.hpp"
#include "os/emulated_kernel.hpp"
#include "os/emulated_usb.hpp"
#include "usb/emu/asm2464_firmware.hpp"
#include "usb/emu/pcie_topology.hpp"

namespace hcq::usb::emu {

struct UsbSystemOptions {
  uint64_t vram_bytes = amd::emu::AmGpu::kDefaultVramBytes;  // sparse: costs only what is touched
};

class UsbEmulatedSystem {
 public:
  static constexpr const char* kPort = "2-1";
  static constexpr int kBus = 2, kDevice = 3;
  static constexpr size_t kGpuFunction = 4;  // 04:00.0's index in asm2464_topology's list

  explicit UsbEmulatedSystem(UsbSystemOptions options = {});
  ~UsbEmulatedSystem();
  UsbEmulatedSystem(const UsbEmulatedSystem&) = delete;
  UsbEmulatedSystem& operator=(const UsbEmulatedSystem&) = delete;

  const std::shared_ptr<os::EmulatedKernel>& kernel() const { return kernel_; }  // usbfs + sysfs
  EmulatedAsm2464& firmware() { return *firmware_; }
  // Also a PcieTransport straight to the hierarchy (no USB).
  EmulatedPcieTopology& topology() { return *topology_; }
  amd::emu::AmGpu& gpu() { return model_->gpu(); }
  // The synthesized gfx1100 firmware.
  const std::string& firmware_dir() const { return model_->firmware_dir(); }

 private:
  class DoorbellBar;
  std::shared_ptr<os::EmulatedKernel> kernel_;
  std::unique_ptr<os::EmulatedUsb> usb_;
  std::shared_ptr<amd::emu::AmRegisterBar> registers_;
  std::shared_ptr<DoorbellBar> doorbells_;
  std::shared_ptr<EmulatedPcieTopology> topology_;
  std::shared_ptr<EmulatedAsm2464> firmware_;
  void* vram_ = nullptr;
  uint64_t vram_bytes_ = 0;
  std::unique_ptr<amd::emu::AmEmulatedGpu> model_;
};

std::unique_ptr<UsbEmulatedSystem> make_usb_emulated_system(UsbSystemOptions options = {});

// Whether HCQ_EMULATED_USB is "1": usb:<port> names and the hcq usb commands then reach this
// emulated machine instead of the real USB bus. The one place the variable is read.
bool emulated_usb_requested();

}  // namespace hcq::usb::emu
