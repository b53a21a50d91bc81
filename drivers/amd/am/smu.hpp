// The SMU (MP1 13.0.0) message mailbox, as Linux's smu_cmn.c (__smu_cmn_send_msg,
// smu_cmn_wait_for_response, __smu_cmn_reg2errno) and tinygrad's am/ip.py AM_SMU._send_msg
// drive it: write 0 to the response register MP1_SMN_C2PMSG_90, the argument to
// MP1_SMN_C2PMSG_82, the message id to MP1_SMN_C2PMSG_66; poll C2PMSG_90 until it is not 0;
// 0x1 is success, anything else an error naming the message, its argument and the response;
// the argument register then holds what the SMU answers (read back on request).
// Mode-1 reset goes through the debug mailbox (message MP1_SMN_C2PMSG_75, argument _53,
// response _54) with DEBUGSMC_MSG_Mode1Reset 2, as tinygrad's AM_SMU.mode1_reset does for
// MP0 13.0.0 (Linux smu_v13_0_0_ppt.c defines DEBUGSMC_MSG_Mode1Reset 2 and these registers
// in smu_v13_0_0_init_msg_ctl).
//
// Threads: every member may be called from several threads at once: one mutex keeps one
// message (its three writes, the poll and the read-back) at a time, as smu_cmn.c's
// message_lock does. The mutex covers only this object; with a SharedMailbox (the device's,
// os/device_owner.hpp) every message is also a MailboxSection of it, so Smu objects of other
// processes (a workload and a monitor) or of this one never interleave on the mailbox.
//
// Re-sync: a section that finds the mailbox interrupted (its last holder died inside, or gave
// up waiting) first waits for the response register to turn non-zero, the SMU done with that
// message, before clearing it: Linux's smu_cmn_send_smc_msg_with_param polls C2PMSG_90 the
// same way (__smu_cmn_poll_stat) before every message and refuses to send while it reads
// SMU_RESP_NONE. The debug mailbox (a reset) skips it: the reset clears what was pending.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "amd/am/register_io.hpp"
#include "os/device_owner.hpp"

namespace hcq::amd::am {

// Message ids: Linux drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu_v13_0_0_ppsmc.h
// (PPSMC_MSG_*), the same values tinygrad takes from its generated smu_v13_0_0 module.
namespace smu_v13_0_0 {
inline constexpr uint32_t kGetSmuVersion = 0x2;
inline constexpr uint32_t kEnableAllSmuFeatures = 0x6;
inline constexpr uint32_t kSetDriverDramAddrHigh = 0xE;
inline constexpr uint32_t kSetDriverDramAddrLow = 0xF;
// Debug mailbox message (Linux smu_v13_0_0_ppt.c DEBUGSMC_MSG_Mode1Reset).
inline constexpr uint32_t kDebugMode1Reset = 0x2;

// Responses in C2PMSG_90 (smu_cmn.c SMU_RESP_*; PPSMC_Result_* in smu_v13_0_0_ppsmc.h).
inline constexpr uint32_t kRespNone = 0x0;
inline constexpr uint32_t kRespOk = 0x1;
inline constexpr uint32_t kRespCmdFail = 0xFF;
inline constexpr uint32_t kRespCmdUnknown = 0xFE;
inline constexpr uint32_t kRespCmdBadPrereq = 0xFD;
inline constexpr uint32_t kRespBusyOther = 0xFC;
inline constexpr uint32_t kRespDebugEnd = 0xFB;
}  // namespace smu_v13_0_0

// "GetSmuVersion" for the message ids above, otherwise empty (errors then give the id only:
// "SMU message 0x55 with argument 0x7: ...").
std::string_view smu_message_name(uint32_t id);
// "SMU_RESP_CMD_FAIL (the message ran and failed)", ... ; "an undefined response" otherwise.
std::string smu_response_text(uint32_t response);

class Smu {
 public:
  // Linux waits adev->usec_timeout * 20 (2 s) per response; tinygrad 10 s.
  static constexpr std::chrono::microseconds kDefaultTimeout = std::chrono::seconds(10);

  // `shared`: the device's mailbox lock, which must outlive this object; null: only this
  // object's mutex (nothing else may use the mailbox).
  explicit Smu(RegisterIo& io, std::chrono::microseconds timeout = kDefaultTimeout,
               os::SharedMailbox* shared = nullptr);

  // Sends one message and waits for its response. Returns the argument register afterwards
  // (the SMU's answer) when `read_back`, otherwise 0. Throws hcq::Error for a response other
  // than 0x1: "SMU message EnableAllSmuFeatures (0x6) with argument 0x0: response 0xff
  // SMU_RESP_CMD_FAIL (the message ran and failed)"; hcq::TimeoutError when no response comes:
  // "SMU message GetSmuVersion (0x2) with argument 0x0: no response: MP1_SMN_C2PMSG_90: waited
  // 10000 ms for a value other than 0x0 (mask 0xffffffff), last read 0x0". A re-sync
  // whose response never comes: hcq::TimeoutError "SMU message GetSmuVersion (0x2) with
  // argument 0x0: the mailbox was left mid-message (its holder died or gave up) and the SMU
  // never answered it: MP1_SMN_C2PMSG_90: waited ...", the mailbox still marked interrupted.
  uint32_t send(uint32_t message, uint32_t argument, bool read_back = false);

  // PPSMC_MSG_GetSmuVersion: the firmware version (Linux prints it as
  // program.major.minor.debug, one byte each from bit 24 down).
  uint32_t version();
  // SetDriverDramAddrHigh then SetDriverDramAddrLow: where the driver table sits (an MC
  // address), as tinygrad's AM_SMU.init_hw sends them.
  void set_driver_dram_address(uint64_t mc_address);
  void enable_all_features();
  // DEBUGSMC_MSG_Mode1Reset through the debug mailbox in tinygrad's order (response cleared,
  // argument, message) and its response waited for as tinygrad does. (Linux's
  // __smu_cmn_send_debug_msg writes argument, message, then clears the response, and does not
  // wait.)
  // The GPU then resets: tinygrad waits 500 ms before touching it; that wait is the caller's.
  void mode1_reset();

  // How many messages of this object found the mailbox interrupted and re-synced it.
  unsigned resyncs() const;

 private:
  uint32_t exchange(const RegDesc& msg_reg, const RegDesc& arg_reg, const RegDesc& resp_reg,
                    const std::string& what, uint32_t message, uint32_t argument,
                    bool read_back);
  RegisterIo& io_;
  std::chrono::microseconds timeout_;
  const RegDesc& msg_;
  const RegDesc& arg_;
  const RegDesc& resp_;
  const RegDesc& debug_msg_;
  const RegDesc& debug_arg_;
  const RegDesc& debug_resp_;
  os::SharedMailbox* shared_;
  mutable std::mutex mutex_;
  unsigned resyncs_ = 0;  // guarded by mutex_
};

}  // namespace hcq::amd::am
