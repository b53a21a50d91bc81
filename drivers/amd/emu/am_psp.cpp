#include "amd/emu/am_psp.hpp"

#include <algorithm>
#include <cstring>

#include "amd/am/psp_gfx_if.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace mp = am::mp_13_0_0;
using namespace am::psp;

uint64_t byte_offset(const am::Reg& r, const am::IpSegmentBases& bases) {
  return am::absolute_dword(am::describe(r), bases) * 4;
}

uint32_t get32(const uint8_t* p, uint32_t at) {
  uint32_t v;
  std::memcpy(&v, p + at, 4);
  return v;
}
void put32(uint8_t* p, uint32_t at, uint32_t v) { std::memcpy(p + at, &v, 4); }
uint64_t get64(const uint8_t* p, uint32_t lo, uint32_t hi) {
  return get32(p, lo) | uint64_t{get32(p, hi)} << 32;
}

// The bootloader's order (Linux psp_hw_start; amdgpu_psp.h enum psp_bootloader_cmd).
constexpr uint32_t kComponentOrder[] = {kBlLoadKeyDatabase, kBlLoadTosSplTable, kBlLoadSysDrv,
                                        kBlLoadSocDrv,      kBlLoadIntfDrv,     kBlLoadDbgDrv,
                                        kBlLoadRasDrv,      kBlLoadSosDrv};

// Firmware types the model's PSP knows (psp_gfx_if.h enum psp_gfx_fw_type, the named ones).
bool known_fw_type(uint32_t type) { return !fw_type_name(type).empty(); }

std::string command_text(uint32_t id) {
  const std::string name = command_name(id);
  return name.empty() ? "command " + hex(id) : name;
}

}  // namespace

AmPsp::AmPsp(const am::IpSegmentBases& bases, AmBus& bus)
    : bus_(bus),
      c2pmsg35_(byte_offset(mp::MP0_SMN_C2PMSG_35, bases)),
      c2pmsg36_(byte_offset(mp::MP0_SMN_C2PMSG_36, bases)),
      c2pmsg64_(byte_offset(mp::MP0_SMN_C2PMSG_64, bases)),
      c2pmsg67_(byte_offset(mp::MP0_SMN_C2PMSG_67, bases)),
      c2pmsg69_(byte_offset(mp::MP0_SMN_C2PMSG_69, bases)),
      c2pmsg70_(byte_offset(mp::MP0_SMN_C2PMSG_70, bases)),
      c2pmsg71_(byte_offset(mp::MP0_SMN_C2PMSG_71, bases)),
      c2pmsg81_(byte_offset(mp::MP0_SMN_C2PMSG_81, bases)) {
  power_on_state();
}

bool AmPsp::handles(uint64_t offset) const {
  return offset == c2pmsg35_ || offset == c2pmsg36_ || offset == c2pmsg64_ ||
         offset == c2pmsg67_ || offset == c2pmsg69_ || offset == c2pmsg70_ ||
         offset == c2pmsg71_ || offset == c2pmsg81_;
}

uint32_t AmPsp::read32(uint64_t offset) {
  std::lock_guard lock(mutex_);
  if (offset == c2pmsg35_) return silent_ ? 0 : bl_status_;
  if (offset == c2pmsg36_) return bl_address_;
  if (offset == c2pmsg64_) return silent_ ? 0 : ctrl_;
  if (offset == c2pmsg67_) return wptr_;
  if (offset == c2pmsg69_) return ring_lo_;
  if (offset == c2pmsg70_) return ring_hi_;
  if (offset == c2pmsg71_) return ring_bytes_;
  if (offset == c2pmsg81_) return sos_alive_ ? kSosAlive : 0;
  throw InvalidInput("AM PSP model: no register at byte " + hex(offset));
}

