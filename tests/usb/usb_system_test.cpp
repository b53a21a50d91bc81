// The composed emulated USB system (issue 18 item 6): the register-level RX 7900 XTX behind the
// emulated ASM2464, reached as the driver will reach it: the real Asm2464Transport over the
// emulated usbfs, enumerate_pcie, TransportMmio on BAR5 and streams on BAR0. Expected values
// from the public sources: RCC_CONFIG_MEMSIZE (absolute dword 0xde3) is VRAM in MiB (Linux
// amdgpu_discovery.c), the IP discovery table sits 64 KiB below the end of VRAM and starts
// with BINARY_SIGNATURE 0x28211407 (discovery.h), a Resizable BAR control's size field is
// bits 13:8 with 1 MiB << n (PCIe Base Specification 7.8.6.3), and the bridge's SRAM is
// 0x80000 bytes at PCI address 0x200000 (tinygrad USBPCIDevice). FB_LOCATION_BASE/TOP count
// 16 MiB (mmhub_v3_0.c).
#include "usb/emu/usb_system.hpp"

#include <gtest/gtest.h>
#include <linux/pci_regs.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am/vram_allocator.hpp"
#include "amd/span_vram.hpp"
#include "common/error_of.hpp"
#include "emu/kernels.hpp"
#include "os/usb.hpp"
#include "usb/asm2464.hpp"
#include "usb/pcie_enumerate.hpp"

namespace hcq::usb {
namespace {

using emu::UsbEmulatedSystem;
using testing_support::error_of;
constexpr uint64_t MiB = 1 << 20, GiB = 1ull << 30;
constexpr Bdf kGpuBdf{4, 0, 0};
constexpr size_t kGpu = UsbEmulatedSystem::kGpuFunction;

// The system opened as the usb: driver will open it: the bridge by its sysfs port, the
// transport, then the hierarchy enumerated.
struct Opened {
  explicit Opened(uint64_t vram_bytes) : sys(emu::make_usb_emulated_system({vram_bytes})) {
    for (auto& d : os::list_usb_devices(*sys->kernel()))
      if (d.port == UsbEmulatedSystem::kPort) info = d;
    device = std::make_unique<os::UsbDevice>(sys->kernel(), info);
    Asm2464Options o;
    o.link_poll = std::chrono::milliseconds(1);
    o.retry_delay = std::chrono::microseconds(0);
    transport = std::make_unique<Asm2464Transport>(*device, o);
    EnumerateOptions e;
    e.crs_delay = std::chrono::microseconds(0);
    hierarchy = enumerate_pcie(*transport, e);
    gpu = hierarchy.find(kGpuBdf);
    if (!gpu) throw Error("no 04:00.0 after enumeration");
  }
  uint64_t bar(int index) const { return gpu->bar(index)->address; }

