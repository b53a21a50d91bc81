// The AM PSP: the driver (am::Psp) against the emulated PSP (emu::AmPsp) through an emulated
// register window at the addresses the emulated RX 7900 XTX's IP discovery table gives, with
// a host array standing in for VRAM (the driver's BootMemory and the model's AmBus over the
// same bytes, fb_base 0x8000000000).
// Expected addresses worked out here: MP0's segment 0 sits at dword 0x16000 in that table and
// Linux mp_13_0_0_offset.h puts regMP0_SMN_C2PMSG_35/36/64/67/69/70/71/81 at
// 0x63/0x64/0x80/0x83/0x85/0x86/0x87/0x91 in it.
#include "amd/am/psp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am_block_harness.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_psp.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;
namespace fw = psp::fw;

// Byte offsets in the register BAR: 4 * (0x16000 + regMP0_SMN_C2PMSG_N).
constexpr uint64_t kC2pMsg35 = 0x5818c, kC2pMsg36 = 0x58190, kC2pMsg64 = 0x58200,
                   kC2pMsg67 = 0x5820c, kC2pMsg69 = 0x58214, kC2pMsg70 = 0x58218,
                   kC2pMsg71 = 0x5821c, kC2pMsg81 = 0x58244;
constexpr uint64_t kFbBase = 0x8000000000;
constexpr uint64_t kVramBytes = 8 << 20;

// A register write: (byte offset, value).
using Write = std::pair<uint64_t, uint32_t>;

// VRAM handed out bottom-up from a host array.
class TestBootMemory final : public BootMemory {
 public:
  explicit TestBootMemory(std::vector<uint8_t>& vram) : vram_(vram) {}
  VramBuffer alloc(uint64_t size, uint64_t align, const char* what) override {
    const uint64_t pa = (next_ + align - 1) & ~(align - 1);
    if (pa + size > vram_.size()) throw Error(std::string("test VRAM exhausted by ") + what);
    next_ = pa + size;
    std::memset(vram_.data() + pa, 0, size);
    return {pa, mc(pa), size, reinterpret_cast<std::byte*>(vram_.data() + pa)};
  }
  uint64_t mc(uint64_t pa) const override { return kFbBase + pa; }

 private:
  std::vector<uint8_t>& vram_;
  uint64_t next_ = 0;
};

// A Firmware value with one part per (name, type, size), each filled with its own byte.
Firmware make_firmware(FirmwareKind kind, const std::string& file,
                       std::vector<std::tuple<std::string, uint32_t, uint64_t>> parts,
                       uint8_t first_fill, uint16_t header_major = 2) {
  Firmware f;
  f.path = "/lib/firmware/amdgpu/" + file;
  f.kind = kind;
  f.header_major = header_major;
  uint64_t offset = 0x100;  // past a header
  f.bytes.assign(offset, 0);
  uint8_t fill = first_fill;
  for (auto& [name, type, size] : parts) {
    f.parts.push_back({name, type, 0, offset, size});
    for (uint64_t i = 0; i < size; ++i) f.bytes.push_back(uint8_t(fill + i / 64));
    offset += size;
    fill = uint8_t(fill + 0x10);
  }
  return f;
}

Firmware make_sos(bool with_sys_drv = true) {
  std::vector<std::tuple<std::string, uint32_t, uint64_t>> parts = {
      {"kdb", psp::kPspFwKdb, 0x200},          {"spl", psp::kPspFwSpl, 0x100},
      {"soc_drv", psp::kPspFwSocDrv, 0x300},   {"intf_drv", psp::kPspFwIntfDrv, 0x100},
      {"dbg_drv", psp::kPspFwDbgDrv, 0x100},   {"ras_drv", psp::kPspFwRasDrv, 0x100},
      {"toc", psp::kPspFwToc, 0x80},           {"sos", psp::kPspFwSos, 0x800}};
  if (with_sys_drv) parts.insert(parts.begin() + 2, {"sys_drv", psp::kPspFwSysDrv, 0x400});
  return make_firmware(FirmwareKind::Sos, "psp_13_0_0_sos.bin", parts, 0x11);
}

