// The am: driver booting the register-level emulated RX 7900 XTX (emu:gfx1100_am) end to end:
// a cold boot, a boot over a previous boot (the mode-1 reset path), a boot after one that died
// half way, and the work the booted GPU then runs, verified.
#include "amd/emu/am_system.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "amd/am/am_driver.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_gpu.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "core/hcq.hpp"
#include "emulated_pci.hpp"
#include "os/emulated_vfio.hpp"
#include "os/mmio.hpp"
#include "os/vfio.hpp"

namespace hcq::amd::am {
namespace {

using emu::AmEmulatedSystem;
using testing_support::error_of;

// One emulated system several drivers open in turn, as processes would one after another.
struct System {
  std::shared_ptr<AmEmulatedSystem> sys = emu::make_am_emulated_system();
  std::unique_ptr<AmDriver> open(AmDriverOptions options = {}) {
    options.boot.reset_settle = std::chrono::milliseconds(1);
    std::shared_ptr<os::Kernel> kernel(sys, sys->kernel().get());
    return std::make_unique<AmDriver>(kernel, AmEmulatedSystem::kAddress, sys->firmware_dir(),
                                      "emu:gfx1100_am", std::move(options));
  }
};

std::vector<std::string> phases_run(const BootReport& r) {
  std::vector<std::string> out;
  for (auto& p : r.phases)
    if (p.run) out.push_back(p.name);
  return out;
}

// A device over the driver runs a copy in and out through the copy queue and a signal on the
// compute queue: the booted GPU works.
void expect_working(std::unique_ptr<AmDriver> drv) {
  auto dev = std::make_unique<Device>(std::move(drv), Device::Options{});
  std::vector<uint8_t> in(1 << 20), out(in.size());
  for (size_t i = 0; i < in.size(); i++) in[i] = uint8_t(i * 7 + 3);
  Buffer b = dev->allocate(in.size());
  dev->copy_in(b, 0, in.data(), in.size());
  dev->copy_out(out.data(), b, 0, out.size());
  EXPECT_EQ(out, in);
  Signal s = dev->new_signal();
  hcq::ComputeQueue q(*dev);
  q.signal(s, 5);
  q.submit();
  s.wait(5, std::chrono::seconds(5));
}

TEST(AmSystem, ColdBootRunsEveryPhaseAndTheGpuWorks) {
  System s;
  auto drv = s.open();
  const BootReport& r = drv->boot_report();
  EXPECT_EQ(r.previous.describe(), "cold (sOS not running, no boot marker), SMU answering");
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(phases_run(r), (std::vector<std::string>{"discovery", "firmware", "soc", "gmc", "ih",
                                                      "psp", "smu", "gfx", "sdma"}));
  EXPECT_EQ(r.vram_size, 24ull << 30);
  EXPECT_TRUE(s.sys->psp().sos_alive());
  EXPECT_TRUE(s.sys->psp().rlc_autoload_done());
  EXPECT_EQ(s.sys->gpu().mode1_resets(), 0u);
  expect_working(std::move(drv));
}

// The HDP: flushed by the boot, after every page-table change, after an MQD, before every
// doorbell (one counted write of the remapped HDP_MEM_FLUSH_CNTL each).
TEST(AmSystem, TheHdpIsFlushedAfterPageTablesAndMqdsAndBeforeEveryDoorbell) {
  System s;
  auto drv = s.open();
  const emu::AmGpu& gpu = s.sys->gpu();
  const uint64_t booted = gpu.hdp_mem_flushes();
  EXPECT_GT(booted, 0u);
  const Allocation a = drv->allocate(drv->va_base(), 2 << 20, MemoryKind::Device, false);
  EXPECT_EQ(gpu.hdp_mem_flushes(), booted + 1);  // the map
  drv->free(a);
  EXPECT_EQ(gpu.hdp_mem_flushes(), booted + 2);  // the unmap, before its invalidation
  auto q = drv->create_queue(QueueKind::Compute);
  EXPECT_EQ(gpu.hdp_mem_flushes(), booted + 6);  // ring, pointers, EOP buffer; the MQD
  const uint32_t nop[2] = {0xc0001000, 0};       // PM4 NOP, one body dword
  q->submit(nop, 2);
  EXPECT_EQ(gpu.hdp_mem_flushes(), booted + 7);  // before the doorbell
}

// gfx1100's PSP block booting without the HDP: it never flushes.
class PspWithoutHdpFlushes final : public IpBlockDriver {
 public:
  explicit PspWithoutHdpFlushes(std::unique_ptr<IpBlockDriver> psp) : psp_(std::move(psp)) {}
  void init(BootContext& c) override {
    BootContext no_flush = c;
    no_flush.hdp = nullptr;
    psp_->init(no_flush);
  }
  void fini(BootContext& c) override { psp_->fini(c); }

