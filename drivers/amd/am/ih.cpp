#include "amd/am/ih.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "amd/am/ih_entry.hpp"
#include "amd/am/ih_ids.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {

namespace {

// Linux sets both rings' control through IH_RB_CNTL's field masks (REG_SET_FIELD(tmp,
// IH_RB_CNTL, ...) on ring 1 too), so the fields come from IH_RB_CNTL whichever ring.
namespace oss = osssys_6_0_0;
namespace ossf = osssys_6_0_0::fields;
namespace cntl_f = osssys_6_0_0::fields::IH_RB_CNTL;

// Each ring's registers (ring 1's carry the _RING1 suffix), as compile-time constants.
struct RingRegs {
  Reg cntl, base, base_hi, rptr, wptr, doorbell_rptr;
};
constexpr RingRegs kRingRegs[2] = {
    {oss::IH_RB_CNTL, oss::IH_RB_BASE, oss::IH_RB_BASE_HI, oss::IH_RB_RPTR, oss::IH_RB_WPTR,
     oss::IH_DOORBELL_RPTR},
    {oss::IH_RB_CNTL_RING1, oss::IH_RB_BASE_RING1, oss::IH_RB_BASE_HI_RING1,
     oss::IH_RB_RPTR_RING1, oss::IH_RB_WPTR_RING1, oss::IH_DOORBELL_RPTR_RING1}};

}  // namespace

IhEntry IhEntry::decode(const std::array<uint32_t, 8>& dw) {
  namespace f = ih_entry;
  IhEntry e;
  e.client_id = f::get(dw, f::CLIENT_ID);
  e.source_id = f::get(dw, f::SOURCE_ID);
  e.ring_id = f::get(dw, f::RING_ID);
  e.vmid = f::get(dw, f::VMID);
  e.vmid_src = f::get(dw, f::VMID_SRC) != 0;
  e.timestamp = f::get(dw, f::TIMESTAMP_LO) | uint64_t(f::get(dw, f::TIMESTAMP_HI)) << 32;
  e.pasid = f::get(dw, f::PASID);
  e.node_id = f::get(dw, f::NODE_ID);
  e.src_data = {f::get(dw, f::SRC_DATA0), f::get(dw, f::SRC_DATA1), f::get(dw, f::SRC_DATA2),
                f::get(dw, f::SRC_DATA3)};
  e.raw = dw;
  return e;
}

std::string IhEntry::describe() const {
  return std::string("client ") + hex(client_id) + " source " + hex(source_id) + " (" +
         source_name(classify(*this)) + ") ring " + std::to_string(ring_id) + " vmid " +
         std::to_string(vmid);
}

std::optional<IhVmFault> decode_vm_fault(const IhEntry& e) {
  const bool mm = e.client_id == ih::kClientVmc && e.source_id == ih::kSrcVmFault;
  const bool gc = e.client_id == ih::kClientGfx && e.source_id == ih::kSrcUtcl2Fault;
  if (!mm && !gc) return std::nullopt;
  IhVmFault f;
  // gmc_v11_0_process_interrupt picks the hub by client (VMC: MM hub).
  f.hub = mm ? Hub::Mm : Hub::Gc;
  f.address =
      (uint64_t(e.src_data[0]) << 12) | (uint64_t(e.src_data[1] & ih::kFaultAddrHiMask) << 44);
  f.vmid = e.vmid;
  f.client_id = e.client_id;
  f.write = (e.src_data[1] & ih::kFaultWrite) != 0;
  f.retry = (e.src_data[1] & ih::kFaultRetry) != 0;
  return f;
}

std::string IhVmFault::describe() const {
  return std::string(hub_name(hub)) + " page fault (IH, client " + hex(client_id) + " vmid " +
         std::to_string(vmid) + ") at " + hex(address) + ", " + (write ? "write" : "read") +
         (retry ? ", retry" : "");
}

