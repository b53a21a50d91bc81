#include "amd/emu/am_ih.hpp"

#include <cstring>

#include "amd/am/ih_entry.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

namespace {

namespace oss = am::osssys_6_0_0;

const am::Reg kRegsInOrder[] = {oss::IH_RB_CNTL,        oss::IH_RB_BASE, oss::IH_RB_BASE_HI,
                                oss::IH_RB_RPTR,        oss::IH_RB_WPTR, oss::IH_RB_WPTR_ADDR_LO,
                                oss::IH_RB_WPTR_ADDR_HI};

namespace ossf = am::osssys_6_0_0::fields;

constexpr uint32_t kEntryBytes = am::ih_entry::kBytes;
constexpr uint32_t kMcSpaceVram = 4;  // ih_v6_0_rb_cntl: 4 for an MC address, 2 for a bus address

}  // namespace

AmIh::AmIh(const am::IpSegmentBases& bases, AmBus& bus) : bus_(bus) {
  for (int r = 0; r < kRegs; ++r)
    offset_[r] = am::absolute_dword(am::describe(kRegsInOrder[r]), bases) * 4;
}

void AmIh::reset() {
  std::lock_guard lock(mu_);
  value_ = {};
  written_ = dropped_ = overflows_ = 0;
  last_error_.clear();
}

bool AmIh::find(uint64_t offset, int& reg) const {
  for (reg = 0; reg < kRegs; ++reg)
    if (offset_[reg] == offset) return true;
  return false;
}

bool AmIh::handles(uint64_t offset) const {
  int reg;
  return find(offset, reg);
}

uint32_t AmIh::read32(uint64_t offset) {
  int reg;
  if (!find(offset, reg))
    throw InvalidInput(std::string("AM IH model: no register at byte ") + hex(offset));
  std::lock_guard lock(mu_);
  return value_[reg];
}

void AmIh::write32(uint64_t offset, uint32_t value) {
  int reg;
  if (!find(offset, reg))
    throw InvalidInput(std::string("AM IH model: no register at byte ") + hex(offset));
  std::lock_guard lock(mu_);
  value_[reg] = value;
  // The clear acts on the register only; the write-back copy is next written with an entry
  // (Linux ih_v6_0_get_wptr trusts the register when the copy shows an overflow).
  if (reg == Cntl && ossf::IH_RB_CNTL::WPTR_OVERFLOW_CLEAR.get(value))
    value_[Wptr] = ossf::IH_RB_WPTR::RB_OVERFLOW.set(value_[Wptr], 0);
}

void AmIh::write_back() {
  constexpr am::RegField enable = ossf::IH_RB_CNTL::WPTR_WRITEBACK_ENABLE;
  constexpr am::RegField lo = ossf::IH_RB_WPTR_ADDR_LO::ADDR;
  constexpr am::RegField hi = ossf::IH_RB_WPTR_ADDR_HI::ADDR;
  if (!enable.get(value_[Cntl])) return;
  const uint64_t mc = uint64_t(lo.get(value_[WptrAddrLo])) << 2 |
                      uint64_t(hi.get(value_[WptrAddrHi])) << 32;
  uint8_t* slot = bus_.vram_at_mc(mc, 4);
  if (!slot) {
    last_error_ = std::string("IH write-back address ") + hex(mc) + " is outside VRAM";
    return;
  }
  std::memcpy(slot, &value_[Wptr], 4);
}

bool AmIh::push(const std::array<uint32_t, 8>& entry) {
  // Looked up once (describe() scans the tables): every interrupt of the GPU comes here.
  constexpr am::RegField rb_enable = ossf::IH_RB_CNTL::RB_ENABLE;
  constexpr am::RegField mc_space_field = ossf::IH_RB_CNTL::MC_SPACE;
  constexpr am::RegField rb_size = ossf::IH_RB_CNTL::RB_SIZE;
  constexpr am::RegField base_hi = ossf::IH_RB_BASE_HI::ADDR;
  constexpr am::RegField offset = ossf::IH_RB_WPTR::OFFSET;
  constexpr am::RegField overflow = ossf::IH_RB_WPTR::RB_OVERFLOW;
  constexpr am::RegField rptr_offset = ossf::IH_RB_RPTR::OFFSET;
  constexpr am::RegField overflow_enable = ossf::IH_RB_CNTL::WPTR_OVERFLOW_ENABLE;
  std::lock_guard lock(mu_);
  const uint32_t cntl = value_[Cntl];
  auto drop = [&](std::string why) {
    ++dropped_;
    last_error_ = std::move(why);
    return false;
  };
  if (!rb_enable.get(cntl))
    return drop("IH entry dropped: ring 0 is off");
  const uint32_t mc_space = mc_space_field.get(cntl);
  if (mc_space != kMcSpaceVram)
    return drop(std::string("IH entry dropped: MC_SPACE ") + std::to_string(mc_space) +
                " is not modelled (4: VRAM)");
  const uint64_t ring_bytes = uint64_t(4) << rb_size.get(cntl);
  const uint64_t base =
      (uint64_t(value_[Base]) << 8) | (uint64_t(base_hi.get(value_[BaseHi])) << 40);
  uint8_t* ring = bus_.vram_at_mc(base, ring_bytes);
  if (!ring)
    return drop(std::string("IH entry dropped: ring at ") + hex(base) + " (" + hex(ring_bytes) +
                " bytes) is outside VRAM");
  const uint64_t mask = ring_bytes - 1;
  const uint64_t wptr = (uint64_t(offset.get(value_[Wptr])) << offset.lo) & mask;
  const uint64_t rptr = (uint64_t(rptr_offset.get(value_[Rptr])) << 2) & mask;
  const uint64_t next = (wptr + kEntryBytes) & mask;
  if (next == rptr) {
    ++overflows_;
    if (overflow_enable.get(cntl)) {
      value_[Wptr] = overflow.set(value_[Wptr], 1);
      write_back();
    }
    return drop(std::string("IH entry dropped: ring 0 is full (rptr ") + hex(rptr) + ", wptr " +
                hex(wptr) + ")");
  }
  std::memcpy(ring + wptr, entry.data(), kEntryBytes);
  value_[Wptr] = offset.set(value_[Wptr], uint32_t(next >> offset.lo));
  write_back();
  ++written_;
  return true;
}

uint64_t AmIh::written() const {
  std::lock_guard lock(mu_);
  return written_;
}
uint64_t AmIh::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}
uint64_t AmIh::overflows() const {
  std::lock_guard lock(mu_);
  return overflows_;
}
std::string AmIh::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

}  // namespace hcq::amd::emu
