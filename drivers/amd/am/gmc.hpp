// The GPU memory controller's two translation hubs of a gfx1100 (issue 17 item 5/6): the MM
// hub (MMHUB 3.0.0: SDMA's and the SOC's clients) and the GC hub (gfxhub_v3_0: CP, shaders,
// SDMA engines inside GC). Gmc programs VM context 0 of a hub onto the driver's own 4-level page
// tables, invalidates a hub's TLBs through invalidation engine 17, and reads the fault a hub
// latched into its L2_PROTECTION_FAULT registers as text for GpuFaultError.
//
// Sequences (each step names its source; docs/am.md lists them):
//   init_hub   Linux gfxhub_v3_0_gart_enable / mmhub_v3_0_gart_enable in their order, with
//              VM context 0 set up as tinygrad am/ip.py AM_GMC.init_hub does it (4 levels over
//              the whole VA range rather than Linux's flat GART), then the fault defaults of
//              *_set_fault_enable_default(true) (gmc_v11_0_gart_enable).
//   invalidate gmc_v11_0_flush_gpu_tlb's register path: the MM hub's semaphore acquire,
//              REQ, ACK poll, semaphore release, the MM hub's private invalidation.
//   read_fault / clear_fault   gmc_v11_0_process_interrupt's status read and clear.
//
// Threads: invalidate, read_fault, clear_fault and describe may be called from several threads
// at once (one lock keeps each invalidation's semaphore/REQ/ACK sequence together, as Linux's
// invalidate_lock does); init_hub runs once per hub during the boot, before any other call.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "amd/am/boot_memory.hpp"
#include "amd/am/register_io.hpp"

namespace hcq::amd::am {

enum class Hub : uint8_t { Mm, Gc };
// "mmhub", "gfxhub" (the names Linux's fault messages use).
const char* hub_name(Hub hub);

// What a hub latched about its first translation fault since the last clear.
struct GpuFaultInfo {
  Hub hub = Hub::Gc;
  uint64_t address = 0;  // the faulting page's address (ADDR_LO32/HI32 << 12)
  uint32_t status = 0;   // *VM_L2_PROTECTION_FAULT_STATUS
  uint32_t client = 0;   // its CID field
  bool write = false;    // its RW field
  // "gfxhub page fault at 0x5000 by CPC (client 0x5), write: page not valid (status 0x40a51:
  // MORE_FAULTS 1, WALKER_ERROR 0, PERMISSION_FAULTS 0x5, MAPPING_ERROR 0)".
  std::string describe() const;
};

// The value *VM_L2_CNTL3 starts from before init_hub sets its fields: each hub's own reset
// default (GC: Linux gc_11_0_0_default.h regGCVM_L2_CNTL3_DEFAULT 0x80120007; MM: mmhub_v3_0.c
// regMMVM_L2_CNTL3_DEFAULT 0x80100007).
uint32_t l2_cntl3_default(Hub hub);

// The UTCL2 client a fault status's CID names: gfxhub_v3_0.c gfxhub_client_ids, and for the MM
// hub mmhub_v3_0.c mmhub_client_ids_v3_0_0[cid][rw]; "unknown" otherwise.
const char* fault_client_name(Hub hub, uint32_t cid, bool write);

// What a hub's VM context 0 translates (byte addresses).
struct HubContext {
  uint64_t page_table_base = 0;  // a PDE of the root: its VRAM address | VALID (PageTables)
  uint64_t va_start = 0;         // 4 KiB aligned
  uint64_t va_end = 0;           // last byte, inclusive (4 KiB page granular)
};

class Gmc {
 public:
  // Takes a VRAM page each for the system aperture's default page and the hubs' dummy page
  // (tinygrad AM_GMC.init_sw allocates both in VRAM; Linux's dummy page is host memory).
  Gmc(RegisterIo& regs, BootMemory& memory, std::chrono::microseconds timeout);

  // Programs the hub (steps above). The frame buffer's range comes from the hub's own
  // *MC_VM_FB_LOCATION_BASE/TOP, as the VBIOS left them (gfxhub_v3_0_get_fb_location).
  void init_hub(Hub hub, const HubContext& context);
  bool hub_ready(Hub hub) const;

  // Invalidates context 0's translations in the hub (every level, L1 and L2). Throws
  // hcq::TimeoutError naming the register when the semaphore is not granted or ACK does not
  // come in time: "MMVM_INVALIDATE_ENG17_ACK: waited 100 ms for 0x1 (mask 0x1), last read 0x0"
  // (the semaphore is released first). hcq::Error before init_hub: "GC hub invalidation
  // before the hub was initialized".
  void invalidate(Hub hub);

  // The latched fault, or nullopt when STATUS is 0.
  std::optional<GpuFaultInfo> read_fault(Hub hub);
  // CLEAR_PROTECTION_FAULT_STATUS_ADDR: the hub latches the next fault again.
  void clear_fault(Hub hub);

  uint64_t fb_base() const { return fb_base_; }
  uint64_t scratch_page_pa() const { return scratch_.pa; }
  uint64_t dummy_page_pa() const { return dummy_.pa; }

 private:
  RegisterIo& regs_;
  std::chrono::microseconds timeout_;
  VramBuffer scratch_, dummy_;
  uint64_t fb_base_ = 0;
  mutable std::mutex mu_;
  bool ready_[2] = {false, false};
};

}  // namespace hcq::amd::am
