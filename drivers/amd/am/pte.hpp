// The gfx11 page-table entry format (pte.def) as constexpr fields: what the driver's builder
// writes and the emulated MMU reads, and the fault status layout both decode.
//
// Threads: constants and pure functions only.
#pragma once

#include <cstdint>

#include "amd/am/regs.hpp"

namespace hcq::amd::am {

// Bits [lo, lo + width) of a 64-bit entry (desc::Bits is one dword; entries are two).
struct EntryBits {
  const char* name;
  uint8_t lo;
  uint8_t width;
  constexpr uint64_t mask() const { return width >= 64 ? ~0ull : (1ull << width) - 1; }
  constexpr uint64_t operator()(uint64_t v) const { return (v & mask()) << lo; }
  constexpr uint64_t get(uint64_t entry) const { return (entry >> lo) & mask(); }
  constexpr bool fits(uint64_t v) const { return v <= mask(); }
};

namespace pte {
#define PTE_FIELD(n, lo, w) inline constexpr EntryBits n{#n, lo, w};
#define PTE_VALUE(f, n, v) inline constexpr uint64_t f##_##n = v;
#define PDE_FIELD(...)
#define PT_LEVEL(...)
#include "amd/am/pte.def"
#undef PTE_FIELD
#undef PTE_VALUE
#undef PDE_FIELD
#undef PT_LEVEL
}  // namespace pte

namespace pde {
#define PTE_FIELD(...)
#define PTE_VALUE(...)
#define PDE_FIELD(n, lo, w) inline constexpr EntryBits n{#n, lo, w};
#define PT_LEVEL(...)
#include "amd/am/pte.def"
#undef PTE_FIELD
#undef PTE_VALUE
#undef PDE_FIELD
#undef PT_LEVEL
}  // namespace pde

// GCVM_L2_PROTECTION_FAULT_STATUS's fields (gc_11_0_0.def; MMVM_L2_PROTECTION_FAULT_STATUS has
// the same): fault_status::PERMISSION_FAULTS, as the hub latches a translation fault. Linux
// gfxhub_v3_0_print_l2_protection_fault_status decodes CID, MORE_FAULTS, WALKER_ERROR,
// PERMISSION_FAULTS, MAPPING_ERROR and RW; the page's address is latched in
// GCVM_L2_PROTECTION_FAULT_ADDR_LO32/HI32 as address >> 12.
namespace fault_status = gc_11_0_0::fields::GCVM_L2_PROTECTION_FAULT_STATUS;

// A level of the table tree, root first.
struct PtLevel {
  const char* name;
  uint8_t shift;     // the VA bit an entry at this level starts at
  bool huge;         // an entry here may be a page (PDE_PTE)
  constexpr uint64_t entry_bytes() const { return 1ull << shift; }
  constexpr uint32_t index(uint64_t va) const { return uint32_t(va >> shift) & (kEntries - 1); }
  static constexpr uint32_t kEntries = 512;
};
inline constexpr PtLevel kLevels[] = {
#define PTE_FIELD(...)
#define PTE_VALUE(...)
#define PDE_FIELD(...)
#define PT_LEVEL(n, shift, huge) {#n, shift, huge != 0},
#include "amd/am/pte.def"
#undef PTE_FIELD
#undef PTE_VALUE
#undef PDE_FIELD
#undef PT_LEVEL
};
inline constexpr unsigned kNumLevels = sizeof(kLevels) / sizeof(kLevels[0]);
inline constexpr uint64_t kPageBytes = 1ull << kLevels[kNumLevels - 1].shift;   // 4 KiB
inline constexpr uint64_t kTableBytes = PtLevel::kEntries * 8;                   // 4 KiB
// Table entries' VAs cover 48 bits: the root's shift plus its 9 index bits.
inline constexpr unsigned kVaBits = kLevels[0].shift + 9;

// The description's invariants: each level 9 bits below the one above, fields inside 64 bits.
constexpr bool levels_consistent() {
  for (unsigned i = 1; i < kNumLevels; ++i)
    if (kLevels[i - 1].shift != kLevels[i].shift + 9) return false;
  return kNumLevels == 4 && kPageBytes == 4096 && kVaBits == 48;
}
static_assert(levels_consistent(), "pte.def: levels must be 9 VA bits apart, 4 KiB pages, 48 bits");
static_assert(pte::ADDRESS.lo + pte::ADDRESS.width == kVaBits, "pte.def: ADDRESS ends at bit 47");
static_assert(pde::ADDRESS.lo + pde::ADDRESS.width == kVaBits, "pte.def: PDE ADDRESS ends at 47");

// The address an entry points at (a page's for a PTE, the next table's for a PDE).
constexpr uint64_t pte_address(uint64_t entry) { return pte::ADDRESS.get(entry) << pte::ADDRESS.lo; }
constexpr uint64_t pde_address(uint64_t entry) { return pde::ADDRESS.get(entry) << pde::ADDRESS.lo; }

}  // namespace hcq::amd::am
