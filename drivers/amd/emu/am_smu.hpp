// The emulated GPU's SMU message mailbox (issue 17 item 8), MP1 13.0.0: the registers
// MP1_SMN_C2PMSG_66 (message), _82 (argument), _90 (response) and the debug mailbox _75
// (message), _53 (argument), _54 (response), at their byte offsets in the register BAR.
// Written from the public descriptions of the interface, not from the driver: Linux
// smu_cmn.c (the driver clears the response, writes the argument, then the message; the SMU
// answers in the response register: 0x1 OK, 0xFF failed, 0xFE unknown message, 0xFD bad
// prerequisites, 0xFC busy), smu_v13_0_0_ppsmc.h (message ids), smu_v13_0_0_ppt.c
// (DEBUGSMC_MSG_Mode1Reset 2 on the debug mailbox) and tinygrad am/ip.py AM_SMU.
//
// A write of the message register runs the message at once and writes its response (the
// model answers synchronously; hardware answers later, which the driver's poll covers):
//   GetSmuVersion (0x2)            the version in the argument register
//   EnableAllSmuFeatures (0x6)     features on
//   SetDriverDramAddrHigh/Low (0xE/0xF)  the driver table's address, half by half
//   any other id                   0xFE, the argument left alone
// The debug mailbox knows Mode1Reset (2): the whole GPU resets (the hook AmGpu sets: every
// block, this one included, back to power-on: features off, address cleared, mailbox
// registers 0; without a hook only this SMU), the reset is counted, and then its response
// reads 0x1 (tinygrad's AM_SMU.mode1_reset waits for it).
// Other debug messages get 0xFE. The model acts on the write of the message register whatever
// the response register holds, so a driver that skipped clearing it reads a stale non-zero
// response only before its message is written, never after.
//
// Test hooks: force_response() makes the next messages answer a given code without running
// (0: never answer, the driver's wait then times out).
//
// Threads: every member may be called from several threads at once (one mutex); one
// register access is atomic, a driver's message sequence is the driver's to keep together.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"

namespace hcq::amd::emu {

class AmSmu final : public AmBlock {
 public:
  // Made up, in the SMU's program.major.minor.debug byte layout (78.74.0): no real firmware's.
  static constexpr uint32_t kVersion = 0x004e4a00;

  // Places the registers with MP1's segment bases from IP discovery.
  explicit AmSmu(const am::IpSegmentBases& bases);

  // Whether `offset` (bytes in the register BAR) is one of the model's registers.
  bool handles(uint64_t offset) const override;
  // hcq::InvalidInput for an offset handles() refuses:
  // "AM SMU model: no register at byte 0x1000".
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;
  // Power-on state (the counters and force_response stay: they are the test's).
  void reset() override;
  // What a Mode1Reset message resets: called with no lock of this SMU held, before the
  // response is written. Set once, before the first access.
  void set_mode1_reset_hook(std::function<void()> hook);

  // State the messages change.
  bool features_enabled() const;
  uint64_t driver_dram_address() const;
  unsigned mode1_resets() const;
  unsigned messages_run() const;

  // Test hook: the next messages on the main mailbox answer `response` without running;
  // 0 leaves the response register 0 (no answer). std::nullopt: run messages again.
  void force_response(std::optional<uint32_t> response);

 private:
  void run_message(uint32_t message);
  // True for a Mode1Reset, which write32 finishes after unlocking (the hook resets this SMU).
  bool run_debug_message(uint32_t message);
  void power_on_state();

  uint64_t msg_, arg_, resp_, debug_msg_, debug_arg_, debug_resp_;  // byte offsets
  mutable std::mutex mutex_;
  uint32_t msg_value_ = 0, arg_value_ = 0, resp_value_ = 0;
  uint32_t debug_msg_value_ = 0, debug_arg_value_ = 0, debug_resp_value_ = 0;
  bool features_enabled_ = false;
  uint64_t driver_dram_address_ = 0;
  unsigned mode1_resets_ = 0;
  unsigned messages_run_ = 0;
  std::optional<uint32_t> forced_;
  std::function<void()> mode1_reset_hook_;
};

}  // namespace hcq::amd::emu
