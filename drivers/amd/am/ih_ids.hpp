// Interrupt identities of a SOC21 GPU (gfx11) as its IH ring reports them: the client ids and
// source ids an 8-dword IH entry carries, and the bits of a VM fault entry's source data.
// Shared by the driver's IH decoder (am/ih.hpp) and the emulated GPU's blocks that raise
// interrupts; the entry layout is ih_entry.def.
//
// Sources: Linux drivers/gpu/drm/amd/include/soc15_ih_clientid.h (enum soc21_ih_clientid),
// include/ivsrcid/gfx/irqsrcs_gfx_11_0_0.h (GFX_11_0_0__SRCID__*),
// include/ivsrcid/vmc/irqsrcs_vmc_1_0.h (VMC_1_0__SRCID__VM_FAULT), amdgpu_gmc.h
// (AMDGPU_GMC9_FAULT_SOURCE_DATA_WRITE/_RETRY), and who registers what: gmc_v11_0.c sw_init
// (VMC/VM_FAULT and GFX/UTCL2_FAULT), gfx_v11_0.c (GRBM_CP/CP_EOP_INTERRUPT), sdma_v6_0.c
// (GFX/SDMA_TRAP).
//
// Threads: constants only.
#pragma once

#include <cstdint>

namespace hcq::amd::am::ih {

// enum soc21_ih_clientid (the ones hcq meets).
inline constexpr uint32_t kClientGfx = 0x0a;     // SOC21_IH_CLIENTID_GFX: UTCL2 faults, SDMA
inline constexpr uint32_t kClientVmc = 0x12;     // SOC21_IH_CLIENTID_VMC: MMHUB faults
inline constexpr uint32_t kClientGrbmCp = 0x14;  // SOC21_IH_CLIENTID_GRBM_CP: CP interrupts

// Source ids.
inline constexpr uint32_t kSrcUtcl2Fault = 0;        // GFX_11_0_0__SRCID__UTCL2_FAULT (GFX)
inline constexpr uint32_t kSrcVmFault = 0;           // VMC_1_0__SRCID__VM_FAULT (VMC)
inline constexpr uint32_t kSrcSdmaTrap = 49;         // GFX_11_0_0__SRCID__SDMA_TRAP (GFX)
inline constexpr uint32_t kSrcCpEop = 181;           // GFX_11_0_0__SRCID__CP_EOP_INTERRUPT
inline constexpr uint32_t kSrcCpBadOpcode = 183;     // GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR
inline constexpr uint32_t kSrcCpPrivRegFault = 184;  // GFX_11_0_0__SRCID__CP_PRIV_REG_FAULT

// A VM fault entry's source data (gmc_v11_0_process_interrupt): src_data[0] holds the page
// address bits 43:12, src_data[1] bits 3:0 the address bits 47:44, plus these flags.
inline constexpr uint32_t kFaultAddrHiMask = 0xf;
inline constexpr uint32_t kFaultWrite = 0x20;  // AMDGPU_GMC9_FAULT_SOURCE_DATA_WRITE
inline constexpr uint32_t kFaultRetry = 0x80;  // AMDGPU_GMC9_FAULT_SOURCE_DATA_RETRY

}  // namespace hcq::amd::am::ih
