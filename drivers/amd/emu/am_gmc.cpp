#include "amd/emu/am_gmc.hpp"

#include <array>
#include <optional>

#include "amd/am/hub_regs.hpp"
#include "amd/am/ih_entry.hpp"
#include "amd/am/ih_ids.hpp"
#include "amd/am/pte.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace gcf = am::gc_11_0_0::fields;

// A hub's registers (hub_regs.hpp) in AmGmc::Reg order.
std::array<am::Reg, 16> in_order(const am::HubRegs& h) {
  return {h.VM_CONTEXT0_CNTL,
          h.VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32,
          h.VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32,
          h.VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32,
          h.VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32,
          h.VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32,
          h.VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32,
          h.VM_INVALIDATE_ENG17_SEM,
          h.VM_INVALIDATE_ENG17_REQ,
          h.VM_INVALIDATE_ENG17_ACK,
          h.VM_L2_PROTECTION_FAULT_STATUS,
          h.VM_L2_PROTECTION_FAULT_ADDR_LO32,
          h.VM_L2_PROTECTION_FAULT_ADDR_HI32,
          h.VM_L2_PROTECTION_FAULT_CNTL,
          h.MC_VM_FB_LOCATION_BASE,
          h.MC_VM_FB_LOCATION_TOP};
}

// Fields, from the GC hub's descriptions (the MM hub's have the same layout:
// mmhub_3_0_0_sh_mask.h and gc_11_0_0_sh_mask.h agree on every field used here).
namespace ctx0 = gcf::GCVM_CONTEXT0_CNTL;

// Which CONTEXT0_CNTL interrupt enable covers a fault (the *_PROTECTION_FAULT_ENABLE_INTERRUPT
// fields): VALID for a missing entry or an unreadable table, RANGE outside the context.
am::RegField interrupt_enable(MmuFaultReason reason) {
  switch (reason) {
    case MmuFaultReason::OutsideContext:
      return ctx0::RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT;
    case MmuFaultReason::NotValid:
    case MmuFaultReason::BadTable:
      return ctx0::VALID_PROTECTION_FAULT_ENABLE_INTERRUPT;
    case MmuFaultReason::NotReadable:
      return ctx0::READ_PROTECTION_FAULT_ENABLE_INTERRUPT;
    case MmuFaultReason::NotWritable:
      return ctx0::WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT;
    case MmuFaultReason::NotExecutable:
      return ctx0::EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT;
  }
  return ctx0::VALID_PROTECTION_FAULT_ENABLE_INTERRUPT;
}

}  // namespace

AmGmc::AmGmc(const am::IpSegmentBases& bases, AmBus& bus)
    : bus_(bus), hubs_{HubState(bus.vram), HubState(bus.vram)} {
  static_assert(kRegs == 16, "in_order lists every AmGmc::Reg");
  const std::array<am::Reg, 16> gfx = in_order(am::kGcHubRegs), mm = in_order(am::kMmHubRegs);
  for (int r = 0; r < kRegs; ++r) {
    hubs_[0].offset[r] = am::absolute_dword(am::describe(gfx[r]), bases) * 4;
    hubs_[1].offset[r] = am::absolute_dword(am::describe(mm[r]), bases) * 4;
  }
  for (HubState& h : hubs_) power_on(h);
}

void AmGmc::power_on(HubState& h) {
  h.value = {};
  const uint64_t vram_end = bus_.fb_base + (bus_.vram.empty() ? 0 : bus_.vram.size() - 1);
  h.value[FbBase] = uint32_t(bus_.fb_base >> 24) & 0xffffff;
  h.value[FbTop] = uint32_t(vram_end >> 24) & 0xffffff;
  h.sem_held = false;
  h.invalidations = 0;
  h.mmu.set_context(0, 0, 0);  // no valid base: everything faults until the driver programs it
}

void AmGmc::reset() {
  std::lock_guard lock(mu_);
  for (HubState& h : hubs_) power_on(h);
  withhold_ack_ = false;
  interrupts_ = 0;
  last_error_.clear();
}

bool AmGmc::find(uint64_t offset, int& hub, int& reg) const {
  for (hub = 0; hub < 2; ++hub)
    for (reg = 0; reg < kRegs; ++reg)
      if (hubs_[hub].offset[reg] == offset) return true;
  return false;
}

bool AmGmc::handles(uint64_t offset) const {
  int hub, reg;
  return find(offset, hub, reg);
}

uint32_t AmGmc::read32(uint64_t offset) {
  int hub, reg;
  if (!find(offset, hub, reg))
    throw InvalidInput(std::string("AM GMC model: no register at byte ") + hex(offset));
  std::lock_guard lock(mu_);
  HubState& h = hubs_[hub];
  if (reg == Sem) {
    // gmc_v11_0_flush_gpu_tlb: "a read return value of 1 means semaphore acquire".
    if (h.sem_held) return 0;
    h.sem_held = true;
    return 1;
  }
  return h.value[reg];
}

