// The emulated GPU's PSP (MP0 13.0.0; issue 17 item 8): its bootloader, the secure OS's KM
// ring and the commands the boot sends on it. Written from the public descriptions of the
// interface, not from hcq's driver: Linux psp_v13_0.c (bootloader mailbox C2PMSG_35/36, sOS
// sign of life C2PMSG_81, ring control C2PMSG_64 with the ring in C2PMSG_69/70/71, write
// pointer C2PMSG_67), amdgpu_psp.c (frames, fences, the command buffer's response),
// psp_gfx_if.h (layouts, command ids, firmware types) and tinygrad test/mockgpu/am MockPSP.
//
// Registers owned (byte offsets from MP0's segment bases): C2PMSG_35, 36, 64, 67, 69, 70, 71,
// 81. Every access answers at once (hardware answers later; the driver's polls cover both).
//
// Bootloader (power-on: C2PMSG_35 reads 0x80000000, ready). A write of C2PMSG_35 runs the
// command on the component at MC address C2PMSG_36 << 20 and leaves 0x80000000 | error:
//   the order is KDB, TOS_SPL_TABLE, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, SOS; a
//   component may be skipped but never sent after a later one or twice (error 0x2); the sOS
//   needs SYS_DRV first (error 0x2); an unknown command is error 0x1; a component address
//   outside VRAM error 0x3; no HDP flush since the last command error 0x4 (below).
//   LOAD_SOSDRV accepted: the sOS runs, C2PMSG_81 reads kSosAlive.
//   The error codes are the model's own (Linux names none for 13.0.0; psp_v13_0.c says bits
//   7:0 carry an error on 13.0.6 and newer).
// KM ring: C2PMSG_64 reads 0 until the sOS runs, then 0x80000000 (ready). Writing
// PSP_RING_TYPE__KM << 16 creates the ring from C2PMSG_69/70 (MC address) and 71 (bytes):
// 0x80000000 when it lies in VRAM, is 4 KiB aligned and a non-zero multiple of 64 bytes, else
// 0x80000000 | kRingStatusInvalid; C2PMSG_67 (write pointer) reads 0. DESTROY_RINGS removes
// it (0x80000000). Other commands: 0x80000000 | PSP_ERR_UNKNOWN_COMMAND. Before the sOS runs a
// write of C2PMSG_64 is not answered.
// Frames: a write of C2PMSG_67 runs every frame from the model's read pointer to the new
// write pointer (dwords, modulo the ring). Each frame's command buffer (1024 bytes) gets its
// response status at +864 (LOAD_TOC also the TMR size at +880), then the fence value is
// written at the fence address. A command or fence buffer outside VRAM: nothing is written
// (the driver's fence wait times out) and last_error says why. Commands:
//   LOAD_TOC      TOC in VRAM and size > 0 -> status 0, tmr_size kTocTmrSize
//   SETUP_TMR     once; 4 KiB aligned, a non-zero multiple of 4 KiB, at least the TOC's size,
//                 in VRAM, and with virt_phy_addr the system address = the VRAM address
//   LOAD_IP_FW    a known type (else TEE_ERROR_NOT_SUPPORTED); bytes in VRAM, size > 0; before
//                 SETUP_TMR only GFX_FW_TYPE_SMU (Linux loads PMFW before the TMR on MP0
//                 13.0.0); the bytes are kept per type
//   AUTOLOAD_RLC  after SETUP_TMR and RLC_G (Linux sends it right after RLC_G)
//   anything else PSP_ERR_UNKNOWN_COMMAND (0x100, what Linux psp_gfx_if.h names)
// HDP: the PSP reads the components, the ring's frames and the command buffers the CPU wrote
// into VRAM, which on hardware may still sit in the HDP unless the driver flushed it (Linux
// psp_cmd_submit_buf and psp_v13_0 bootloader steps run amdgpu_device_flush_hdp / the copy is
// followed by a flush; tinygrad AM_PSP._prep_msg1 and _ring_submit flush_hdp). The model
// cannot see pending CPU writes (VRAM is a plain mapping), so with AmBus::hdp_flushes set it
// treats a bootloader command or a write-pointer update with no HDP flush since the previous
// one as reading stale memory: the bootloader answers error kBlErrorStale, the frames are
// dropped (no fence, last_error says why).
// Refused state and parameters answer kStatusBadState / kStatusBadParameters (the
// GlobalPlatform TEE codes TEE_ERROR_BAD_STATE / _BAD_PARAMETERS, of the family of Linux's
// TEE_ERROR_NOT_SUPPORTED; what a real PSP answers there is not public).
//
// Test hook: set_silent(true) makes the PSP stop answering: C2PMSG_35 and 64 read 0 and
// writes to 35, 64 and 67 are kept but not acted on (frames pending then are dropped).
//
// Threads: every member may be called from several threads at once (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"

