#include "amd/am/page_tables.hpp"

#include <algorithm>
#include <array>
#include <bitset>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace {
constexpr uint64_t kVaLimit = 1ull << kVaBits;
constexpr unsigned kPtb = kNumLevels - 1;

std::string page_name(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}
}  // namespace

// ---- HostVram ----

HostVram::HostVram(uint64_t base, uint64_t bytes) : base_(base), words_(bytes / 8, 0) {}

uint64_t& HostVram::at(uint64_t pa, const char* what) {
  if (pa % 8 || pa < base_ || (pa - base_) / 8 >= words_.size())
    throw Error(std::string("VRAM ") + what + " at " + hex(pa) + ": not an aligned 8-byte word of [" +
                hex(base_) + ", " + hex(base_ + words_.size() * 8) + ")");
  return words_[(pa - base_) / 8];
}
uint64_t HostVram::read64(uint64_t pa) { return at(pa, "read64"); }
void HostVram::write64(uint64_t pa, uint64_t value) { at(pa, "write64") = value; }
std::span<const uint8_t> HostVram::bytes() const {
  return {reinterpret_cast<const uint8_t*>(words_.data()), words_.size() * 8};
}

// ---- entries ----

// FRAGMENT stays 0 (each page stands alone): right for any layout. Linux's
// amdgpu_vm_pte_fragment marks aligned contiguous runs so the TLB holds them as one; not done.
uint64_t page_entry(uint64_t pa, const MapFlags& f, unsigned level) {
  uint64_t e = pte::ADDRESS(pa >> pte::ADDRESS.lo) | pte::VALID(1) | pte::READABLE(f.readable) |
               pte::WRITEABLE(f.writable) | pte::EXECUTABLE(f.executable) |
               pte::MTYPE(f.uncached ? pte::MTYPE_UC : pte::MTYPE_NC);
  if (f.memory == Memory::System) e |= pte::SYSTEM(1) | pte::SNOOPED(f.snooped);
  if (level != kPtb) e |= pte::PDE_PTE(1);
  return e;
}

uint64_t table_entry(uint64_t table_pa) {
  return pde::ADDRESS(table_pa >> pde::ADDRESS.lo) | pde::VALID(1);
}

// ---- PageTables ----

// The host's copy of one table: which entries are pages, which point at tables, how many are
// valid (an empty table is freed).
struct PageTables::Table {
  uint64_t pa = 0;
  unsigned level = 0;
  uint32_t live = 0;
  std::bitset<PtLevel::kEntries> page;
  std::vector<std::unique_ptr<Table>> child;  // directories only
};

PageTables::PageTables(VramAccess& vram, VramAllocator& allocator)
    : vram_(vram), allocator_(allocator), root_(new_table(0)) {}

PageTables::~PageTables() { free_table(std::move(root_)); }

uint64_t PageTables::root_address() const { return root_->pa; }
uint64_t PageTables::page_table_base() const { return table_entry(root_->pa); }

std::unique_ptr<PageTables::Table> PageTables::new_table(unsigned level) {
  auto t = std::make_unique<Table>();
  t->level = level;
  if (level != kPtb) t->child.resize(PtLevel::kEntries);
  t->pa = allocator_.alloc(kTableBytes, kTableBytes);
  try {
    // VRAM holds whatever was there before: every entry starts invalid.
    for (uint32_t i = 0; i < PtLevel::kEntries; ++i) vram_.write64(t->pa + i * 8, 0);
  } catch (...) {
    allocator_.free(t->pa);
    throw;
  }
  ++tables_;
  return t;
}

void PageTables::free_table(std::unique_ptr<Table> t) {
  if (!t) return;
  for (auto& c : t->child) free_table(std::move(c));
  allocator_.free(t->pa);
  --tables_;
}

std::vector<VaRange> PageTables::take_invalidations() {
  std::vector<VaRange> out;
  out.swap(pending_);
  return out;
}

void PageTables::map(uint64_t va, uint64_t pa, uint64_t size, const MapFlags& flags) {
  const std::string what = "map " + hex(size) + " bytes at " + hex(va) + " to " + hex(pa);
  if (size == 0) throw InvalidInput(what + ": the size is 0");
  if (va % kPageBytes) throw InvalidInput(what + ": the VA is not 4 KiB aligned");
  if (pa % kPageBytes) throw InvalidInput(what + ": the physical address is not 4 KiB aligned");
  if (size % kPageBytes) throw InvalidInput(what + ": the size is not a multiple of 4 KiB");
  if (va >= kVaLimit || size > kVaLimit - va)
    throw InvalidInput(what + ": the range ends beyond the 48-bit VA space (" + hex(kVaLimit) +
                       ")");
  if (pa >= kVaLimit || size > kVaLimit - pa)
    throw InvalidInput(what + ": the physical range ends beyond 48 bits (" + hex(kVaLimit) + ")");
  const uint64_t largest = flags.largest_page;
  if (largest != kLevels[kPtb].entry_bytes() && largest != kLevels[2].entry_bytes() &&
      largest != kLevels[1].entry_bytes())
    throw InvalidInput(what + ": largest page " + hex(largest) +
                       " is not 4 KiB, 2 MiB or 1 GiB");
  check_free(*root_, va, size, what);
  try {
    map_in(*root_, va, pa, size, flags);
  } catch (...) {
    // Only this call mapped anything in the range (check_free): take it all back.
    clear_in(*root_, va, size);
    throw;
  }
}

