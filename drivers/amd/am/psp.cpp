#include "amd/am/psp.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace {

namespace mp = mp_13_0_0;
using namespace psp;

std::string duration_text(std::chrono::microseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " ms";
  return std::to_string(d.count()) + " us";
}

std::string bootloader_text(uint32_t command) {
  return bootloader_command_name(command) + " (" + hex(command) + ")";
}

std::string part_text(const Firmware& fw, const FirmwarePart& p) {
  std::string file = fw.path.substr(fw.path.find_last_of('/') + 1);
  return file + " part '" + p.name + "'";
}

// The part's bytes, checked against the file (a Firmware is a plain value: parts built by
// hand or from a damaged file must not read past its end).
std::span<const uint8_t> part_bytes(const Firmware& fw, const FirmwarePart& p) {
  if (p.offset > fw.bytes.size() || p.size > fw.bytes.size() - p.offset)
    throw InvalidInput(fw.path + ": part '" + p.name + "' is " + hex(p.offset) + "+" +
                       hex(p.size) + ", past the end of the file (" + hex(fw.bytes.size()) +
                       " bytes)");
  return fw.data(p);
}

const FirmwarePart* find_part(const Firmware& fw, std::string_view name) {
  for (const FirmwarePart& p : fw.parts)
    if (p.name == name) return &p;
  return nullptr;
}

void check_fits(std::span<const uint8_t> bytes, const std::string& what) {
  if (bytes.size() > k1Meg)
    throw InvalidInput("PSP: " + what + " is " + hex(bytes.size()) +
                       " bytes, more than the 1 MiB buffer the PSP reads it from");
}

