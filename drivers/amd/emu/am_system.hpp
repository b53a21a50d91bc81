// The emulated PCI system with a register-level RX 7900 XTX behind vfio-pci (emu:gfx1100_am;
// issue 17 item 8): what hcq's am: driver opens when it runs against the emulator.
//
//   0000:00:00.0  host bridge
//   0000:00:01.0  root port, 16 GT/s x16
//     0000:03:00.0  AMD Radeon RX 7900 XTX (1002:744c, class 0x030000) on vfio-pci, alone in
//                   IOMMU group 2; BAR0 VRAM (64-bit prefetchable, the VRAM size), BAR2
//                   doorbells (64-bit prefetchable, 2 MiB), BAR5 registers (32-bit, 1 MiB)
//                   whose every access calls the AmGpu model: VFIO reads and writes it (pread/
//                   pwrite of the device fd) but will not map it, so the driver opens it with
//                   os::open_register_window.
//
// The BARs are those tinygrad's AMDev maps (am/amdev.py: vram BAR0, doorbell BAR2, mmio BAR5);
// the GPU and its blocks are assembled as every emulated system does (am_emulated_gpu.hpp).
// A VFIO_DEVICE_RESET of the GPU is AmGpu::function_reset (VRAM kept). The DMA the model does
// reaches host memory through the emulated VFIO's DMA mappings only while bus mastering is on.
// The system also holds a directory of synthesized gfx1100 firmware (am_firmware_writer.hpp),
// removed with it.
//
// Threads: the kernel may be used from several threads as EmulatedKernel allows; the GPU as
// AmGpu says. The system must outlive every use of its kernel.
#pragma once

#include <memory>
#include <vector>
#include <string>

#include "amd/emu/am_emulated_gpu.hpp"
#include "os/emulated_pci.hpp"

namespace hcq::amd::emu {

struct AmSystemOptions {
  uint64_t vram_bytes = AmGpu::kDefaultVramBytes;  // sparse: costs only what is touched
  FirmwareCompression firmware = FirmwareCompression::None;
  // The IP discovery table the GPU's firmware leaves (write_discovery_table); empty: the RX
  // 7900 XTX's. Tests give another ASIC's IP versions so.
  std::vector<std::byte> discovery;
  // Where a test's ASIC moved registers (AmGpuWiring::register_tables); must outlive the system.
  std::array<std::span<const am::RegDesc>, am::kIpCount> register_tables{};
};

class AmEmulatedSystem {
 public:
  static constexpr const char* kAddress = "0000:03:00.0";
  static constexpr int kIommuGroup = 2;

  explicit AmEmulatedSystem(AmSystemOptions options = {});
  ~AmEmulatedSystem();  // removes the firmware directory
  AmEmulatedSystem(const AmEmulatedSystem&) = delete;
  AmEmulatedSystem& operator=(const AmEmulatedSystem&) = delete;

  os::EmulatedPciBus& bus() { return *bus_; }
  // The kernel the driver uses (os::Kernel calls: sysfs, /dev/vfio, the BARs).
  const std::shared_ptr<os::EmulatedKernel>& kernel() const { return bus_->kernel(); }
  AmGpu& gpu() { return model_->gpu(); }
  // The IP blocks on it (also routed to through gpu()).
  AmPsp& psp() { return model_->psp(); }
  AmGmc& gmc() { return model_->gmc(); }
  AmIh& ih() { return model_->ih(); }
  AmGfx& gfx() { return model_->gfx(); }
  // A directory holding every file of am::gfx1100_firmware_names().
  const std::string& firmware_dir() const { return model_->firmware_dir(); }

 private:
  std::shared_ptr<AmRegisterBar> registers_;
  std::unique_ptr<os::EmulatedPciBus> bus_;
  void* vram_ = nullptr;
  void* doorbells_ = nullptr;
  uint64_t vram_bytes_ = 0;
  std::unique_ptr<AmEmulatedGpu> model_;
};

std::unique_ptr<AmEmulatedSystem> make_am_emulated_system(AmSystemOptions options = {});

}  // namespace hcq::amd::emu
