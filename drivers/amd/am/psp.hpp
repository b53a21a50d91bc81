// The PSP (MP0 13.0.0) as the AM boot drives it (issue 17, boot step 6), written from Linux
// amdgpu_psp.c (psp_hw_start, psp_cmd_submit_buf, psp_ring_cmd_submit, psp_tmr_init,
// psp_load_toc, psp_tmr_load, psp_load_non_psp_fw, psp_rlc_autoload_start), psp_v13_0.c
// (bootloader, KM ring create/stop, ring write pointer) and tinygrad am/ip.py AM_PSP:
//
// 1. Bootloader (skipped when the sOS already runs: MP0_SMN_C2PMSG_81 != 0). For each
//    component of the sOS file in Linux's order -- KDB (LOAD_KEY_DATABASE), the KDB again as
//    LOAD_TOS_SPL_TABLE when the file has an SPL part (psp_v13_0_bootloader_load_spl loads
//    psp->kdb), SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV -- wait for C2PMSG_35 to read
//    0x80000000 exactly (Linux's mask 0xffffffff), copy the component into a zeroed 1 MiB
//    buffer, write its MC address >> 20 to C2PMSG_36 and the command to C2PMSG_35, wait for
//    0x80000000 again; bit 31 with bits 7:0 non-zero when the wait ends is the error named.
//    Then the sOS (LOAD_SOSDRV) the same way, and wait for C2PMSG_81 to turn non-zero.
// 2. KM ring: a ring left by an earlier boot (C2PMSG_71 != 0) is destroyed first (tinygrad
//    _ring_create); wait for C2PMSG_64 bit 31 (the sOS ready for a ring), ring MC address to
//    C2PMSG_69/70, its size to C2PMSG_71, PSP_RING_TYPE__KM << 16 to C2PMSG_64, wait for
//    bit 31; status bits 15:0 non-zero are an error.
// 3. Commands: the 1024-byte command buffer is written, a 64-byte frame (command buffer MC
//    address, fence MC address, fence value) at the write pointer read from C2PMSG_67, the
//    write pointer (dwords, modulo the ring) written back; the PSP writes the fence value into
//    the fence buffer when done and the status into the command buffer's response.
// 4. TMR: LOAD_TOC (when the sOS file has a TOC) answers the TMR size, else 4 MiB; the SMU
//    firmware first (MP0 13.0.0 has PMFW-centralized C-state management: Linux
//    psp_check_pmfw_centralized_cstate_management and psp_hw_start), then SETUP_TMR with the
//    TMR's MC and VRAM addresses.
// 5. IP firmware: LOAD_IP_FW per (type, bytes) in Linux's order (gfx1100_psp_firmware), then
//    AUTOLOAD_RLC right after RLC_G (psp_load_non_psp_fw).
// Shutdown: C2PMSG_64 = GFX_CTRL_CMD_ID_DESTROY_RINGS, wait for bit 31 (psp_v13_0_ring_stop).
//
// Unlike Linux, which only warns on a non-zero response status outside SR-IOV, every status
// other than 0 is an error here (as tinygrad's _ring_submit raises).
//
// Threads: every member may be called from several threads at once; one mutex keeps one
// bootloader step, ring operation or command (buffer copy, frame, fence wait) at a time, as
// Linux's psp->mutex does. With a SharedMailbox (the device's, os/device_owner.hpp) each of
// those is also a MailboxSection of it, so no other process or Psp object uses MP0's mailbox
// registers meanwhile. An interrupted section (its holder died inside) needs no extra step:
// every operation starts by waiting for the ready bit it needs (C2PMSG_35 bit 31 for the
// bootloader, C2PMSG_64 bit 31 for the ring), as psp_v13_0.c does; it is counted in the
// mailbox's `interruptions`. Without a SharedMailbox nothing else may use the registers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "amd/am/boot_memory.hpp"
#include "amd/am/firmware.hpp"
#include "amd/am/psp_gfx_if.hpp"
#include "amd/am/register_io.hpp"
#include "os/device_owner.hpp"