std::vector<Firmware> make_ip_firmware() {
  return {
      make_firmware(FirmwareKind::Rlc, "gc_11_0_0_rlc.bin",
                    {{"rlc_g", 0, 0x300},
                     {"save_restore_list_cntl", 0, 0x40},
                     {"save_restore_list_gpm", 0, 0x40},
                     {"save_restore_list_srm", 0, 0x40},
                     {"rlc_iram", 0, 0x100},
                     {"rlc_dram", 0, 0x100}},
                    0x21),
      make_firmware(FirmwareKind::Mec, "gc_11_0_0_mec.bin", {{"ucode", 0, 0x400}, {"data", 0, 0x80}},
                    0x31),
      make_firmware(FirmwareKind::Sdma, "sdma_6_0_0.bin", {{"ctx", 0, 0x200}, {"ctl", 0, 0x100}},
                    0x41),
      make_firmware(FirmwareKind::Imu, "gc_11_0_0_imu.bin",
                    {{"imu_i", 0, 0x100}, {"imu_d", 0, 0x100}}, 0x51),
      make_firmware(FirmwareKind::Pfp, "gc_11_0_0_pfp.bin", {{"ucode", 0, 0x200}, {"data", 0, 0x40}},
                    0x61),
      make_firmware(FirmwareKind::Me, "gc_11_0_0_me.bin", {{"ucode", 0, 0x200}, {"data", 0, 0x40}},
                    0x71),
      make_firmware(FirmwareKind::Smu, "smu_13_0_0.bin", {{"smc", 0, 0x600}}, 0x81),
  };
}

// Linux's order (amdgpu_ucode.h AMDGPU_UCODE_ID, the SMU first), for the parts above.
const std::vector<uint32_t> kGfx1100Order = {
    fw::kSmu,           fw::kSdmaUcodeTh0,   fw::kSdmaUcodeTh1,   fw::kRs64Pfp,
    fw::kRs64Me,        fw::kRs64Mec,        fw::kRs64PfpP0Stack, fw::kRs64PfpP1Stack,
    fw::kRs64MeP0Stack, fw::kRs64MeP1Stack,  fw::kRs64MecP0Stack, fw::kRs64MecP1Stack,
    fw::kRs64MecP2Stack, fw::kRs64MecP3Stack, fw::kImuI,          fw::kImuD,
    fw::kRlcRestoreListSrmCntl, fw::kRlcRestoreListGpmMem, fw::kRlcRestoreListSrmMem,
    fw::kRlcIram,       fw::kRlcDramBoot,    fw::kRlcG};

std::vector<uint8_t> bytes_of(const Firmware& f, const std::string& part) {
  auto d = f.data(f.part(part));
  return {d.begin(), d.end()};
}

class AmPspTest : public ::testing::Test {
 protected:
  AmPspTest() {
    router.add(model);
    router.record(true);
  }
  IpSegmentBases bases = test::gfx1100_bases();
  std::vector<uint8_t> vram = std::vector<uint8_t>(kVramBytes);
  emu::AmBus bus{vram, {}, kFbBase, {}, {}, {}};  // no HDP: nothing checks for flushes
  emu::AmPsp model{bases, bus};
  test::Router router{bases};
  os::EmulatedMmio bar{"BAR5 of 0000:03:00.0", 0x100000, router};
  RegisterIo io{bar, bases};
  TestBootMemory memory{vram};
  Psp psp{io, memory, 20ms, 0us};
  Firmware sos = make_sos();
  std::vector<Firmware> ip = make_ip_firmware();

  void up_to_ring() {
    psp.load_bootloader(sos);
    psp.create_ring();
    router.take_raw_writes();
  }
};

TEST_F(AmPspTest, TheRegistersSitWhereTheDiscoveryTableAndMp13HeaderPutThem) {
  EXPECT_EQ(io.byte_offset(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35)), kC2pMsg35);
  for (uint64_t at : {kC2pMsg35, kC2pMsg36, kC2pMsg64, kC2pMsg67, kC2pMsg69, kC2pMsg70,
                      kC2pMsg71, kC2pMsg81})
    EXPECT_TRUE(model.handles(at)) << hex(at);
  EXPECT_FALSE(model.handles(kC2pMsg35 + 8));
  EXPECT_EQ(error_of([&] { model.read32(0x1000); }), "AM PSP model: no register at byte 0x1000");
}

TEST_F(AmPspTest, BuffersSitInVramWithTheAlignmentThePspNeeds) {
  EXPECT_EQ(psp.firmware_buffer().mc, kFbBase);  // 1 MiB aligned: C2PMSG_36 takes mc >> 20
  EXPECT_EQ(psp.command_buffer().mc, kFbBase + 0x100000);
  EXPECT_EQ(psp.fence_buffer().mc, kFbBase + 0x101000);
  EXPECT_EQ(psp.ring_buffer().mc, kFbBase + 0x102000);
  EXPECT_EQ(psp.ring_buffer().size, 0x1000u);
}