IhSource classify(const IhEntry& e) {
  if (decode_vm_fault(e)) return IhSource::VmFault;
  if (e.client_id == ih::kClientGrbmCp) {
    if (e.source_id == ih::kSrcCpEop) return IhSource::CpEndOfPipe;
    if (e.source_id == ih::kSrcCpBadOpcode) return IhSource::CpBadOpcode;
    if (e.source_id == ih::kSrcCpPrivRegFault) return IhSource::CpPrivRegFault;
  }
  if (e.client_id == ih::kClientGfx && e.source_id == ih::kSrcSdmaTrap) return IhSource::SdmaTrap;
  return IhSource::Other;
}

const char* source_name(IhSource s) {
  switch (s) {
    case IhSource::VmFault:
      return "VM_FAULT";
    case IhSource::CpEndOfPipe:
      return "CP_EOP";
    case IhSource::SdmaTrap:
      return "SDMA_TRAP";
    case IhSource::CpBadOpcode:
      return "CP_BAD_OPCODE";
    case IhSource::CpPrivRegFault:
      return "CP_PRIV_REG_FAULT";
    case IhSource::Other:
      return "OTHER";
  }
  return "OTHER";
}

Ih::Ih(RegisterIo& regs, BootMemory& memory, uint64_t ring_bytes, VramPort* vram)
    : regs_(regs), vram_(vram), ring_bytes_(ring_bytes) {
  if (!std::has_single_bit(ring_bytes) || ring_bytes < 0x1000 || ring_bytes > 0x40000)
    throw InvalidInput(std::string("IH ring of ") + hex(ring_bytes) +
                       " bytes: a power of two from 0x1000 to 0x40000 expected");
  for (int i = 0; i < 2; ++i) {
    rings_[i] = memory.alloc(ring_bytes, 0x1000, i == 0 ? "IH ring 0" : "IH ring 1");
    writeback_[i] =
        memory.alloc(0x1000, 0x1000, i == 0 ? "IH ring 0 write-back" : "IH ring 1 write-back");
  }
}

