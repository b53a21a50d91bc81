#include "amd/emu/am_smu.hpp"

#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace mp = am::mp_13_0_0;

// Linux drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu_v13_0_0_ppsmc.h.
constexpr uint32_t kMsgGetSmuVersion = 0x2;
constexpr uint32_t kMsgEnableAllSmuFeatures = 0x6;
constexpr uint32_t kMsgSetDriverDramAddrHigh = 0xE;
constexpr uint32_t kMsgSetDriverDramAddrLow = 0xF;
constexpr uint32_t kResultOk = 0x1;           // PPSMC_Result_OK
constexpr uint32_t kResultUnknownCmd = 0xFE;  // PPSMC_Result_UnknownCmd
// Linux smu_v13_0_0_ppt.c.
constexpr uint32_t kDebugMsgMode1Reset = 0x2;

uint64_t byte_offset(const am::Reg& r, const am::IpSegmentBases& bases) {
  return am::absolute_dword(am::describe(r), bases) * 4;
}

}  // namespace

AmSmu::AmSmu(const am::IpSegmentBases& bases)
    : msg_(byte_offset(mp::MP1_SMN_C2PMSG_66, bases)),
      arg_(byte_offset(mp::MP1_SMN_C2PMSG_82, bases)),
      resp_(byte_offset(mp::MP1_SMN_C2PMSG_90, bases)),
      debug_msg_(byte_offset(mp::MP1_SMN_C2PMSG_75, bases)),
      debug_arg_(byte_offset(mp::MP1_SMN_C2PMSG_53, bases)),
      debug_resp_(byte_offset(mp::MP1_SMN_C2PMSG_54, bases)) {}

bool AmSmu::handles(uint64_t offset) const {
  return offset == msg_ || offset == arg_ || offset == resp_ || offset == debug_msg_ ||
         offset == debug_arg_ || offset == debug_resp_;
}

uint32_t AmSmu::read32(uint64_t offset) {
  std::lock_guard lock(mutex_);
  if (offset == msg_) return msg_value_;
  if (offset == arg_) return arg_value_;
  if (offset == resp_) return resp_value_;
  if (offset == debug_msg_) return debug_msg_value_;
  if (offset == debug_arg_) return debug_arg_value_;
  if (offset == debug_resp_) return debug_resp_value_;
  throw InvalidInput("AM SMU model: no register at byte " + hex(offset));
}

void AmSmu::write32(uint64_t offset, uint32_t value) {
  std::unique_lock lock(mutex_);
  if (offset == debug_msg_) {
    debug_msg_value_ = value;
    if (!run_debug_message(value)) return;
    // Mode-1 reset: the GPU's reset takes every block's lock in turn, this one's too.
    std::function<void()> hook = mode1_reset_hook_;
    if (hook) {
      lock.unlock();
      hook();
      lock.lock();
    } else {
      power_on_state();
    }
    ++mode1_resets_;
    debug_resp_value_ = kResultOk;
    return;
  }
  if (offset == msg_) {
    msg_value_ = value;
    run_message(value);
  } else if (offset == arg_) {
    arg_value_ = value;
  } else if (offset == resp_) {
    resp_value_ = value;
  } else if (offset == debug_arg_) {
    debug_arg_value_ = value;
  } else if (offset == debug_resp_) {
    debug_resp_value_ = value;
  } else {
    throw InvalidInput("AM SMU model: no register at byte " + hex(offset));
  }
}

void AmSmu::run_message(uint32_t message) {
  if (forced_) {
    resp_value_ = *forced_;
    return;
  }
  ++messages_run_;
  switch (message) {
    case kMsgGetSmuVersion:
      arg_value_ = kVersion;
      break;
    case kMsgEnableAllSmuFeatures:
      features_enabled_ = true;
      break;
    case kMsgSetDriverDramAddrHigh:
      driver_dram_address_ = (driver_dram_address_ & 0xffffffffu) | uint64_t(arg_value_) << 32;
      break;
    case kMsgSetDriverDramAddrLow:
      driver_dram_address_ = (driver_dram_address_ & ~uint64_t(0xffffffffu)) | arg_value_;
      break;
    default:
      resp_value_ = kResultUnknownCmd;
      return;
  }
  resp_value_ = kResultOk;
}

bool AmSmu::run_debug_message(uint32_t message) {
  if (message == kDebugMsgMode1Reset) return true;
  debug_resp_value_ = kResultUnknownCmd;
  return false;
}

void AmSmu::reset() {
  std::lock_guard lock(mutex_);
  power_on_state();
}

void AmSmu::set_mode1_reset_hook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  mode1_reset_hook_ = std::move(hook);
}

void AmSmu::power_on_state() {
  msg_value_ = arg_value_ = resp_value_ = 0;
  debug_msg_value_ = debug_arg_value_ = debug_resp_value_ = 0;
  features_enabled_ = false;
  driver_dram_address_ = 0;
}

bool AmSmu::features_enabled() const {
  std::lock_guard lock(mutex_);
  return features_enabled_;
}

uint64_t AmSmu::driver_dram_address() const {
  std::lock_guard lock(mutex_);
  return driver_dram_address_;
}

unsigned AmSmu::mode1_resets() const {
  std::lock_guard lock(mutex_);
  return mode1_resets_;
}

unsigned AmSmu::messages_run() const {
  std::lock_guard lock(mutex_);
  return messages_run_;
}

void AmSmu::force_response(std::optional<uint32_t> response) {
  std::lock_guard lock(mutex_);
  forced_ = response;
}

}  // namespace hcq::amd::emu
