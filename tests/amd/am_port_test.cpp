// The am: driver where the CPU maps no device memory (issue 18: a GPU behind a USB bridge),
// before the USB function exists: the emulated RX 7900 XTX's VFIO function behind a wrapper
// that hides its mappings, as the bridge does. VRAM only through the port (each access
// recorded), no host DMA but a window of host pages at a fixed device address (the bridge's
// SRAM: 0x80000 bytes at PCI address 0x200000), doorbells rung through the function, no MSI.
// The driver's own work (copies, signals, wake-ups) runs on it and is verified through the
// port; its exact errors; a submission's ring range goes out in one write.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <utility>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "amd/am/am_driver.hpp"
#include "amd/am/am_function.hpp"
#include "amd/am/am_driver.hpp"
#include "amd/am/vfio_function.hpp"
#include "amd/emu/am_system.hpp"
#include "common/error_of.hpp"
#include "core/command_stream.hpp"
#include "core/error.hpp"
#include "os/pci.hpp"

namespace hcq::amd::am {
namespace {

using emu::AmEmulatedSystem;
using testing_support::error_of;

constexpr uint64_t kWindowAddress = 0x200000, kWindowBytes = 0x80000;

// What went through the port, in order.
struct PortLog {
  std::mutex mu;
  std::vector<std::string> lines;  // "vram write 0x1000 +0x10", "window write ...", "doorbell 3 0x8"
  void add(std::string line) {
    std::lock_guard lk(mu);
    lines.push_back(std::move(line));
  }
  std::vector<std::string> take() {
    std::lock_guard lk(mu);
    return std::exchange(lines, {});
  }
};

// The inner function's VRAM, only through write/read (and the page tables' 64-bit accesses).
class HiddenVram final : public VramPort {
 public:
  HiddenVram(VramPort& inner, PortLog& log) : inner_(inner), log_(log) {}
  uint64_t read64(uint64_t pa) override { return inner_.read64(pa); }
  void write64(uint64_t pa, uint64_t value) override { inner_.write64(pa, value); }
  uint64_t size() const override { return inner_.size(); }
  void write(uint64_t pa, std::span<const std::byte> data) override {
    log_.add("vram write " + hex(pa) + " +" + hex(data.size()));
    inner_.write(pa, data);
  }
  void read(uint64_t pa, std::span<std::byte> out) override {
    log_.add("vram read " + hex(pa) + " +" + hex(out.size()));
    inner_.read(pa, out);
  }
  std::byte* mapping() const override { return nullptr; }

 private:
  VramPort& inner_;
  PortLog& log_;
};

class HiddenFunction final : public AmFunction {
 public:
  HiddenFunction(std::unique_ptr<AmFunction> inner, PortLog& log)
      : inner_(std::move(inner)), vram_(inner_->vram(), log), log_(log) {
    void* p = mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw Error("test: mmap of the window failed");
    window_ = static_cast<std::byte*>(p);
    inner_->map_dma(window_, kWindowAddress, kWindowBytes);
  }
  ~HiddenFunction() override {
    inner_->unmap_dma(kWindowAddress, kWindowBytes);
    munmap(window_, kWindowBytes);
  }
  const std::string& name() const override { return inner_->name(); }
  os::Mmio& registers() override { return inner_->registers(); }
  VramPort& vram() override { return vram_; }
  uint64_t doorbell_bytes() const override { return inner_->doorbell_bytes(); }
  volatile uint64_t* doorbell_mapping(uint32_t) override { return nullptr; }
  void ring_doorbell(uint32_t index, uint64_t value) override {
    log_.add("doorbell " + std::to_string(index) + " " + hex(value));
    inner_->ring_doorbell(index, value);
  }
  void set_bus_master(bool on) override { inner_->set_bus_master(on); }
  bool maps_host_memory() const override { return false; }
  void map_dma(void*, uint64_t, uint64_t) override {
    throw InvalidInput("test: no DMA outside the window");
  }
  void unmap_dma(uint64_t, uint64_t) override {
    throw InvalidInput("test: no DMA outside the window");
  }
  void map_vram(void*, uint64_t, uint64_t) override {
    throw InvalidInput("test: VRAM is not mapped for the CPU");
  }
  std::optional<HostWindow> host_window() const override {
    return HostWindow{kWindowAddress, kWindowBytes};
  }
  void write_host_window(uint64_t offset, std::span<const std::byte> data) override {
    check(offset, data.size());
    log_.add("window write " + hex(offset) + " +" + hex(data.size()));
    std::memcpy(window_ + offset, data.data(), data.size());
  }
  void read_host_window(uint64_t offset, std::span<std::byte> out) override {
    check(offset, out.size());
    log_.add("window read " + hex(offset) + " +" + hex(out.size()));
    std::memcpy(out.data(), window_ + offset, out.size());
  }
  bool enable_msi(int) override { return false; }
  void disable_msi() override {}

