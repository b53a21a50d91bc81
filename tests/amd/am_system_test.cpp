// The am: driver booting the register-level emulated RX 7900 XTX (emu:gfx1100_am) end to end:
// a cold boot, a boot over a previous boot (the mode-1 reset path), a boot after one that died
// half way, and the work the booted GPU then runs, verified.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "amd/am/am_driver.hpp"
#include "amd/am/gfx1100.hpp"
#include "amd/emu/am_gpu.hpp"
#include "amd/emu/am_system.hpp"
#include "common/error_of.hpp"
#include "core/hcq.hpp"

namespace hcq::amd::am {
namespace {

using emu::AmEmulatedSystem;
using testing_support::error_of;

// One emulated system several drivers open in turn, as processes would one after another.
struct System {
  std::shared_ptr<AmEmulatedSystem> sys = emu::make_am_emulated_system();
  std::unique_ptr<AmDriver> open(AmDriverHooks hooks = gfx1100_hooks()) {
    hooks.boot_options.reset_settle = std::chrono::milliseconds(1);
    std::shared_ptr<os::Kernel> kernel(sys, sys->kernel().get());
    return std::make_unique<AmDriver>(kernel, AmEmulatedSystem::kAddress, sys->firmware_dir(),
                                      "emu:gfx1100_am", std::move(hooks));
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
                                                      "psp", "smu", "gfx"}));
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

// A PSP phase that does not flush: the emulated PSP takes the second bootloader component
// (the soc phase's flush covered the first) as stale, and the boot fails naming it.
TEST(AmSystem, APspPhaseWithoutHdpFlushesFails) {
  System s;
  AmDriverHooks hooks = gfx1100_hooks();
  hooks.boot.psp = [psp = hooks.boot.psp](BootContext& c) {
    BootContext no_flush = c;
    no_flush.hdp = nullptr;
    psp(no_flush);
  };
  EXPECT_EQ(error_of<Error>([&] { s.open(hooks); }),
            "PSP bootloader LOAD_TOS_SPL_TABLE (0x10000000) with psp_13_0_0_sos.bin part 'kdb': "
            "MP0_SMN_C2PMSG_35 reads 0x80000004, error 0x4 in bits 7:0");
  EXPECT_EQ(s.sys->psp().last_error(),
            "bootloader: LOAD_TOS_SPL_TABLE: no HDP flush since the last command (the component "
            "may still sit in the HDP)");
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
  AmDriverHooks dying = gfx1100_hooks();
  dying.boot.gfx = [](BootContext&) { throw Error("killed"); };
  EXPECT_EQ(error_of<Error>([&] { s.open(std::move(dying)); }), "killed");
  EXPECT_TRUE(s.sys->psp().sos_alive());
  auto drv = s.open();
  EXPECT_EQ(drv->boot_report().previous.describe(),
            "booted by another driver (sOS running), SMU answering");
  EXPECT_TRUE(drv->boot_report().reset);
  expect_working(std::move(drv));
}

// Copy queue i is queue 0 of SDMA engine i (gfx1100.hpp): two copy queues, one on each engine,
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

}  // namespace
}  // namespace hcq::amd::am
