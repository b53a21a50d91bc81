// The emulated GPU's interrupt handler, ring 0 (OSSSYS 6.0.0 / IH 6.0; issue 17 item 8): each
// interrupt a block raises (AmBus::interrupt) becomes an 8-dword entry in the ring the driver
// set up, followed by the write pointer, in the register and in the write-back slot. Written
// from the public descriptions, not from hcq's driver: Linux ih_v6_0.c (what IH_RB_CNTL,
// IH_RB_BASE/_HI, IH_RB_WPTR_ADDR_LO/HI, IH_RB_RPTR/WPTR hold; pointers in bytes, the overflow
// flag in bit 0 of the write pointer and its clearing through WPTR_OVERFLOW_CLEAR), and
// amdgpu_ih.c (entries of 32 bytes).
//
// Registers the model acts on (ring 0): IH_RB_CNTL, IH_RB_BASE, IH_RB_BASE_HI, IH_RB_RPTR,
// IH_RB_WPTR, IH_RB_WPTR_ADDR_LO, IH_RB_WPTR_ADDR_HI. Ring 1 and the other IH registers stay
// plain storage in the GPU's register file (no block raises entries there).
//   IH_RB_CNTL   stored; RB_ENABLE gates entries; RB_SIZE is log2 of the ring's dwords;
//                WPTR_WRITEBACK_ENABLE writes the write pointer to IH_RB_WPTR_ADDR; a write with
//                WPTR_OVERFLOW_CLEAR 1 clears RB_OVERFLOW.
//   IH_RB_BASE/_HI  the ring's MC address bits 39:8 and 47:40 (MC_SPACE 4: VRAM).
//   IH_RB_RPTR   the driver's read pointer (bytes); IH_RB_WPTR the model's (bytes | RB_OVERFLOW),
//                writable (the driver zeroes it while the ring is off).
// An entry is dropped and counted when the ring is off, its memory is not VRAM, or it is full
// (writing would make wptr equal rptr); a full ring with WPTR_OVERFLOW_ENABLE also sets
// RB_OVERFLOW, which the driver sees in the write pointer.
//
// Threads: every member may be called from several threads at once (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"

namespace hcq::amd::emu {

class AmIh final : public AmBlock {
 public:
  AmIh(const am::IpSegmentBases& bases, AmBus& bus);

  bool handles(uint64_t offset) const override;
  // hcq::InvalidInput for an offset handles() refuses: "AM IH model: no register at byte 0x10".
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;
  void reset() override;

  // One entry into ring 0 (what AmBus::interrupt calls). Returns whether it was written.
  bool push(const std::array<uint32_t, 8>& entry);

  uint64_t written() const;
  uint64_t dropped() const;    // every drop, whatever the reason
  uint64_t overflows() const;  // drops because the ring was full
  std::string last_error() const;

 private:
  enum Reg : uint8_t { Cntl, Base, BaseHi, Rptr, Wptr, WptrAddrLo, WptrAddrHi, kRegs };
  bool find(uint64_t offset, int& reg) const;
  void write_back();

  AmBus& bus_;
  std::array<uint64_t, kRegs> offset_{};
  mutable std::mutex mu_;
  std::array<uint32_t, kRegs> value_{};
  uint64_t written_ = 0, dropped_ = 0, overflows_ = 0;
  std::string last_error_;
};

}  // namespace hcq::amd::emu