void put32(std::span<uint8_t> b, uint32_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = uint8_t(v >> (8 * i));
}
uint32_t get32(std::span<const uint8_t> b, uint32_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

std::vector<uint8_t> new_command(uint32_t cmd_id) {
  std::vector<uint8_t> c(kCmdBytes, 0);
  put32(c, kCmdId, cmd_id);
  return c;
}

std::string command_text(std::span<const uint8_t> c) {
  const uint32_t id = get32(c, kCmdId);
  std::string name = command_name(id);
  std::string text = "PSP command " + (name.empty() ? hex(id) : name + " (" + hex(id) + ")");
  if (id == kCmdLoadIpFw) text += " for " + fw_type_text(get32(c, kLoadIpFwType));
  return text;
}

// Linux's AMDGPU_UCODE_ID order of the types gfx1100_psp_firmware gives (amdgpu_ucode.h),
// the SMU first because it is loaded before SETUP_TMR.
constexpr uint32_t kLoadOrder[] = {
    fw::kSmu,
    fw::kSdmaUcodeTh0, fw::kSdmaUcodeTh1,
    fw::kCpPfp, fw::kCpMe,
    fw::kRs64Pfp, fw::kRs64Me, fw::kRs64Mec,
    fw::kRs64PfpP0Stack, fw::kRs64PfpP1Stack, fw::kRs64MeP0Stack, fw::kRs64MeP1Stack,
    fw::kRs64MecP0Stack, fw::kRs64MecP1Stack, fw::kRs64MecP2Stack, fw::kRs64MecP3Stack,
    fw::kCpMec,
    fw::kImuI, fw::kImuD,
    fw::kGlobalTapDelays, fw::kSe0TapDelays, fw::kSe1TapDelays, fw::kSe2TapDelays,
    fw::kSe3TapDelays,
    fw::kRlcRestoreListSrmCntl, fw::kRlcRestoreListGpmMem, fw::kRlcRestoreListSrmMem,
    fw::kRlcIram, fw::kRlcDramBoot, fw::kRlcP, fw::kRlcV,
    fw::kRlcG,
};

size_t load_rank(uint32_t fw_type) {
  return size_t(std::find(std::begin(kLoadOrder), std::end(kLoadOrder), fw_type) -
                std::begin(kLoadOrder));
}

// The PSP firmware types of one file's parts (amdgpu_ucode.c / psp_get_fw_type via the
// AMDGPU_UCODE_ID each part is registered as).
std::vector<std::pair<std::string, uint32_t>> part_types(const Firmware& f) {
  const bool rs64 = f.header_major == 2;  // gfx_firmware_header_v2_0 (gfx_v11_0.c rs64_enable)
  switch (f.kind) {
    case FirmwareKind::Smu: return {{"smc", fw::kSmu}};
    case FirmwareKind::Sdma: return {{"ctx", fw::kSdmaUcodeTh0}, {"ctl", fw::kSdmaUcodeTh1}};
    case FirmwareKind::Pfp:
      if (!rs64) return {{"ucode", fw::kCpPfp}};
      return {{"ucode", fw::kRs64Pfp}, {"data", fw::kRs64PfpP0Stack},
              {"data", fw::kRs64PfpP1Stack}};
    case FirmwareKind::Me:
      if (!rs64) return {{"ucode", fw::kCpMe}};
      return {{"ucode", fw::kRs64Me}, {"data", fw::kRs64MeP0Stack}, {"data", fw::kRs64MeP1Stack}};
    case FirmwareKind::Mec:
      if (!rs64) return {{"ucode", fw::kCpMec}};
      return {{"ucode", fw::kRs64Mec},
              {"data", fw::kRs64MecP0Stack},
              {"data", fw::kRs64MecP1Stack},
              {"data", fw::kRs64MecP2Stack},
              {"data", fw::kRs64MecP3Stack}};
    case FirmwareKind::Imu: return {{"imu_i", fw::kImuI}, {"imu_d", fw::kImuD}};
    case FirmwareKind::Rlc:
      return {{"rlc_g", fw::kRlcG},
              {"save_restore_list_cntl", fw::kRlcRestoreListSrmCntl},
              {"save_restore_list_gpm", fw::kRlcRestoreListGpmMem},
              {"save_restore_list_srm", fw::kRlcRestoreListSrmMem},
              {"rlc_iram", fw::kRlcIram},
              {"rlc_dram", fw::kRlcDramBoot},
              {"rlc_p", fw::kRlcP},
              {"rlc_v", fw::kRlcV},
              {"global_tap_delays", fw::kGlobalTapDelays},
              {"se0_tap_delays", fw::kSe0TapDelays},
              {"se1_tap_delays", fw::kSe1TapDelays},
              {"se2_tap_delays", fw::kSe2TapDelays},
              {"se3_tap_delays", fw::kSe3TapDelays}};
    case FirmwareKind::Sos:
    case FirmwareKind::Ta: return {};
  }
  return {};
}

}  // namespace

std::vector<PspFirmwareLoad> gfx1100_psp_firmware(const std::vector<Firmware>& firmware) {
  constexpr FirmwareKind kNeeded[] = {FirmwareKind::Smu, FirmwareKind::Sdma, FirmwareKind::Pfp,
                                      FirmwareKind::Me,  FirmwareKind::Mec,  FirmwareKind::Imu,
                                      FirmwareKind::Rlc};
  for (FirmwareKind kind : kNeeded) {
    auto count = std::count_if(firmware.begin(), firmware.end(),
                               [kind](const Firmware& f) { return f.kind == kind; });
    if (count == 0)
      throw InvalidInput(std::string("PSP firmware: no ") + firmware_kind_name(kind) +
                         " firmware among the " + std::to_string(firmware.size()) + " given");
    if (count > 1)
      throw InvalidInput(std::string("PSP firmware: ") + std::to_string(count) + " " +
                         firmware_kind_name(kind) + " firmware files given, expected one");
  }
  std::vector<PspFirmwareLoad> loads;
  for (const Firmware& f : firmware) {
    for (const auto& [name, type] : part_types(f)) {
      const FirmwarePart* p = find_part(f, name);
      if (!p) {
        // RLC parts beyond rlc_g are optional (registered only when present: amdgpu_rlc.c).
        if (f.kind == FirmwareKind::Rlc && name != "rlc_g") continue;
        f.part(name);  // throws the missing-part error
      }
      loads.push_back({type, part_bytes(f, *p), part_text(f, *p)});
    }
  }
  std::stable_sort(loads.begin(), loads.end(), [](const auto& a, const auto& b) {
    return load_rank(a.fw_type) < load_rank(b.fw_type);
  });
  return loads;
}

