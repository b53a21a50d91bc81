// PCIe enumeration over a transport (issue 18 items 2, 3 and 6's topology): the ASM2464
// hierarchy with an RX 7900 XTX behind it gets tinygrad's bus numbers (GPU on bus 4), its BARs
// sized, BAR0 grown to 32 GiB through the Resizable BAR capability and every BAR and window
// placed, all asserted against the emulated config space registers byte for byte (values from
// the public layout: PCI-to-PCI Bridge Architecture Specification 3.2, PCIe Base Specification
// 7.8.6, Linux pci_regs.h); a BAR5 register read through TransportMmio; every injected fault's
// exact message; CRS retried and exhausted; every limit.
#include "usb/pcie_enumerate.hpp"

#include <gtest/gtest.h>

#include <map>

#include "amd/pci.hpp"
#include "common/error_of.hpp"
#include "usb/emu/pcie_topology.hpp"
#include "usb/rx7900xtx.hpp"

namespace hcq::usb {
namespace {

using testing_support::error_of;
constexpr uint64_t kMiB = 1 << 20, kGiB = 1ull << 30;
// Indices in asm2464_topology's list.
constexpr size_t kAsmUp = 0, kAsmDown = 1, kCardUp = 2, kCardDown = 3, kGpu = 4, kAudio = 5;
constexpr Bdf kGpuBdf{4, 0, 0};

EnumerateOptions options() {
  EnumerateOptions o;
  o.memory = {0x10000000, 0x10000000};      // tinygrad's mem_base
  o.prefetchable = {32 * kGiB, 64 * kGiB};  // tinygrad's pref_mem_base
  o.crs_retries = 8;
  o.crs_delay = std::chrono::microseconds(0);
  return o;
}

struct Asm2464 {
  emu::EmulatedPcieTopology topology{emu::asm2464_topology(rx7900xtx()),
                                     {emu::asm2464_sram_window()}};
};

TEST(PcieEnumerate, Asm2464GetsTinygradsBusNumbersBarsAndWindows) {
  Asm2464 a;
  auto& t = a.topology;
  // Before: BAR0 at its reset size, 256 MiB (control: BAR 0, one BAR, size 8 = 256 MiB).
  EXPECT_EQ(t.config32(kGpu, 0x108), 0x00000820u);
  const PcieHierarchy h = enumerate_pcie(t, options());

  // Bus numbers: primary | secondary << 8 | subordinate << 16 at 0x18.
  EXPECT_EQ(t.config32(kAsmUp, 0x18), 0x00040100u);
  EXPECT_EQ(t.config32(kAsmDown, 0x18), 0x00040201u);
  EXPECT_EQ(t.config32(kCardUp, 0x18), 0x00040302u);
  EXPECT_EQ(t.config32(kCardDown, 0x18), 0x00040403u);
  // Every bridge: memory window [0x10000000, 0x101fffff] (bits 31:20 in 15:4 of base and
  // limit), prefetchable [0x800000000, 0x10001fffff] (64-bit type nibble 1; upper halves 8 and
  // 0x10); memory decode and bus mastering on (status keeps its capability-list bit).
  for (size_t bridge : {kAsmUp, kAsmDown, kCardUp, kCardDown}) {
    SCOPED_TRACE(bridge);
    EXPECT_EQ(t.config32(bridge, 0x20), 0x10101000u);
    EXPECT_EQ(t.config32(bridge, 0x24), 0x00110001u);
    EXPECT_EQ(t.config32(bridge, 0x28), 0x00000008u);
    EXPECT_EQ(t.config32(bridge, 0x2c), 0x00000010u);
    EXPECT_EQ(t.config32(bridge, 0x04), 0x00100006u);
  }
  // The GPU: BAR0 64-bit prefetchable (type bits 0xc) at 32 GiB, BAR2 at 64 GiB, BAR4 (I/O)
  // left at 0, BAR5 32-bit at 0x10000000; Resizable BAR control now size 15 = 32 GiB.
  EXPECT_EQ(t.config32(kGpu, 0x10), 0x0000000cu);
  EXPECT_EQ(t.config32(kGpu, 0x14), 0x00000008u);
  EXPECT_EQ(t.config32(kGpu, 0x18), 0x0000000cu);
  EXPECT_EQ(t.config32(kGpu, 0x1c), 0x00000010u);
  EXPECT_EQ(t.config32(kGpu, 0x20), 0x00000001u);
  EXPECT_EQ(t.config32(kGpu, 0x24), 0x10000000u);
  EXPECT_EQ(t.config32(kGpu, 0x104), 0x000ff000u);  // offers 256 MiB (bit 12) to 32 GiB (bit 19)
  EXPECT_EQ(t.config32(kGpu, 0x108), 0x00000f20u);
  EXPECT_EQ(t.config32(kGpu, 0x04), 0x00100006u);
  EXPECT_EQ(t.config32(kGpu, 0x0c), 0x00800000u);  // header type 0, multi-function
  EXPECT_EQ(t.config32(kAudio, 0x10), 0x10100000u);
  EXPECT_EQ(t.config32(kAudio, 0x04), 0x00100006u);

  // The BAR really is 32 GiB now: all ones written, the size mask read back.
  t.config_write(kGpuBdf, 0x14, 4, 0xffffffff);
  EXPECT_EQ(t.config_read(kGpuBdf, 0x14, 4), 0xfffffff8u);
  t.config_write(kGpuBdf, 0x14, 4, 0x8);

  // The description says the same.
  ASSERT_EQ(h.functions.size(), 6u);
  const PcieFunctionInfo& gpu = *h.find(kGpuBdf);
  EXPECT_EQ(gpu.vendor, 0x1002);
  EXPECT_EQ(gpu.device, 0x744c);
  EXPECT_EQ(gpu.class_code, 0x030000u);
  EXPECT_EQ(gpu.parent, int(kCardDown));
  ASSERT_EQ(gpu.bars.size(), 4u);
  EXPECT_EQ(gpu.bar(0)->address, 32 * kGiB);
  EXPECT_EQ(gpu.bar(0)->size, 32 * kGiB);
  EXPECT_EQ(gpu.bar(0)->size_before, 256 * kMiB);
  EXPECT_EQ(gpu.bar(2)->address, 64 * kGiB);
  EXPECT_EQ(gpu.bar(2)->size, 2 * kMiB);
  EXPECT_FALSE(gpu.bar(4)->assigned);
  EXPECT_EQ(gpu.bar(5)->address, 0x10000000u);
  ASSERT_EQ(gpu.resizable_bars.size(), 1u);
  EXPECT_EQ(gpu.resizable_bars[0].current, 32 * kGiB);
  EXPECT_EQ(h.text(),
            "00:00.0 1b21:2464 class 060400, switch upstream port: buses 00/01-04, memory "
            "[0x10000000, 0x10200000) 2 MiB, prefetchable [0x800000000, 0x1000200000) 32770 MiB\n"
            "  01:00.0 1b21:2464 class 060400, switch downstream port: buses 01/02-04, memory "
            "[0x10000000, 0x10200000) 2 MiB, prefetchable [0x800000000, 0x1000200000) 32770 MiB\n"
            "    02:00.0 1002:1478 class 060400, switch upstream port: buses 02/03-04, memory "
            "[0x10000000, 0x10200000) 2 MiB, prefetchable [0x800000000, 0x1000200000) 32770 MiB\n"
            "      03:00.0 1002:1479 class 060400, switch downstream port: buses 03/04-04, memory "
            "[0x10000000, 0x10200000) 2 MiB, prefetchable [0x800000000, 0x1000200000) 32770 MiB\n"
            "        04:00.0 1002:744c class 030000, endpoint\n"
            "          BAR0 [0x800000000, 0x1000000000) 32 GiB, 64-bit, prefetchable (resized from "
            "256 MiB)\n"
            "          BAR2 [0x1000000000, 0x1000200000) 2 MiB, 64-bit, prefetchable\n"
            "          BAR4 I/O 256 B, not assigned (no I/O space over this transport)\n"
            "          BAR5 [0x10000000, 0x10100000) 1 MiB, 32-bit, non-prefetchable\n"
            "        04:00.1 1002:ab30 class 040300, endpoint\n"
            "          BAR0 [0x10100000, 0x10104000) 16 KiB, 32-bit, non-prefetchable\n");
  EXPECT_EQ(t.dma_windows(), (std::vector<DmaWindow>{{0x200000, 0x80000}}));
}

TEST(PcieEnumerate, ResizableBarTakesTheLargestSizeThatFits) {
  Asm2464 a;
  EnumerateOptions o = options();
  o.prefetchable = {32 * kGiB, 16 * kGiB};  // 16 GiB + 2 MiB does not fit; 8 GiB does
  const PcieHierarchy h = enumerate_pcie(a.topology, o);
  EXPECT_EQ(h.find(kGpuBdf)->bar(0)->size, 8 * kGiB);
  EXPECT_EQ(a.topology.config32(kGpu, 0x108), 0x00000d20u);  // size 13 = 8 GiB
  EXPECT_EQ(h.find(kGpuBdf)->bar(2)->address, 40 * kGiB);
}

TEST(PcieEnumerate, ResizingCanBeLeftOff) {
  Asm2464 a;
  EnumerateOptions o = options();
  o.resize_bars = false;
  const PcieHierarchy h = enumerate_pcie(a.topology, o);
  EXPECT_EQ(h.find(kGpuBdf)->bar(0)->size, 256 * kMiB);
  EXPECT_EQ(a.topology.config32(kGpu, 0x108), 0x00000820u);
}

TEST(PcieEnumerate, TransportMmioReadsTheGpusRegisterBar) {
  Asm2464 a;
  const PcieHierarchy h = enumerate_pcie(a.topology, options());
  const PcieBarInfo& bar5 = *h.find(kGpuBdf)->bar(5);
  TransportMmio mmio(a.topology, bar5.address, bar5.size, "BAR5 of usb 04:00.0");
  // The emulated RX 7900 XTX's GRBM_STATUS (drivers/emulated_pci.cpp: busy).
  EXPECT_EQ(mmio.read32(amd::kGrbmStatus), 0xa0404000u);
  mmio.write32(0x100, 0x12345678);
  EXPECT_EQ(a.topology.bar(kGpu, 5).read32(0x100), 0x12345678u);
  EXPECT_EQ(error_of([&] { mmio.read32(bar5.size); }),
            "0x100000 is outside BAR5 of usb 04:00.0 (0x100000 bytes)");
  // Streaming through BAR0 (VRAM) at its new top end.
  std::vector<std::byte> out(16), in(16);
  for (size_t i = 0; i < in.size(); i++) in[i] = std::byte(i * 7);
  a.topology.memory_write(64 * kGiB - 16, in);
  a.topology.memory_read(64 * kGiB - 16, out);
  EXPECT_EQ(out, in);
}

TEST(PcieEnumerate, RequestsOutsideTheWindowsAndBusesAreUnsupported) {
  Asm2464 a;
  auto& t = a.topology;
  // Before enumeration no bridge forwards anything.
  EXPECT_EQ(error_of<PcieError>([&] { t.config_read(kGpuBdf, 0, 4); }),
            "config read 04:00.0 +0x0: unsupported request (UR)");
  enumerate_pcie(t, options());
  EXPECT_EQ(error_of<PcieError>([&] { t.config_read({5, 0, 0}, 0, 4); }),
            "config read 05:00.0 +0x0: unsupported request (UR)");
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_read32(0x10104000); }),  // in the window, no BAR
            "memory read 0x10104000 (4 bytes): unsupported request (UR)");
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_write32(0x20000000, 1); }),
            "memory write 0x20000000 (4 bytes): unsupported request (UR)");
  // A range that runs off the end of BAR5.
  std::vector<std::byte> two(8);
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_read(0x100ffffc, two); }),
            "memory read 0x100ffffc (8 bytes): unsupported request (UR)");
  // Memory decode off on the GPU: its BARs stop answering.
  t.config_write(kGpuBdf, 0x04, 2, 0x0004);
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_read32(0x10000000); }),
            "memory read 0x10000000 (4 bytes): unsupported request (UR)");
}