  std::byte* window() const { return window_; }

 private:
  static void check(uint64_t offset, uint64_t size) {
    if (offset > kWindowBytes || kWindowBytes - offset < size)
      throw InvalidInput("test: outside the window");
  }
  std::unique_ptr<AmFunction> inner_;
  HiddenVram vram_;
  PortLog& log_;
  std::byte* window_ = nullptr;
};

struct Hidden {
  std::shared_ptr<AmEmulatedSystem> sys = emu::make_am_emulated_system();
  PortLog log;
  HiddenFunction* function = nullptr;
  std::unique_ptr<AmDriver> drv;
  Hidden() {
    std::shared_ptr<os::Kernel> kernel(sys, sys->kernel().get());
    auto vfio = std::make_unique<VfioFunction>(
        kernel, os::pci_function(*kernel, AmEmulatedSystem::kAddress), nullptr);
    auto hidden = std::make_unique<HiddenFunction>(std::move(vfio), log);
    function = hidden.get();
    drv = std::make_unique<AmDriver>(kernel, std::move(hidden), sys->firmware_dir(),
                                     "emu:gfx1100_am");
  }
  uint64_t read64(uint64_t va) {
    uint64_t v = 0;
    drv->read_memory(va, std::as_writable_bytes(std::span(&v, 1)));
    return v;
  }
  // Submits what `encode` writes and waits for its wake-up (the signal's value at `signal`).
  void run(HwQueue& q, uint64_t signal, uint64_t value,
           const std::function<void(Encoder&, CommandStream&, std::vector<PatchSite>&)>& encode,
           QueueKind kind) {
    auto enc = drv->encoder(kind);
    CommandStream cs;
    std::vector<PatchSite> sites;
    encode(*enc, cs, sites);
    enc->signal(cs, signal, value, true, sites);
    q.submit(cs.data(), cs.size());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read64(signal) != value) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no signal";
      drv->wait_interrupt(std::chrono::milliseconds(100));
    }
  }
};

TEST(AmPort, TheDriverSaysItsMemoryIsNotMapped) {
  Hidden h;
  const Capabilities& caps = h.drv->properties().caps;
  EXPECT_FALSE(caps.cpu_maps_memory);
  EXPECT_EQ(caps.host_window_bytes, kWindowBytes);
  EXPECT_FALSE(caps.map_host);
  EXPECT_TRUE(caps.host_reachable);
  const Allocation d = h.drv->allocate(h.drv->va_base(), 0x2000, MemoryKind::Device, false);
  const Allocation w = h.drv->allocate(h.drv->va_base() + 0x2000, 0x1000, MemoryKind::Host, false);
  EXPECT_EQ(d.host, nullptr);
  EXPECT_EQ(w.host, nullptr);
  h.drv->free(d);
  h.drv->free(w);
}


std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; i++) out[i] = std::byte(uint8_t(i * 13 + size_t(seed)));
  return out;
}

std::vector<std::byte> read_bytes(AmDriver& drv, uint64_t va, size_t n) {
  std::vector<std::byte> out(n);
  drv.read_memory(va, out);
  return out;
}