void AmPsp::write32(uint64_t offset, uint32_t value) {
  std::lock_guard lock(mutex_);
  if (offset == c2pmsg35_) {
    if (!silent_) bootloader_command(value);
  } else if (offset == c2pmsg36_) {
    bl_address_ = value;
  } else if (offset == c2pmsg64_) {
    if (!silent_) ring_control(value);
  } else if (offset == c2pmsg67_) {
    if (silent_ || !ring_) {
      if (!silent_) last_error_ = "write pointer " + hex(value) + " written with no KM ring";
      wptr_ = rptr_ = value;  // frames not run now are never run
      return;
    }
    run_frames(value);
  } else if (offset == c2pmsg69_) {
    ring_lo_ = value;
  } else if (offset == c2pmsg70_) {
    ring_hi_ = value;
  } else if (offset == c2pmsg71_) {
    ring_bytes_ = value;
  } else if (offset == c2pmsg81_) {
    // The sOS's sign of life: written by the PSP, not the driver; a write is dropped.
    last_error_ = "write of C2PMSG_81 (" + hex(value) + ") ignored";
  } else {
    throw InvalidInput("AM PSP model: no register at byte " + hex(offset));
  }
}

uint8_t* AmPsp::vram(uint64_t mc, uint64_t size) const { return bus_.vram_at_mc(mc, size); }

void AmPsp::bootloader_command(uint32_t command) {
  auto refuse = [&](uint32_t error, const std::string& why) {
    bl_status_ = kBlReady | error;
    last_error_ = "bootloader: " + why;
  };
  if (sos_alive_) {
    // The bootloader has handed over to the sOS: nobody reads the mailbox any more.
    last_error_ = "bootloader command " + hex(command) + " while the sOS runs";
    return;
  }
  const std::string name = bootloader_command_name(command);
  const auto at = std::find(std::begin(kComponentOrder), std::end(kComponentOrder), command);
  if (at == std::end(kComponentOrder))
    return refuse(kBlErrorUnknownCommand, "unknown command " + hex(command));
  const int rank = int(at - std::begin(kComponentOrder));
  if (rank <= last_component_)
    return refuse(kBlErrorOrder,
                  name + " after " + bootloader_command_name(kComponentOrder[last_component_]));
  if (command == kBlLoadSosDrv && !sys_drv_loaded_)
    return refuse(kBlErrorOrder, "LOAD_SOSDRV before LOAD_SYSDRV");
  const uint64_t mc = uint64_t{bl_address_} << 20;
  const uint8_t* component = vram(mc, k1Meg);
  if (!component)
    return refuse(kBlErrorAddress, name + ": component at MC " + hex(mc) + " is outside VRAM");
  if (!hdp_flushed())
    return refuse(kBlErrorStale, name + ": no HDP flush since the last command (the "
                                        "component may still sit in the HDP)");
  steps_.push_back({command, mc, std::vector<uint8_t>(component, component + 64)});
  last_component_ = rank;
  if (command == kBlLoadSysDrv) sys_drv_loaded_ = true;
  if (command == kBlLoadSosDrv) {
    sos_alive_ = true;
    ctrl_ = kCtrlResponse;  // the sOS is ready for a ring (tinygrad's MockPSP)
  }
  bl_status_ = kBlReady;
}

void AmPsp::ring_control(uint32_t command) {
  if (!sos_alive_) {
    ctrl_ = command;  // no sOS to answer
    last_error_ = "ring command " + hex(command) + " before the sOS runs";
    return;
  }
  if (command == kCtrlDestroyRings) {
    ring_ = false;
    wptr_ = rptr_ = 0;
    ctrl_ = kCtrlResponse;
    return;
  }
  if (command != kCtrlInitKmRing) {
    last_error_ = "unknown ring command " + hex(command);
    ctrl_ = kCtrlResponse | kErrUnknownCommand;
    return;
  }
  const uint64_t mc = ring_lo_ | uint64_t{ring_hi_} << 32;
  std::string why;
  if (ring_bytes_ == 0 || ring_bytes_ % kFrameBytes != 0)
    why = "size " + hex(ring_bytes_) + " is not a non-zero multiple of 64 bytes";
  else if (mc % 0x1000 != 0)
    why = "MC address " + hex(mc) + " is not 4 KiB aligned";
  else if (!vram(mc, ring_bytes_))
    why = "MC " + hex(mc) + "+" + hex(ring_bytes_) + " is outside VRAM";
  if (!why.empty()) {
    last_error_ = "ring create: " + why;
    ctrl_ = kCtrlResponse | kRingStatusInvalid;
    return;
  }
  ring_ = true;
  ring_mc_ = mc;
  ring_size_ = ring_bytes_;
  wptr_ = rptr_ = 0;
  ctrl_ = kCtrlResponse;
}