 private:
  std::unique_ptr<IpBlockDriver> psp_;
};

// A PSP block that does not flush: the emulated PSP takes the second bootloader component
// (the soc block's flush covered the first) as stale, and the boot fails naming it.
TEST(AmSystem, APspPhaseWithoutHdpFlushesFails) {
  System s;
  AmDriverOptions options;
  options.make_block = [](const BlockSpec& spec, AmAsic& asic) {
    std::unique_ptr<IpBlockDriver> b = AmAsic::standard_block(spec, asic);
    if (spec.kind == BlockKind::Psp) return std::unique_ptr<IpBlockDriver>(new PspWithoutHdpFlushes(std::move(b)));
    return b;
  };
  EXPECT_EQ(error_of<Error>([&] { s.open(options); }),
            "PSP bootloader LOAD_TOS_SPL_TABLE (0x10000000) with psp_13_0_0_sos.bin part 'kdb': "
            "MP0_SMN_C2PMSG_35 reads 0x80000004, error 0x4 in bits 7:0");
  EXPECT_EQ(s.sys->psp().last_error(),
            "bootloader: LOAD_TOS_SPL_TABLE: no HDP flush since the last command (the component "
            "may still sit in the HDP)");
}

// gfx1100's discovery table with OSSSYS (the IH) and MP1 (the SMU) in other versions.
std::vector<std::byte> table_with_other_versions() {
  emu::DiscoveryTableSpec spec = emu::gfx1100_discovery_spec();
  for (auto& die : spec.dies)
    for (emu::DiscoveryIpEntry& ip : die) {
      if (ip.hw_id == hw_id::OSSSYS) ip.revision = 3;  // 6.0.3
      if (ip.hw_id == hw_id::MP1) ip.minor = 0, ip.revision = 7;  // 13.0.7
    }
  return emu::write_discovery_table(spec);
}

// A second ASIC is a table (asic.hpp): a GPU whose discovery table reports other IP versions
// is refused by the known descriptions, naming the first that differs, and boots and works
// with a description that lists those versions and nothing else new.
TEST(AmSystem, ASecondAsicThatIsOnlyATableBootsAndWorks) {
  System s;
  emu::AmSystemOptions options;
  options.discovery = table_with_other_versions();
  s.sys = emu::make_am_emulated_system(std::move(options));
  EXPECT_EQ(error_of<InvalidInput>([&] { s.open(); }),
            "IP discovery table: OSSSYS 6.0.3 where hcq's gfx1100 has OSSSYS 6.0.0");

  AsicDescription other = gfx1100_asic();
  for (BlockSpec& b : other.blocks) {
    if (b.kind == BlockKind::Ih) b.version = {6, 0, 3};
    if (b.kind == BlockKind::Smu) b.version = {13, 0, 7};
  }
  AmDriverOptions with_it;
  with_it.asics = {&gfx1100_asic(), &other};  // GC 11.0.0 both: the first whose blocks all match
  auto drv = s.open(with_it);
  const BootReport& r = drv->boot_report();
  EXPECT_EQ(&drv->asic().description(), &other);
  std::string versions;
  for (auto& [name, v] : r.ip_versions) versions += name + " " + v.to_string() + ", ";
  EXPECT_EQ(versions, "NBIF 4.3.0, MMHUB 3.0.0, OSSSYS 6.0.3, MP0 13.0.0, MP1 13.0.7, GC 11.0.0, "
                      "SDMA0 6.0.0, HDP 6.0.0, ");
  EXPECT_EQ(phases_run(r), (std::vector<std::string>{"discovery", "firmware", "soc", "gmc", "ih",
                                                      "psp", "smu", "gfx", "sdma"}));
  expect_working(std::move(drv));
}

// OSSSYS 6.0.3 of the fake ASIC above, with IH_RB_BASE moved from dword 0x81 of segment 0 to
// 0xa0 (free in OSSSYS 6.0.0): the table a new IP version's .def would give.
std::vector<RegDesc> osssys_with_a_moved_register() {
  std::vector<RegDesc> t;
  for (const RegDesc& r : registers())
    if (r.reg.ip == Ip::OSSSYS) t.push_back(r);
  for (RegDesc& r : t) {
    EXPECT_NE(r.reg.offset, 0xa0u) << r.name;  // the new place is free
    r.file = "osssys_6_0_3";
    if (r.name == "IH_RB_BASE") r.reg.offset = 0xa0;
  }
  return t;
}

// The same second ASIC with one register moved is still only a table: the driver and the
// emulated GPU both place IH_RB_BASE from it, the boot and the GPU work, and the ring base lands
// at the new place. Without the table the driver writes the old place, where the GPU does not
// look: the moved register is what the test exercises.
TEST(AmSystem, AnAsicWithAMovedRegisterIsATableToo) {
  static const std::vector<RegDesc> moved = osssys_with_a_moved_register();
  AsicDescription other = gfx1100_asic();
  for (BlockSpec& b : other.blocks) {
    if (b.kind == BlockKind::Ih) b.version = {6, 0, 3};
    if (b.kind == BlockKind::Smu) b.version = {13, 0, 7};
  }
  AsicDescription without_table = other;
  other.register_tables[size_t(Ip::OSSSYS)] = moved;
  const RegDesc& base = describe(osssys_6_0_0::IH_RB_BASE);
  for (const AsicDescription* asic : {&other, &without_table}) {
    SCOPED_TRACE(asic == &other ? "with the table" : "without it");
    System s;
    emu::AmSystemOptions options;
    options.discovery = table_with_other_versions();
    options.register_tables[size_t(Ip::OSSSYS)] = moved;
    s.sys = emu::make_am_emulated_system(std::move(options));
    AmDriverOptions with_it;
    with_it.asics = {asic};
    auto drv = s.open(with_it);
    const uint64_t at = absolute_dword(base, s.sys->gpu().bases()) * 4;
    IpSegmentBases unmoved = s.sys->gpu().bases();
    unmoved.tables = {};
    EXPECT_EQ(at, absolute_dword(base, unmoved) * 4 + (0xa0 - 0x81) * 4);
    if (asic == &other) {
      EXPECT_NE(s.sys->gpu().read32(at), 0u);  // the ring's address >> 8
      expect_working(std::move(drv));
    } else {
      EXPECT_EQ(s.sys->gpu().read32(at), 0u);
    }
  }
  IpSegmentBases bases;
  bases.tables[size_t(Ip::OSSSYS)] = std::span(moved).first(1);
  EXPECT_EQ(error_of<InvalidInput>([&] { absolute_dword(base, bases); }),
            "IH_RB_BASE: this GPU's OSSSYS register table (osssys_6_0_3) has no such register");
}

// The RX 7900 XTX's PCI identity is written once (amd::emu::rx7900xtx_identity): the VFIO
// system's GPU and both Navi 31s of `hcq pci`'s emulated machine carry it.
TEST(AmSystem, EveryEmulatedRx7900XtxHasTheOneIdentity) {
  const os::EmulatedPciFunction id = emu::rx7900xtx_identity();
  EXPECT_EQ(id.vendor, 0x1002);
  EXPECT_EQ(id.device, 0x744c);  // pci.ids: Navi 31 [Radeon RX 7900 XT/7900 XTX]
  EXPECT_EQ(id.subsystem_device, 0x0e3b);
  EXPECT_EQ(id.class_code, 0x030000u);
  EXPECT_EQ(id.revision, 0xc8);
  auto same = [&](const os::EmulatedPciFunction& f) {
    SCOPED_TRACE(f.address);
    EXPECT_EQ(f.vendor, id.vendor);
    EXPECT_EQ(f.device, id.device);
    EXPECT_EQ(f.subsystem_vendor, id.subsystem_vendor);
    EXPECT_EQ(f.subsystem_device, id.subsystem_device);
    EXPECT_EQ(f.class_code, id.class_code);
    EXPECT_EQ(f.revision, id.revision);
    EXPECT_EQ(f.link.max_speed, id.link.max_speed);
    EXPECT_EQ(f.link.max_width, id.link.max_width);
  };
  System s;
  same(*s.sys->bus().function(AmEmulatedSystem::kAddress));
  int navis = 0;
  for (const os::EmulatedPciFunction& f : emulated_pci_functions())
    if (f.device == id.device && f.vendor == id.vendor) same(f), ++navis;
  EXPECT_EQ(navis, 2);
}

TEST(AmSystem, ABootOverAPreviousBootResetsTheGpuFirst) {
  System s;
  s.open().reset();  // booted, then closed: the sOS keeps running, the marker stays
  auto drv = s.open();
  const BootReport& r = drv->boot_report();
  EXPECT_EQ(r.previous.describe(), "booted by hcq (SCRATCH_REG7 0x68637101), SMU answering");
  EXPECT_TRUE(r.reset);
  EXPECT_EQ(s.sys->gpu().mode1_resets(), 1u);
  expect_working(std::move(drv));
}

TEST(AmSystem, AProcessThatDiedMidBootLeavesAGpuTheNextOpenRecovers) {
  System s;
  // The first boot dies after the PSP has started the sOS and loaded the firmware, before the
  // GFX phase: what a process killed there leaves (nothing of it shuts down).
  struct Killed final : IpBlockDriver {
    void init(BootContext&) override { throw Error("killed"); }
  };
  AmDriverOptions dying;
  dying.make_block = [](const BlockSpec& spec, AmAsic& asic) -> std::unique_ptr<IpBlockDriver> {
    if (spec.kind == BlockKind::Gfx) return std::make_unique<Killed>();
    return AmAsic::standard_block(spec, asic);
  };
  EXPECT_EQ(error_of<Error>([&] { s.open(std::move(dying)); }), "killed");
  EXPECT_TRUE(s.sys->psp().sos_alive());
  auto drv = s.open();
  EXPECT_EQ(drv->boot_report().previous.describe(),
            "booted by another driver (sOS running), SMU answering");
  EXPECT_TRUE(drv->boot_report().reset);
  expect_working(std::move(drv));
}

// Copy queue i is queue 0 of SDMA engine i (asic.hpp): two copy queues, one on each engine,
// a third refused; a closed one's engine is the next one's again.
TEST(AmSystem, CopyQueuesAreQueue0OfSdma0AndSdma1AndAThirdIsRefused) {
  System s;
  auto drv = s.open();
  EXPECT_EQ(drv->properties().caps.max_copy_queues, 2u);
  auto first = drv->create_queue(QueueKind::Copy);
  EXPECT_TRUE(s.sys->gfx().sdma_queue_running(0));
  EXPECT_FALSE(s.sys->gfx().sdma_queue_running(1));
  auto second = drv->create_queue(QueueKind::Copy);
  EXPECT_TRUE(s.sys->gfx().sdma_queue_running(1));
  EXPECT_EQ(error_of([&] { drv->create_queue(QueueKind::Copy); }),
            "AM gfx1100: copy queue 2: hcq runs one copy queue on each of the 2 SDMA engines "
            "(queue 0 of SDMA0 and SDMA1)");
  second.reset();
  EXPECT_FALSE(s.sys->gfx().sdma_queue_running(1));
  EXPECT_TRUE(s.sys->gfx().sdma_queue_running(0));
  auto again = drv->create_queue(QueueKind::Copy);  // the lowest free number: 1, SDMA1
  EXPECT_TRUE(s.sys->gfx().sdma_queue_running(1));
  first.reset();
  again.reset();
  EXPECT_FALSE(s.sys->gfx().sdma_queue_running(0));
  EXPECT_FALSE(s.sys->gfx().sdma_queue_running(1));
}

TEST(AmSystem, AMissingFirmwareFileIsAnErrorNamingIt) {
  System s;
  const std::string mec = s.sys->firmware_dir() + "/gc_11_0_0_mec.bin";
  ASSERT_EQ(std::remove(mec.c_str()), 0);
  const std::string msg = error_of<Error>([&] { s.open(); });
  EXPECT_NE(msg.find(mec), std::string::npos) << msg;
}

// The register window with every access counted, to see what a wait touches.
struct AccessCount {
  std::atomic<uint64_t> reads{0}, writes{0};
};
class CountingMmio final : public os::Mmio {
 public:
  CountingMmio(std::unique_ptr<os::Mmio> inner, std::shared_ptr<AccessCount> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}
  uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