TEST(PcieEnumerate, InjectedFaultsGiveExactErrors) {
  Asm2464 a;
  auto& t = a.topology;
  enumerate_pcie(t, options());
  const uint64_t grbm = 0x10000000 + amd::kGrbmStatus;
  t.fail_memory(grbm, CompletionStatus::UR);
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_read32(grbm); }),
            "memory read 0x10008010 (4 bytes): unsupported request (UR)");
  t.fail_memory(0x10000100, CompletionStatus::CA);
  TransportMmio mmio(t, 0x10000000, 1 * kMiB, "BAR5 of usb 04:00.0");
  try {
    mmio.write32(0x100, 1);
    ADD_FAILURE() << "no error";
  } catch (const PcieError& e) {
    EXPECT_STREQ(e.what(), "memory write 0x10000100 (4 bytes): completer abort (CA)");
    EXPECT_EQ(e.kind(), RequestKind::MemoryWrite);
    EXPECT_EQ(e.status(), CompletionStatus::CA);
    EXPECT_EQ(e.address(), 0x10000100u);
  }
  // A streamed range that holds the failing address fails as a whole.
  std::vector<std::byte> block(64);
  EXPECT_EQ(error_of<PcieError>([&] { t.memory_read(0x100000f0, block); }),
            "memory read 0x100000f0 (64 bytes): completer abort (CA)");

  t.fail_config(kAudio, CompletionStatus::CA);
  EXPECT_EQ(error_of<PcieError>([&] { t.config_write({4, 0, 1}, 0x3c, 1, 5); }),
            "config write 04:00.1 +0x3c: completer abort (CA)");

  t.set_link_down(true);
  EXPECT_EQ(error_of<PcieError>([&] { mmio.read32(0); }),
            "memory read 0x10000000 (4 bytes): unsupported request (UR): link down");
  EXPECT_EQ(error_of<PcieError>([&] { t.config_read({0, 0, 0}, 0, 2); }),
            "config read 00:00.0 +0x0: unsupported request (UR): link down");
  t.set_link_down(false);
  EXPECT_EQ(t.config_read({0, 0, 0}, 0, 2), 0x1b21u);
}