void AmPsp::run_frames(uint32_t new_wptr) {
  const uint32_t ring_dwords = ring_size_ / 4;
  if (new_wptr >= ring_dwords || new_wptr % (kFrameBytes / 4) != 0) {
    last_error_ = "write pointer " + hex(new_wptr) + " is not a frame boundary inside the " +
                  hex(ring_size_) + "-byte ring";
    wptr_ = new_wptr;
    return;
  }
  wptr_ = new_wptr;
  if (!hdp_flushed()) {
    last_error_ = "write pointer " + hex(new_wptr) +
                  ": no HDP flush since the last command (the frame may still sit in the "
                  "HDP); frames dropped";
    rptr_ = wptr_;
    return;
  }
  while (rptr_ != wptr_) {
    run_frame(ring_mc_ + uint64_t{rptr_} * 4);
    rptr_ = (rptr_ + kFrameBytes / 4) % ring_dwords;
  }
}

void AmPsp::run_frame(uint64_t frame_mc) {
  const uint8_t* frame = vram(frame_mc, kFrameBytes);
  if (!frame) {
    last_error_ = "frame at MC " + hex(frame_mc) + " is outside VRAM";
    return;
  }
  const uint64_t cmd_mc = get64(frame, kFrameCmdBufAddrLo, kFrameCmdBufAddrHi);
  const uint64_t fence_mc = get64(frame, kFrameFenceAddrLo, kFrameFenceAddrHi);
  uint8_t* cmd = vram(cmd_mc, kCmdBytes);
  uint8_t* fence = vram(fence_mc, 4);
  if (!cmd) {
    last_error_ = "frame at MC " + hex(frame_mc) + ": command buffer at MC " + hex(cmd_mc) +
                  " is outside VRAM";
    return;
  }
  if (!fence) {
    last_error_ = "frame at MC " + hex(frame_mc) + ": fence at MC " + hex(fence_mc) +
                  " is outside VRAM";
    return;
  }
  ++commands_run_;
  const uint32_t status = run_command({cmd, kCmdBytes});
  put32(cmd, kRespStatus, status);
  put32(fence, 0, get32(frame, kFrameFenceValue));
}

uint32_t AmPsp::run_command(std::span<uint8_t> c) {
  const uint32_t id = get32(c.data(), kCmdId);
  auto refuse = [&](uint32_t status, const std::string& why) {
    last_error_ = command_text(id) + ": " + why;
    return status;
  };
  switch (id) {
    case kCmdLoadToc: {
      const uint64_t mc = get64(c.data(), kTocAddrLo, kTocAddrHi);
      const uint32_t size = get32(c.data(), kTocSize);
      if (size == 0 || !vram(mc, size))
        return refuse(kStatusBadParameters,
                      "TOC at MC " + hex(mc) + "+" + hex(size) + " is empty or outside VRAM");
      toc_tmr_size_ = kTocTmrSize;
      put32(c.data(), kRespTmrSize, kTocTmrSize);
      return kStatusOk;
    }
    case kCmdSetupTmr: {
      const uint64_t mc = get64(c.data(), kTmrAddrLo, kTmrAddrHi);
      const uint32_t size = get32(c.data(), kTmrSize);
      const uint32_t flags = get32(c.data(), kTmrFlags);
      const uint64_t system = get64(c.data(), kTmrSystemAddrLo, kTmrSystemAddrHi);
      if (tmr_) return refuse(kStatusBadState, "the TMR is already set up");
      if (size == 0 || size % 0x1000 != 0 || mc % 0x1000 != 0)
        return refuse(kStatusBadParameters, "TMR at MC " + hex(mc) + "+" + hex(size) +
                                                " is not 4 KiB aligned with a non-zero size");
      if (size < toc_tmr_size_)
        return refuse(kStatusBadParameters, "TMR size " + hex(size) +
                                                " is below the TOC's " + hex(toc_tmr_size_));
      if (!vram(mc, size))
        return refuse(kStatusBadParameters,
                      "TMR at MC " + hex(mc) + "+" + hex(size) + " is outside VRAM");
      if ((flags & kTmrFlagVirtPhyAddr) && system != mc - bus_.fb_base)
        return refuse(kStatusBadParameters, "TMR system address " + hex(system) +
                                                " is not its VRAM address " +
                                                hex(mc - bus_.fb_base));
      tmr_ = true;
      tmr_mc_ = mc;
      tmr_size_ = size;
      return kStatusOk;
    }
    case kCmdLoadIpFw: {
      const uint64_t mc = get64(c.data(), kLoadIpFwAddrLo, kLoadIpFwAddrHi);
      const uint32_t size = get32(c.data(), kLoadIpFwSize);
      const uint32_t type = get32(c.data(), kLoadIpFwType);
      if (!known_fw_type(type))
        return refuse(kTeeErrorNotSupported, "unknown " + fw_type_text(type));
      const uint8_t* bytes = size ? vram(mc, size) : nullptr;
      if (!bytes)
        return refuse(kStatusBadParameters, fw_type_text(type) + " at MC " + hex(mc) + "+" +
                                                 hex(size) + " is empty or outside VRAM");
      if (!tmr_ && type != fw::kSmu)
        return refuse(kStatusBadState, fw_type_text(type) + " before SETUP_TMR");
      loaded_[type].assign(bytes, bytes + size);
      load_order_.push_back(type);
      return kStatusOk;
    }
    case kCmdAutoloadRlc:
      if (!tmr_) return refuse(kStatusBadState, "before SETUP_TMR");
      if (!loaded_.count(fw::kRlcG))
        return refuse(kStatusBadState, "before " + fw_type_text(fw::kRlcG) + " was loaded");
      rlc_autoload_ = true;
      return kStatusOk;
    default:
      return refuse(kErrUnknownCommand, "not a command the model knows");
  }
}

