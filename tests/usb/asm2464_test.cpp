// The ASM2464 bridge protocol (issue 18 items 2 and 6): Asm2464Transport over usbfs
// (os::UsbDevice) to the emulated firmware (EmulatedAsm2464) in front of the emulated PCIe
// hierarchy, all through EmulatedKernel + EmulatedUsb. The 0xF0 request bytes are checked
// against tinygrad's format (runtime/support/usb.py _f0_out: '<III' address low, address high,
// value; wValue fmt_type | byte_enables << 8), enumeration over the bridge must give exactly
// what enumeration of the topology directly gives, and every failure has its exact message.
#include "usb/asm2464.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "amd/pci.hpp"
#include "common/error_of.hpp"
#include "os/emulated_usb.hpp"
#include "usb/emu/asm2464_firmware.hpp"
#include "usb/pcie_enumerate.hpp"
#include "usb/rx7900xtx.hpp"

namespace hcq::usb {
namespace {

using testing_support::error_of;
constexpr uint64_t kGiB = 1ull << 30;
constexpr size_t kGpu = 4;  // in asm2464_topology's list
constexpr Bdf kGpuBdf{4, 0, 0};

EnumerateOptions enumerate_options() {
  EnumerateOptions o;
  o.crs_retries = 8;
  o.crs_delay = std::chrono::microseconds(0);
  return o;
}

Asm2464Options fast() {
  Asm2464Options o;
  o.link_timeout = std::chrono::milliseconds(50);
  o.link_poll = std::chrono::milliseconds(1);
  o.retry_delay = std::chrono::microseconds(0);
  o.stream_chunk = 256 << 10;  // a 1 MiB stream takes four requests
  return o;
}

class Asm2464Test : public ::testing::Test {
 protected:
  void SetUp() override { usb.plug("2-1", 3, firmware); }
  os::UsbDeviceInfo info() {
    for (auto& d : os::list_usb_devices(*k))
      if (d.port == "2-1") return d;
    throw Error("2-1 not listed");
  }
  std::unique_ptr<Asm2464Transport> open() {
    device = std::make_unique<os::UsbDevice>(k, info());
    return std::make_unique<Asm2464Transport>(*device, fast());
  }