TEST_F(AmPspTest, BootloaderSendsEachComponentInLinuxsOrderThenTheSos) {
  EXPECT_FALSE(psp.sos_alive());
  psp.load_bootloader(sos);
  EXPECT_TRUE(psp.sos_alive());
  EXPECT_TRUE(model.sos_alive());
  const uint32_t mc_mb = uint32_t(kFbBase >> 20);
  std::vector<Write> expected;
  for (uint32_t cmd : {psp::kBlLoadKeyDatabase, psp::kBlLoadTosSplTable, psp::kBlLoadSysDrv,
                       psp::kBlLoadSocDrv, psp::kBlLoadIntfDrv, psp::kBlLoadDbgDrv,
                       psp::kBlLoadRasDrv, psp::kBlLoadSosDrv}) {
    expected.push_back({kC2pMsg36, mc_mb});
    expected.push_back({kC2pMsg35, cmd});
  }
  EXPECT_EQ(router.take_raw_writes(), expected);
  // What the bootloader found at C2PMSG_36 << 20 each time: the component (the SPL step
  // sends the KDB again, as psp_v13_0_bootloader_load_spl does).
  const char* parts[] = {"kdb", "kdb", "sys_drv", "soc_drv", "intf_drv", "dbg_drv", "ras_drv",
                         "sos"};
  auto steps = model.bootloader_steps();
  ASSERT_EQ(steps.size(), 8u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].mc, kFbBase);
    auto want = bytes_of(sos, parts[i]);
    want.resize(64);
    EXPECT_EQ(steps[i].head, want) << parts[i];
  }
  // A running sOS: nothing is sent again (psp_v13_0_bootloader_load_component).
  psp.load_bootloader(sos);
  EXPECT_EQ(router.take_raw_writes(), std::vector<Write>{});
}

TEST_F(AmPspTest, TheFirmwareBufferIsClearedBeforeEachComponent) {
  std::memset(vram.data(), 0xee, 0x100000);
  psp.load_bootloader(sos);
  // The last component (sOS, 0x800 bytes) followed by zeros, not by older bytes.
  auto sos_bytes = bytes_of(sos, "sos");
  EXPECT_TRUE(std::equal(sos_bytes.begin(), sos_bytes.end(), vram.begin()));
  EXPECT_TRUE(std::all_of(vram.begin() + 0x800, vram.begin() + 0x100000,
                          [](uint8_t b) { return b == 0; }));
}

TEST_F(AmPspTest, RingCreateWritesAddressSizeAndTheKmRingCommand) {
  psp.load_bootloader(sos);
  router.take_raw_writes();
  psp.create_ring();
  EXPECT_EQ(router.take_raw_writes(), (std::vector<Write>{{kC2pMsg69, 0x00102000},
                                               {kC2pMsg70, 0x80},
                                               {kC2pMsg71, 0x1000},
                                               {kC2pMsg64, 0x20000}}));
  EXPECT_TRUE(model.ring_created());
  // A second create finds C2PMSG_71 set (a ring an earlier boot left) and destroys it first.
  psp.create_ring();
  EXPECT_EQ(router.take_raw_writes(), (std::vector<Write>{{kC2pMsg64, 0x30000},
                                               {kC2pMsg69, 0x00102000},
                                               {kC2pMsg70, 0x80},
                                               {kC2pMsg71, 0x1000},
                                               {kC2pMsg64, 0x20000}}));
}

TEST_F(AmPspTest, FullBootLoadsEveryFirmwareInLinuxsOrderAndStartsRlcAutoload) {
  psp.boot(sos, ip);
  EXPECT_EQ(model.load_order(), kGfx1100Order);
  EXPECT_TRUE(model.rlc_autoload_done());
  EXPECT_TRUE(model.tmr_set_up());
  EXPECT_EQ(model.tmr_size(), emu::AmPsp::kTocTmrSize);  // LOAD_TOC's answer
  ASSERT_TRUE(psp.tmr());
  EXPECT_EQ(model.tmr_mc(), psp.tmr()->mc);
  EXPECT_EQ(psp.tmr()->mc % psp::kTmrAlignment, 0u);
  // LOAD_TOC, SMU, SETUP_TMR, 21 more loads, AUTOLOAD_RLC.
  EXPECT_EQ(model.commands_run(), 1u + 1u + 1u + 21u + 1u);
  EXPECT_EQ(model.last_error(), "");
  // The bytes the PSP read for each type are the part's.
  const Firmware& mec = ip[1];
  EXPECT_EQ(model.loaded_bytes(fw::kRs64Mec), bytes_of(mec, "ucode"));
  EXPECT_EQ(model.loaded_bytes(fw::kRs64MecP3Stack), bytes_of(mec, "data"));
  EXPECT_EQ(model.loaded_bytes(fw::kSdmaUcodeTh1), bytes_of(ip[2], "ctl"));
  EXPECT_EQ(model.loaded_bytes(fw::kSmu), bytes_of(ip[6], "smc"));
  EXPECT_EQ(model.loaded_bytes(fw::kRlcG), bytes_of(ip[0], "rlc_g"));
  EXPECT_TRUE(model.loaded(fw::kRlcDramBoot));
  EXPECT_FALSE(model.loaded(fw::kRlcP));  // the RLC file has no rlc_p part
}

