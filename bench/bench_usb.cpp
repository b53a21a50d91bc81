// PCIe over the ASM2464 bridge (issue 18): Asm2464Transport through the emulated usbfs to the
// emulated firmware and hierarchy of make_usb_emulated_system() (the register-level RX 7900 XTX
// behind asm2464_topology's bridges). The figures are functional only: every USB request is
// a hand-off to the emulated host controller's thread, not a bus transaction (a real bridge:
// about 323 MB/s copy-in, tinygrad's figure for the ASM2464).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "core/hcq.hpp"
#include "os/usb.hpp"
#include "usb/asm2464.hpp"
#include "usb/emu/usb_system.hpp"
#include "usb/pcie_enumerate.hpp"

namespace {

using namespace hcq;

constexpr usb::Bdf kGpu{4, 0, 0};

// One emulated bridge for the process, enumerated once: BAR0 (VRAM) and BAR5 (registers).
struct Bridge {
  std::unique_ptr<usb::emu::UsbEmulatedSystem> system = usb::emu::make_usb_emulated_system();
  std::unique_ptr<os::UsbDevice> device;
  std::unique_ptr<usb::Asm2464Transport> transport;
  uint64_t vram = 0, registers = 0;

  Bridge() {
    for (auto& d : os::list_usb_devices(*system->kernel()))
      if (d.port == usb::emu::UsbEmulatedSystem::kPort)
        device = std::make_unique<os::UsbDevice>(system->kernel(), d);
    transport = std::make_unique<usb::Asm2464Transport>(*device);
    const usb::PcieHierarchy h = usb::enumerate_pcie(*transport);
    vram = h.find(kGpu)->bar(0)->address;
    registers = h.find(kGpu)->bar(5)->address;
  }
};

Bridge& bridge() {
  static Bridge b;
  return b;
}

// One configuration read of the GPU's IDs: a 0xF0 OUT (the TLP) and a 0xF0 IN (its completion)
// through two bridges.
void BM_UsbConfigReadRoundTrip(benchmark::State& state) {
  auto& t = *bridge().transport;
  for (auto _ : state) benchmark::DoNotOptimize(t.config_read(kGpu, 0, 4));
}
BENCHMARK(BM_UsbConfigReadRoundTrip)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One register read in BAR5 (what every os::Mmio read over USB costs): a memory read TLP and
// its completion.
void BM_UsbMemoryRead32RoundTrip(benchmark::State& state) {
  auto& b = bridge();
  for (auto _ : state) benchmark::DoNotOptimize(b.transport->memory_read32(b.registers));
}
BENCHMARK(BM_UsbMemoryRead32RoundTrip)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A streamed write into VRAM (BAR0): 0xF0 mode 1 and bulk OUT 0x02, 1 MiB per request.
void BM_UsbStreamWrite(benchmark::State& state) {
  auto& b = bridge();
  std::vector<std::byte> data(size_t(state.range(0)), std::byte{0x5a});
  for (auto _ : state) b.transport->memory_write(b.vram, data);
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_UsbStreamWrite)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// A streamed read from VRAM (BAR0): 0xF0 mode 2 and bulk IN 0x81, 1 MiB per request.
void BM_UsbStreamRead(benchmark::State& state) {
  auto& b = bridge();
  std::vector<std::byte> data(size_t(state.range(0)));
  for (auto _ : state) b.transport->memory_read(b.vram, data);
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_UsbStreamRead)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole device (emu:gfx1100_usb, the AM driver over the emulated bridge), opened once.
hcq::Device& usb_device() {
  static std::unique_ptr<hcq::Device> dev = hcq::Device::open("emu:gfx1100_usb");
  return *dev;
}

// copy_in as a user calls it: 0xF2 writes into half the SRAM window, an SDMA copy of each
// chunk from the window's PCI address into VRAM, then waiting for the last one (the figure
// tinygrad's ~323 MB/s on a real bridge compares with).
void BM_UsbCopyIn(benchmark::State& state) {
  hcq::Device& dev = usb_device();
  hcq::Buffer b = dev.allocate(uint64_t(state.range(0)));
  std::vector<std::byte> data(size_t(state.range(0)), std::byte{0x5a});
  for (auto _ : state) {
    dev.copy_in(b, 0, data.data(), data.size());
    dev.synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_UsbCopyIn)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// copy_out: streamed reads of the buffer at BAR0 (the CPU cannot read the SRAM window).
void BM_UsbCopyOut(benchmark::State& state) {
  hcq::Device& dev = usb_device();
  hcq::Buffer b = dev.allocate(uint64_t(state.range(0)));
  std::vector<std::byte> data(size_t(state.range(0)));
  for (auto _ : state) dev.copy_out(data.data(), b, 0, data.size());
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_UsbCopyOut)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