namespace hcq::amd::am {

// One LOAD_IP_FW: the firmware type and the bytes (inside a Firmware's bytes).
struct PspFirmwareLoad {
  uint32_t fw_type = 0;
  std::span<const uint8_t> bytes;
  std::string what;  // "gc_11_0_0_mec.bin part 'data'", for errors
};

// Every IP firmware Linux has the PSP load on gfx1100, in Linux's order: the SMU first (loaded
// before SETUP_TMR), then by AMDGPU_UCODE_ID (amdgpu_ucode.h): SDMA TH0 (ctx), TH1 (ctl);
// PFP/ME (F32: CP_PFP, CP_ME); RS64 PFP, ME, MEC code; PFP P0/P1, ME P0/P1, MEC P0-P3 stacks
// (each the 'data' part: amdgpu_gfx_cp_init_microcode); F32 MEC code (its jump table skipped,
// fw_load_skip_check with autoload); IMU I, D; tap delays; RLC restore lists CNTL, GPM, SRM;
// RLC IRAM, DRAM, P, V; RLC_G last. The parts are those firmware.hpp gives (absent optional RLC
// parts are not loaded). Kinds Sos and Ta are ignored. Throws hcq::InvalidInput for a kind
// missing ("PSP firmware: no rlc firmware among the 6 given") or given twice, or a part whose
// range is not inside its file.
// tinygrad loads fewer (no PFP/ME, only the MEC P0 stack, TH1 before TH0, no restore lists
// for RLC 2.2+); Linux's set is kept.
std::vector<PspFirmwareLoad> gfx1100_psp_firmware(const std::vector<Firmware>& firmware);

class Psp {
 public:
  // tinygrad waits 10 s per poll; Linux 100 ms per register poll (10 tries for the
  // bootloader) and about 20 s for a command's fence.
  static constexpr std::chrono::microseconds kDefaultTimeout = std::chrono::seconds(10);
  // Linux and tinygrad wait 20 ms after LOAD_SOSDRV and after each C2PMSG_64 command ("there
  // might be handshake issue with hardware which needs delay").
  static constexpr std::chrono::microseconds kDefaultHandshakeDelay =
      std::chrono::milliseconds(20);

  // Allocates the 1 MiB firmware buffer, the command and fence buffers and the ring from
  // `memory`. `flush_hdp`, when set, runs after each CPU write of VRAM the PSP then reads (the
  // HDP flush Linux's amdgpu_device_flush_hdp and tinygrad's flush_hdp do).
  Psp(RegisterIo& io, BootMemory& memory, std::chrono::microseconds timeout = kDefaultTimeout,
      std::chrono::microseconds handshake_delay = kDefaultHandshakeDelay,
      std::function<void()> flush_hdp = {}, os::SharedMailbox* shared = nullptr);

  // C2PMSG_81 != 0 (psp_v13_0_is_sos_alive).
  bool sos_alive();

  // Step 1. Does nothing when the sOS is alive. Throws hcq::InvalidInput for a firmware that
  // is not a sOS file, lacks its 'sos' part, or a component past its file's end or over 1 MiB;
  // hcq::Error when the bootloader reports an error:
  // "PSP bootloader LOAD_KEY_DATABASE (0x80000) with psp_13_0_0_sos.bin part 'kdb':
  // MP0_SMN_C2PMSG_35 reads 0x80000002, error 0x2 in bits 7:0"; hcq::TimeoutError naming the
  // step and the register ("PSP bootloader not ready for LOAD_SYSDRV (0x10000): MP0_SMN_...",
  // "PSP bootloader LOAD_SOSDRV (0x20000): the sOS did not start: MP0_SMN_C2PMSG_81: ...;
  // MP0_SMN_C2PMSG_35 reads 0x80000003").
  void load_bootloader(const Firmware& sos);