TEST_F(AmPspTest, TheOrderedListNamesEachPart) {
  auto loads = gfx1100_psp_firmware(ip);
  std::vector<uint32_t> types;
  for (auto& l : loads) types.push_back(l.fw_type);
  EXPECT_EQ(types, kGfx1100Order);
  EXPECT_EQ(loads[0].what, "smu_13_0_0.bin part 'smc'");
  EXPECT_EQ(loads[5].what, "gc_11_0_0_mec.bin part 'ucode'");
  EXPECT_EQ(loads.back().what, "gc_11_0_0_rlc.bin part 'rlc_g'");
  EXPECT_EQ(loads[1].bytes.size(), 0x200u);
}

TEST_F(AmPspTest, F32CpFirmwareLoadsAsCpTypesWithoutJumpTables) {
  ip[1] = make_firmware(FirmwareKind::Mec, "gc_11_0_0_mec.bin",
                        {{"ucode", 0, 0x400}, {"jt", 0, 0x40}}, 0x31, 1);
  ip[4] = make_firmware(FirmwareKind::Pfp, "gc_11_0_0_pfp.bin",
                        {{"ucode", 0, 0x200}, {"jt", 0, 0x40}}, 0x61, 1);
  ip[5] = make_firmware(FirmwareKind::Me, "gc_11_0_0_me.bin",
                        {{"ucode", 0, 0x200}, {"jt", 0, 0x40}}, 0x71, 1);
  std::vector<uint32_t> types;
  for (auto& l : gfx1100_psp_firmware(ip)) types.push_back(l.fw_type);
  EXPECT_EQ(types, (std::vector<uint32_t>{fw::kSmu, fw::kSdmaUcodeTh0, fw::kSdmaUcodeTh1,
                                          fw::kCpPfp, fw::kCpMe, fw::kCpMec, fw::kImuI,
                                          fw::kImuD, fw::kRlcRestoreListSrmCntl,
                                          fw::kRlcRestoreListGpmMem,
                                          fw::kRlcRestoreListSrmMem, fw::kRlcIram,
                                          fw::kRlcDramBoot, fw::kRlcG}));
}

TEST_F(AmPspTest, FramesAndCommandBuffersHoldTheFieldsOfPspGfxIf) {
  up_to_ring();
  psp.setup_tmr(0x400000);
  // The frame at the ring's start (psp_gfx_rb_frame) and the write pointer one frame on.
  auto u32 = [&](uint64_t pa) {
    uint32_t v;
    std::memcpy(&v, vram.data() + pa, 4);
    return v;
  };
  EXPECT_EQ(u32(0x102000 + 0), 0x00100000u);  // cmd_buf_addr_lo
  EXPECT_EQ(u32(0x102000 + 4), 0x80u);        // cmd_buf_addr_hi
  EXPECT_EQ(u32(0x102000 + 12), 0x00101000u);  // fence_addr_lo
  EXPECT_EQ(u32(0x102000 + 16), 0x80u);        // fence_addr_hi
  EXPECT_EQ(u32(0x102000 + 20), 1u);           // fence_value
  EXPECT_EQ(router.take_raw_writes(), (std::vector<Write>{{kC2pMsg67, 16}}));
  EXPECT_EQ(u32(0x101000), 1u);  // the fence the PSP wrote
  // psp_gfx_cmd_resp: SETUP_TMR with MC address, size, virt_phy_addr and the VRAM address.
  const uint64_t tmr_pa = psp.tmr()->pa;
  EXPECT_EQ(tmr_pa, 0x200000u);
  EXPECT_EQ(u32(0x100000 + 8), psp::kCmdSetupTmr);
  EXPECT_EQ(u32(0x100000 + 28), uint32_t(kFbBase + tmr_pa));
  EXPECT_EQ(u32(0x100000 + 32), 0x80u);
  EXPECT_EQ(u32(0x100000 + 36), 0x400000u);
  EXPECT_EQ(u32(0x100000 + 40), 2u);
  EXPECT_EQ(u32(0x100000 + 44), uint32_t(tmr_pa));
  EXPECT_EQ(u32(0x100000 + 48), 0u);
  EXPECT_EQ(u32(0x100000 + 864), 0u);  // resp.status
}