TEST(PcieEnumerate, EnumerationStopsAtAFailedRequest) {
  {
    Asm2464 a;
    a.topology.fail_config(kGpu, CompletionStatus::CA);
    EXPECT_EQ(error_of<PcieError>([&] { enumerate_pcie(a.topology, options()); }),
              "config read 04:00.0 +0x0: completer abort (CA)");
  }
  {
    // A link that is down is no empty bus.
    Asm2464 a;
    a.topology.set_link_down(true);
    EXPECT_EQ(error_of<PcieError>([&] { enumerate_pcie(a.topology, options()); }),
              "config read 00:00.0 +0x0: unsupported request (UR): link down");
  }
}

TEST(PcieEnumerate, ConfigRetryStatusIsRetriedUpToItsBound) {
  {
    Asm2464 a;
    a.topology.retry_config_reads(kGpu, 8);  // ready on the ninth read: 8 retries
    const PcieHierarchy h = enumerate_pcie(a.topology, options());
    EXPECT_EQ(h.find(kGpuBdf)->device, 0x744c);
  }
  {
    Asm2464 a;
    a.topology.retry_config_reads(kGpu, 9);
    EXPECT_EQ(error_of<PcieError>([&] { enumerate_pcie(a.topology, options()); }),
              "config read 04:00.0 +0x0: configuration request retry status (CRS): still not "
              "ready after 8 retries");
    EXPECT_EQ(a.topology.config_reads(kGpu), 9u);
  }
}