// One PSP operation: this object's mutex, then the device's mailbox lock when shared. The
// mailbox reads busy until the operation returns; one that throws leaves it so.
class Psp::Section {
 public:
  explicit Section(const Psp& p) : lock_(p.mutex_), exceptions_(std::uncaught_exceptions()) {
    if (p.shared_) {
      shared_.emplace(*p.shared_);
      shared_->begin();
    }
  }
  ~Section() {
    if (shared_ && std::uncaught_exceptions() == exceptions_) shared_->end();
  }

 private:
  std::unique_lock<std::mutex> lock_;
  int exceptions_;
  std::optional<os::MailboxSection> shared_;
};

Psp::Psp(RegisterIo& io, BootMemory& memory, std::chrono::microseconds timeout,
         std::chrono::microseconds handshake_delay, std::function<void()> flush_hdp,
         os::SharedMailbox* shared)
    : io_(io),
      memory_(memory),
      timeout_(timeout),
      handshake_delay_(handshake_delay),
      flush_hdp_(std::move(flush_hdp)),
      c2pmsg35_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_35)),
      c2pmsg36_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_36)),
      c2pmsg64_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_64)),
      c2pmsg67_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_67)),
      c2pmsg69_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_69)),
      c2pmsg70_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_70)),
      c2pmsg71_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_71)),
      c2pmsg81_(RegisterIo::describe(mp::MP0_SMN_C2PMSG_81)),
      shared_(shared) {
  // The bootloader takes the buffer's MC address >> 20: 1 MiB aligned (amdgpu_psp.c
  // psp_sw_init allocates fw_pri_bo with PSP_1_MEG alignment).
  fw_pri_ = memory_.alloc(k1Meg, k1Meg, "PSP firmware buffer");
  cmd_ = memory_.alloc(kCmdBufferSize, 0x1000, "PSP command buffer");
  fence_ = memory_.alloc(kFenceBufferSize, 0x1000, "PSP fence buffer");
  ring_ = memory_.alloc(kKmRingSize, 0x1000, "PSP KM ring");
}

void Psp::sleep_handshake() const {
  if (handshake_delay_.count() > 0) std::this_thread::sleep_for(handshake_delay_);
}

void Psp::flush() const {
  if (flush_hdp_) flush_hdp_();
}

bool Psp::sos_alive() {
  Section section(*this);
  return io_.read(c2pmsg81_) != 0;
}

std::optional<VramBuffer> Psp::tmr() const {
  std::lock_guard lock(mutex_);
  return tmr_;
}

void Psp::copy_to_firmware_buffer(std::span<const uint8_t> bytes, const std::string& what) {
  check_fits(bytes, what);
  // Linux clears the whole buffer before each component (memset(psp->fw_pri_buf, 0, ...)).
  // One write of the whole buffer (the component, then zeros), as a port streams it best.
  std::vector<uint8_t> image(fw_pri_.size);
  std::copy(bytes.begin(), bytes.end(), image.begin());
  fw_pri_.write(0, std::span<const uint8_t>(image));
  flush();
}

void Psp::wait_bootloader_ready(const std::string& context) {
  // The whole register, as Linux waits (psp_v13_0_wait_for_bootloader: psp_wait_for(...,
  // C2PMSG_35, 0x80000000, 0xffffffff)): bit 31 with every other bit clear. Bits 7:0 set
  // beside bit 31 are a failed command's error code (the same function's comment): named
  // when the wait ends without the register clearing.
  try {
    io_.wait(c2pmsg35_, 0xffffffff, kBlReady, timeout_);
  } catch (const TimeoutError& e) {
    const uint32_t v = io_.read(c2pmsg35_);
    if ((v & kBlReady) && (v & kBlErrorMask))
      throw Error(context + ": " + std::string(c2pmsg35_.name) + " reads " + hex(v) + ", error " +
                  hex(v & kBlErrorMask) + " in bits 7:0");
    throw TimeoutError(context + ": " + e.what());
  }
}

