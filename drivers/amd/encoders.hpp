// PM4 (compute) and SDMA (copy) encoders for the core queue commands, per generation.
// Every packet is laid out through the descriptions (pm4.def, sdma.def, regs.def) with
// desc::PacketWriter: lengths, field dwords and patch sites come from there, none by hand.
#pragma once

#include "amd/packets.hpp"
#include "core/driver.hpp"

namespace hcq::amd {
class AmdKernel;
}

namespace hcq::amd {

// Where a `wake` signal raises the host interrupt: the KFD event's mailbox slot and id.
struct InterruptTarget {
  uint64_t mailbox_va = 0;
  uint32_t event_id = 0;
};

class Pm4Encoder final : public Encoder {
 public:
  Pm4Encoder(Gen gen, InterruptTarget irq);
  // value >= `value` at `va`. gfx11+: one WAIT_REG_MEM64. gfx9, gfx10.3: two WAIT_REG_MEMs,
  // the high word >= H, then the low word >= L. That never passes early (once the high word
  // is >= H, a low word >= L means the value is >= H:L). It stalls only if the value moves
  // past (H + 1) << 32 before the low-word poll sees it between H:L and that boundary: MEC
  // has no conditional to skip the second poll (SDMA's COND_EXE, Adreno's CP_COND_EXEC).
  // The device timeline cannot do that (each submission waits for its predecessor, so
  // nothing signals past a value before its waiter runs); a waiter on another device's
  // timeline or on a host signal can, when the signaler crosses a multiple of 2^32 meanwhile.
  void wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) override;
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
              std::vector<PatchSite>& s) override;
  void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) override;
  void memory_barrier(CommandStream& cs) override;
  void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid, Dim3 block,
            std::vector<PatchSite>& s) override;
  void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
            std::vector<PatchSite>& s) override;

  // Encode `k`'s dispatch template for this generation (done once at program load).
  void prepare(AmdKernel& k) const;

  // An INDIRECT_BUFFER packet running `ndwords` at `va` (indirect_buffer_dwords() long).
  // Throws InvalidInput when `ndwords` does not fit its IB_SIZE field.
  static void indirect_buffer(uint32_t* out, uint64_t va, uint32_t ndwords);
  static uint32_t indirect_buffer_dwords();

 private:
  // A 32-bit WAIT_REG_MEM: the dword at `va` >= `ref`; its sites patch with the 64-bit wait's
  // address + `add` and the `half` of its value.
  static void wait_reg_mem32(CommandStream& cs, uint64_t va, uint32_t ref, uint64_t add,
                             PatchFormat half, std::vector<PatchSite>& s);
  // exec of a kernel not prepared for this generation: a prepared copy, out of line so that
  // exec's fast path neither builds nor destroys one.
  [[gnu::noinline]] void exec_unprepared(CommandStream& cs, const AmdKernel& k, uint64_t kernargs,
                                         Dim3 grid, Dim3 block, std::vector<PatchSite>& s);
  // A RELEASE_MEM at the end of `cs`, its event, selects and cache actions written; the caller
  // writes the address and data. Inlined: every signal writes one, and the constant selects
  // then fold into the stores.
  HCQ_DESC_INLINE desc::PacketWriter release_mem(CommandStream& cs, uint32_t data_sel, uint32_t int_sel,
                                 bool cache_flush, std::vector<PatchSite>* s) const;
  Gen gen_;
  InterruptTarget irq_;
  uint32_t rsrc3_reg_;
  bool wait64_;  // WAIT_REG_MEM64 exists on gen_ (pm4.def decides)
};

class SdmaEncoder final : public Encoder {
 public:
  SdmaEncoder(Gen gen, InterruptTarget irq);
  // 64-bit >= as three 32-bit steps (SDMA polls compare 32 bits): poll the high word >=,
  // then only while the high word still equals the target's, poll the low word >=.
  void wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) override;
  // Two 32-bit fences, low word first: a reader may see a lower value briefly, never a
  // higher one, so >= waits stay correct across a 2^32 boundary.
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
              std::vector<PatchSite>& s) override;
  void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) override;
  void memory_barrier(CommandStream& cs) override;
  void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid, Dim3 block,
            std::vector<PatchSite>& s) override;
  void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
            std::vector<PatchSite>& s) override;

  // An INDIRECT packet running `ndwords` (a multiple of 8) at 32-byte aligned `va`
  // (indirect_dwords() long). Throws InvalidInput when `ndwords` does not fit IB_SIZE.
  static void indirect(uint32_t* out, uint64_t va, uint32_t ndwords);
  static uint32_t indirect_dwords();

 private:
  // POLL_REGMEM: the dword at `va` >= `value`; sites as Pm4Encoder::wait_reg_mem32's.
  static void poll_ge(CommandStream& cs, uint64_t va, uint32_t value, uint64_t add,
                      PatchFormat half, std::vector<PatchSite>& s);
  // A 32-bit FENCE of `data` at `va`; with sites, the signal's address + `add` and value half.
  void fence(CommandStream& cs, uint64_t va, uint32_t data, uint64_t add, PatchFormat half,
             std::vector<PatchSite>* s) const;
  Gen gen_;
  InterruptTarget irq_;
};

}  // namespace hcq::amd