// The error enumeration fails with when `change` is applied to the options.
template <class F>
std::string limit_error(F change) {
  Asm2464 a;
  EnumerateOptions o = options();
  change(o);
  return error_of([&] { enumerate_pcie(a.topology, o); });
}

TEST(PcieEnumerate, LimitsAreExactErrors) {
  // Not even BAR0's smallest size, 256 MiB, fits.
  EXPECT_EQ(limit_error([](auto& o) { o.prefetchable = {32 * kGiB, 128 * kMiB}; }),
            "PCIe enumeration: the BARs need 0x10200000 bytes of prefetchable memory from "
            "0x800000000; the aperture has 0x8000000");
  EXPECT_EQ(limit_error([](auto& o) { o.memory = {0x10000000, 1 * kMiB}; }),
            "PCIe enumeration: the BARs need 0x200000 bytes of non-prefetchable memory from "
            "0x10000000; the aperture has 0x100000");
  EXPECT_EQ(limit_error([](auto& o) { o.last_bus = 3; }),
            "PCIe enumeration: bridge 03:00.0 needs bus 4, beyond the last bus 3");
  EXPECT_EQ(limit_error([](auto& o) { o.memory = {0xfff00000, 2 * kMiB}; }),
            "PCIe enumeration: the non-prefetchable aperture [0xfff00000, 0x100100000) 2 MiB "
            "must lie below 4 GiB (a bridge's memory window has 32-bit addresses)");
  EXPECT_EQ(limit_error([](auto& o) { o.prefetchable = {32 * kGiB + 4096, 64 * kGiB}; }),
            "PCIe enumeration: the prefetchable aperture [0x800001000, 0x1800001000) 64 GiB is "
            "not 1 MiB aligned (bridge windows are)");
}