void Psp::bootloader_step(uint32_t command, const Firmware& sos, const FirmwarePart& part) {
  const std::string what = part_text(sos, part);
  const std::span<const uint8_t> bytes = part_bytes(sos, part);
  const std::string step = "PSP bootloader " + bootloader_text(command) + " with " + what;
  wait_bootloader_ready("PSP bootloader not ready for " + bootloader_text(command));
  copy_to_firmware_buffer(bytes, what);
  io_.write(c2pmsg36_, uint32_t(fw_pri_.mc >> 20));
  io_.write(c2pmsg35_, command);
  if (command == kBlLoadSosDrv) {
    sleep_handshake();
    try {
      io_.wait_not(c2pmsg81_, 0xffffffff, 0, timeout_);
    } catch (const TimeoutError& e) {
      throw TimeoutError("PSP bootloader " + bootloader_text(command) +
                         ": the sOS did not start: " + e.what() + "; " + std::string(c2pmsg35_.name) +
                         " reads " + hex(io_.read(c2pmsg35_)));
    }
    return;
  }
  wait_bootloader_ready(step);
}

void Psp::load_bootloader(const Firmware& sos) {
  if (sos.kind != FirmwareKind::Sos)
    throw InvalidInput(sos.path + ": a " + firmware_kind_name(sos.kind) +
                       " firmware, expected the PSP sOS file");
  // psp_hw_start's order; each component only when the file has it (is_psp_fw_valid).
  struct Step {
    const char* part;
    uint32_t command;
  };
  constexpr Step kComponents[] = {{"kdb", kBlLoadKeyDatabase}, {"sys_drv", kBlLoadSysDrv},
                                  {"soc_drv", kBlLoadSocDrv},  {"intf_drv", kBlLoadIntfDrv},
                                  {"dbg_drv", kBlLoadDbgDrv},  {"ras_drv", kBlLoadRasDrv}};
  std::vector<std::pair<uint32_t, const FirmwarePart*>> steps;
  const FirmwarePart* kdb = find_part(sos, "kdb");
  for (const Step& s : kComponents) {
    if (const FirmwarePart* p = find_part(sos, s.part)) steps.push_back({s.command, p});
    // psp_v13_0_bootloader_load_spl sends the KDB again as the SPL table, when the file has
    // an SPL part (psp_hw_start) -- tinygrad does the same for MP0 below 14.0.
    if (s.command == kBlLoadKeyDatabase && kdb && find_part(sos, "spl"))
      steps.push_back({kBlLoadTosSplTable, kdb});
  }
  steps.push_back({kBlLoadSosDrv, &sos.part("sos")});
  for (const auto& step : steps)  // all checked before the first command
    check_fits(part_bytes(sos, *step.second), part_text(sos, *step.second));

  Section section(*this);
  if (io_.read(c2pmsg81_) != 0) return;  // psp_v13_0_bootloader_load_component
  for (const auto& [command, part] : steps) bootloader_step(command, sos, *part);
}