// Copies between VRAM buffers and the window, and signals, run on the copy and the compute
// queue; the CPU reaches every byte through the port.
TEST(AmPort, CopiesAndSignalsRunAndAreVerifiedThroughThePort) {
  Hidden h;
  AmDriver& drv = *h.drv;
  const uint64_t base = drv.va_base();
  const Allocation src = drv.allocate(base, 0x10000, MemoryKind::Device, false);
  const Allocation dst = drv.allocate(base + 0x10000, 0x10000, MemoryKind::Device, false);
  const Allocation staging = drv.allocate(base + 0x20000, 0x4000, MemoryKind::Host, false);
  const Allocation signals = drv.allocate(base + 0x30000, 0x1000, MemoryKind::Device, false);
  const std::vector<std::byte> zeros(0x1000);
  drv.write_memory(signals.va, zeros);
  auto copy = drv.create_queue(QueueKind::Copy);
  auto compute = drv.create_queue(QueueKind::Compute);
  auto copy_op = [](uint64_t to, uint64_t from, uint64_t n) {
    return [=](Encoder& e, CommandStream& cs, std::vector<PatchSite>& sites) {
      e.copy(cs, to, from, n, sites);
    };
  };

  // VRAM to VRAM.
  const std::vector<std::byte> a = pattern(0x10000, 1);
  drv.write_memory(src.va, a);
  h.run(*copy, signals.va, 1, copy_op(dst.va, src.va, 0x10000), QueueKind::Copy);
  EXPECT_EQ(read_bytes(drv, dst.va, 0x10000), a);

  // The window (the bridge's SRAM) to VRAM, as lib/core stages a copy in.
  const std::vector<std::byte> b = pattern(0x4000, 2);
  drv.write_memory(staging.va, b);
  EXPECT_EQ(std::memcmp(h.function->window() + staging.handle, b.data(), b.size()), 0);
  h.run(*copy, signals.va, 2, copy_op(dst.va + 0x1000, staging.va, 0x4000), QueueKind::Copy);
  std::vector<std::byte> expect = a;
  std::copy(b.begin(), b.end(), expect.begin() + 0x1000);
  EXPECT_EQ(read_bytes(drv, dst.va, 0x10000), expect);

  // VRAM to the window: the GPU writes the host pages behind it.
  h.run(*copy, signals.va, 3, copy_op(staging.va, src.va + 0x8000, 0x4000), QueueKind::Copy);
  EXPECT_EQ(std::memcmp(h.function->window() + staging.handle, a.data() + 0x8000, 0x4000), 0);
  EXPECT_EQ(read_bytes(drv, staging.va, 0x4000),
            std::vector<std::byte>(a.begin() + 0x8000, a.begin() + 0xc000));

  // A signal with a wake-up on the compute queue: the wait polls the mailbox in VRAM.
  h.run(*compute, signals.va + 8, 7, [](Encoder&, CommandStream&, std::vector<PatchSite>&) {},
        QueueKind::Compute);
  EXPECT_EQ(h.read64(signals.va + 8), 7u);
  copy.reset();
  compute.reset();
  for (const Allocation& x : {src, dst, staging, signals}) drv.free(x);
}

// One submission: its ring range in one write, the write pointer in another, the doorbell
// through the function; the next one continues right after it.
TEST(AmPort, ASubmissionPublishesItsRingRangeInOneWrite) {
  Hidden h;
  auto q = h.drv->create_queue(QueueKind::Compute);
  h.log.take();
  const uint32_t nops[4] = {0xc0001000, 0, 0xc0001000, 0};  // PM4 NOPs, one body dword each
  q->submit(nops, 2);
  const std::vector<std::string> first = h.log.take();
  ASSERT_EQ(first.size(), 3u);
  unsigned long long ring = 0, wptr = 0;
  unsigned doorbell = 0;
  ASSERT_EQ(std::sscanf(first[0].c_str(), "vram write %llx +0x8", &ring), 1) << first[0];
  ASSERT_EQ(std::sscanf(first[1].c_str(), "vram write %llx +0x8", &wptr), 1) << first[1];
  ASSERT_EQ(std::sscanf(first[2].c_str(), "doorbell %u 0x2", &doorbell), 1) << first[2];
  q->submit(nops, 4);
  EXPECT_EQ(h.log.take(), (std::vector<std::string>{"vram write " + hex(ring + 8) + " +0x10",
                                                    "vram write " + hex(wptr) + " +0x8",
                                                    "doorbell " + std::to_string(doorbell) +
                                                        " 0x6"}));
}