void AmGmc::write32(uint64_t offset, uint32_t value) {
  int hub, reg;
  if (!find(offset, hub, reg))
    throw InvalidInput(std::string("AM GMC model: no register at byte ") + hex(offset));
  std::lock_guard lock(mu_);
  HubState& h = hubs_[hub];
  switch (reg) {
    case Sem:
      if (gcf::GCVM_INVALIDATE_ENG17_SEM::SEMAPHORE.get(value) == 0) h.sem_held = false;
      return;
    case Req: {
      h.value[Req] = value;
      h.value[Ack] = 0;
      const uint32_t vmids = gcf::GCVM_INVALIDATE_ENG17_REQ::PER_VMID_INVALIDATE_REQ.get(value);
      if (vmids & 1) {
        h.mmu.invalidate();
        ++h.invalidations;
      }
      if (!withhold_ack_)
        h.value[Ack] = gcf::GCVM_INVALIDATE_ENG17_ACK::PER_VMID_INVALIDATE_ACK.set(0, vmids);
      return;
    }
    case Ack:
    case FaultStatus:
    case FaultAddrLo:
    case FaultAddrHi:
      return;  // read-only
    case FaultCntl: {
      const am::RegField& clear =
          gcf::GCVM_L2_PROTECTION_FAULT_CNTL::CLEAR_PROTECTION_FAULT_STATUS_ADDR;
      if (clear.get(value)) h.value[FaultStatus] = h.value[FaultAddrLo] = h.value[FaultAddrHi] = 0;
      h.value[FaultCntl] = clear.set(value, 0);
      return;
    }
    default:
      h.value[reg] = value;
      if (reg <= EndHi) apply_context(h, hub);
      return;
  }
}

void AmGmc::apply_context(HubState& h, int hub) {
  const uint32_t cntl = h.value[Cntl];
  if (!ctx0::ENABLE_CONTEXT.get(cntl)) {
    h.mmu.set_context(0, 0, 0);
    return;
  }
  const uint32_t depth = ctx0::PAGE_TABLE_DEPTH.get(cntl);
  if (depth != 3) {
    last_error_ = std::string(hub == 0 ? "GCVM" : "MMVM") + "_CONTEXT0_CNTL: PAGE_TABLE_DEPTH " +
                  std::to_string(depth) +
                  " is not modelled (the model walks 4 levels, depth 3); the context translates "
                  "nothing";
    h.mmu.set_context(0, 0, 0);
    return;
  }
  const uint64_t base = uint64_t(h.value[BaseLo]) | (uint64_t(h.value[BaseHi]) << 32);
  const uint64_t start = (uint64_t(h.value[StartLo]) | (uint64_t(h.value[StartHi] & 0xf) << 32))
                         << 12;
  const uint64_t end =
      ((uint64_t(h.value[EndLo]) | (uint64_t(h.value[EndHi] & 0xf) << 32)) << 12) | 0xfff;
  h.mmu.set_context(base, start, end);
}

void AmGmc::report_fault(Hub which, const MmuFault& fault) {
  namespace fs = am::fault_status;
  std::optional<std::array<uint32_t, 8>> entry;
  {
    std::lock_guard lock(mu_);
    HubState& h = hubs_[int(which)];
    const bool allow_updates =
        gcf::GCVM_L2_PROTECTION_FAULT_CNTL::ALLOW_SUBSEQUENT_PROTECTION_FAULT_STATUS_ADDR_UPDATES
            .get(h.value[FaultCntl]);
    if (h.value[FaultStatus] == 0 || allow_updates) {
      const uint32_t more = uint32_t(fs::MORE_FAULTS(h.value[FaultStatus] != 0 ? 1 : 0));
      h.value[FaultStatus] = fault.status | more;
      h.value[FaultAddrLo] = fault.addr_lo32();
      h.value[FaultAddrHi] = fault.addr_hi32() & 0xf;
    } else {
      h.value[FaultStatus] |= uint32_t(fs::MORE_FAULTS(1));
    }
    if (interrupt_enable(fault.reason).get(h.value[Cntl])) {
      const bool mm = which == Hub::Mm;
      const uint32_t client = mm ? am::ih::kClientVmc : am::ih::kClientGfx;
      const uint32_t source = mm ? am::ih::kSrcVmFault : am::ih::kSrcUtcl2Fault;
      const uint32_t vmid = uint32_t(fs::VMID.get(fault.status));
      namespace f = am::ih_entry;
      entry = f::make({{f::CLIENT_ID, client},
                       {f::SOURCE_ID, source},
                       {f::VMID, vmid},
                       {f::VMID_SRC, mm ? 1 : 0},
                       {f::SRC_DATA0, uint32_t(fault.address >> 12)},
                       {f::SRC_DATA1, (uint32_t(fault.address >> 44) & am::ih::kFaultAddrHiMask) |
                                          (fault.access == MmuAccess::Write ? am::ih::kFaultWrite : 0)}});
      ++interrupts_;
    }
  }
  if (entry && bus_.interrupt) bus_.interrupt(*entry);
}

void AmGmc::withhold_ack(bool withhold) {
  std::lock_guard lock(mu_);
  withhold_ack_ = withhold;
}

void AmGmc::hold_semaphore(Hub hub, bool held) {
  std::lock_guard lock(mu_);
  hubs_[int(hub)].sem_held = held;
}

unsigned AmGmc::invalidations(Hub hub) const {
  std::lock_guard lock(mu_);
  return hubs_[int(hub)].invalidations;
}

unsigned AmGmc::interrupts_raised() const {
  std::lock_guard lock(mu_);
  return interrupts_;
}

std::string AmGmc::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

}  // namespace hcq::amd::emu