 protected:
  uint32_t do_read32(uint64_t offset) override {
    ++count_->reads;
    return inner_->read32(offset);
  }
  void do_write32(uint64_t offset, uint32_t value) override {
    ++count_->writes;
    inner_->write32(offset, value);
  }

 private:
  std::unique_ptr<os::Mmio> inner_;
  std::shared_ptr<AccessCount> count_;
};

// The driver over a counting register window.
AmDriverOptions counted_window(std::shared_ptr<AccessCount> count) {
  AmDriverOptions h;
  h.register_window = [count](os::VfioDevice& d, int bar) -> std::unique_ptr<os::Mmio> {
    return std::make_unique<CountingMmio>(os::open_register_window(d, bar), count);
  };
  return h;
}

// A write by the CPC to an unmapped page, as the engine reports it: the GC hub latches it and
// writes a VM fault entry into the IH ring.
void fault_at(AmEmulatedSystem& sys, uint64_t va) {
  const auto t = sys.gmc().gfx_mmu().translate(va, emu::MmuAccess::Write, emu::kClientCpc);
  ASSERT_FALSE(t.ok());
  sys.gmc().report_fault(emu::AmGmc::Hub::Gfx, *t.fault);
}

// The wait's hot path looks at the IH ring's write pointer in memory and reads no register
// while it has not moved; a VM fault entry makes it read the hub's fault registers.
TEST(AmSystem, PollingTheIhRingReadsNoRegisterUntilItsWritePointerMoves) {
  System s;
  auto count = std::make_shared<AccessCount>();
  auto drv = s.open(counted_window(count));
  AmAsic& asic = drv->asic();
  count->reads = count->writes = 0;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(asic.poll_fault(), std::nullopt);
  EXPECT_EQ(count->reads, 0u);
  EXPECT_EQ(count->writes, 0u);

  fault_at(*s.sys, 0xdead0000);
  const std::optional<std::string> fault = asic.poll_fault();
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->rfind("gfxhub page fault at 0xdead0000 by CPC (client 0x5), write", 0), 0u)
      << *fault;
  EXPECT_NE(fault->find("; gfxhub page fault (IH, client 0xa vmid 0) at 0xdead0000, write"),
            std::string::npos)
      << *fault;
  EXPECT_GT(count->reads, 0u);  // the hub's status and address, the IH overflow check none
  EXPECT_EQ(asic.poll_fault(), std::nullopt);  // drained and cleared
}

// A fault entry that appears in the IH ring while a wait sleeps is reported by that wait, as a
// GpuFaultError with the address and the client, long before its timeout.
TEST(AmSystem, AFaultEntryEndsTheWaitWithAGpuFaultError) {
  System s;
  auto drv = s.open();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fault_at(*s.sys, 0xdead0000);
  });
  const std::string msg = error_of<GpuFaultError>([&] { drv->wait_interrupt(std::chrono::seconds(10)); });
  raiser.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(msg.rfind("emu:gfx1100_am: gfxhub page fault at 0xdead0000 by CPC (client 0x5), write", 0),
            0u)
      << msg;
}

