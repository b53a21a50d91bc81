#include "usb/emu/usb_system.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>

#include "core/error.hpp"

namespace hcq::usb::emu {

using amd::emu::AmGpu;

// BAR2: the doorbell memory the engines watch, and a look at the doorbells on every write
// (AmGfx::kick), which over VFIO the driver's sleep on the MSI gives instead.
class UsbEmulatedSystem::DoorbellBar final : public os::MmioHandler {
 public:
  DoorbellBar() {
    void* p = ::mmap(nullptr, AmGpu::kDoorbellBarBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw OsError("emulated USB GPU: doorbell memory", errno);
    memory_ = static_cast<uint8_t*>(p);
  }
  ~DoorbellBar() override { ::munmap(memory_, AmGpu::kDoorbellBarBytes); }
  std::span<uint8_t> memory() const { return {memory_, AmGpu::kDoorbellBarBytes}; }
  uint32_t read32(uint64_t offset) override {
    return __atomic_load_n(reinterpret_cast<uint32_t*>(memory_ + offset), __ATOMIC_ACQUIRE);
  }
  void write32(uint64_t offset, uint32_t value) override {
    __atomic_store_n(reinterpret_cast<uint32_t*>(memory_ + offset), value, __ATOMIC_RELEASE);
    if (amd::emu::AmGfx* g = gfx.load(std::memory_order_acquire)) g->kick();
  }
  std::atomic<amd::emu::AmGfx*> gfx{nullptr};

 private:
  uint8_t* memory_ = nullptr;
};

UsbEmulatedSystem::UsbEmulatedSystem(UsbSystemOptions options)
    : kernel_(std::make_shared<os::EmulatedKernel>()),
      registers_(std::make_shared<amd::emu::AmRegisterBar>()),
      doorbells_(std::make_shared<DoorbellBar>()),
      vram_bytes_(options.vram_bytes) {
  // BAR0 resizable as the RX 7900 XTX's (drivers/emulated_pci.cpp: 256 MiB at reset), up to
  // the smallest power of two holding all of VRAM.
  constexpr uint64_t kResetBar0 = 256ull << 20;
  const uint64_t largest = std::bit_ceil(std::max<uint64_t>(options.vram_bytes, 1ull << 20));
  const uint64_t smallest = std::min(kResetBar0, largest);
  os::EmulatedPciFunction gpu = amd::emu::am_gpu_function(smallest, registers_, doorbells_);
  os::PciResizableBar bar0{0, smallest, {}};
  for (uint64_t s = smallest; s <= largest; s *= 2) bar0.supported.push_back(s);
  gpu.resizable_bars = {bar0};
  topology_ = std::make_shared<EmulatedPcieTopology>(asm2464_topology(gpu),
                                                     std::vector<DmaWindow>{asm2464_sram_window()});
  firmware_ = std::make_shared<EmulatedAsm2464>(topology_);

  vram_ = amd::emu::map_emulated_bar(topology_->bar(kGpuFunction, 0), options.vram_bytes);
  struct Undo {
    UsbEmulatedSystem* s;
    ~Undo() {
      if (s) ::munmap(s->vram_, s->vram_bytes_);
    }
  } undo{this};
  amd::emu::AmGpuWiring wiring;
  wiring.registers = registers_;
  wiring.vram = std::span(static_cast<uint8_t*>(vram_), options.vram_bytes);
  wiring.doorbells = doorbells_->memory();
  // A PCI bus address: only the bridge's SRAM window reaches memory, the firmware's SRAM.
  EmulatedAsm2464* firmware = firmware_.get();
  wiring.dma = [firmware](uint64_t address, uint64_t size) -> void* {
    const DmaWindow w = asm2464_sram_window();
    if (address < w.pci_address || address - w.pci_address >= w.size ||
        size > w.size - (address - w.pci_address))
      return nullptr;
    return firmware->device_sram().data() + (address - w.pci_address);
  };
  model_ = std::make_unique<amd::emu::AmEmulatedGpu>(std::move(wiring));
  doorbells_->gfx.store(&model_->gfx(), std::memory_order_release);
  model_->publish(*kernel_);
  usb_ = std::make_unique<os::EmulatedUsb>(kernel_);
  usb_->plug(kPort, kDevice, firmware_);
  undo.s = nullptr;
}

UsbEmulatedSystem::~UsbEmulatedSystem() {
  usb_.reset();  // unplugged: no more requests reach the hierarchy
  doorbells_->gfx.store(nullptr, std::memory_order_release);
  model_.reset();  // the engines stop before the memory they read goes
  ::munmap(vram_, vram_bytes_);
}

std::unique_ptr<UsbEmulatedSystem> make_usb_emulated_system(UsbSystemOptions options) {
  return std::make_unique<UsbEmulatedSystem>(options);
}

bool emulated_usb_requested() {
  const char* e = std::getenv("HCQ_EMULATED_USB");
  return e && std::string(e) == "1";
}

}  // namespace hcq::usb::emu