TEST_F(AmPspTest, TheRingWrapsAfterItsLastFrame) {
  up_to_ring();
  const auto smc = bytes_of(ip[6], "smc");
  for (int i = 0; i < 70; ++i) psp.load(fw::kSmu, smc, "smu");
  EXPECT_EQ(model.commands_run(), 70u);
  EXPECT_EQ(io.read(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_67)), (70u * 16) % 1024);
  EXPECT_EQ(model.last_error(), "");
}

TEST_F(AmPspTest, ASosWithoutSysDrvIsRefusedAndTheSosNeverStarts) {
  const Firmware no_sys = make_sos(false);
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.load_bootloader(no_sys); }),
            "PSP bootloader LOAD_SOSDRV (0x20000): the sOS did not start: MP0_SMN_C2PMSG_81: "
            "waited 20 ms for a value other than 0x0 (mask 0xffffffff), last read 0x0; "
            "MP0_SMN_C2PMSG_35 reads 0x80000002");
  EXPECT_EQ(model.last_error(), "bootloader: LOAD_SOSDRV before LOAD_SYSDRV");
  EXPECT_FALSE(model.sos_alive());
  // Without a reset the error stands in C2PMSG_35: the bootloader never reads 0x80000000
  // (Linux waits for that exact value), so nothing more is sent and the wait names the code.
  EXPECT_EQ(error_of<Error>([&] { psp.load_bootloader(sos); }),
            "PSP bootloader not ready for LOAD_KEY_DATABASE (0x80000): MP0_SMN_C2PMSG_35 reads "
            "0x80000002, error 0x2 in bits 7:0");
  EXPECT_EQ(model.last_error(), "bootloader: LOAD_SOSDRV before LOAD_SYSDRV");
  // After a reset (mode-1 reset, FLR) the full sequence works.
  model.reset();
  psp.load_bootloader(sos);
  EXPECT_TRUE(psp.sos_alive());
}

TEST_F(AmPspTest, ABootloaderCommandTheModelDoesNotKnowOrAComponentOutsideVram) {
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35), 0x12345);
  EXPECT_EQ(io.read(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35)), 0x80000001u);
  EXPECT_EQ(model.last_error(), "bootloader: unknown command 0x12345");
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_36), 0x10);  // MC 0x1000000
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35), psp::kBlLoadSysDrv);
  EXPECT_EQ(io.read(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35)), 0x80000003u);
  EXPECT_EQ(model.last_error(), "bootloader: LOAD_SYSDRV: component at MC 0x1000000 is outside VRAM");
}

TEST_F(AmPspTest, ARingBeforeTheSosIsNeverAnswered) {
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.create_ring(); }),
            "PSP ring create: the sOS is not ready for a ring: MP0_SMN_C2PMSG_64: waited 20 ms "
            "for 0x80000000 (mask 0x80000000), last read 0x0");
  EXPECT_FALSE(model.ring_created());
  EXPECT_EQ(error_of<Error>([&] { psp.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): no KM ring (create_ring first)");
}

TEST_F(AmPspTest, ARingOutsideVramIsRefusedWithAStatus) {
  psp.load_bootloader(sos);
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_69), 0);
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_70), 0x90);
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_71), 0x1000);
  io.write(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_64), psp::kCtrlInitKmRing);
  EXPECT_EQ(io.read(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_64)), 0x80000001u);
  EXPECT_EQ(model.last_error(), "ring create: MC 0x9000000000+0x1000 is outside VRAM");
  EXPECT_FALSE(model.ring_created());
}