// Several threads wait at once: each sleeps on the MSI eventfd, and one fault ends every wait
// with the same GpuFaultError.
TEST(AmSystem, SeveralWaitersAllSeeTheFault) {
  System s;
  auto drv = s.open();
  constexpr int kThreads = 4;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      errors[i] = error_of<GpuFaultError>([&] { drv->wait_interrupt(std::chrono::seconds(10)); });
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fault_at(*s.sys, 0xbeef000);
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) {
    EXPECT_EQ(e, errors[0]);
    EXPECT_EQ(e.rfind("emu:gfx1100_am: gfxhub page fault at 0xbeef000 by CPC", 0), 0u) << e;
  }
}

// With nothing happening a wait sleeps on the eventfd until its timeout, then reads the fault
// registers once (a fault whose ring entry was lost).
TEST(AmSystem, AQuietWaitSleepsUntilItsTimeoutThenReadsTheFaultRegisters) {
  System s;
  auto count = std::make_shared<AccessCount>();
  auto drv = s.open(counted_window(count));
  count->reads = 0;
  const auto t0 = std::chrono::steady_clock::now();
  drv->wait_interrupt(std::chrono::milliseconds(30));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(30));
  EXPECT_LT(took, std::chrono::seconds(2));
  // GCVM_L2_PROTECTION_FAULT_STATUS twice (gmc_v11_0_process_interrupt's first read waits
  // for the status to settle), MMVM's once, and the IH's nothing (its write pointer is in
  // memory).
  EXPECT_EQ(count->reads, 3u);
}