  // Step 2. Errors "PSP ring create: the sOS is not ready for a ring: MP0_SMN_C2PMSG_64: ...",
  // "PSP ring create: no response: ...", "PSP ring create: MP0_SMN_C2PMSG_64 reads
  // 0x80000001, status 0x1".
  void create_ring();

  // Submits one command (a psp_gfx_cmd_resp; its response part is cleared) and waits for its
  // fence; returns the command buffer as the PSP left it. Throws hcq::Error without a ring
  // ("PSP command LOAD_TOC (0x20): no KM ring (create_ring first)"), for a non-zero status
  // ("PSP command LOAD_IP_FW (0x6) for GFX_FW_TYPE_RS64_MEC (89): status 0xffff0007"), and
  // hcq::TimeoutError when the fence does not come ("PSP command AUTOLOAD_RLC (0x21): no
  // fence: waited 20 ms for fence value 0x3 at MC 0x8000201000, last read 0x2").
  std::vector<uint8_t> submit(std::span<const uint8_t> command);

  // LOAD_TOC with the sOS file's 'toc' part; returns the TMR size the PSP answers.
  uint32_t load_toc(const Firmware& sos);
  // SETUP_TMR over a new `size`-byte VRAM buffer aligned to 1 MiB (the MC address, and the
  // VRAM address as system address with virt_phy_addr set, as Linux psp_prep_tmr_cmd_buf).
  void setup_tmr(uint64_t size);
  // LOAD_IP_FW of `bytes` (copied into the 1 MiB buffer; InvalidInput when larger).
  void load(uint32_t fw_type, std::span<const uint8_t> bytes, const std::string& what);
  void load(const PspFirmwareLoad& l) { load(l.fw_type, l.bytes, l.what); }
  // GFX_CMD_ID_AUTOLOAD_RLC.
  void autoload_rlc();
  // GFX_CTRL_CMD_ID_DESTROY_RINGS; later commands need create_ring again.
  void destroy_ring();

  // Steps 1-5 in Linux's order for MP0 13.0.0: bootloader, ring, TOC (or 4 MiB), SMU,
  // SETUP_TMR, the other firmware of gfx1100_psp_firmware, AUTOLOAD_RLC right after RLC_G.
  void boot(const Firmware& sos, const std::vector<Firmware>& firmware);

  // Where the buffers sit (tests, hang reports).
  const VramBuffer& firmware_buffer() const { return fw_pri_; }
  const VramBuffer& command_buffer() const { return cmd_; }
  const VramBuffer& fence_buffer() const { return fence_; }
  const VramBuffer& ring_buffer() const { return ring_; }
  std::optional<VramBuffer> tmr() const;

 private:
  void bootloader_step(uint32_t command, const Firmware& sos, const FirmwarePart& part);
  void wait_bootloader_ready(const std::string& context);
  void copy_to_firmware_buffer(std::span<const uint8_t> bytes, const std::string& what);
  std::vector<uint8_t> submit_locked(std::span<const uint8_t> command, const std::string& what);
  void sleep_handshake() const;
  void flush() const;

  RegisterIo& io_;
  BootMemory& memory_;
  std::chrono::microseconds timeout_;
  std::chrono::microseconds handshake_delay_;
  std::function<void()> flush_hdp_;
  const RegDesc &c2pmsg35_, &c2pmsg36_, &c2pmsg64_, &c2pmsg67_, &c2pmsg69_, &c2pmsg70_,
      &c2pmsg71_, &c2pmsg81_;
  VramBuffer fw_pri_, cmd_, fence_, ring_;
  std::optional<VramBuffer> tmr_;
  uint32_t fence_value_ = 0;
  bool ring_created_ = false;
  mutable std::mutex mutex_;
  os::SharedMailbox* shared_ = nullptr;
  class Section;
};

}  // namespace hcq::amd::am