void Ih::init() {
  std::lock_guard lock(mu_);
  // ih_v6_0_toggle_interrupts(false): rings off, pointers 0.
  for (int i = 0; i < 2; ++i) {
    const RegDesc& cntl = describe(kRingRegs[i].cntl);
    uint32_t v = with_fields(regs_.read(cntl), {{cntl_f::RB_ENABLE, 0}});
    if (i == 0) v = with_fields(v, {{cntl_f::ENABLE_INTR, 0}});  // ring 0 only
    regs_.write(cntl, v);
    regs_.write(kRingRegs[i].rptr, 0);
    regs_.write(kRingRegs[i].wptr, 0);
  }
  // (nbio ih_control and IH_CHICKEN's MC_SPACE_GPA_ENABLE for bus addresses are not the IH's:
  // the first is NBIO's, the second only for rings in host memory.)

  // ih_v6_0_enable_ring for each ring.
  const uint32_t rb_size = uint32_t(std::countr_zero(ring_bytes_ / 4));
  for (int i = 0; i < 2; ++i) {
    const uint64_t mc = rings_[i].mc;
    regs_.write(kRingRegs[i].base, uint32_t(mc >> 8));  // bits 39:8
    regs_.write(kRingRegs[i].base_hi, uint32_t(mc >> 40) & 0xff);
    const RegDesc& cntl = describe(kRingRegs[i].cntl);
    // ih_v6_0_rb_cntl: MC_SPACE 4 (an MC address; 2 is a bus address), overflow detection,
    // the ring's size as log2(dwords), write-back of the write pointer, snooped, VMID 0.
    uint32_t v = with_fields(regs_.read(cntl), {{cntl_f::MC_SPACE, 4},
                                                {cntl_f::WPTR_OVERFLOW_CLEAR, 1},
                                                {cntl_f::WPTR_OVERFLOW_ENABLE, 1},
                                                {cntl_f::RB_SIZE, rb_size},
                                                {cntl_f::WPTR_WRITEBACK_ENABLE, 1},
                                                {cntl_f::MC_SNOOP, 1},
                                                {cntl_f::MC_RO, 0},
                                                {cntl_f::MC_VMID, 0}});
    // Ring 0: RPTR_REARM 0. Linux sets it when MSI is on (ih_v6_0_enable_ring); hcq takes the
    // MSI too but leaves it 0, an interrupt per entry (docs/am.md: not verified on hardware).
    // Ring 1 drains when full instead of overflowing.
    if (i == 0) v = with_fields(v, {{cntl_f::RPTR_REARM, 0}});
    if (i == 1)
      v = with_fields(v, {{cntl_f::WPTR_OVERFLOW_ENABLE, 0}, {cntl_f::RB_FULL_DRAIN_ENABLE, 1}});
    regs_.write(cntl, v);
    if (i == 0) {
      regs_.write(oss::IH_RB_WPTR_ADDR_LO, uint32_t(writeback_[0].mc));
      regs_.write(oss::IH_RB_WPTR_ADDR_HI, uint32_t(writeback_[0].mc >> 32) & 0xffff);
    }
    regs_.write(kRingRegs[i].wptr, 0);
    regs_.write(kRingRegs[i].rptr, 0);
    const RegDesc& doorbell = describe(kRingRegs[i].doorbell_rptr);
    // No doorbell: the read pointer goes back through IH_RB_RPTR.
    regs_.write(doorbell, with_fields(0, {{ossf::IH_DOORBELL_RPTR::ENABLE, 0}}));
  }
  // (nbio ih_doorbell_range: NBIO's.)

  // Storm and flood control (ih_v6_0_irq_init; tinygrad AM_IH the same).
  const RegDesc& storm = describe(oss::IH_STORM_CLIENT_LIST_CNTL);
  regs_.write(storm, with_fields(regs_.read(storm),
                                 {{ossf::IH_STORM_CLIENT_LIST_CNTL::CLIENT18_IS_STORM_CLIENT, 1}}));
  const RegDesc& flood = describe(oss::IH_INT_FLOOD_CNTL);
  regs_.write(flood,
              with_fields(regs_.read(flood), {{ossf::IH_INT_FLOOD_CNTL::FLOOD_CNTL_ENABLE, 1}}));
  const RegDesc& msi_storm = describe(oss::IH_MSI_STORM_CTRL);
  regs_.write(msi_storm, with_fields(regs_.read(msi_storm), {{ossf::IH_MSI_STORM_CTRL::DELAY, 3}}));

  // ih_v6_0_toggle_interrupts(true): WPTR_OVERFLOW_CLEAR 0 -> 1 -> 0 with the ring on.
  for (int i = 0; i < 2; ++i) {
    const RegDesc& cntl = describe(kRingRegs[i].cntl);
    uint32_t v =
        with_fields(regs_.read(cntl), {{cntl_f::RB_ENABLE, 1}, {cntl_f::WPTR_OVERFLOW_CLEAR, 0}});
    regs_.write(cntl, v);
    v = with_fields(v, {{cntl_f::WPTR_OVERFLOW_CLEAR, 1}});
    regs_.write(cntl, v);
    v = with_fields(v, {{cntl_f::WPTR_OVERFLOW_CLEAR, 0}});
    if (i == 0) v = with_fields(v, {{cntl_f::ENABLE_INTR, 1}});
    regs_.write(cntl, v);
  }

  // force_update_wptr_for_self_int(threshold 0, timeout 8, enabled).
  const RegDesc& cntl2 = describe(oss::IH_CNTL2);
  const RegDesc& cntl1 = describe(oss::IH_RB_CNTL_RING1);
  const uint32_t ih_cntl2 =
      with_fields(regs_.read(cntl2), {{ossf::IH_CNTL2::SELF_IV_FORCE_WPTR_UPDATE_TIMEOUT, 8},
                                      {ossf::IH_CNTL2::SELF_IV_FORCE_WPTR_UPDATE_ENABLE, 1}});
  const uint32_t ring1 =
      with_fields(regs_.read(cntl1), {{ossf::IH_RB_CNTL_RING1::RB_USED_INT_THRESHOLD, 0}});
  regs_.write(cntl1, ring1);
  regs_.write(cntl2, ih_cntl2);
  rptr_ = 0;
  drained_writeback_ = read_wptr_writeback();
}

