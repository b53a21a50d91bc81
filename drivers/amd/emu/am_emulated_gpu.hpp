// The register-level RX 7900 XTX (emu:gfx1100_am) as every emulated system assembles it
// (issue 18 item 6): the AmGpu model with gfx1100's IP blocks (PSP, GMC, IH, GFX), the
// engines' view of memory (the GC hub's MMU), the fault log the engines write, and a directory
// of synthesized gfx1100 firmware (am_firmware_writer.hpp), removed with it. What differs
// between the systems is given: the VRAM and doorbell memory (the BARs' memory), how the GPU's
// DMA reaches host memory (VFIO: the DMA mappings with bus mastering on; behind the ASM2464:
// only the bridge's SRAM window), and what an IH entry that raises an interrupt does (VFIO:
// the MSI through the driver's eventfd; USB: nothing, the driver polls).
//
// The PCI function's identity (1002:744c, class 0x030000, revision 0xc8) and its three BARs as
// tinygrad's AMDev maps them (am/amdev.py: vram BAR0, doorbell BAR2, mmio BAR5) are
// am_gpu_function's; the caller adds what its bus needs (driver, IOMMU group, resizable BAR).
//
// Threads: as AmGpu and the blocks say; fault_log() may be called from any thread. The VRAM,
// doorbell memory and whatever `dma` reaches must outlive the object.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "amd/emu/am_firmware_writer.hpp"
#include "amd/emu/am_gfx.hpp"
#include "amd/emu/am_gmc.hpp"
#include "amd/emu/am_gpu.hpp"
#include "amd/emu/am_ih.hpp"
#include "amd/emu/am_psp.hpp"
#include "os/emulated_kernel.hpp"
#include "os/emulated_pci.hpp"

namespace hcq::amd::emu {

// The RX 7900 XTX's PCI identity, the one place every emulated machine takes it from: AMD
// Navi 31 (vendor 1002, the device id of targets.cpp's gfx1100, pci.ids 744c), subsystem
// 1002:0e3b, class 0x030000, revision 0xc8, 16 GT/s x16. No BARs, address or driver: the
// machine adds them.
os::EmulatedPciFunction rx7900xtx_identity();

// The RX 7900 XTX's PCI description: rx7900xtx_identity() with BAR0 `vram_bar_bytes` (64-bit
// prefetchable), BAR2 the doorbells (64-bit prefetchable, AmGpu::kDoorbellBarBytes; memory, or
// `doorbells` where given), BAR5 the registers (32-bit, AmGpu::kRegisterBarBytes) whose accesses go
// to `registers`.
os::EmulatedPciFunction am_gpu_function(uint64_t vram_bar_bytes,
                                        std::shared_ptr<os::MmioHandler> registers,
                                        std::shared_ptr<os::MmioHandler> doorbells = nullptr);

// BAR5's handler: every access calls the GPU. Made before the GPU (the bus that holds BAR0's
// memory, the GPU's VRAM, needs it first); AmEmulatedGpu connects it.
class AmRegisterBar final : public os::MmioHandler {
 public:
  uint32_t read32(uint64_t offset) override { return gpu_->read32(offset); }
  void write32(uint64_t offset, uint32_t value) override { gpu_->write32(offset, value); }

 private:
  friend class AmEmulatedGpu;
  AmGpu* gpu_ = nullptr;
};

// Maps the first `bytes` of an emulated BAR read-write (mmap(2), shared). OsError "emulated AM
// GPU: mapping a BAR of 0x... bytes".
void* map_emulated_bar(os::EmulatedBar& bar, uint64_t bytes);

struct AmGpuWiring {
  std::shared_ptr<AmRegisterBar> registers;  // connected to the GPU; may be null
  std::span<uint8_t> vram;       // BAR0's memory, a whole number of MiB (AmGpu's rule)
  std::span<uint8_t> doorbells;  // BAR2's memory (AmGpu::kDoorbellBarBytes)
  // Host memory at a device address (AmBus::dma); null where the device's DMA reaches nothing.
  std::function<void*(uint64_t address, uint64_t size)> dma;
  // An IH entry was written with the ring's interrupt enabled (the GPU's MSI). May be empty.
  std::function<void()> msi;
  FirmwareCompression firmware = FirmwareCompression::None;
  std::vector<std::byte> discovery;  // the IP discovery table; empty: gfx1100's
  // Per IP, the register table of a version whose registers moved (IpSegmentBases::tables);
  // empty: the .def's. Must outlive the GPU.
  std::array<std::span<const am::RegDesc>, am::kIpCount> register_tables{};
};

class AmEmulatedGpu {
 public:
  // Builds the GPU and its blocks, and writes the firmware directory. InvalidInput as AmGpu's
  // constructor; OsError when the firmware directory cannot be made.
  explicit AmEmulatedGpu(AmGpuWiring wiring);
  ~AmEmulatedGpu();  // stops the engines, removes the firmware directory
  AmEmulatedGpu(const AmEmulatedGpu&) = delete;
  AmEmulatedGpu& operator=(const AmEmulatedGpu&) = delete;

  AmGpu& gpu() { return *gpu_; }
  AmPsp& psp() { return *psp_; }
  AmGmc& gmc() { return *gmc_; }
  AmIh& ih() { return *ih_; }
  AmGfx& gfx() { return *gfx_; }
  // A directory holding every file of am::gfx1100_firmware_names().
  const std::string& firmware_dir() const { return firmware_dir_; }
  // What the engines said about each fault, one line each.
  std::string fault_log() const;
  // Publishes the fault log and the engines' IB positions as the emulated kernel's reports
  // (os::EmulatorReport), which the driver asks for. The kernel must not
  // read them after this object is gone.
  void publish(os::EmulatedKernel& kernel);

 private:
  std::unique_ptr<AmGpu> gpu_;
  std::shared_ptr<AmPsp> psp_;
  std::shared_ptr<AmGmc> gmc_;
  std::shared_ptr<AmIh> ih_;
  std::unique_ptr<AmAddressSpace> engine_memory_;  // the engines' view: the GC hub's MMU
  std::shared_ptr<AmGfx> gfx_;
  std::unique_ptr<os::TempTree> firmware_tree_;
  std::string firmware_dir_;
  mutable std::mutex fault_log_mu_;
  std::string fault_log_;
};

}  // namespace hcq::amd::emu
