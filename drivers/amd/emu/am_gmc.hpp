// The emulated GPU's memory controller hubs (issue 17 item 8): the GC hub (gfxhub_v3_0) and the
// MM hub (MMHUB 3.0.0), each with its own MMU (AmMmu) walking the driver's page tables in
// emulated VRAM. Written from the public descriptions of the hubs, not from hcq's driver:
// Linux gfxhub_v3_0.c / mmhub_v3_0.c (what VM context 0's registers hold), gmc_v11_0.c
// gmc_v11_0_flush_gpu_tlb (semaphore, request, acknowledge), gmc_v11_0_process_interrupt (the
// fault registers and IH entry), and tinygrad test/mockgpu/am/amgpu.py (MockGMC, MockGFX:
// an invalidate request drops the MMU's cached translations).
//
// Registers the model acts on, per hub (GCVM_/MMVM_ and GCMC_/MMMC_ names):
//   VM_CONTEXT0_CNTL, _PAGE_TABLE_BASE_ADDR_LO32/HI32, _START_ADDR_LO32/HI32, _END_ADDR_LO32/HI32
//       stored; with ENABLE_CONTEXT and PAGE_TABLE_DEPTH 3 the MMU walks from the base (a PDE)
//       over [START << 12, END << 12 | 0xfff]. Another depth is refused (last_error; the
//       context translates nothing): the MMU walks four levels only.
//   VM_INVALIDATE_ENG17_SEM   a read returns 1 and takes the semaphore when it is free, 0 while
//       it is held; writing 0 releases it.
//   VM_INVALIDATE_ENG17_REQ   clears ACK, drops the MMU's TLB when PER_VMID_INVALIDATE_REQ has
//       VMID 0, then sets ACK's bits for the requested VMIDs (at once; a test may withhold it).
//   VM_INVALIDATE_ENG17_ACK   read-only.
//   VM_L2_PROTECTION_FAULT_STATUS/ADDR_LO32/ADDR_HI32  the first fault since the last clear
//       (later faults set MORE_FAULTS only, unless ALLOW_SUBSEQUENT_PROTECTION_FAULT_STATUS_ADDR_
//       UPDATES is set); read-only.
//   VM_L2_PROTECTION_FAULT_CNTL  stored; writing CLEAR_PROTECTION_FAULT_STATUS_ADDR 1 clears the
//       latched fault (the bit itself reads back 0: the model acts on the write).
//   MC_VM_FB_LOCATION_BASE/TOP  the frame buffer as the VBIOS leaves it: AmBus::fb_base >> 24 and
//       (fb_base + VRAM size - 1) >> 24.
// Every other hub register stays plain storage in the GPU's register file.
//
// A fault (report_fault, from whoever translated) is latched as above and, when context 0's
// *_PROTECTION_FAULT_ENABLE_INTERRUPT bit for its kind is set, raised as an IH entry through
// AmBus::interrupt: SOC21 client GFX source UTCL2_FAULT (GC hub) or client VMC source VM_FAULT
// (MM hub, VMID source bit set), src_data[0] = address >> 12, src_data[1] = address bits 47:44
// | WRITE (am/ih_ids.hpp; the decoding in gmc_v11_0_process_interrupt).
//
// Threads: every member may be called from several threads at once (one mutex; the MMUs have
// their own). report_fault calls AmBus::interrupt outside the lock.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"
#include "amd/emu/am_mmu.hpp"

namespace hcq::amd::emu {

class AmGmc final : public AmBlock {
 public:
  enum class Hub : uint8_t { Gfx, Mm };

  AmGmc(const am::IpSegmentBases& bases, AmBus& bus);

  bool handles(uint64_t offset) const override;
  // hcq::InvalidInput for an offset handles() refuses: "AM GMC model: no register at byte 0x10".
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;
  void reset() override;

  AmMmu& gfx_mmu() { return hubs_[0].mmu; }
  AmMmu& mm_mmu() { return hubs_[1].mmu; }
  // Latches the fault in the hub and raises its IH entry (above).
  void report_fault(Hub hub, const MmuFault& fault);

  // Test hooks and counters.
  void withhold_ack(bool withhold);         // REQ leaves ACK 0
  void hold_semaphore(Hub hub, bool held);  // another owner holds the semaphore
  unsigned invalidations(Hub hub) const;    // REQs that dropped the hub's TLB
  unsigned interrupts_raised() const;
  std::string last_error() const;

 private:
  enum Reg : uint8_t {
    Cntl,
    BaseLo,
    BaseHi,
    StartLo,
    StartHi,
    EndLo,
    EndHi,
    Sem,
    Req,
    Ack,
    FaultStatus,
    FaultAddrLo,
    FaultAddrHi,
    FaultCntl,
    FbBase,
    FbTop,
    kRegs
  };
  struct HubState {
    explicit HubState(std::span<const uint8_t> vram) : mmu(vram) {}
    AmMmu mmu;
    std::array<uint64_t, kRegs> offset{};  // byte offsets in the register BAR
    std::array<uint32_t, kRegs> value{};
    bool sem_held = false;
    unsigned invalidations = 0;
  };
  bool find(uint64_t offset, int& hub, int& reg) const;
  void apply_context(HubState& h, int hub);
  void power_on(HubState& h);

  AmBus& bus_;
  std::array<HubState, 2> hubs_;
  mutable std::mutex mu_;
  bool withhold_ack_ = false;
  unsigned interrupts_ = 0;
  std::string last_error_;
};

}  // namespace hcq::amd::emu
