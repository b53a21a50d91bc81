// The GPU's page tables as the AM driver builds them in VRAM: four levels (PDB2 -> PDB1 ->
// PDB0 -> PTB, 512 entries each, 48-bit VAs) in the gfx11 format of pte.def, 1 GiB / 2 MiB /
// 4 KiB pages chosen by alignment, table pages taken from and returned to the VRAM allocator.
//
// Every unmap leaves the range in `take_invalidations()` until the caller has written the
// hubs' invalidate request registers and seen the acknowledge: until then the GPU's TLBs may
// still translate what was unmapped (the emulated MMU models exactly that).
//
// Threads: HostVram and PageTables are not thread-safe; one owner calls them (the driver holds
// its VM lock around map, unmap and the invalidation that follows).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "amd/am/pte.hpp"
#include "amd/am/vram_allocator.hpp"

namespace hcq::amd::am {

// 64-bit reads and writes of VRAM by physical address: through the VRAM BAR on a GPU, a host
// array in tests and in the emulated GPU.
class VramAccess {
 public:
  virtual ~VramAccess() = default;
  virtual uint64_t read64(uint64_t pa) = 0;
  virtual void write64(uint64_t pa, uint64_t value) = 0;
};

// VRAM [base, base + bytes) as a zeroed host array. An access outside it, or not 8-byte
// aligned, throws hcq::Error naming the address and the range.
class HostVram final : public VramAccess {
 public:
  HostVram(uint64_t base, uint64_t bytes);
  uint64_t read64(uint64_t pa) override;
  void write64(uint64_t pa, uint64_t value) override;
  uint64_t base() const { return base_; }
  // The memory from `base`, as the emulated GPU's VRAM is seen by its MMU.
  std::span<const uint8_t> bytes() const;

 private:
  uint64_t& at(uint64_t pa, const char* what);
  uint64_t base_;
  std::vector<uint64_t> words_;
};

enum class Memory : uint8_t {
  Vram,    // a VRAM physical address
  System,  // host memory: an IOVA the IOMMU maps (PTE SYSTEM)
};

struct MapFlags {
  Memory memory = Memory::Vram;
  bool readable = true;
  bool writable = true;
  bool executable = false;
  bool snooped = false;   // host memory the CPU caches (Linux sets SNOOPED for cached TT pages)
  bool uncached = false;  // MTYPE UC instead of NC
  // The largest page the builder may use: 4 KiB, 2 MiB or 1 GiB.
  uint64_t largest_page = 1ull << 30;
};

struct VaRange {
  uint64_t va = 0;
  uint64_t size = 0;
  bool operator==(const VaRange&) const = default;
};

class PageTables {
 public:
  // Allocates and clears the root directory (PDB2).
  PageTables(VramAccess& vram, VramAllocator& allocator);
  // Returns every table page to the allocator; the tables' contents are left as they are.
  ~PageTables();
  PageTables(const PageTables&) = delete;
  PageTables& operator=(const PageTables&) = delete;

  // The root directory's VRAM address, and the value VM_CONTEXT*_PAGE_TABLE_BASE_ADDR_LO32/HI32
  // hold for it: a PDE (address | VALID), as Linux amdgpu_gmc_pd_addr gives the hub.
  uint64_t root_address() const;
  uint64_t page_table_base() const;

  // Maps [va, va + size) to [pa, pa + size). va, pa and size must be multiples of 4 KiB, the
  // range inside 48 bits and nothing in it mapped; each page is the largest (up to
  // flags.largest_page) that va and pa are both aligned to and the range covers. On an error
  // (hcq::InvalidInput, or VRAM running out for a table) nothing is left mapped.
  void map(uint64_t va, uint64_t pa, uint64_t size, const MapFlags& flags);
  // Unmaps [va, va + size): every page in it must be mapped and lie wholly inside it (a 2 MiB
  // or 1 GiB page is unmapped whole). Tables left empty are freed. The range then needs a TLB
  // invalidation (needs_invalidate, take_invalidations).
  void unmap(uint64_t va, uint64_t size);

  bool needs_invalidate() const { return !pending_.empty(); }
  // The ranges unmapped since the last call, in order; the caller invalidates the hubs' TLBs.
  std::vector<VaRange> take_invalidations();

  // Table pages in use (the root included).
  size_t table_pages() const { return tables_; }

 private:
  struct Table;
  std::unique_ptr<Table> new_table(unsigned level);
  void free_table(std::unique_ptr<Table> t);
  void map_in(Table& t, uint64_t va, uint64_t pa, uint64_t size, const MapFlags& flags);
  void clear_in(Table& t, uint64_t va, uint64_t size);
  void check_free(const Table& t, uint64_t va, uint64_t size, const std::string& what) const;
  void check_mapped(const Table& t, uint64_t va, uint64_t size, const std::string& what) const;

  VramAccess& vram_;
  VramAllocator& allocator_;
  size_t tables_ = 0;  // before root_: the root's allocation counts it
  std::unique_ptr<Table> root_;
  std::vector<VaRange> pending_;
};

// The 64-bit entries the builder writes (pte.def): a page at `level` (PTE format; PDE_PTE set
// above the PTB) and a directory entry pointing at a table.
uint64_t page_entry(uint64_t pa, const MapFlags& flags, unsigned level);
uint64_t table_entry(uint64_t table_pa);

}  // namespace hcq::amd::am