TEST_F(AmPspTest, FirmwareBeforeTheTmrIsRefusedExceptTheSmus) {
  up_to_ring();
  const auto mec = bytes_of(ip[1], "ucode");
  EXPECT_EQ(error_of<Error>([&] { psp.load(fw::kRs64Mec, mec, "gc_11_0_0_mec.bin part 'ucode'"); }),
            "PSP command LOAD_IP_FW (0x6) for GFX_FW_TYPE_RS64_MEC (89) with gc_11_0_0_mec.bin "
            "part 'ucode': status 0xffff0007");
  EXPECT_EQ(model.last_error(), "LOAD_IP_FW: GFX_FW_TYPE_RS64_MEC (89) before SETUP_TMR");
  EXPECT_FALSE(model.loaded(fw::kRs64Mec));
  psp.load(fw::kSmu, bytes_of(ip[6], "smc"), "smu");  // PMFW before the TMR (Linux)
  EXPECT_TRUE(model.loaded(fw::kSmu));
  psp.setup_tmr(0x400000);
  psp.load(fw::kRs64Mec, mec, "mec");
  EXPECT_TRUE(model.loaded(fw::kRs64Mec));
}

TEST_F(AmPspTest, EachRefusedCommandIsAnExactError) {
  up_to_ring();
  std::vector<uint8_t> unknown(psp::kCmdBytes, 0);
  unknown[psp::kCmdId] = 0x7f;
  EXPECT_EQ(error_of<Error>([&] { psp.submit(unknown); }),
            "PSP command 0x7f: status 0x100 PSP_ERR_UNKNOWN_COMMAND");
  EXPECT_EQ(model.last_error(), "command 0x7f: not a command the model knows");

  EXPECT_EQ(error_of<Error>([&] { psp.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): status 0xffff0007");
  EXPECT_EQ(model.last_error(), "AUTOLOAD_RLC: before SETUP_TMR");
  psp.setup_tmr(0x400000);
  EXPECT_EQ(error_of<Error>([&] { psp.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): status 0xffff0007");
  EXPECT_EQ(model.last_error(), "AUTOLOAD_RLC: before GFX_FW_TYPE_RLC_G (8) was loaded");
  EXPECT_FALSE(model.rlc_autoload_done());

  EXPECT_EQ(error_of<Error>([&] { psp.setup_tmr(0x400000); }),
            "PSP command SETUP_TMR (0x5): status 0xffff0007");
  EXPECT_EQ(model.last_error(), "SETUP_TMR: the TMR is already set up");

  const std::vector<uint8_t> some(0x40, 1);
  EXPECT_EQ(error_of<Error>([&] { psp.load(200, some, "x"); }),
            "PSP command LOAD_IP_FW (0x6) for fw type 200 with x: status 0xffff000a "
            "TEE_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(model.last_error(), "LOAD_IP_FW: unknown fw type 200");
  EXPECT_EQ(error_of<Error>([&] { psp.load(fw::kRlcG, {}, "empty"); }),
            "PSP command LOAD_IP_FW (0x6) for GFX_FW_TYPE_RLC_G (8) with empty: status "
            "0xffff0006");
  // The ring still works after refusals.
  psp.load(fw::kRlcG, some, "rlc");
  psp.autoload_rlc();
  EXPECT_TRUE(model.rlc_autoload_done());
}

TEST_F(AmPspTest, ATmrBelowTheTocsSizeIsRefused) {
  up_to_ring();
  EXPECT_EQ(psp.load_toc(sos), emu::AmPsp::kTocTmrSize);
  EXPECT_EQ(error_of<Error>([&] { psp.setup_tmr(0x100000); }),
            "PSP command SETUP_TMR (0x5): status 0xffff0006");
  EXPECT_EQ(model.last_error(), "SETUP_TMR: TMR size 0x100000 is below the TOC's 0x400000");
}

TEST_F(AmPspTest, ASilentBootloaderTimesOutNamingTheStep) {
  model.set_silent(true);
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.load_bootloader(sos); }),
            "PSP bootloader not ready for LOAD_KEY_DATABASE (0x80000): MP0_SMN_C2PMSG_35: "
            "waited 20 ms for 0x80000000 (mask 0xffffffff), last read 0x0");
  EXPECT_EQ(router.take_raw_writes(), std::vector<Write>{});
}

TEST_F(AmPspTest, ASilentPspLeavesTheFenceUnwritten) {
  up_to_ring();
  model.set_silent(true);
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): no fence: waited 20 ms for fence value 0x1 at MC "
            "0x8000101000, last read 0x0");
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.destroy_ring(); }),
            "PSP ring destroy: no response: MP0_SMN_C2PMSG_64: waited 20 ms for 0x80000000 "
            "(mask 0x80000000), last read 0x0");
  model.set_silent(false);
  EXPECT_EQ(error_of<TimeoutError>([&] { psp.create_ring(); }), "no error");
  // The dropped frame stays dropped; the next command gets its own fence.
  psp.setup_tmr(0x400000);
  EXPECT_EQ(model.commands_run(), 1u);
}