namespace hcq::amd::emu {

class AmPsp final : public AmBlock {
 public:
  static constexpr uint32_t kSosAlive = 0x1;  // C2PMSG_81 once the sOS runs (tinygrad's mock)
  static constexpr uint32_t kBlErrorUnknownCommand = 0x1, kBlErrorOrder = 0x2,
                            kBlErrorAddress = 0x3, kBlErrorStale = 0x4;
  static constexpr uint32_t kRingStatusInvalid = 0x1;
  static constexpr uint32_t kStatusBadParameters = 0xFFFF0006;
  static constexpr uint32_t kStatusBadState = 0xFFFF0007;
  static constexpr uint32_t kTocTmrSize = 0x400000;  // the model's TMR size answer

  // One bootloader command the model accepted: its command, the component's MC address and
  // the first 64 bytes there (what the driver copied).
  struct BootloaderStep {
    uint32_t command;
    uint64_t mc;
    std::vector<uint8_t> head;
  };

  AmPsp(const am::IpSegmentBases& bases, AmBus& bus);

  bool handles(uint64_t offset) const override;
  // hcq::InvalidInput for an offset handles() refuses: "AM PSP model: no register at byte
  // 0x1000".
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;
  void reset() override;

  bool sos_alive() const;
  bool ring_created() const;
  bool tmr_set_up() const;
  uint64_t tmr_mc() const;
  uint64_t tmr_size() const;
  bool loaded(uint32_t fw_type) const;
  // The bytes last loaded for `fw_type` (empty when none).
  std::vector<uint8_t> loaded_bytes(uint32_t fw_type) const;
  // The firmware types in the order they were loaded.
  std::vector<uint32_t> load_order() const;
  bool rlc_autoload_done() const;
  std::vector<BootloaderStep> bootloader_steps() const;
  unsigned commands_run() const;
  // Why the last refused access was refused; "" when none since power-on.
  std::string last_error() const;

  void set_silent(bool silent);

 private:
  void bootloader_command(uint32_t command);
  void ring_control(uint32_t command);
  void run_frames(uint32_t new_wptr);
  void run_frame(uint64_t frame_at);
  uint32_t run_command(std::span<uint8_t> cmd);
  uint8_t* vram(uint64_t mc, uint64_t size) const;
  void power_on_state();
  // Whether the HDP was flushed since the last call (always, when the bus has no HDP).
  bool hdp_flushed();

  AmBus& bus_;
  uint64_t c2pmsg35_, c2pmsg36_, c2pmsg64_, c2pmsg67_, c2pmsg69_, c2pmsg70_, c2pmsg71_,
      c2pmsg81_;
  mutable std::mutex mutex_;
  uint32_t bl_status_ = 0, bl_address_ = 0, ctrl_ = 0, wptr_ = 0, ring_lo_ = 0, ring_hi_ = 0,
           ring_bytes_ = 0;
  int last_component_ = -1;
  bool sys_drv_loaded_ = false;
  bool sos_alive_ = false;
  bool ring_ = false;
  uint64_t ring_mc_ = 0;
  uint32_t ring_size_ = 0, rptr_ = 0;
  uint32_t toc_tmr_size_ = 0;
  bool tmr_ = false;
  uint64_t tmr_mc_ = 0, tmr_size_ = 0;
  std::map<uint32_t, std::vector<uint8_t>> loaded_;
  std::vector<uint32_t> load_order_;
  bool rlc_autoload_ = false;
  std::vector<BootloaderStep> steps_;
  unsigned commands_run_ = 0;
  std::string last_error_;
  bool silent_ = false;
  uint64_t flushes_seen_ = 0;  // AmBus::hdp_flushes at the last command
};

}  // namespace hcq::amd::emu