// Nothing in [va, va + size) mapped, or InvalidInput naming the first mapped address.
void PageTables::check_free(const Table& t, uint64_t va, uint64_t size,
                            const std::string& what) const {
  const PtLevel& l = kLevels[t.level];
  while (size) {
    const uint64_t eb = l.entry_bytes();
    const uint64_t n = std::min(size, eb - (va & (eb - 1)));
    const uint32_t i = l.index(va);
    if (t.page[i]) throw InvalidInput(what + ": " + hex(va) + " is already mapped");
    if (t.level != kPtb && t.child[i]) check_free(*t.child[i], va, n, what);
    va += n;
    size -= n;
  }
}

void PageTables::map_in(Table& t, uint64_t va, uint64_t pa, uint64_t size,
                        const MapFlags& flags) {
  const PtLevel& l = kLevels[t.level];
  const uint64_t eb = l.entry_bytes();
  while (size) {
    const uint64_t n = std::min(size, eb - (va & (eb - 1)));
    const uint32_t i = l.index(va);
    const uint64_t entry_pa = t.pa + uint64_t(i) * 8;
    // A whole entry with va and pa aligned to it becomes one page where this level has pages.
    const bool whole = n == eb && pa % eb == 0 && eb <= flags.largest_page;
    if (t.level == kPtb || (l.huge && whole && !t.child[i])) {
      vram_.write64(entry_pa, page_entry(pa, flags, t.level));
      t.page[i] = true;
      ++t.live;
    } else {
      if (!t.child[i]) {
        t.child[i] = new_table(t.level + 1);
        vram_.write64(entry_pa, table_entry(t.child[i]->pa));
        ++t.live;
      }
      map_in(*t.child[i], va, pa, n, flags);
    }
    va += n;
    pa += n;
    size -= n;
  }
}

void PageTables::unmap(uint64_t va, uint64_t size) {
  const std::string what = "unmap " + hex(size) + " bytes at " + hex(va);
  if (size == 0) throw InvalidInput(what + ": the size is 0");
  if (va % kPageBytes) throw InvalidInput(what + ": the VA is not 4 KiB aligned");
  if (size % kPageBytes) throw InvalidInput(what + ": the size is not a multiple of 4 KiB");
  if (va >= kVaLimit || size > kVaLimit - va)
    throw InvalidInput(what + ": the range ends beyond the 48-bit VA space (" + hex(kVaLimit) +
                       ")");
  check_mapped(*root_, va, size, what);
  clear_in(*root_, va, size);
  pending_.push_back({va, size});
}

// Every page of [va, va + size) mapped by a page wholly inside it, or InvalidInput naming the
// first address that is not, or the page that sticks out.
void PageTables::check_mapped(const Table& t, uint64_t va, uint64_t size,
                              const std::string& what) const {
  const PtLevel& l = kLevels[t.level];
  const uint64_t eb = l.entry_bytes();
  while (size) {
    const uint64_t n = std::min(size, eb - (va & (eb - 1)));
    const uint32_t i = l.index(va);
    if (t.page[i]) {
      if (n != eb)
        throw InvalidInput(what + ": " + hex(va) + " lies in the " + page_name(eb) +
                           " page at " + hex(va & ~(eb - 1)) + ", which is unmapped whole");
    } else if (t.level != kPtb && t.child[i]) {
      check_mapped(*t.child[i], va, n, what);
    } else {
      throw InvalidInput(what + ": " + hex(va) + " is not mapped");
    }
    va += n;
    size -= n;
  }
}

// Invalidates every page in [va, va + size) (skipping what is not mapped) and frees the tables
// this leaves empty.
void PageTables::clear_in(Table& t, uint64_t va, uint64_t size) {
  const PtLevel& l = kLevels[t.level];
  const uint64_t eb = l.entry_bytes();
  while (size) {
    const uint64_t n = std::min(size, eb - (va & (eb - 1)));
    const uint32_t i = l.index(va);
    const uint64_t entry_pa = t.pa + uint64_t(i) * 8;
    if (t.page[i]) {
      vram_.write64(entry_pa, 0);
      t.page[i] = false;
      --t.live;
    } else if (t.level != kPtb && t.child[i]) {
      clear_in(*t.child[i], va, n);
      if (t.child[i]->live == 0) {
        vram_.write64(entry_pa, 0);
        free_table(std::move(t.child[i]));
        --t.live;
      }
    }
    va += n;
    size -= n;
  }
}

}  // namespace hcq::amd::am