// The driver takes the GPU's MSI through a VFIO eventfd while it is open and gives it back on
// close; VFIO refuses an fd that is not an eventfd, exactly.
TEST(AmSystem, TheMsiGoesToTheDriversEventfdWhileItIsOpen) {
  System s;
  os::EmulatedVfio& vfio = s.sys->bus().vfio();
  EXPECT_FALSE(vfio.interrupt(AmEmulatedSystem::kAddress));
  auto drv = s.open();
  EXPECT_TRUE(vfio.interrupt(AmEmulatedSystem::kAddress));
  drv.reset();
  EXPECT_FALSE(vfio.interrupt(AmEmulatedSystem::kAddress));

  std::shared_ptr<os::Kernel> kernel(s.sys, s.sys->kernel().get());
  os::VfioDevice dev(kernel, os::pci_function(*kernel, AmEmulatedSystem::kAddress));
  EXPECT_EQ(error_of<OsError>([&] { dev.enable_msi(12345); }),
            "0000:03:00.0: VFIO_DEVICE_SET_IRQS (MSI eventfd): Bad file descriptor (errno 9)");
}

// The device-memory port on a GPU whose memory the CPU maps (VFIO): VRAM and host memory alike
// written and read at their addresses, whole dwords or not; a range in no allocation, or
// leaving one, refused exactly. The caps stay VFIO's.
TEST(AmSystem, ThePortReachesMappedMemoryToo) {
  System s;
  auto drv = s.open();
  EXPECT_TRUE(drv->properties().caps.cpu_maps_memory);
  EXPECT_EQ(drv->properties().caps.host_window_bytes, 0u);
  const uint64_t base = drv->va_base();
  const Allocation d = drv->allocate(base, 0x2000, MemoryKind::Device, false);
  const Allocation h = drv->allocate(base + 0x2000, 0x1000, MemoryKind::Host, false);
  std::vector<std::byte> bytes(11);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = std::byte(i + 1);
  for (const Allocation& a : {d, h}) {
    drv->write_memory(a.va + 3, bytes);
    EXPECT_EQ(std::memcmp(static_cast<char*>(a.host) + 3, bytes.data(), bytes.size()), 0);
    std::vector<std::byte> back(bytes.size());
    drv->read_memory(a.va + 3, back);
    EXPECT_EQ(back, bytes);
  }
  EXPECT_EQ(error_of([&] { drv->write_memory(base + 0x3000, bytes); }),
            "emu:gfx1100_am: [" + hex(base + 0x3000) + ", +0xb) is in no allocation");
  std::vector<std::byte> out(16);
  EXPECT_EQ(error_of([&] { drv->read_memory(base + 0x1ff8, out); }),
            "emu:gfx1100_am: [" + hex(base + 0x1ff8) + ", +0x10) leaves the allocation [" +
                hex(base) + ", +0x2000)");
  drv->free(d);
  drv->free(h);
}

}  // namespace
}  // namespace hcq::amd::am
