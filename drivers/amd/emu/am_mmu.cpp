#include "amd/emu/am_mmu.hpp"

#include <cstring>

#include "amd/am/pte.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

namespace am = hcq::amd::am;

namespace {

const char* access_name(MmuAccess a) {
  switch (a) {
    case MmuAccess::Read: return "read";
    case MmuAccess::Write: return "write";
    case MmuAccess::Execute: return "execute";
  }
  return "?";
}

std::string entry_name(int level) {
  if (level < 0) return "the page-table base";
  const bool ptb = unsigned(level) == am::kNumLevels - 1;
  return std::string(ptb ? "the PTE (" : "the PDE (") + am::kLevels[level].name + ")";
}

}  // namespace

// PERMISSION_FAULTS is not defined bit by bit in a public header. The model reads it as one
// bit per check that failed: 1 valid, 2 read, 4 write, 8 execute, which is what amdgpu's
// fault logs show (a read of an unmapped page 0x3 with RW 0, a write 0x5 with RW 1: ROCm/amdgpu
// issue 172, ROCm/tensorflow-upstream issue 998). WALKER_ERROR 1 for a table the walker cannot
// read is the model's own choice.
uint32_t fault_status(MmuFaultReason reason, MmuAccess access, uint32_t client) {
  namespace fs = am::fault_status;
  const uint32_t access_bit = access == MmuAccess::Read ? 2 : access == MmuAccess::Write ? 4 : 8;
  uint32_t permission = 0, walker = 0;
  switch (reason) {
    case MmuFaultReason::OutsideContext:
    case MmuFaultReason::NotValid: permission = 1 | access_bit; break;
    case MmuFaultReason::BadTable: walker = 1; break;
    case MmuFaultReason::NotReadable:
    case MmuFaultReason::NotWritable:
    case MmuFaultReason::NotExecutable: permission = access_bit; break;
  }
  return uint32_t(fs::WALKER_ERROR(walker) | fs::PERMISSION_FAULTS(permission) |
                  fs::CID(client) | fs::RW(access == MmuAccess::Write ? 1 : 0) | fs::VMID(0));
}

std::string MmuFault::describe() const {
  std::string why;
  switch (reason) {
    case MmuFaultReason::OutsideContext: why = "outside the context's page-table range"; break;
    case MmuFaultReason::NotValid: why = entry_name(level) + " is not valid"; break;
    case MmuFaultReason::BadTable:
      why = entry_name(level) + " points at a table outside VRAM (" + hex(entry) + ")";
      break;
    case MmuFaultReason::NotReadable: why = "the page is not readable"; break;
    case MmuFaultReason::NotWritable: why = "the page is not writable"; break;
    case MmuFaultReason::NotExecutable: why = "the page is not executable"; break;
  }
  return "GPU page fault at " + hex(address) + " (client " + std::to_string(client) + ", " +
         access_name(access) + "): " + why + ", status " + hex(status);
}

AmMmu::AmMmu(std::span<const uint8_t> vram) : vram_(vram) {}

void AmMmu::set_context(uint64_t page_table_base, uint64_t start, uint64_t end) {
  std::lock_guard lock(mu_);
  base_ = page_table_base;
  start_ = start;
  end_ = end;
  tlb_ = {};
}

void AmMmu::invalidate() {
  std::lock_guard lock(mu_);
  tlb_ = {};
}

uint64_t AmMmu::tlb_hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}
uint64_t AmMmu::walks() const {
  std::lock_guard lock(mu_);
  return walks_;
}

std::optional<uint64_t> AmMmu::read_entry(uint64_t pa) const {
  if (pa % 8 || pa >= vram_.size() || vram_.size() - pa < 8) return std::nullopt;
  uint64_t v;
  std::memcpy(&v, vram_.data() + pa, 8);
  return v;
}

MmuTranslation AmMmu::finish(uint64_t va, uint64_t offset, const TlbEntry& e, MmuAccess access,
                             uint32_t client) const {
  MmuTranslation t;
  auto fault = [&](MmuFaultReason r) {
    t.fault = MmuFault{va, client, access, r, e.level, e.pte, fault_status(r, access, client)};
    return t;
  };
  if (access == MmuAccess::Read && !am::pte::READABLE.get(e.pte))
    return fault(MmuFaultReason::NotReadable);
  if (access == MmuAccess::Write && !am::pte::WRITEABLE.get(e.pte))
    return fault(MmuFaultReason::NotWritable);
  if (access == MmuAccess::Execute && !am::pte::EXECUTABLE.get(e.pte))
    return fault(MmuFaultReason::NotExecutable);
  // A page's address bits below its size are the offset's, whatever the entry holds there.
  t.pa = (am::pte_address(e.pte) & ~(e.page_bytes - 1)) | (offset & (e.page_bytes - 1));
  t.page_bytes = e.page_bytes;
  t.system = am::pte::SYSTEM.get(e.pte) != 0;
  return t;
}

MmuTranslation AmMmu::translate(uint64_t va, MmuAccess access, uint32_t client) {
  std::lock_guard lock(mu_);
  auto fault = [&](MmuFaultReason r, int level, uint64_t entry) {
    MmuTranslation t;
    t.fault = MmuFault{va, client, access, r, level, entry, fault_status(r, access, client)};
    return t;
  };
  if (va < start_ || va > end_) return fault(MmuFaultReason::OutsideContext, -1, base_);
  const uint64_t offset = va - start_;
  if (offset >> am::kVaBits) return fault(MmuFaultReason::OutsideContext, -1, base_);

  for (const TlbEntry& e : tlb_) {
    if (e.valid && (offset & ~(e.page_bytes - 1)) == e.tag) {
      ++hits_;
      MmuTranslation t = finish(va, offset, e, access, client);
      t.from_tlb = true;
      return t;
    }
  }

  ++walks_;
  uint64_t entry = base_;
  if (!am::pde::VALID.get(entry)) return fault(MmuFaultReason::NotValid, -1, entry);
  for (unsigned level = 0; level < am::kNumLevels; ++level) {
    const int here = int(level) - 1;  // the level `entry` was read from
    if (am::pde::SYSTEM.get(entry)) return fault(MmuFaultReason::BadTable, here, entry);
    const am::PtLevel& l = am::kLevels[level];
    const auto next = read_entry(am::pde_address(entry) + uint64_t(l.index(offset)) * 8);
    if (!next) return fault(MmuFaultReason::BadTable, here, entry);
    entry = *next;
    if (!am::pte::VALID.get(entry)) return fault(MmuFaultReason::NotValid, int(level), entry);
    const bool ptb = level == am::kNumLevels - 1;
    const bool page = ptb || am::pde::PTE.get(entry);
    if (page && !ptb && !l.huge) return fault(MmuFaultReason::NotValid, int(level), entry);
    if (page) {
      TlbEntry& e = tlb_[next_victim_];
      next_victim_ = (next_victim_ + 1) % kTlbEntries;
      e = {true, offset & ~(l.entry_bytes() - 1), l.entry_bytes(), entry, int(level)};
      return finish(va, offset, e, access, client);
    }
  }
  return fault(MmuFaultReason::NotValid, int(am::kNumLevels) - 1, entry);  // not reached
}

}  // namespace hcq::amd::emu
