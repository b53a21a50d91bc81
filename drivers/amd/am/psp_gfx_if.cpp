#include "amd/am/psp_gfx_if.hpp"

namespace hcq::amd::am::psp {

std::string bootloader_command_name(uint32_t command) {
  switch (command) {
    case kBlLoadSysDrv: return "LOAD_SYSDRV";
    case kBlLoadSosDrv: return "LOAD_SOSDRV";
    case kBlLoadKeyDatabase: return "LOAD_KEY_DATABASE";
    case kBlLoadSocDrv: return "LOAD_SOCDRV";
    case kBlLoadDbgDrv: return "LOAD_DBGDRV";
    case kBlLoadIntfDrv: return "LOAD_INTFDRV";
    case kBlLoadRasDrv: return "LOAD_RASDRV";
    case kBlLoadTosSplTable: return "LOAD_TOS_SPL_TABLE";
    default: return "";
  }
}

std::string command_name(uint32_t cmd_id) {
  switch (cmd_id) {
    case kCmdLoadTa: return "LOAD_TA";
    case kCmdSetupTmr: return "SETUP_TMR";
    case kCmdLoadIpFw: return "LOAD_IP_FW";
    case kCmdDestroyTmr: return "DESTROY_TMR";
    case kCmdLoadToc: return "LOAD_TOC";
    case kCmdAutoloadRlc: return "AUTOLOAD_RLC";
    case kCmdBootCfg: return "BOOT_CFG";
    default: return "";
  }
}

std::string status_name(uint32_t status) {
  switch (status) {
    case kErrUnknownCommand: return "PSP_ERR_UNKNOWN_COMMAND";
    case kTeeErrorNotSupported: return "TEE_ERROR_NOT_SUPPORTED";
    default: return "";
  }
}

std::string fw_type_name(uint32_t fw_type) {
  using namespace fw;
  switch (fw_type) {
    case kCpMe: return "GFX_FW_TYPE_CP_ME";
    case kCpPfp: return "GFX_FW_TYPE_CP_PFP";
    case kCpMec: return "GFX_FW_TYPE_CP_MEC";
    case kCpMecMe1: return "GFX_FW_TYPE_CP_MEC_ME1";
    case kRlcV: return "GFX_FW_TYPE_RLC_V";
    case kRlcG: return "GFX_FW_TYPE_RLC_G";
    case kSmu: return "GFX_FW_TYPE_SMU";
    case kRlcRestoreListGpmMem: return "GFX_FW_TYPE_RLC_RESTORE_LIST_GPM_MEM";
    case kRlcRestoreListSrmMem: return "GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_MEM";
    case kRlcRestoreListSrmCntl: return "GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_CNTL";
    case kToc: return "GFX_FW_TYPE_TOC";
    case kRlcP: return "GFX_FW_TYPE_RLC_P";
    case kRlcIram: return "GFX_FW_TYPE_RLC_IRAM";
    case kGlobalTapDelays: return "GFX_FW_TYPE_GLOBAL_TAP_DELAYS";
    case kSe0TapDelays: return "GFX_FW_TYPE_SE0_TAP_DELAYS";
    case kSe1TapDelays: return "GFX_FW_TYPE_SE1_TAP_DELAYS";
    case kRlcDramBoot: return "GFX_FW_TYPE_RLC_DRAM_BOOT";
    case kSe2TapDelays: return "GFX_FW_TYPE_SE2_TAP_DELAYS";
    case kSe3TapDelays: return "GFX_FW_TYPE_SE3_TAP_DELAYS";
    case kImuI: return "GFX_FW_TYPE_IMU_I";
    case kImuD: return "GFX_FW_TYPE_IMU_D";
    case kSdmaUcodeTh0: return "GFX_FW_TYPE_SDMA_UCODE_TH0";
    case kSdmaUcodeTh1: return "GFX_FW_TYPE_SDMA_UCODE_TH1";
    case kPptable: return "GFX_FW_TYPE_PPTABLE";
    case kRs64Pfp: return "GFX_FW_TYPE_RS64_PFP";
    case kRs64Me: return "GFX_FW_TYPE_RS64_ME";
    case kRs64Mec: return "GFX_FW_TYPE_RS64_MEC";
    case kRs64PfpP0Stack: return "GFX_FW_TYPE_RS64_PFP_P0_STACK";
    case kRs64PfpP1Stack: return "GFX_FW_TYPE_RS64_PFP_P1_STACK";
    case kRs64MeP0Stack: return "GFX_FW_TYPE_RS64_ME_P0_STACK";
    case kRs64MeP1Stack: return "GFX_FW_TYPE_RS64_ME_P1_STACK";
    case kRs64MecP0Stack: return "GFX_FW_TYPE_RS64_MEC_P0_STACK";
    case kRs64MecP1Stack: return "GFX_FW_TYPE_RS64_MEC_P1_STACK";
    case kRs64MecP2Stack: return "GFX_FW_TYPE_RS64_MEC_P2_STACK";
    case kRs64MecP3Stack: return "GFX_FW_TYPE_RS64_MEC_P3_STACK";
    default: return "";
  }
}

std::string fw_type_text(uint32_t fw_type) {
  const std::string name = fw_type_name(fw_type);
  if (name.empty()) return "fw type " + std::to_string(fw_type);
  return name + " (" + std::to_string(fw_type) + ")";
}

}  // namespace hcq::amd::am::psp