TEST_F(AmPspTest, DestroyRingForShutdownThenCreateAgain) {
  up_to_ring();
  psp.destroy_ring();
  EXPECT_EQ(router.take_raw_writes(), (std::vector<Write>{{kC2pMsg64, 0x30000}}));
  EXPECT_FALSE(model.ring_created());
  EXPECT_EQ(error_of<Error>([&] { psp.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): no KM ring (create_ring first)");
  psp.create_ring();
  psp.setup_tmr(0x400000);
  EXPECT_TRUE(model.tmr_set_up());
}

TEST_F(AmPspTest, ResetReturnsThePspToPowerOn) {
  psp.boot(sos, ip);
  model.reset();
  EXPECT_FALSE(psp.sos_alive());
  EXPECT_FALSE(model.ring_created());
  EXPECT_FALSE(model.tmr_set_up());
  EXPECT_FALSE(model.loaded(fw::kRlcG));
  EXPECT_FALSE(model.rlc_autoload_done());
  EXPECT_EQ(model.last_error(), "");
  EXPECT_EQ(io.read(RegisterIo::describe(mp_13_0_0::MP0_SMN_C2PMSG_35)), 0x80000000u);
}

TEST_F(AmPspTest, CommandsFromSeveralThreadsEachGetTheirFenceAndBytes) {
  up_to_ring();
  psp.setup_tmr(0x400000);
  const uint32_t types[4][4] = {
      {fw::kRs64Pfp, fw::kRs64Me, fw::kRs64Mec, fw::kImuI},
      {fw::kImuD, fw::kRlcG, fw::kRlcP, fw::kRlcV},
      {fw::kRlcIram, fw::kRlcDramBoot, fw::kSdmaUcodeTh0, fw::kSdmaUcodeTh1},
      {fw::kRs64MecP0Stack, fw::kRs64MecP1Stack, fw::kRs64MecP2Stack, fw::kRs64MecP3Stack}};
  auto payload = [](uint32_t type) { return std::vector<uint8_t>(0x100 + type, uint8_t(type)); };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (uint32_t type : types[t]) psp.load(type, payload(type), "thread");
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(model.commands_run(), 1u + 4 * 5 * 4);
  for (auto& row : types)
    for (uint32_t type : row) EXPECT_EQ(model.loaded_bytes(type), payload(type)) << type;
  EXPECT_EQ(model.last_error(), "");
}

TEST_F(AmPspTest, TheHdpIsFlushedAfterEachVramWriteThePspReads) {
  int flushes = 0;
  TestBootMemory other_memory{vram};
  Psp flushing{io, other_memory, 20ms, 0us, [&] { ++flushes; }};
  flushing.load_bootloader(sos);
  EXPECT_EQ(flushes, 8);  // one per component copied
  flushing.create_ring();
  flushing.setup_tmr(0x400000);
  EXPECT_EQ(flushes, 9);  // the frame
  flushing.load(fw::kRlcG, bytes_of(ip[0], "rlc_g"), "rlc");
  EXPECT_EQ(flushes, 11);  // the firmware copy and the frame
}

// With the HDP modelled (AmBus::hdp_flushes), a component or a frame the CPU wrote with no
// HDP flush since the PSP's last command is stale: the bootloader answers error 0x4, the
// frames are dropped and the fence never comes.
TEST_F(AmPspTest, WithTheHdpModelledWhatThePspReadsMustBeFlushedFirst) {
  uint64_t flushes = 0;
  bool flush_on = false;
  bus.hdp_flushes = [&] { return flushes; };
  TestBootMemory other_memory{vram};
  Psp driver{io, other_memory, 20ms, 0us, [&] {
               if (flush_on) ++flushes;
             }};
  EXPECT_EQ(error_of<Error>([&] { driver.load_bootloader(sos); }),
            "PSP bootloader LOAD_KEY_DATABASE (0x80000) with psp_13_0_0_sos.bin part 'kdb': "
            "MP0_SMN_C2PMSG_35 reads 0x80000004, error 0x4 in bits 7:0");
  EXPECT_EQ(model.last_error(),
            "bootloader: LOAD_KEY_DATABASE: no HDP flush since the last command (the component "
            "may still sit in the HDP)");
  flush_on = true;
  model.reset();  // the error stands in C2PMSG_35 until a reset: never 0x80000000 before it
  driver.load_bootloader(sos);
  driver.create_ring();
  driver.setup_tmr(0x400000);
  EXPECT_EQ(model.commands_run(), 1u);
  flush_on = false;
  EXPECT_EQ(error_of<TimeoutError>([&] { driver.autoload_rlc(); }),
            "PSP command AUTOLOAD_RLC (0x21): no fence: waited 20 ms for fence value 0x2 at MC "
            "0x8000101000, last read 0x1");
  EXPECT_EQ(model.last_error(),
            "write pointer 0x20: no HDP flush since the last command (the frame may still sit "
            "in the HDP); frames dropped");
  flush_on = true;
  driver.load(fw::kRlcG, bytes_of(ip[0], "rlc_g"), "rlc");
  EXPECT_EQ(model.commands_run(), 2u);
  EXPECT_TRUE(model.loaded(fw::kRlcG));
}

TEST_F(AmPspTest, FirmwareInputsThatCannotBeSentAreExactErrorsBeforeAnyRegisterWrite) {
  EXPECT_EQ(error_of([&] { psp.load_bootloader(ip[6]); }),
            "/lib/firmware/amdgpu/smu_13_0_0.bin: a smu firmware, expected the PSP sOS file");
  Firmware no_sos = sos;
  no_sos.parts.pop_back();
  EXPECT_EQ(error_of([&] { psp.load_bootloader(no_sos); }),
            "/lib/firmware/amdgpu/psp_13_0_0_sos.bin: no part 'sos' in this sos firmware");
  Firmware short_file = sos;
  short_file.bytes.resize(0x500);  // cuts sys_drv (0x400 bytes at 0x400)
  EXPECT_EQ(error_of([&] { psp.load_bootloader(short_file); }),
            "/lib/firmware/amdgpu/psp_13_0_0_sos.bin: part 'sys_drv' is 0x400+0x400, past the "
            "end of the file (0x500 bytes)");
  Firmware huge = make_firmware(FirmwareKind::Sos, "psp_13_0_0_sos.bin",
                                {{"sys_drv", 2, 0x100}, {"sos", 1, 0x100010}}, 1);
  EXPECT_EQ(error_of([&] { psp.load_bootloader(huge); }),
            "PSP: psp_13_0_0_sos.bin part 'sos' is 0x100010 bytes, more than the 1 MiB buffer "
            "the PSP reads it from");
  EXPECT_EQ(router.take_raw_writes(), std::vector<Write>{});
  EXPECT_FALSE(model.sos_alive());

  auto no_rlc = ip;
  no_rlc.erase(no_rlc.begin());
  EXPECT_EQ(error_of([&] { gfx1100_psp_firmware(no_rlc); }),
            "PSP firmware: no rlc firmware among the 6 given");
  auto two_mec = ip;
  two_mec.push_back(ip[1]);
  EXPECT_EQ(error_of([&] { gfx1100_psp_firmware(two_mec); }),
            "PSP firmware: 2 mec firmware files given, expected one");
  auto mec_without_stack = ip;
  mec_without_stack[1].parts.pop_back();
  EXPECT_EQ(error_of([&] { gfx1100_psp_firmware(mec_without_stack); }),
            "/lib/firmware/amdgpu/gc_11_0_0_mec.bin: no part 'data' in this mec firmware");
  auto cut_sdma = ip;
  cut_sdma[2].bytes.resize(0x180);
  EXPECT_EQ(error_of([&] { gfx1100_psp_firmware(cut_sdma); }),
            "/lib/firmware/amdgpu/sdma_6_0_0.bin: part 'ctx' is 0x100+0x200, past the end of "
            "the file (0x180 bytes)");
  // boot() checks the list before touching the PSP.
  EXPECT_EQ(error_of([&] { psp.boot(sos, no_rlc); }),
            "PSP firmware: no rlc firmware among the 6 given");
  EXPECT_EQ(router.take_raw_writes(), std::vector<Write>{});
  std::vector<uint8_t> too_big(0x100001);
  up_to_ring();
  EXPECT_EQ(error_of([&] { psp.load(fw::kSmu, too_big, "smu_13_0_0.bin part 'smc'"); }),
            "PSP: smu_13_0_0.bin part 'smc' is 0x100001 bytes, more than the 1 MiB buffer the "
            "PSP reads it from");
}

}  // namespace
}  // namespace hcq::amd::am