bool AmPsp::hdp_flushed() {
  if (!bus_.hdp_flushes) return true;
  const uint64_t n = bus_.hdp_flushes();
  const bool fresh = n != flushes_seen_;
  flushes_seen_ = n;
  return fresh;
}

void AmPsp::power_on_state() {
  flushes_seen_ = bus_.hdp_flushes ? bus_.hdp_flushes() : 0;
  bl_status_ = kBlReady;
  bl_address_ = ctrl_ = wptr_ = ring_lo_ = ring_hi_ = ring_bytes_ = 0;
  last_component_ = -1;
  sys_drv_loaded_ = sos_alive_ = ring_ = tmr_ = rlc_autoload_ = false;
  ring_mc_ = 0;
  ring_size_ = rptr_ = toc_tmr_size_ = 0;
  tmr_mc_ = tmr_size_ = 0;
  loaded_.clear();
  load_order_.clear();
  steps_.clear();
  commands_run_ = 0;
  last_error_.clear();
}

void AmPsp::reset() {
  std::lock_guard lock(mutex_);
  power_on_state();
}

bool AmPsp::sos_alive() const {
  std::lock_guard lock(mutex_);
  return sos_alive_;
}

bool AmPsp::ring_created() const {
  std::lock_guard lock(mutex_);
  return ring_;
}

bool AmPsp::tmr_set_up() const {
  std::lock_guard lock(mutex_);
  return tmr_;
}

uint64_t AmPsp::tmr_mc() const {
  std::lock_guard lock(mutex_);
  return tmr_mc_;
}

uint64_t AmPsp::tmr_size() const {
  std::lock_guard lock(mutex_);
  return tmr_size_;
}

bool AmPsp::loaded(uint32_t fw_type) const {
  std::lock_guard lock(mutex_);
  return loaded_.count(fw_type) != 0;
}

std::vector<uint8_t> AmPsp::loaded_bytes(uint32_t fw_type) const {
  std::lock_guard lock(mutex_);
  auto it = loaded_.find(fw_type);
  return it == loaded_.end() ? std::vector<uint8_t>{} : it->second;
}

std::vector<uint32_t> AmPsp::load_order() const {
  std::lock_guard lock(mutex_);
  return load_order_;
}

bool AmPsp::rlc_autoload_done() const {
  std::lock_guard lock(mutex_);
  return rlc_autoload_;
}

std::vector<AmPsp::BootloaderStep> AmPsp::bootloader_steps() const {
  std::lock_guard lock(mutex_);
  return steps_;
}

unsigned AmPsp::commands_run() const {
  std::lock_guard lock(mutex_);
  return commands_run_;
}

std::string AmPsp::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

void AmPsp::set_silent(bool silent) {
  std::lock_guard lock(mutex_);
  silent_ = silent;
}

}  // namespace hcq::amd::emu
