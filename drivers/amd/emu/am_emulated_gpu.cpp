#include "amd/emu/am_emulated_gpu.hpp"

#include <stdlib.h>
#include <sys/mman.h>

#include <cerrno>
#include <filesystem>

#include "amd/am/ih_entry.hpp"
#include "amd/am/psp_gfx_if.hpp"
#include "amd/pci.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"
#include "os/cleanup.hpp"

namespace hcq::amd::emu {

os::EmulatedPciFunction rx7900xtx_identity() {
  os::EmulatedPciFunction gpu;
  gpu.vendor = kPciVendor;
  gpu.device = uint16_t(find_target("gfx1100")->device_id);
  gpu.subsystem_vendor = kPciVendor;
  gpu.subsystem_device = 0x0e3b;
  gpu.class_code = 0x030000;
  gpu.revision = 0xc8;
  gpu.link = {4, 16, 4, 16};
  return gpu;
}

os::EmulatedPciFunction am_gpu_function(uint64_t vram_bar_bytes,
                                        std::shared_ptr<os::MmioHandler> registers,
                                        std::shared_ptr<os::MmioHandler> doorbells) {
  os::EmulatedPciFunction gpu = rx7900xtx_identity();
  gpu.bars = {{0, vram_bar_bytes, true, true, false, {}, {}},
              {2, AmGpu::kDoorbellBarBytes, true, true, false, {}, std::move(doorbells)},
              {5, AmGpu::kRegisterBarBytes, false, false, false, {}, std::move(registers)}};
  return gpu;
}

void* map_emulated_bar(os::EmulatedBar& bar, uint64_t bytes) {
  void* p = bar.map(nullptr, bytes, PROT_READ | PROT_WRITE, 0);
  if (p == MAP_FAILED) throw OsError("emulated AM GPU: mapping a BAR of " + hex(bytes) + " bytes", errno);
  return p;
}

// The IP blocks of gfx1100 on the GPU: each owns its registers; the PSP model says when the
// MEC and SDMA firmware are loaded and the RLC autoload has run, which the queue model needs;
// the engines read memory through the GC hub's MMU, whose faults the GMC model latches; every
// block's interrupts go into the IH ring.
AmEmulatedGpu::AmEmulatedGpu(AmGpuWiring wiring)
    : gpu_(std::make_unique<AmGpu>(wiring.vram, wiring.doorbells, std::move(wiring.dma),
                                   AmGpu::kFbBase, std::move(wiring.discovery),
                                   wiring.register_tables)) {
  AmGpu& g = *gpu_;
  psp_ = std::make_shared<AmPsp>(g.bases(), g.bus());
  gmc_ = std::make_shared<AmGmc>(g.bases(), g.bus());
  ih_ = std::make_shared<AmIh>(g.bases(), g.bus());
  AmGmc* gmc = gmc_.get();
  engine_memory_ = std::make_unique<AmAddressSpace>(
      gmc->gfx_mmu(), g.bus(), kClientCpc,
      [gmc](const MmuFault& f) { gmc->report_fault(AmGmc::Hub::Gfx, f); });
  AmPsp* psp = psp_.get();
  namespace fw = am::psp::fw;
  AmGfxHooks hooks;
  hooks.rlc_autoload_done = [psp] { return psp->rlc_autoload_done(); };
  hooks.mec_firmware_ready = [psp] { return psp->loaded(fw::kRs64Mec) || psp->loaded(fw::kCpMec); };
  hooks.sdma_firmware_ready = [psp] { return psp->loaded(fw::kSdmaUcodeTh0); };
  // A queue stopped on a bad packet raises the CP's bad-opcode interrupt (client GRBM_CP,
  // source GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR, am/ih_ids.hpp); a memory
  // fault has already been latched by the GMC, which raised its own entry.
  AmBus* bus = &g.bus();
  hooks.fault = [this, bus](const std::string&, bool memory_fault, uint64_t,
                            const std::string& what) {
    {
      std::lock_guard lk(fault_log_mu_);
      fault_log_ += what + "\n";  // the engine's message names the queue
    }
    if (memory_fault || !bus->interrupt) return;
    namespace f = am::ih_entry;
    bus->interrupt(f::make({{f::CLIENT_ID, am::ih::kClientGrbmCp},
                            {f::SOURCE_ID, am::ih::kSrcCpBadOpcode}}));
  };
  gfx_ = std::make_shared<AmGfx>(g.bases(), g.bus(), *engine_memory_, hooks);
  for (std::shared_ptr<AmBlock> b : {std::shared_ptr<AmBlock>(psp_), std::shared_ptr<AmBlock>(gmc_),
                                     std::shared_ptr<AmBlock>(ih_), std::shared_ptr<AmBlock>(gfx_)})
    g.add_block(std::move(b));
  // An entry written raises the GPU's MSI (ih_v6_0: ENABLE_INTR on ring 0).
  AmIh* ih = ih_.get();
  g.set_interrupt([ih, msi = std::move(wiring.msi)](const std::array<uint32_t, 8>& e) {
    if (ih->push(e) && msi) msi();
  });

  if (wiring.registers) wiring.registers->gpu_ = gpu_.get();

  firmware_tree_ = std::make_unique<os::TempTree>("am-firmware");
  firmware_dir_ = firmware_tree_->path();
  write_gfx1100_firmware(firmware_dir_, wiring.firmware);
}

AmEmulatedGpu::~AmEmulatedGpu() {
  firmware_tree_.reset();
  // The engines stop first (they read memory through the GMC's MMU and the DMA callback).
  gpu_.reset();
  gfx_.reset();
  engine_memory_.reset();
  ih_.reset();
  gmc_.reset();
  psp_.reset();
}

std::string AmEmulatedGpu::fault_log() const {
  std::lock_guard lk(fault_log_mu_);
  return fault_log_;
}

void AmEmulatedGpu::publish(os::EmulatedKernel& kernel) {
  // The emulated GPU's own words about each fault, which only the emulated kernel answers
  // (os::EmulatorReport::FaultLog); the driver adds them to its fault errors.
  kernel.set_emulator_report(os::EmulatorReport::FaultLog, [this] { return fault_log(); });
  AmGfx* gfx = gfx_.get();
  kernel.set_emulator_report(os::EmulatorReport::IbPositions, [gfx] { return gfx->ib_positions(); });
}

}  // namespace hcq::amd::emu