// One function at 00:00.0 whose config space is given as dwords with their writable bits:
// hostile hardware the emulated topology cannot describe (fuzz/fuzz_usb.cpp's model).
class RawFunction final : public PcieTransport {
 public:
  std::map<uint32_t, uint32_t> value, writable;
  std::vector<DmaWindow> dma_windows() const override { return {}; }

 protected:
  Completion do_config_read(Bdf f, uint32_t at, uint8_t, uint32_t& v) override {
    if (f != Bdf{}) return {CompletionStatus::UR, {}};
    v = value.count(at) ? value[at] : 0;
    return Completion::ok();
  }
  Completion do_config_write(Bdf f, uint32_t at, uint8_t byte_enables, uint32_t v) override {
    if (f != Bdf{}) return {CompletionStatus::UR, {}};
    uint32_t mask = 0;
    for (int b = 0; b < 4; b++)
      if (byte_enables >> b & 1) mask |= 0xffu << (8 * b);
    mask &= writable.count(at) ? writable[at] : 0;
    value[at] = (value[at] & ~mask) | (v & mask);
    return Completion::ok();
  }
  Completion do_memory_read(uint64_t, std::span<std::byte>) override { return {}; }
  Completion do_memory_write(uint64_t, std::span<const std::byte>) override { return {}; }
};

// Found by fuzz/fuzz_usb.cpp: a BAR whose writable bits have a hole (0xffef0000: bit 20 stuck)
// was taken as 0x110000 bytes (~mask + 1) and placed misaligned. Linux pci_size() takes the
// lowest writable bit as the size (the BAR decodes that much): 64 KiB, naturally aligned.
TEST(PcieEnumerate, ABarWithAHoleInItsMaskIsSizedByItsLowestBit) {
  RawFunction t;
  t.value = {{0x00, 0x12341002}, {0x08, 0x03000000}};
  t.writable = {{0x04, 0x7}, {0x10, 0xffef0000}};
  const PcieHierarchy h = enumerate_pcie(t, options());
  ASSERT_EQ(h.functions.size(), 1u);
  ASSERT_EQ(h.functions[0].bars.size(), 1u);
  EXPECT_EQ(h.functions[0].bars[0].size, 64u << 10);
  EXPECT_EQ(h.functions[0].bars[0].address, 0x10000000u);
  EXPECT_EQ(t.value[0x10], 0x10000000u);
}

// Found by fuzz/fuzz_usb.cpp: a Resizable BAR offering only sizes that do not fit (1 TiB) on a
// BAR that decodes 4 KiB while its control says 256 MiB was "resized" to the 4 KiB it had,
// computing the size field as ctz(0) (undefined; UBSan). A size no entry offers is never
// written: the control stays as it was and the BAR keeps its size.
TEST(PcieEnumerate, AResizableBarWithNoSizeThatFitsIsLeftAlone) {
  RawFunction t;
  // BAR0 64-bit prefetchable, 4 KiB; Resizable BAR at 0x100: offers 1 TiB only (bit 24),
  // control: BAR 0, one BAR, size 8 (256 MiB).
  t.value = {{0x00, 0x12341002}, {0x08, 0x03000000}, {0x10, 0xc}, {0x100, 0x00010015},
             {0x104, 1u << 24}, {0x108, 0x820}};
  t.writable = {{0x04, 0x7}, {0x10, 0xfffff000}, {0x14, 0xffffffff}, {0x108, 0x3f00}};
  const PcieHierarchy h = enumerate_pcie(t, options());
  ASSERT_EQ(h.functions.size(), 1u);
  ASSERT_EQ(h.functions[0].bars.size(), 1u);
  EXPECT_EQ(h.functions[0].bars[0].size, 4096u);
  EXPECT_EQ(h.functions[0].bars[0].address, 32 * kGiB);
  EXPECT_EQ(t.value[0x108], 0x820u);
}