void Ih::read(const VramBuffer& buffer, uint64_t offset, std::span<std::byte> out) const {
  // The buffer's own mapping or port (VramBuffer::read), else the port given.
  if (buffer.cpu || buffer.port || !vram_) return buffer.read(offset, out);
  vram_->read(buffer.pa + offset, out);
}

uint32_t Ih::read_wptr_writeback() const {
  uint32_t v;
  read(writeback_[0], 0, std::as_writable_bytes(std::span(&v, 1)));  // little-endian
  return v;
}

std::vector<IhEntry> Ih::drain() {
  std::lock_guard lock(mu_);
  const uint32_t mask = uint32_t(ring_bytes_ - 1);
  // Looked up once: drain runs on every interrupt.
  static const RegDesc& wptr_reg = describe(oss::IH_RB_WPTR);
  static const RegDesc& rptr_reg = describe(oss::IH_RB_RPTR);
  constexpr RegField overflow = ossf::IH_RB_WPTR::RB_OVERFLOW;
  uint32_t wptr = read_wptr_writeback();
  drained_writeback_ = wptr;
  const uint32_t rptr_before = rptr_;
  bool moved = false;
  // ih_v6_0_get_wptr: the write-back copy first; on its overflow flag the register decides.
  if (overflow.get(wptr)) {
    wptr = regs_.read(wptr_reg);
    if (overflow.get(wptr)) {
      wptr = overflow.set(wptr, 0);
      ++overflows_;
      rptr_ = (wptr + kEntryBytes) & mask;  // the oldest entry not overwritten
      moved = true;
      const RegDesc& cntl = describe(oss::IH_RB_CNTL);
      uint32_t v = with_fields(regs_.read(cntl), {{ossf::IH_RB_CNTL::WPTR_OVERFLOW_CLEAR, 1}});
      regs_.write(cntl, v);
      regs_.write(cntl, with_fields(v, {{ossf::IH_RB_CNTL::WPTR_OVERFLOW_CLEAR, 0}}));
    }
  }
  wptr &= mask;
  // The new entries in one read, two where they wrap around the ring's end (a read is a
  // request where VRAM goes through the port).
  const uint32_t head_end = wptr >= rptr_ ? wptr : uint32_t(ring_bytes_);
  std::vector<uint32_t> words((head_end - rptr_ + (wptr < rptr_ ? wptr : 0)) / 4);
  std::span<std::byte> bytes = std::as_writable_bytes(std::span(words));
  if (head_end > rptr_) read(rings_[0], rptr_, bytes.first(head_end - rptr_));
  if (wptr < rptr_ && wptr > 0) read(rings_[0], 0, bytes.subspan(head_end - rptr_));
  std::vector<IhEntry> out;
  for (size_t i = 0; i + 8 <= words.size(); i += 8) {
    std::array<uint32_t, 8> dw;
    std::copy(words.begin() + long(i), words.begin() + long(i) + 8, dw.begin());
    out.push_back(IhEntry::decode(dw));
  }
  rptr_ = wptr;
  // ih_v6_0_set_rptr without a doorbell: the register, in bytes.
  if (moved || rptr_ != rptr_before) regs_.write(rptr_reg, rptr_);
  return out;
}

bool Ih::pending() const {
  std::lock_guard lock(mu_);
  return read_wptr_writeback() != drained_writeback_;
}

uint64_t Ih::overflows() const {
  std::lock_guard lock(mu_);
  return overflows_;
}

}  // namespace hcq::amd::am