  std::shared_ptr<os::EmulatedKernel> k = std::make_shared<os::EmulatedKernel>();
  os::EmulatedUsb usb{k};
  std::shared_ptr<emu::EmulatedPcieTopology> topology = std::make_shared<emu::EmulatedPcieTopology>(
      emu::asm2464_topology(rx7900xtx()), std::vector<DmaWindow>{emu::asm2464_sram_window()});
  std::shared_ptr<emu::EmulatedAsm2464> firmware =
      std::make_shared<emu::EmulatedAsm2464>(topology);
  std::unique_ptr<os::UsbDevice> device;
};

// The 8 bytes of a 0xF0 IN as tinygrad _f0_in reads them: u32 data, status in byte 4 bits 7:5,
// the firmware's return status in byte 7 (what fuzz/fuzz_usb.cpp checks on arbitrary bytes).
TEST(Asm2464Completion, DecodesDataStatusAndReturnStatus) {
  using asm2464::decode_completion;
  const uint8_t ok[8] = {0x02, 0x10, 0x4c, 0x74, 0x1f, 0, 0, 0};
  auto c = decode_completion(ok);
  EXPECT_TRUE(c.answered());
  EXPECT_EQ(c.completion.status, CompletionStatus::SC);
  EXPECT_EQ(c.value, 0x744c1002u);
  const uint8_t ur[8] = {0xff, 0xff, 0xff, 0xff, 1 << 5, 0, 0, 0};
  c = decode_completion(ur);
  EXPECT_EQ(c.completion.status, CompletionStatus::UR);
  EXPECT_EQ(c.value, 0u);  // data only with a successful completion
  const uint8_t reserved[8] = {0, 0, 0, 0, 3 << 5, 0, 0, 0};
  c = decode_completion(reserved);
  EXPECT_EQ(c.completion.status, CompletionStatus::CA);
  EXPECT_EQ(c.completion.detail, "reserved completion status 0x3");
  const uint8_t none[8] = {1, 2, 3, 4, 0, 0, 0, 0x5};
  c = decode_completion(none);
  EXPECT_FALSE(c.answered());
  EXPECT_EQ(c.return_status, 0x5);
  EXPECT_EQ(c.value, 0u);
}

TEST_F(Asm2464Test, ListsAsTinygradsCustomFirmware) {
  const os::UsbDeviceInfo d = info();
  EXPECT_EQ(d.vendor, 0xadd1);
  EXPECT_EQ(d.product, 0x0001);
  EXPECT_EQ(d.product_name.rfind("custom", 0), 0u);
}

TEST_F(Asm2464Test, PowersPcieOnAndWaitsForL0) {
  EXPECT_FALSE(firmware->pcie_power());
  auto t = open();
  EXPECT_TRUE(firmware->pcie_power());
  EXPECT_EQ(t->xdata_read(asm2464::kLtssmRegister, 1), std::vector<uint8_t>{0x78});
  EXPECT_EQ(usb.driver("2-1", 0), "usbfs");
  EXPECT_EQ(t->dma_windows(), (std::vector<DmaWindow>{{0x200000, 0x80000}}));
  // Power off: the LTSSM leaves L0 and the hierarchy answers UR.
  t->set_pcie_power(false);
  EXPECT_EQ(t->xdata_read(asm2464::kLtssmRegister, 1), std::vector<uint8_t>{0x00});
  EXPECT_EQ(error_of<PcieError>([&] { t->config_read({0, 0, 0}, 0, 4); }),
            "config read 00:00.0 +0x0: unsupported request (UR)");
}

TEST_F(Asm2464Test, ALinkThatNeverTrainsNamesItsLtssmState) {
  firmware->set_link_training_state(0x11);
  EXPECT_EQ(error_of<TimeoutError>([&] { open(); }),
            "usb 2-1 (add1:0001): ASM2464 PCIe link not up after 50 ms (LTSSM 0x11; L0 is 0x78)");
}

TEST_F(Asm2464Test, EnumeratesTheGpuThroughTwoBridgesAsTheTopologyDirectly) {
  auto t = open();
  const PcieHierarchy h = enumerate_pcie(*t, enumerate_options());
  emu::EmulatedPcieTopology direct(emu::asm2464_topology(rx7900xtx()));
  const PcieHierarchy expected = enumerate_pcie(direct, enumerate_options());
  EXPECT_EQ(h.text(), expected.text());
  ASSERT_NE(h.find(kGpuBdf), nullptr);
  EXPECT_EQ(h.find(kGpuBdf)->bar(0)->address, 32 * kGiB);
  EXPECT_EQ(h.find(kGpuBdf)->bar(5)->address, 0x10000000u);
  // The same config registers, and the same number of reads the GPU answered.
  for (uint32_t offset : {0x04u, 0x10u, 0x14u, 0x24u, 0x108u})
    EXPECT_EQ(topology->config32(kGpu, offset), direct.config32(kGpu, offset)) << offset;
  EXPECT_EQ(topology->config_reads(kGpu), direct.config_reads(kGpu));
  EXPECT_EQ(t->config_read(kGpuBdf, 0, 4), 0x744c1002u);
  EXPECT_EQ(t->config_read(kGpuBdf, 2, 2), 0x744cu);
}

TEST_F(Asm2464Test, AConfigReadIsOneF0RequestInTinygradsFormat) {
  auto t = open();
  enumerate_pcie(*t, enumerate_options());
  EXPECT_EQ(t->config_read(kGpuBdf, 0x2, 2), 0x744cu);
  // bmRequestType 0x40 (vendor, OUT), bRequest 0xF0, wValue 0x05 (type 1 configuration read)
  // | byte enables 0b1100 << 8, wIndex 0; data: address 4 << 24 (bus 4) low, high, value 0.
  const os::UsbSetup s = firmware->last_tlp_setup();
  EXPECT_EQ(s.request_type, 0x40);
  EXPECT_EQ(s.request, 0xF0);
  EXPECT_EQ(s.value, 0x0c05);
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(firmware->last_tlp_data(),
            (std::vector<uint8_t>{0x00, 0x00, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0}));
  const asm2464::TlpRequest r = asm2464::tlp_request(0x05, 0x0c, 0x04000000, 0);
  EXPECT_EQ(r.setup.value, 0x0c05);
  EXPECT_EQ(std::vector<uint8_t>(r.data.begin(), r.data.end()), firmware->last_tlp_data());
  // Bus 0 is the bridge's own port: type 0 (0x04). Device 1 function 2 offset 0x10.
  EXPECT_EQ(asm2464::config_address({3, 1, 2}, 0x10), 0x030a0010u);
}

TEST_F(Asm2464Test, ReadsAGpuRegisterThroughTransportMmio) {
  auto t = open();
  const PcieHierarchy h = enumerate_pcie(*t, enumerate_options());
  const PcieBarInfo& bar5 = *h.find(kGpuBdf)->bar(5);
  TransportMmio mmio(*t, bar5.address, bar5.size, "BAR5 of usb 04:00.0");
  EXPECT_EQ(mmio.read32(amd::kGrbmStatus), 0xa0404000u);
  mmio.write32(0x100, 0x12345678);
  EXPECT_EQ(topology->bar(kGpu, 5).read32(0x100), 0x12345678u);
}

TEST_F(Asm2464Test, StreamsOneMebibyteIntoVramAndBack) {
  auto t = open();
  enumerate_pcie(*t, enumerate_options());
  std::vector<uint32_t> data(1 << 18);
  std::iota(data.begin(), data.end(), 0x1000u);
  t->memory_write(32 * kGiB, std::as_bytes(std::span(data)));
  EXPECT_EQ(topology->bar(kGpu, 0).read32(0), 0x1000u);
  EXPECT_EQ(topology->bar(kGpu, 0).read32((1 << 20) - 4), 0x1000u + (1 << 18) - 1);
  std::vector<uint32_t> back(data.size());
  t->memory_read(32 * kGiB, std::as_writable_bytes(std::span(back)));
  EXPECT_EQ(back, data);
  // The last request was the fourth 256 KiB chunk: mode 2, 0x10000 dwords at 32 GiB + 768 KiB.
  EXPECT_EQ(firmware->last_tlp_setup().index, 2);
  EXPECT_EQ(firmware->last_tlp_data(),
            (std::vector<uint8_t>{0x00, 0x00, 0x0c, 0x00, 0x08, 0, 0, 0, 0x00, 0x00, 0x01, 0}));
}

// The headers let several threads use one transport at once: each thread's config reads,
// register writes and read-backs, and streams through the same bridge stay whole (one lock
// makes each request and its completion one exchange on the device).
TEST_F(Asm2464Test, SeveralThreadsShareOneTransport) {
  auto t = open();
  const PcieHierarchy h = enumerate_pcie(*t, enumerate_options());
  const PcieBarInfo& bar5 = *h.find(kGpuBdf)->bar(5);
  TransportMmio mmio(*t, bar5.address, bar5.size, "BAR5 of usb 04:00.0");
  constexpr int kThreads = 4, kRounds = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      const uint64_t vram = 32 * kGiB + uint64_t(i) * 65536;
      std::vector<uint32_t> data(1024), back(1024);
      for (int r = 0; r < kRounds; ++r) {
        if (t->config_read(kGpuBdf, 0, 4) != 0x744c1002u) ++wrong;
        const uint32_t value = 0x1000u * uint32_t(i + 1) + uint32_t(r);
        mmio.write32(0x100 + 4 * uint32_t(i), value);
        if (mmio.read32(0x100 + 4 * uint32_t(i)) != value) ++wrong;
        std::iota(data.begin(), data.end(), value << 8);
        t->memory_write(vram, std::as_bytes(std::span(data)));
        t->memory_read(vram, std::as_writable_bytes(std::span(back)));
        if (back != data) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(topology->bar(kGpu, 5).read32(0x100 + 4 * uint32_t(i)),
              0x1000u * uint32_t(i + 1) + kRounds - 1);
}

TEST_F(Asm2464Test, UnclaimedAddressesCompleteUnsupportedRequest) {
  auto t = open();
  enumerate_pcie(*t, enumerate_options());
  EXPECT_EQ(error_of<PcieError>([&] { t->memory_read32(0x20000000); }),
            "memory read 0x20000000 (4 bytes): unsupported request (UR)");
  EXPECT_EQ(error_of<PcieError>([&] { t->config_read({5, 0, 0}, 0, 4); }),
            "config read 05:00.0 +0x0: unsupported request (UR)");
  std::vector<uint32_t> two(2);
  EXPECT_EQ(error_of<PcieError>([&] { t->memory_read(0x20000000, std::as_writable_bytes(std::span(two))); }),
            "memory read 0x20000000 (8 bytes): unsupported request (UR): the bridge stalled the "
            "stream on bulk IN 0x81");
  // A posted write gets no completion: lost, as on a real link.
  t->memory_write32(0x20000000, 1);
  EXPECT_EQ(firmware->lost_writes(), 1u);
  // Completer abort from the device.
  topology->fail_memory(0x10000000, CompletionStatus::CA);
  EXPECT_EQ(error_of<PcieError>([&] { t->memory_read32(0x10000000); }),
            "memory read 0x10000000 (4 bytes): completer abort (CA)");
}

TEST_F(Asm2464Test, CrsIsRetriedByEnumeration) {
  auto t = open();
  topology->retry_config_reads(kGpu, 3);
  const PcieHierarchy h = enumerate_pcie(*t, enumerate_options());
  emu::EmulatedPcieTopology direct(emu::asm2464_topology(rx7900xtx()));
  enumerate_pcie(direct, enumerate_options());
  EXPECT_EQ(topology->config_reads(kGpu), direct.config_reads(kGpu) + 3);
  EXPECT_EQ(h.find(kGpuBdf)->device, 0x744c);
  topology->retry_config_reads(kGpu, 1);
  EXPECT_EQ(error_of<PcieError>([&] { t->config_read(kGpuBdf, 0, 4); }),
            "config read 04:00.0 +0x0: configuration request retry status (CRS)");
}

TEST_F(Asm2464Test, AReturnStatusIsRetriedABoundedNumberOfTimes) {
  auto t = open();
  firmware->fail_completions(10, 0x01);  // tinygrad: ten retries after the first try
  EXPECT_EQ(t->config_read({0, 0, 0}, 0, 4), 0x24641b21u);
  firmware->fail_completions(11, 0x01);
  EXPECT_EQ(error_of<Error>([&] { t->config_read({0, 0, 0}, 0, 4); }),
            "usb 2-1 (add1:0001): config read 00:00.0 +0x0: the ASM2464 answered return status "
            "0x1 11 times (no completion)");
}

TEST_F(Asm2464Test, SramWriteLandsInTheDmaWindow) {
  auto t = open();
  std::vector<uint8_t> data(1000);
  std::iota(data.begin(), data.end(), uint8_t(7));
  t->sram_write(data);
  EXPECT_EQ(firmware->sram(0, 1000), data);
  EXPECT_EQ(t->xdata_read(0xF000, 4), (std::vector<uint8_t>{7, 8, 9, 10}));
}

TEST_F(Asm2464Test, ADisconnectMidStreamFailsAtOnce) {
  auto t = open();
  enumerate_pcie(*t, enumerate_options());
  firmware->fail_next_bulk(os::UsbReply::disconnect());
  std::vector<uint32_t> data(1 << 18);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of<OsError>([&] { t->memory_write(32 * kGiB, std::as_bytes(std::span(data))); }),
            "usb 2-1 (add1:0001): bulk OUT of 262144 bytes on endpoint 0x02: the device is "
            "disconnected: Cannot send after transport endpoint shutdown (errno 108)");
  // Afterwards every request fails at once with ENODEV.
  EXPECT_EQ(error_of<OsError>([&] { t->memory_read32(32 * kGiB); }),
            "usb 2-1 (add1:0001): control OUT request 0xf0 (type 0x40, value 0xf20, index 0x0) of "
            "12 bytes: the device is disconnected: No such device (errno 19)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace hcq::usb
