#include "amd/emu/am_system.hpp"

#include <stdlib.h>
#include <sys/mman.h>

#include <cerrno>
#include <filesystem>

#include "amd/am/psp_gfx_if.hpp"
#include "amd/fault_log.hpp"
#include "amd/ib_positions.hpp"
#include "core/error.hpp"
#include "os/emulated_vfio.hpp"

namespace hcq::amd::emu {

// BAR5's handler, made before the GPU it forwards to (the GPU's VRAM is BAR0's memory, which
// exists once the bus does); set before the first access.
class AmEmulatedSystem::RegisterBar final : public os::MmioHandler {
 public:
  uint32_t read32(uint64_t offset) override { return gpu->read32(offset); }
  void write32(uint64_t offset, uint32_t value) override { gpu->write32(offset, value); }
  AmGpu* gpu = nullptr;
};

namespace {

void* map_bar(os::EmulatedBar& bar) {
  void* p = bar.map(nullptr, bar.size(), PROT_READ | PROT_WRITE, 0);
  if (p == MAP_FAILED) throw OsError("emulated AM GPU: mapping a BAR of " + hex(bar.size()) + " bytes", errno);
  return p;
}

}  // namespace

AmEmulatedSystem::AmEmulatedSystem(AmSystemOptions options)
    : registers_(std::make_shared<RegisterBar>()), vram_bytes_(options.vram_bytes) {
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
  F gpu;
  gpu.address = kAddress;
  gpu.parent = port.address;
  gpu.vendor = 0x1002;  // AMD; Navi 31 RX 7900 XTX (pci.ids 744c)
  gpu.device = 0x744c;
  gpu.subsystem_vendor = 0x1002;
  gpu.subsystem_device = 0x0e3b;
  gpu.class_code = 0x030000;
  gpu.revision = 0xc8;
  gpu.link = {4, 16, 4, 16};
  gpu.bars = {{0, options.vram_bytes, true, true, false, {}, {}},
              {2, AmGpu::kDoorbellBarBytes, true, true, false, {}, {}},
              {5, AmGpu::kRegisterBarBytes, false, false, false, {}, registers_}};
  gpu.driver = "vfio-pci";
  gpu.iommu_group = kIommuGroup;
  gpu.numa_node = 0;
  gpu.on_reset = [this] { gpu_->function_reset(); };
  // MSI through VFIO; a driver going to sleep on it makes the engines look at their
  // doorbells (a real GPU sees a doorbell write at once; the emulated one polls).
  gpu.msi = true;
  gpu.on_interrupt_wait = [this] {
    if (gfx_) gfx_->kick();
  };
  bus_ = std::make_unique<os::EmulatedPciBus>(std::vector<F>{host, port, gpu});

  struct Undo {
    AmEmulatedSystem* s;
    ~Undo() {
      if (!s) return;
      if (s->vram_) ::munmap(s->vram_, s->vram_bytes_);
      if (s->doorbells_) ::munmap(s->doorbells_, AmGpu::kDoorbellBarBytes);
      if (!s->firmware_dir_.empty()) std::filesystem::remove_all(s->firmware_dir_);
    }
  } undo{this};
  vram_ = map_bar(bus_->bar(kAddress, 0));
  doorbells_ = map_bar(bus_->bar(kAddress, 2));
  os::EmulatedVfio* vfio = &bus_->vfio();
  auto dma = [vfio](uint64_t iova, uint64_t size) -> void* {
    return vfio->bus_master(kAddress) ? vfio->translate(iova, size) : nullptr;
  };
  gpu_ = std::make_unique<AmGpu>(std::span(static_cast<uint8_t*>(vram_), options.vram_bytes),
                                 std::span(static_cast<uint8_t*>(doorbells_), AmGpu::kDoorbellBarBytes),
                                 dma);
  registers_->gpu = gpu_.get();
  assemble();

  std::string tmpl = (std::filesystem::temp_directory_path() / "hcq-am-firmware-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw OsError("emulated AM GPU: mkdtemp for the firmware", errno);
  firmware_dir_ = tmpl;
  write_gfx1100_firmware(firmware_dir_, options.firmware);
  undo.s = nullptr;
}

// The IP blocks of gfx1100 on the GPU: each owns its registers; the PSP model says when the
// MEC and SDMA firmware are loaded and the RLC autoload has run, which the queue model needs;
// the engines read memory through the GC hub's MMU, whose faults the GMC model latches; every
// block's interrupts go into the IH ring.
void AmEmulatedSystem::assemble() {
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
    bus->interrupt({am::ih::kClientGrbmCp | am::ih::kSrcCpBadOpcode << 8, 0, 0, 0, 0, 0, 0, 0});
  };
  gfx_ = std::make_shared<AmGfx>(g.bases(), g.bus(), *engine_memory_, hooks);
  for (std::shared_ptr<AmBlock> b : {std::shared_ptr<AmBlock>(psp_), std::shared_ptr<AmBlock>(gmc_),
                                     std::shared_ptr<AmBlock>(ih_), std::shared_ptr<AmBlock>(gfx_)})
    g.add_block(std::move(b));
  // The emulated GPU's own words about each fault, in a debugfs-style file only the emulated
  // kernel has (amd/fault_log.hpp); the driver adds them to its fault errors.
  bus_->kernel()->add_generated_file(kAmEmulatorFaultLog, [this] {
    std::lock_guard lk(fault_log_mu_);
    return fault_log_;
  });
  AmGfx* gfx = gfx_.get();
  bus_->kernel()->add_generated_file(kAmEmulatorIbPositions, [gfx] { return gfx->ib_positions(); });
  // An entry written raises the GPU's MSI (ih_v6_0: ENABLE_INTR on ring 0), which VFIO turns
  // into the driver's eventfd signal.
  AmIh* ih = ih_.get();
  os::EmulatedVfio* vfio = &bus_->vfio();
  g.set_interrupt([ih, vfio](const std::array<uint32_t, 8>& e) {
    if (ih->push(e)) vfio->interrupt(kAddress);
  });
}

AmEmulatedSystem::~AmEmulatedSystem() {
  std::error_code ec;
  std::filesystem::remove_all(firmware_dir_, ec);
  // The engines stop first (they read memory through the GMC's MMU and the VFIO mappings).
  gpu_.reset();
  gfx_.reset();
  engine_memory_.reset();
  ih_.reset();
  gmc_.reset();
  psp_.reset();
  ::munmap(vram_, vram_bytes_);
  ::munmap(doorbells_, AmGpu::kDoorbellBarBytes);
}

std::unique_ptr<AmEmulatedSystem> make_am_emulated_system(AmSystemOptions options) {
  return std::make_unique<AmEmulatedSystem>(options);
}

}  // namespace hcq::amd::emu