// Found by fuzz/fuzz_usb.cpp (821,109 executions in): a Resizable BAR capability whose two
// entries both name BAR0, the first offering 1 MiB, the second nothing. The first resized
// the BAR and the second then described it with sizes it does not offer. Each BAR has one
// entry (PCIe Base Specification 7.8.6, "BAR Index"): a second one is an exact error.
TEST(PcieEnumerate, AResizableBarCapabilityNamingABarTwiceIsRefused) {
  RawFunction t;
  // BAR0 32-bit, 256 bytes; Resizable BAR at 0x100 with two entries (NBAR 2 in bits 7:5 of
  // the first control): entry 0 offers 1 MiB (bit 4) for BAR 0, entry 1 nothing for BAR 0.
  t.value = {{0x00, 0x12341002}, {0x08, 0x03000000}, {0x10, 0x0}, {0x100, 0x00010015},
             {0x104, 1u << 4}, {0x108, 0x40}, {0x10c, 0}, {0x110, 0}};
  t.writable = {{0x04, 0x7}, {0x10, 0xffffff00}, {0x108, 0x3f00}, {0x110, 0x3f00}};
  EXPECT_EQ(error_of([&] { enumerate_pcie(t, options()); }),
            "PCIe enumeration: 00:00.0: the Resizable BAR capability names BAR0 in entries 0 "
            "and 1 (one entry per BAR)");
}

TEST(PcieTransport, ConfigRequestsUseByteEnablesAndCheckTheirSize) {
  Asm2464 a;
  auto& t = a.topology;
  // Bytes and words of the upstream port's header: vendor 1b21, device 2464, class 060400.
  EXPECT_EQ(t.config_read({0, 0, 0}, 0, 4), 0x24641b21u);
  EXPECT_EQ(t.config_read({0, 0, 0}, 2, 2), 0x2464u);
  EXPECT_EQ(t.config_read({0, 0, 0}, 0xb, 1), 0x06u);
  EXPECT_EQ(t.config_read({0, 0, 0}, 0xe, 1), 0x01u);  // type 1 header
}

TEST(PcieTransport, MisalignedRequestsAreRefused) {
  Asm2464 a;
  auto& t = a.topology;
  EXPECT_EQ(error_of([&] { t.config_read({0, 0, 0}, 0x11, 2); }),
            "config read 00:00.0 +0x11: 2 bytes must be 2-byte aligned");
  EXPECT_EQ(error_of([&] { t.config_read({0, 0, 0}, 0x10, 3); }),
            "config read 00:00.0 +0x10: 3 bytes (1, 2 or 4)");
  EXPECT_EQ(error_of([&] { t.config_read({0, 0, 0}, 0x1000, 4); }),
            "config read 00:00.0 +0x1000: beyond the 4 KiB configuration space");
  EXPECT_EQ(error_of([&] { t.config_write({0, 0, 0}, 0x19, 1, 0x100); }),
            "config write 00:00.0 +0x19: 0x100 does not fit in 1 bytes");
  EXPECT_EQ(error_of([&] { t.memory_read32(0x10000002); }),
            "memory read 0x10000002 (4 bytes): address and length must be multiples of 4");
}

TEST(PcieTransport, ByteEnabledWritesChangeOnlyTheirBytes) {
  Asm2464 a;
  auto& t = a.topology;
  t.config_write({0, 0, 0}, 0x18, 4, 0x00040100);
  t.config_write({0, 0, 0}, 0x19, 1, 0x02);  // secondary bus only
  EXPECT_EQ(t.config32(kAsmUp, 0x18), 0x00040200u);
  t.config_write({0, 0, 0}, 0x00, 2, 0xffff);  // vendor ID is read-only
  EXPECT_EQ(t.config32(kAsmUp, 0x00), 0x24641b21u);
}

}  // namespace
}  // namespace hcq::usb
