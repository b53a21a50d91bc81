// The registers of the two VM hubs, the GC hub (GCVM_*, GCMC_VM_*) and the MM hub (MMVM_*,
// MMMC_VM_*), as one list that the GMC programs (gmc.cpp) and the emulated GMC answers
// (amd/emu/am_gmc.cpp). Linux gfxhub_v3_0.c and mmhub_v3_0.c program the same registers on
// both hubs under these two prefixes, so one X-macro list instantiated for each prefix names
// them: compile-time constants, a typo is a build error.
//
// Fields: the GC hub's (gc_11_0_0::fields::GCVM_*), used for both hubs; the MM hub's are at
// the same bits but for VM_L2_CNTL5's FGCG bits (test AmRegs.BothHubsDescribeTheirFieldsAlike).
//
// Threads: constants only.
#pragma once

#include <array>

#include "amd/am/regs.hpp"

namespace hcq::amd::am {

// clang-format off
#define AM_HUB_REGS(X)                               \
  X(MC_VM_FB_LOCATION_BASE)                          \
  X(MC_VM_FB_LOCATION_TOP)                           \
  X(MC_VM_AGP_BASE)                                  \
  X(MC_VM_AGP_BOT)                                   \
  X(MC_VM_AGP_TOP)                                   \
  X(MC_VM_SYSTEM_APERTURE_LOW_ADDR)                  \
  X(MC_VM_SYSTEM_APERTURE_HIGH_ADDR)                 \
  X(MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB)          \
  X(MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB)          \
  X(MC_VM_MX_L1_TLB_CNTL)                            \
  X(VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32)           \
  X(VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32)           \
  X(VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32)          \
  X(VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32)          \
  X(VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32)            \
  X(VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32)            \
  X(VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32)        \
  X(VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32)        \
  X(VM_L2_PROTECTION_FAULT_CNTL2)                    \
  X(VM_L2_CNTL)                                      \
  X(VM_L2_CNTL2)                                     \
  X(VM_L2_CNTL3)                                     \
  X(VM_L2_CNTL4)                                     \
  X(VM_L2_CNTL5)                                     \
  X(VM_CONTEXT0_CNTL)                                \
  X(VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32)  \
  X(VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32)  \
  X(VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32) \
  X(VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32) \
  X(VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32)     \
  X(VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32)     \
  X(VM_L2_PROTECTION_FAULT_CNTL)                     \
  X(VM_L2_PROTECTION_FAULT_STATUS)                   \
  X(VM_L2_PROTECTION_FAULT_ADDR_LO32)                \
  X(VM_L2_PROTECTION_FAULT_ADDR_HI32)                \
  X(VM_INVALIDATE_ENG17_SEM)                         \
  X(VM_INVALIDATE_ENG17_REQ)                         \
  X(VM_INVALIDATE_ENG17_ACK)
// Every invalidation engine's address range (LO32, HI32).
#define AM_HUB_ENGINES(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17)
// clang-format on

inline constexpr int kHubInvalidationEngines = 18;

struct HubRegs {
#define AM_MEMBER(name) Reg name;
  AM_HUB_REGS(AM_MEMBER)
#undef AM_MEMBER
  std::array<Reg, kHubInvalidationEngines> range_lo, range_hi;
};

#define AM_GC(name) gc_11_0_0::GC##name,
#define AM_MM(name) mmhub_3_0_0::MM##name,
#define AM_GC_LO(e) gc_11_0_0::GCVM_INVALIDATE_ENG##e##_ADDR_RANGE_LO32,
#define AM_GC_HI(e) gc_11_0_0::GCVM_INVALIDATE_ENG##e##_ADDR_RANGE_HI32,
#define AM_MM_LO(e) mmhub_3_0_0::MMVM_INVALIDATE_ENG##e##_ADDR_RANGE_LO32,
#define AM_MM_HI(e) mmhub_3_0_0::MMVM_INVALIDATE_ENG##e##_ADDR_RANGE_HI32,
inline constexpr HubRegs kGcHubRegs{
    AM_HUB_REGS(AM_GC){AM_HUB_ENGINES(AM_GC_LO)}, {AM_HUB_ENGINES(AM_GC_HI)}};
inline constexpr HubRegs kMmHubRegs{
    AM_HUB_REGS(AM_MM){AM_HUB_ENGINES(AM_MM_LO)}, {AM_HUB_ENGINES(AM_MM_HI)}};
#undef AM_GC
#undef AM_MM
#undef AM_GC_LO
#undef AM_GC_HI
#undef AM_MM_LO
#undef AM_MM_HI
#undef AM_HUB_REGS
#undef AM_HUB_ENGINES

// The fields of both hubs' registers (see above).
namespace hub_fields = gc_11_0_0::fields;

}  // namespace hcq::amd::am