TEST(AmPort, ThePortsErrorsAreExact) {
  Hidden h;
  AmDriver& drv = *h.drv;
  const uint64_t base = drv.va_base();
  const Allocation d = drv.allocate(base, 0x2000, MemoryKind::Device, false);
  const std::vector<std::byte> eight(8);
  EXPECT_EQ(error_of([&] { drv.write_memory(base + 0x2000, eight); }),
            "emu:gfx1100_am: [" + hex(base + 0x2000) + ", +0x8) is in no allocation");
  EXPECT_EQ(error_of([&] { drv.write_memory(base + 0x1ffc, eight); }),
            "emu:gfx1100_am: [" + hex(base + 0x1ffc) + ", +0x8) leaves the allocation [" +
                hex(base) + ", +0x2000)");
  std::vector<std::byte> out(8);
  EXPECT_EQ(error_of([&] { drv.read_memory(base - 0x1000, out); }),
            "emu:gfx1100_am: [" + hex(base - 0x1000) + ", +0x8) is in no allocation");
  void* p = mmap(nullptr, 0x1000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(error_of([&] { drv.map_user(p, 0x1000); }),
            "emu:gfx1100_am: cannot map user memory [" + hex(reinterpret_cast<uint64_t>(p)) +
                ", +0x1000): the device cannot reach host memory outside the bridge's SRAM "
                "window (0x80000 bytes at 0x200000)");
  munmap(p, 0x1000);
  EXPECT_EQ(error_of<Error>([&] { drv.allocate(base + 0x100000, 0x81000, MemoryKind::Host, false); }),
            "emu:gfx1100_am: 0x81000 bytes of host memory do not fit the host window (0x80000 "
            "bytes at 0x200000): 0x80000 bytes free, largest free range 0x80000");

  // A write that is not whole dwords goes to the port as it is: merging partly covered
  // dwords is the port's work (VramPort; TransportVram's test checks it byte by byte).
  std::vector<std::byte> words = pattern(16, 3);
  drv.write_memory(base, words);
  h.log.take();
  const std::byte three[3] = {std::byte(0xaa), std::byte(0xbb), std::byte(0xcc)};
  drv.write_memory(base + 5, three);
  EXPECT_EQ(h.log.take(), (std::vector<std::string>{"vram write " + hex(d.handle + 5) + " +0x3"}));
  std::copy(std::begin(three), std::end(three), words.begin() + 5);
  EXPECT_EQ(read_bytes(drv, base, 16), words);
  std::vector<std::byte> odd(3);
  drv.read_memory(base + 6, odd);
  EXPECT_EQ(odd, std::vector<std::byte>(words.begin() + 6, words.begin() + 9));
  drv.free(d);
}

// A queue stuck in an indirect buffer: the report reads the read pointer and the buffer
// through the port; released through the port, the queue finishes.
TEST(AmPort, AHangReportReadsThroughThePort) {
  Hidden h;
  AmDriver& drv = *h.drv;
  const uint64_t base = drv.va_base();
  const Allocation ib = drv.allocate(base, 0x1000, MemoryKind::Device, false);
  const Allocation signals = drv.allocate(base + 0x1000, 0x1000, MemoryKind::Device, false);
  drv.write_memory(signals.va, std::vector<std::byte>(0x1000));
  auto q = drv.create_queue(QueueKind::Compute);
  auto enc = drv.encoder(QueueKind::Compute);
  CommandStream cs;
  std::vector<PatchSite> sites;
  enc->wait(cs, signals.va, 1, sites);
  drv.write_memory(ib.va, std::as_bytes(std::span(cs.data(), cs.size())));
  q->submit_indirect(ib.va, cs.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string report;
  while ((report = drv.hang_report()).find("WAIT_REG_MEM") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(report.rfind("emu:gfx1100_am: compute queue 0: read pointer 0x0, write pointer 0x4", 0), 0u)
      << report;
  EXPECT_NE(report.find("    indirect buffer " + hex(ib.va)), std::string::npos) << report;
  EXPECT_NE(report.find("WAIT_REG_MEM"), std::string::npos) << report;
  EXPECT_EQ(report.find("not mapped for the CPU"), std::string::npos) << report;
  // After the queues, the ASIC's blocks, one line each.
  const std::string blocks =
      "\ngmc: MM hub up, GC hub up\nih: 0 ring overflows, entries none waiting\n"
      "gfx: 1 compute queue on ME 1\nsdma: copy queues on no engine";
  EXPECT_EQ(report.substr(report.size() - std::min(report.size(), blocks.size())), blocks) << report;

  const uint64_t one = 1;
  drv.write_memory(signals.va, std::as_bytes(std::span(&one, 1)));
  h.run(*q, signals.va + 8, 2, [](Encoder&, CommandStream&, std::vector<PatchSite>&) {},
        QueueKind::Compute);
  // The wake-up's own packet after the signal may still be in flight: idle soon after.
  const auto idle_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!drv.hang_report().empty() && std::chrono::steady_clock::now() < idle_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(drv.hang_report(), "");
  q.reset();
  drv.free(ib);
  drv.free(signals);
}

}  // namespace
}  // namespace hcq::amd::am
