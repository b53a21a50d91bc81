// The PSP's interface as the driver and the emulated PSP both see it (MP0 13.0.0, issue 17):
// bootloader commands, the sOS component types, the KM ring's control commands, the ring
// frame and command buffer layouts, the command ids and the firmware types of
// GFX_CMD_ID_LOAD_IP_FW. Values from Linux drivers/gpu/drm/amd/amdgpu/psp_gfx_if.h (GFX_*,
// struct psp_gfx_rb_frame, struct psp_gfx_cmd_resp), amdgpu_psp.h (enum psp_bootloader_cmd,
// enum psp_ring_type, PSP_*_SIZE) and amdgpu_ucode.h (enum psp_fw_type); tinygrad's
// autogen/am/am.py tabulates the same values.
//
// Threads: constants and pure functions only.
#pragma once

#include <cstdint>
#include <string>

namespace hcq::amd::am::psp {

// Bootloader commands written to MP0_SMN_C2PMSG_35 (amdgpu_psp.h enum psp_bootloader_cmd).
inline constexpr uint32_t kBlLoadSysDrv = 0x10000;
inline constexpr uint32_t kBlLoadSosDrv = 0x20000;
inline constexpr uint32_t kBlLoadKeyDatabase = 0x80000;
inline constexpr uint32_t kBlLoadSocDrv = 0xB0000;
inline constexpr uint32_t kBlLoadDbgDrv = 0xC0000;
inline constexpr uint32_t kBlLoadIntfDrv = 0xD0000;
inline constexpr uint32_t kBlLoadRasDrv = 0xE0000;
inline constexpr uint32_t kBlLoadTosSplTable = 0x10000000;
// C2PMSG_35 reading exactly 0x80000000 (bit 31, all else clear): the bootloader is ready for
// a command (psp_v13_0.c psp_v13_0_wait_for_bootloader waits for that value under mask
// 0xffffffff). Bits 7:0 hold an error code when a command failed (the same comment; said
// there of MP0 13.0.6 and newer).
inline constexpr uint32_t kBlReady = 0x80000000;
inline constexpr uint32_t kBlErrorMask = 0xff;
// "LOAD_SYSDRV" for the commands above, "" otherwise.
std::string bootloader_command_name(uint32_t command);

// Components of the sOS file (amdgpu_ucode.h enum psp_fw_type), the `type` of its parts.
inline constexpr uint32_t kPspFwSos = 1, kPspFwSysDrv = 2, kPspFwKdb = 3, kPspFwToc = 4,
                          kPspFwSpl = 5, kPspFwRl = 6, kPspFwSocDrv = 7, kPspFwIntfDrv = 8,
                          kPspFwDbgDrv = 9, kPspFwRasDrv = 10;

// KM ring control through MP0_SMN_C2PMSG_64 (psp_gfx_if.h enum psp_gfx_crtl_cmd_id;
// amdgpu_psp.h enum psp_ring_type: the create command is the ring type << 16).
inline constexpr uint32_t kRingTypeKm = 2;
inline constexpr uint32_t kCtrlInitKmRing = kRingTypeKm << 16;
inline constexpr uint32_t kCtrlDestroyRings = 0x00030000;
inline constexpr uint32_t kCtrlResponse = 0x80000000;  // GFX_FLAG_RESPONSE
inline constexpr uint32_t kCtrlStatusMask = 0x0000FFFF;  // GFX_CMD_STATUS_MASK

// Ring buffer commands (psp_gfx_if.h enum psp_gfx_cmd_id).
inline constexpr uint32_t kCmdLoadTa = 0x1;
inline constexpr uint32_t kCmdSetupTmr = 0x5;
inline constexpr uint32_t kCmdLoadIpFw = 0x6;
inline constexpr uint32_t kCmdDestroyTmr = 0x7;
inline constexpr uint32_t kCmdLoadToc = 0x20;
inline constexpr uint32_t kCmdAutoloadRlc = 0x21;
inline constexpr uint32_t kCmdBootCfg = 0x22;
// "LOAD_IP_FW" for the commands above, "" otherwise.
std::string command_name(uint32_t cmd_id);

// Response statuses Linux names (psp_gfx_if.h); 0 is success.
inline constexpr uint32_t kStatusOk = 0;
inline constexpr uint32_t kErrUnknownCommand = 0x00000100;    // PSP_ERR_UNKNOWN_COMMAND
inline constexpr uint32_t kTeeErrorNotSupported = 0xFFFF000A;  // TEE_ERROR_NOT_SUPPORTED
// "PSP_ERR_UNKNOWN_COMMAND" / "TEE_ERROR_NOT_SUPPORTED", "" otherwise.
std::string status_name(uint32_t status);

// Firmware types of GFX_CMD_ID_LOAD_IP_FW (psp_gfx_if.h enum psp_gfx_fw_type), the ones a
// gfx1100 boot loads or may meet.
namespace fw {
inline constexpr uint32_t kCpMe = 1, kCpPfp = 2, kCpMec = 4, kCpMecMe1 = 5, kRlcV = 7,
                          kRlcG = 8, kSmu = 18, kRlcRestoreListGpmMem = 20,
                          kRlcRestoreListSrmMem = 21, kRlcRestoreListSrmCntl = 22, kToc = 24,
                          kRlcP = 25, kRlcIram = 26, kGlobalTapDelays = 27, kSe0TapDelays = 28,
                          kSe1TapDelays = 29, kRlcDramBoot = 48, kSe2TapDelays = 65,
                          kSe3TapDelays = 66, kImuI = 68, kImuD = 69, kSdmaUcodeTh0 = 71,
                          kSdmaUcodeTh1 = 72, kPptable = 73, kRs64Pfp = 87, kRs64Me = 88,
                          kRs64Mec = 89, kRs64PfpP0Stack = 90, kRs64PfpP1Stack = 91,
                          kRs64MeP0Stack = 92, kRs64MeP1Stack = 93, kRs64MecP0Stack = 94,
                          kRs64MecP1Stack = 95, kRs64MecP2Stack = 96, kRs64MecP3Stack = 97;
}  // namespace fw
// "GFX_FW_TYPE_RS64_MEC" for the types above, "" otherwise.
std::string fw_type_name(uint32_t fw_type);
// "GFX_FW_TYPE_RS64_MEC (89)", or "fw type 200" for a type not above.
std::string fw_type_text(uint32_t fw_type);

// struct psp_gfx_rb_frame: 64 bytes; byte offsets of the fields the KM ring uses.
inline constexpr uint32_t kFrameBytes = 64;
inline constexpr uint32_t kFrameCmdBufAddrLo = 0, kFrameCmdBufAddrHi = 4, kFrameCmdBufSize = 8,
                          kFrameFenceAddrLo = 12, kFrameFenceAddrHi = 16, kFrameFenceValue = 20;

// struct psp_gfx_cmd_resp: 1024 bytes; the command at +28 (union psp_gfx_commands), the
// response (struct psp_gfx_resp) at +864.
inline constexpr uint32_t kCmdBytes = 1024;
inline constexpr uint32_t kCmdBufSize = 0, kCmdBufVersion = 4, kCmdId = 8, kCmdUnion = 28;
// psp_gfx_cmd_load_ip_fw
inline constexpr uint32_t kLoadIpFwAddrLo = kCmdUnion + 0, kLoadIpFwAddrHi = kCmdUnion + 4,
                          kLoadIpFwSize = kCmdUnion + 8, kLoadIpFwType = kCmdUnion + 12;
// psp_gfx_cmd_setup_tmr (tmr_flags bit 1: virt_phy_addr, the system address is given too)
inline constexpr uint32_t kTmrAddrLo = kCmdUnion + 0, kTmrAddrHi = kCmdUnion + 4,
                          kTmrSize = kCmdUnion + 8, kTmrFlags = kCmdUnion + 12,
                          kTmrSystemAddrLo = kCmdUnion + 16, kTmrSystemAddrHi = kCmdUnion + 20;
inline constexpr uint32_t kTmrFlagVirtPhyAddr = 1u << 1;
// psp_gfx_cmd_load_toc
inline constexpr uint32_t kTocAddrLo = kCmdUnion + 0, kTocAddrHi = kCmdUnion + 4,
                          kTocSize = kCmdUnion + 8;
// psp_gfx_resp
inline constexpr uint32_t kResp = 864;
inline constexpr uint32_t kRespStatus = kResp + 0, kRespSessionId = kResp + 4,
                          kRespFwAddrLo = kResp + 8, kRespFwAddrHi = kResp + 12,
                          kRespTmrSize = kResp + 16;

// Buffer sizes (amdgpu_psp.h): the 1 MiB buffer the bootloader and LOAD_IP_FW read from (its
// MC address >> 20 goes into C2PMSG_36, so it is 1 MiB aligned), the command and fence
// buffers, the TMR's alignment and the size Linux uses when no TOC says otherwise
// (PSP_TMR_SIZE, 4 MiB on dGPUs other than Aldebaran). The KM ring is one 4 KiB page
// (psp_v13_0.c psp_v13_0_ring_init; tinygrad uses 64 KiB).
inline constexpr uint64_t k1Meg = 0x100000;
inline constexpr uint64_t kCmdBufferSize = 0x1000;
inline constexpr uint64_t kFenceBufferSize = 0x1000;
inline constexpr uint64_t kTmrAlignment = 0x100000;
inline constexpr uint64_t kDefaultTmrSize = 0x400000;
inline constexpr uint64_t kKmRingSize = 0x1000;

}  // namespace hcq::amd::am::psp