  std::unique_ptr<UsbEmulatedSystem> sys;
  os::UsbDeviceInfo info;
  std::unique_ptr<os::UsbDevice> device;
  std::unique_ptr<Asm2464Transport> transport;
  PcieHierarchy hierarchy;
  const PcieFunctionInfo* gpu = nullptr;
};

TEST(UsbEmulatedSystem, TheBridgeIsOnPort2Dash1AsTinygradsCustomFirmware) {
  Opened o(64 * MiB);
  EXPECT_EQ(o.info.bus, 2);
  EXPECT_EQ(o.info.devnum, 3);
  EXPECT_EQ(o.info.node(), "/dev/bus/usb/002/003");
  EXPECT_EQ(o.info.vendor, 0xadd1);
  EXPECT_EQ(o.info.product, 0x0001);
  EXPECT_TRUE(o.sys->firmware().pcie_power());
  // The GPU model's own refusal, as over VFIO.
  EXPECT_EQ(error_of([] { emu::make_usb_emulated_system({MiB + 4096}); }),
            "AM GPU model: VRAM of 0x101000 bytes is not a whole number of MiB (at least 1)");
}

TEST(UsbEmulatedSystem, EnumerationAssignsTheBarsAndGrowsBar0OverAllOfVram) {
  Opened o(amd::emu::AmGpu::kDefaultVramBytes);  // 24 GiB, sparse
  const PcieBarInfo* vram = o.gpu->bar(0);
  ASSERT_NE(vram, nullptr);
  EXPECT_EQ(vram->size_before, 256 * MiB);
  EXPECT_EQ(vram->size, 32 * GiB);  // the smallest power of two holding 24 GiB
  EXPECT_EQ(vram->address, 32 * GiB);
  EXPECT_EQ(o.gpu->bar(2)->size, 2 * MiB);
  EXPECT_EQ(o.gpu->bar(5)->size, 1 * MiB);
  EXPECT_EQ(o.gpu->bar(5)->address, 0x10000000u);
  // The GPU's config space as the hierarchy holds it now.
  auto& t = o.sys->topology();
  EXPECT_EQ(t.config32(kGpu, 0), 0x744c1002u);
  EXPECT_EQ(t.config32(kGpu, PCI_BASE_ADDRESS_0),
            uint32_t(32 * GiB) | PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH);
  EXPECT_EQ(t.config32(kGpu, PCI_BASE_ADDRESS_1), uint32_t((32 * GiB) >> 32));
  EXPECT_EQ(t.config32(kGpu, PCI_BASE_ADDRESS_2),
            uint32_t(o.bar(2)) | PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH);
  EXPECT_EQ(t.config32(kGpu, PCI_BASE_ADDRESS_3), uint32_t(o.bar(2) >> 32));
  EXPECT_EQ(t.config32(kGpu, PCI_BASE_ADDRESS_5), 0x10000000u);
  EXPECT_EQ(t.config32(kGpu, PCI_COMMAND) & (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER),
            uint32_t(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER));
  // The Resizable BAR control (the first extended capability): BAR 0, size 1 MiB << 15.
  EXPECT_EQ(t.config32(kGpu, 0x100) & 0xffff, uint32_t(PCI_EXT_CAP_ID_REBAR));
  EXPECT_EQ(t.config32(kGpu, 0x108) & PCI_REBAR_CTRL_BAR_IDX, 0u);
  EXPECT_EQ(t.config32(kGpu, 0x108) >> PCI_REBAR_CTRL_BAR_SHIFT & 0x3f, 15u);
}

TEST(UsbEmulatedSystem, TheGpuAnswersThroughBar5AndBar0) {
  Opened o(512 * MiB);
  EXPECT_EQ(o.gpu->bar(0)->size, 512 * MiB);
  TransportMmio regs(*o.transport, o.bar(5), o.gpu->bar(5)->size, "BAR5 of usb 04:00.0");
  EXPECT_EQ(regs.read32(0xde3 * 4), 512u);  // RCC_CONFIG_MEMSIZE: VRAM in MiB
  // The FB location the firmware leaves (16 MiB units: 0x8000000000 >> 24, + 512 MiB - 1),
  // and a plain register written and read back through the bridge.
  amd::am::RegisterIo io(regs, o.sys->gpu().bases());
  EXPECT_EQ(io.read(amd::am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE), 0x8000u);
  EXPECT_EQ(io.read(amd::am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_TOP), 0x801fu);
  io.write(amd::am::gc_11_0_0::SCRATCH_REG7, 0x12345678);
  EXPECT_EQ(io.read(amd::am::gc_11_0_0::SCRATCH_REG7), 0x12345678u);
  // The discovery table, streamed from the end of VRAM through BAR0.
  EXPECT_EQ(o.sys->gpu().discovery_offset(), 512 * MiB - 64 * 1024);
  std::vector<std::byte> head(256);
  o.transport->memory_read(o.bar(0) + 512 * MiB - 64 * 1024, head);
  uint32_t signature = 0;
  std::memcpy(&signature, head.data(), 4);
  EXPECT_EQ(signature, amd::am::kBinarySignature);
}

TEST(UsbEmulatedSystem, SixtyFourMiBOfVramWrittenAndReadBackThroughStreams) {
  Opened o(512 * MiB);
  constexpr size_t kBytes = 64 * MiB;
  constexpr uint64_t kAt = 16 * MiB;
  std::vector<uint32_t> pattern(kBytes / 4);
  for (size_t i = 0; i < pattern.size(); i++) pattern[i] = uint32_t(i * 2654435761u) ^ 0xa5a5a5a5u;
  o.transport->memory_write(o.bar(0) + kAt, std::as_bytes(std::span(pattern)));
  // What the GPU sees in its VRAM.
  std::span<uint8_t> vram = o.sys->gpu().bus().vram;
  EXPECT_EQ(std::memcmp(vram.data() + kAt, pattern.data(), kBytes), 0);
  std::vector<uint32_t> back(pattern.size());
  o.transport->memory_read(o.bar(0) + kAt, std::as_writable_bytes(std::span(back)));
  EXPECT_TRUE(back == pattern);
  EXPECT_EQ(o.sys->firmware().lost_writes(), 0u);
}

TEST(UsbEmulatedSystem, DoorbellWritesLandInTheMemoryTheEnginesWatch) {
  Opened o(64 * MiB);
  o.transport->memory_write32(o.bar(2) + 0x18, 0x40);
  o.transport->memory_write32(o.bar(2) + 0x1c, 0x1);
  uint64_t seen = 0;
  std::memcpy(&seen, o.sys->gpu().bus().doorbells.data() + 0x18, 8);
  EXPECT_EQ(seen, 0x100000040u);
  EXPECT_EQ(o.transport->memory_read32(o.bar(2) + 0x18), 0x40u);
}

TEST(UsbEmulatedSystem, GpuDmaReachesOnlyTheBridgesSram) {
  Opened o(64 * MiB);
  amd::emu::AmBus& bus = o.sys->gpu().bus();
  // System pages at GPU VA 0x20000000: the SRAM window's last two pages, then the page past it.
  constexpr uint64_t kSysVa = 0x20000000, kSram = 0x200000, kSramBytes = 0x80000;
  testing_support::SpanVram vram_access{bus.vram};
  amd::am::VramAllocator alloc{0, 32 * MiB};
  amd::am::PageTables pt{vram_access, alloc};
  amd::am::MapFlags sys_flags;
  sys_flags.memory = amd::am::Memory::System;
  pt.map(kSysVa, kSram + kSramBytes - 0x2000, 0x3000, sys_flags);
  amd::emu::AmMmu mmu{bus.vram};
  mmu.set_context(pt.page_table_base(), 0, (1ull << 48) - 1);
  int mmu_faults = 0;
  amd::emu::AmAddressSpace space{mmu, bus, amd::emu::kClientCpc,
                                 [&](const amd::emu::MmuFault&) { ++mmu_faults; }};

  // What the host writes into the SRAM (0xF2 and bulk OUT) the GPU reads there.
  std::vector<uint8_t> data(kSramBytes);
  std::iota(data.begin(), data.end(), uint8_t(7));
  o.transport->sram_write(data);
  auto* p = static_cast<uint8_t*>(space.translate(kSysVa + 0x10, 16));
  EXPECT_EQ(p, o.sys->firmware().device_sram().data() + kSramBytes - 0x2000 + 0x10);
  EXPECT_EQ(std::memcmp(p, data.data() + kSramBytes - 0x2000 + 0x10, 16), 0);
  // What the GPU writes there the firmware holds.
  std::memcpy(p, "\xde\xad\xbe\xef", 4);
  EXPECT_EQ(o.sys->firmware().sram(kSramBytes - 0x2000 + 0x10, 4),
            (std::vector<uint8_t>{0xde, 0xad, 0xbe, 0xef}));
  // The page past the window reaches nothing: the model's DMA fault.
  EXPECT_EQ(error_of<hcq::emu::Fault>([&] { space.translate(kSysVa + 0x2008, 8); }),
            "GPU VA 0x20002008: IOVA 0x280008 (system page) has no DMA mapping (or bus "
            "mastering is off)");
  EXPECT_EQ(error_of<hcq::emu::Fault>([&] { space.translate(kSysVa + 0x1ff8, 16); }),
            "GPU VA 0x20002000: IOVA 0x280000 (system page) has no DMA mapping (or bus "
            "mastering is off)");
  // And through the bus directly: below the window, and a range leaving it.
  EXPECT_EQ(bus.dma(kSram - 4, 4), nullptr);
  EXPECT_EQ(bus.dma(kSram + kSramBytes - 4, 8), nullptr);
  EXPECT_EQ(bus.dma(kSram, kSramBytes), o.sys->firmware().device_sram().data());
  EXPECT_EQ(mmu_faults, 0);  // not the GPU's MMU: the bus's
}

}  // namespace
}  // namespace hcq::usb