void Psp::create_ring() {
  Section section(*this);
  const std::string what = "PSP ring create";
  try {
    // A ring an earlier boot left: destroy it first (tinygrad AM_PSP._ring_create).
    if (io_.read(c2pmsg71_) != 0) {
      io_.write(c2pmsg64_, kCtrlDestroyRings);
      sleep_handshake();
      try {
        io_.wait(c2pmsg64_, kCtrlResponse, kCtrlResponse, timeout_);
      } catch (const TimeoutError& e) {
        throw TimeoutError(what + ": the earlier ring was not destroyed: " + e.what());
      }
    }
    try {
      io_.wait(c2pmsg64_, kCtrlResponse, kCtrlResponse, timeout_);
    } catch (const TimeoutError& e) {
      throw TimeoutError(what + ": the sOS is not ready for a ring: " + e.what());
    }
    io_.write(c2pmsg69_, uint32_t(ring_.mc));
    io_.write(c2pmsg70_, uint32_t(ring_.mc >> 32));
    io_.write(c2pmsg71_, uint32_t(ring_.size));
    io_.write(c2pmsg64_, kCtrlInitKmRing);
    sleep_handshake();
    uint32_t v;
    try {
      v = io_.wait(c2pmsg64_, kCtrlResponse, kCtrlResponse, timeout_);
    } catch (const TimeoutError& e) {
      throw TimeoutError(what + ": no response: " + e.what());
    }
    // Linux waits for (value & 0x8000FFFF) == 0x80000000: a status in bits 15:0 is a failure.
    if (v & kCtrlStatusMask)
      throw Error(what + ": " + std::string(c2pmsg64_.name) + " reads " + hex(v) + ", status " +
                  hex(v & kCtrlStatusMask));
  } catch (...) {
    ring_created_ = false;
    throw;
  }
  ring_.zero();
  ring_created_ = true;
}

void Psp::destroy_ring() {
  Section section(*this);
  ring_created_ = false;
  io_.write(c2pmsg64_, kCtrlDestroyRings);
  sleep_handshake();
  try {
    io_.wait(c2pmsg64_, kCtrlResponse, kCtrlResponse, timeout_);
  } catch (const TimeoutError& e) {
    throw TimeoutError(std::string("PSP ring destroy: no response: ") + e.what());
  }
}

std::vector<uint8_t> Psp::submit(std::span<const uint8_t> command) {
  Section section(*this);
  return submit_locked(command, command_text(command));
}

std::vector<uint8_t> Psp::submit_locked(std::span<const uint8_t> command,
                                        const std::string& what) {
  if (command.size() != kCmdBytes)
    throw InvalidInput(what + ": command is " + std::to_string(command.size()) +
                       " bytes, expected " + std::to_string(kCmdBytes));
  if (!ring_created_) throw Error(what + ": no KM ring (create_ring first)");
  // psp_cmd_submit_buf: the command into the command buffer, a new fence value
  // (psp->fence_value), then psp_ring_cmd_submit writes the frame at the write pointer.
  std::vector<uint8_t> cmd(cmd_.size);  // the response part stays zero
  std::copy(command.begin(), command.begin() + kResp, cmd.begin());
  cmd_.write(0, std::span<const uint8_t>(cmd));
  const uint32_t fence = ++fence_value_;
  const uint32_t ring_dwords = uint32_t(ring_.size / 4);
  const uint32_t wptr = io_.read(c2pmsg67_);
  const uint32_t frame_index = (wptr % ring_dwords) / (kFrameBytes / 4);
  std::vector<uint8_t> frame(kFrameBytes);
  put32(frame, kFrameCmdBufAddrLo, uint32_t(cmd_.mc));
  put32(frame, kFrameCmdBufAddrHi, uint32_t(cmd_.mc >> 32));
  put32(frame, kFrameFenceAddrLo, uint32_t(fence_.mc));
  put32(frame, kFrameFenceAddrHi, uint32_t(fence_.mc >> 32));
  put32(frame, kFrameFenceValue, fence);
  ring_.write(uint64_t(frame_index) * kFrameBytes, std::span<const uint8_t>(frame));
  flush();
  io_.write(c2pmsg67_, (wptr + kFrameBytes / 4) % ring_dwords);

  // Wait for the PSP to write the fence (psp_cmd_submit_buf polls psp->fence_buf).
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int polls = 0;; ++polls) {
    const bool late = std::chrono::steady_clock::now() >= deadline;
    const uint32_t seen = fence_.read32(0);
    if (seen == fence) break;
    if (late)
      throw TimeoutError(what + ": no fence: waited " + duration_text(timeout_) +
                         " for fence value " + hex(fence) + " at MC " + hex(fence_.mc) +
                         ", last read " + hex(seen));
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  std::vector<uint8_t> answer(kCmdBytes);
  cmd_.read(0, std::span<uint8_t>(answer));
  const uint32_t status = get32(answer, kRespStatus);
  if (status != kStatusOk) {
    const std::string name = status_name(status);
    throw Error(what + ": status " + hex(status) + (name.empty() ? "" : " " + name));
  }
  return answer;
}

