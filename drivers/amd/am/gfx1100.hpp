// The gfx1100 (RX 7900 XTX) AM driver put together: the boot phases, queue programming, TLB
// invalidation and fault reading of the IP pieces (gmc, ih, psp, gfx, sdma) as the
// AmDriverHooks AmDriver runs.
//
// Boot order (tinygrad am/amdev.py; Linux amdgpu_device_ip_init for the same blocks): soc and
// smu are AmBoot's own; gmc brings up the MM hub over VMID 0's page tables; ih sets up the
// interrupt rings; psp loads the bootloader components, the sOS, the TMR and every IP
// firmware, then starts the RLC autoload; gfx waits for the autoload, brings up the GC hub
// (tinygrad AM_GFX.init_hw calls gmc.init_hub("GC") there: the GC hub's registers answer only
// once the RLC runs), the MEC and its doorbell range; sdma has no set-up of its own (the
// queue's ring registers are written when a copy queue is made).
//
// Queues: compute queue i runs on ME 1, pipe i % 4, queue i / 4 (Linux spreads its compute
// rings over the pipes the same way) with 64-bit doorbell AMDGPU_NAVI10_DOORBELL_MEC_RING0 + i
// (0x003 + i, Linux amdgpu_doorbell.h); the MEC doorbell range covers Linux's KIQ..USERQUEUE_END
// (0x000..0x08A). Copy queue i is queue 0 of SDMA engine i (SDMA0, SDMA1), doorbell
// AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 0x100 / _ENGINE1 0x10A (Linux amdgpu_doorbell.h; sdma_v6_0
// sw_init gives each instance its ring 0 on sdma_engine[i]): a third copy queue is refused with
// an exact error.
//
// Faults: both hubs' latched protection faults, then the IH ring's entries (VM faults, CP bad
// opcode / privileged register faults), as one text for GpuFaultError. poll_fault looks at the
// IH write pointer in memory first and touches no register unless it moved; it reads the hubs'
// registers only for a VM fault entry.
//
// Threads: the hooks may be called from several threads at once (the driver's own threads);
// one mutex guards the queue tables and the IH drain.
#pragma once

#include <array>

#include "amd/am/am_driver.hpp"
#include "amd/am/sdma.hpp"

namespace hcq::amd::am {

inline constexpr uint32_t kMecRing0Doorbell = 0x003;    // AMDGPU_NAVI10_DOORBELL_MEC_RING0
inline constexpr uint32_t kUserQueueEndDoorbell = 0x08A;  // AMDGPU_NAVI10_DOORBELL_USERQUEUE_END
// AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0, _ENGINE1 (Linux amdgpu_doorbell.h), by SDMA engine.
inline constexpr std::array<uint32_t, kSdmaEngines> kSdmaEngineDoorbells = {0x100, 0x10A};
inline constexpr uint32_t kMaxComputeQueues = 16;        // 4 pipes x 4 queues of ME 1

AmDriverHooks gfx1100_hooks();

}  // namespace hcq::amd::am
