#include "amd/am/smu.hpp"

#include <optional>

#include "core/error.hpp"

namespace hcq::amd::am {

using namespace smu_v13_0_0;

std::string_view smu_message_name(uint32_t id) {
  switch (id) {
    case kGetSmuVersion: return "GetSmuVersion";
    case kEnableAllSmuFeatures: return "EnableAllSmuFeatures";
    case kSetDriverDramAddrHigh: return "SetDriverDramAddrHigh";
    case kSetDriverDramAddrLow: return "SetDriverDramAddrLow";
    default: return {};
  }
}

// The meanings are smu_cmn.c's comments on __smu_cmn_poll_stat and __smu_cmn_reg2errno.
std::string smu_response_text(uint32_t response) {
  switch (response) {
    case kRespNone: return "SMU_RESP_NONE (still busy with the message)";
    case kRespOk: return "SMU_RESP_OK";
    case kRespCmdFail: return "SMU_RESP_CMD_FAIL (the message ran and failed)";
    case kRespCmdUnknown: return "SMU_RESP_CMD_UNKNOWN (the SMU does not know the message)";
    case kRespCmdBadPrereq: return "SMU_RESP_CMD_BAD_PREREQ (valid message, bad prerequisites)";
    case kRespBusyOther: return "SMU_RESP_BUSY_OTHER (busy with other messages, retry)";
    case kRespDebugEnd: return "SMU_RESP_DEBUG_END";
    default: return "an undefined response";
  }
}

Smu::Smu(RegisterIo& io, std::chrono::microseconds timeout, os::SharedMailbox* shared)
    : io_(io),
      timeout_(timeout),
      msg_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_66)),
      arg_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_82)),
      resp_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_90)),
      debug_msg_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_75)),
      debug_arg_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_53)),
      debug_resp_(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_54)),
      shared_(shared) {}

unsigned Smu::resyncs() const {
  std::lock_guard lock(mutex_);
  return resyncs_;
}

uint32_t Smu::exchange(const RegDesc& msg_reg, const RegDesc& arg_reg, const RegDesc& resp_reg,
                       const std::string& what, uint32_t message, uint32_t argument,
                       bool read_back) {
  const std::string context = what + " with argument " + hex(argument);
  std::lock_guard lock(mutex_);
  std::optional<os::MailboxSection> section;
  if (shared_) {
    section.emplace(*shared_);
    if (section->interrupted() && &resp_reg == &resp_) {
      // Let the SMU finish the message left behind before clearing its response.
      try {
        io_.wait_not(resp_reg, 0xffffffff, kRespNone, timeout_);
      } catch (const TimeoutError& e) {
        throw TimeoutError(context +
                           ": the mailbox was left mid-message (its holder died or gave up) "
                           "and the SMU never answered it: " + e.what());
      }
      resyncs_++;
    }
    section->begin();
  }
  // Clear the response first: the SMU writes it when done (smu_cmn.c __smu_cmn_send_msg).
  io_.write(resp_reg, kRespNone);
  io_.write(arg_reg, argument);
  io_.write(msg_reg, message);
  uint32_t response;
  try {
    response = io_.wait_not(resp_reg, 0xffffffff, kRespNone, timeout_);
  } catch (const TimeoutError& e) {
    throw TimeoutError(context + ": no response: " + e.what());  // the mailbox stays busy
  }
  if (section) section->end();
  if (response != kRespOk)
    throw Error(context + ": response " + hex(response) + " " + smu_response_text(response));
  return read_back ? io_.read(arg_reg) : 0;
}

uint32_t Smu::send(uint32_t message, uint32_t argument, bool read_back) {
  const std::string_view name = smu_message_name(message);
  const std::string what = name.empty()
                               ? "SMU message " + hex(message)
                               : "SMU message " + std::string(name) + " (" + hex(message) + ")";
  return exchange(msg_, arg_, resp_, what, message, argument, read_back);
}

uint32_t Smu::version() { return send(kGetSmuVersion, 0, true); }

void Smu::set_driver_dram_address(uint64_t mc_address) {
  send(kSetDriverDramAddrHigh, uint32_t(mc_address >> 32));
  send(kSetDriverDramAddrLow, uint32_t(mc_address));
}

void Smu::enable_all_features() { send(kEnableAllSmuFeatures, 0); }

void Smu::mode1_reset() {
  exchange(debug_msg_, debug_arg_, debug_resp_,
           "SMU debug message Mode1Reset (" + hex(kDebugMode1Reset) + ")", kDebugMode1Reset, 0,
           false);
}

}  // namespace hcq::amd::am