uint32_t Psp::load_toc(const Firmware& sos) {
  const FirmwarePart& toc = sos.part("toc");
  const std::span<const uint8_t> bytes = part_bytes(sos, toc);
  Section section(*this);
  copy_to_firmware_buffer(bytes, part_text(sos, toc));
  // psp_load_toc / psp_prep_load_toc_cmd_buf.
  std::vector<uint8_t> c = new_command(kCmdLoadToc);
  put32(c, kTocAddrLo, uint32_t(fw_pri_.mc));
  put32(c, kTocAddrHi, uint32_t(fw_pri_.mc >> 32));
  put32(c, kTocSize, uint32_t(bytes.size()));
  return get32(submit_locked(c, command_text(c)), kRespTmrSize);
}

void Psp::setup_tmr(uint64_t size) {
  Section section(*this);
  if (!tmr_) tmr_ = memory_.alloc(size, kTmrAlignment, "PSP TMR");
  if (tmr_->size != size)
    throw InvalidInput("PSP SETUP_TMR: the TMR is already " + hex(tmr_->size) +
                       " bytes, asked for " + hex(size));
  // psp_prep_tmr_cmd_buf: the MC address, the size, virt_phy_addr and the VRAM address
  // (amdgpu_gmc_vram_pa: VRAM offset + vram_base_offset, 0 on a single dGPU).
  std::vector<uint8_t> c = new_command(kCmdSetupTmr);
  put32(c, kTmrAddrLo, uint32_t(tmr_->mc));
  put32(c, kTmrAddrHi, uint32_t(tmr_->mc >> 32));
  put32(c, kTmrSize, uint32_t(size));
  put32(c, kTmrFlags, kTmrFlagVirtPhyAddr);
  put32(c, kTmrSystemAddrLo, uint32_t(tmr_->pa));
  put32(c, kTmrSystemAddrHi, uint32_t(tmr_->pa >> 32));
  submit_locked(c, command_text(c));
}

void Psp::load(uint32_t fw_type, std::span<const uint8_t> bytes, const std::string& what) {
  Section section(*this);
  copy_to_firmware_buffer(bytes, what);
  // psp_prep_load_ip_fw_cmd_buf (tinygrad _load_ip_fw_cmd: from its 1 MiB msg1 buffer).
  std::vector<uint8_t> c = new_command(kCmdLoadIpFw);
  put32(c, kLoadIpFwAddrLo, uint32_t(fw_pri_.mc));
  put32(c, kLoadIpFwAddrHi, uint32_t(fw_pri_.mc >> 32));
  put32(c, kLoadIpFwSize, uint32_t(bytes.size()));
  put32(c, kLoadIpFwType, fw_type);
  submit_locked(c, command_text(c) + " with " + what);
}

void Psp::autoload_rlc() {
  Section section(*this);
  std::vector<uint8_t> c = new_command(kCmdAutoloadRlc);
  submit_locked(c, command_text(c));
}

void Psp::boot(const Firmware& sos, const std::vector<Firmware>& firmware) {
  const std::vector<PspFirmwareLoad> loads = gfx1100_psp_firmware(firmware);
  load_bootloader(sos);
  create_ring();
  const uint64_t tmr_size = find_part(sos, "toc") ? load_toc(sos) : kDefaultTmrSize;
  for (const PspFirmwareLoad& l : loads)
    if (l.fw_type == fw::kSmu) load(l);
  setup_tmr(tmr_size);
  for (const PspFirmwareLoad& l : loads) {
    if (l.fw_type == fw::kSmu) continue;
    load(l);
    if (l.fw_type == fw::kRlcG) autoload_rlc();
  }
}

}  // namespace hcq::amd::am
