// The emulated GMC's MMU (issue 17 item 8): translates a GPU virtual address by walking the
// page tables the driver wrote into emulated VRAM, reading entries only through the public
// format (am/pte.def), never through the driver's builder. A small TLB keeps translating an
// entry it holds, however the tables change, until the hub is told to invalidate (as the
// hubs' VM_INVALIDATE_ENG*_REQ / _ACK do), so a driver that forgets to invalidate after an
// unmap is caught. A failed translation returns the fault as the hub latches it
// (GCVM_L2_PROTECTION_FAULT_STATUS and the faulting page's address) instead of throwing.
//
// Threads: every member may be called from several threads at once (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>

namespace hcq::amd::emu {

enum class MmuAccess : uint8_t { Read, Write, Execute };

enum class MmuFaultReason : uint8_t {
  OutsideContext,  // the VA is outside the context's [start, end]
  NotValid,        // the page-table base, a PDE or a PTE has VALID clear (or is a page where
                   // the level has none: PDE_PTE in the root)
  BadTable,        // a PDE points outside VRAM or into host memory (the model walks VRAM)
  NotReadable,
  NotWritable,
  NotExecutable,
};

// UTCL2 client ids as the gfxhub reports them in CID (Linux gfxhub_v3_0.c gfxhub_client_ids;
// tinygrad am ip.py's fault decoder lists the same order).
inline constexpr uint32_t kClientCpc = 5;
inline constexpr uint32_t kClientTcp = 8;
inline constexpr uint32_t kClientSdma0 = 13;

struct MmuFault {
  uint64_t address = 0;  // the faulting VA
  uint32_t client = 0;
  MmuAccess access = MmuAccess::Read;
  MmuFaultReason reason = MmuFaultReason::NotValid;
  int level = -1;        // the level whose entry faulted (0 = PDB2 ... 3 = PTB); -1: none read
  uint64_t entry = 0;    // that entry (the base for level -1)
  uint32_t status = 0;   // GCVM_L2_PROTECTION_FAULT_STATUS as the hub latches it
  // GCVM_L2_PROTECTION_FAULT_ADDR_LO32/HI32: the faulting page's address >> 12.
  uint32_t addr_lo32() const { return uint32_t(address >> 12); }
  uint32_t addr_hi32() const { return uint32_t(address >> 44); }
  // "GPU page fault at 0x5000 (client 5, write): the PTE (PTB) is not valid, status 0x40a50".
  std::string describe() const;
};

struct MmuTranslation {
  uint64_t pa = 0;           // VRAM physical address, or an IOVA when `system`
  uint64_t page_bytes = 0;   // 4 KiB, 2 MiB or 1 GiB
  bool system = false;
  bool from_tlb = false;
  std::optional<MmuFault> fault;
  bool ok() const { return !fault; }
};

class AmMmu {
 public:
  static constexpr size_t kTlbEntries = 16;

  // `vram`: the emulated VRAM from physical address 0; it must outlive the MMU.
  explicit AmMmu(std::span<const uint8_t> vram);

  // The context as VM_CONTEXT0 holds it: PAGE_TABLE_BASE_ADDR_LO32/HI32 (a PDE: the root's
  // address | VALID) and PAGE_TABLE_START/END_ADDR (byte addresses here; the registers hold
  // them >> 12). The walk translates va - start. Drops the TLB.
  void set_context(uint64_t page_table_base, uint64_t start, uint64_t end);

  MmuTranslation translate(uint64_t va, MmuAccess access, uint32_t client);

  // The hub's invalidate request for the context: the TLB forgets every entry.
  void invalidate();

  uint64_t tlb_hits() const;
  uint64_t walks() const;

 private:
  struct TlbEntry {
    bool valid = false;
    uint64_t tag = 0;  // the page's offset in the context
    uint64_t page_bytes = 0;
    uint64_t pte = 0;
    int level = 0;
  };
  MmuTranslation finish(uint64_t va, uint64_t offset, const TlbEntry& e, MmuAccess access,
                        uint32_t client) const;
  std::optional<uint64_t> read_entry(uint64_t pa) const;

  std::span<const uint8_t> vram_;
  mutable std::mutex mu_;
  uint64_t base_ = 0, start_ = 0, end_ = 0;
  std::array<TlbEntry, kTlbEntries> tlb_{};
  size_t next_victim_ = 0;
  uint64_t hits_ = 0, walks_ = 0;
};

// The fault status a translation fault latches (pte.hpp fault_status: the fields of
// gc_11_0_0.def GCVM_L2_PROTECTION_FAULT_STATUS).
uint32_t fault_status(MmuFaultReason reason, MmuAccess access, uint32_t client);

}  // namespace hcq::amd::emu
