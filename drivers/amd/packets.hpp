// PM4 and SDMA packet descriptions (from pm4.def and sdma.def) as constants for the encoders
// and as tables for the decoder, the emulated GPU and the dump tool.
#pragma once

#include <cstdint>
#include <span>

#include "common/bitfield.hpp"

namespace hcq::amd {

// Packet-form generations hcq emits for, one bit each (the values stay as first numbered).
// Gfx10 is gfx10.3 (RDNA2); gfx10.1 is no target.
enum class Gen : uint8_t { Gfx9 = 1, Gfx11 = 2, Gfx12 = 4, Gfx10 = 8 };
// The generation sets the .def files name: GFX10_12 = gfx10.3 and later, ...
inline constexpr uint8_t GFX9 = 1, GFX10 = 8, GFX11 = 2, GFX12 = 4, GFX10_11 = GFX10 | GFX11,
                         GFX10_12 = GFX10 | GFX11 | GFX12, GFX11_12 = GFX11 | GFX12,
                         GFX9_11 = GFX9 | GFX10 | GFX11, GFX9_GFX12 = GFX9 | GFX12,
                         GFX9_10 = GFX9 | GFX10, ALL = GFX9 | GFX10 | GFX11 | GFX12;
constexpr bool has_gen(uint8_t gens, Gen g) { return gens & uint8_t(g); }
const char* to_string(Gen g);

struct Field {
  const char* name;
  uint8_t gens;
  uint8_t dword;  // PM4: 1 = first body dword; SDMA: 0 = header
  uint8_t lo;
  uint8_t width;
  constexpr desc::Bits bits() const { return {lo, width}; }
  constexpr uint32_t mask() const { return bits().mask(); }
  // The field's bits for value v, unchecked (desc::checked where a value enters from outside).
  constexpr uint32_t operator()(uint64_t v) const { return bits()(v); }
  constexpr uint32_t get(const uint32_t* pkt) const { return bits().get(pkt[dword]); }
};

struct PacketInfo {
  const char* name;
  uint8_t opcode;
  uint8_t sub_op;   // SDMA only
  uint8_t dwords;   // PM4: body dwords; SDMA: whole packet; 0 = variable
  std::span<const Field> fields;
  // A variable tail (PM4_TAIL, SDMA_TAIL): its first dword, 0 when the packet has none. SDMA
  // tails are `tail_count` + `tail_add` dwords long (PM4 packets end where their header says).
  uint8_t tail_at = 0;
  Field tail_count{};
  uint8_t tail_add = 0;
  // Whether the packet exists on `g`: a packet with fields has one described for `g`.
  bool exists_on(Gen g) const {
    for (auto& f : fields)
      if (has_gen(f.gens, g)) return true;
    return fields.empty();
  }
};

namespace pm4 {
enum Op : uint8_t {
#define PM4_PACKET(id, op, n) id = op,
#define PM4_FIELD(...)
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
};
// Field constants: pm4::RELEASE_MEM_EVENT_TYPE, ...
#define PM4_PACKET(...)
#define PM4_FIELD(pkt, f, gens, dw, lo, w) inline constexpr Field pkt##_##f{#f, gens, dw, lo, w};
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD

// The header's fields: pm4::HEADER_TYPE, HEADER_COUNT, HEADER_OPCODE, ...
#define PM4_PACKET(...)
#define PM4_FIELD(...)
#define PM4_HEADER(f, lo, w) inline constexpr desc::Bits HEADER_##f{lo, w};
// The first dword of a variable tail: pm4::SET_SH_REG_VALUES (= 2).
#define PM4_TAIL(id, tail, first) inline constexpr uint32_t id##_##tail = first;
// Named field values: pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, ... (Mesa's V_ prefix).
#define PM4_VALUE(id, f, value, name) inline constexpr uint32_t V_##id##_##f##_##name = value;
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
#undef PM4_HEADER
#undef PM4_TAIL
#undef PM4_VALUE

// The fixed body length of `op`, 0 when it varies (PM4_PACKET's body_dwords).
HCQ_DESC_INLINE constexpr uint32_t fixed_body_dwords(Op op) {
  switch (op) {
#define PM4_PACKET(id, opc, n) case id: return n;
#define PM4_FIELD(...)
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
  }
  return 0;
}
// The body length of a packet without a tail on `g`: its fixed length, or its last field there
// (ACQUIRE_MEM: 6 on gfx9, 7 on gfx10+).
constexpr uint32_t varying_body_dwords(Op op, Gen g) {
  uint32_t n = 0;
#define PM4_PACKET(...)
#define PM4_FIELD(pkt, f, gens, dw, lo, w) \
  if (op == pkt && has_gen(gens, g) && dw > n) n = dw;
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
  return n;
}
// The body length of `op` on `g`. Inlined so a fixed-length packet's length is a constant where
// the encoder writes it (the packet then zeroes and fills with plain stores).
HCQ_DESC_INLINE constexpr uint32_t body_dwords(Op op, Gen g) {
  if (uint32_t n = fixed_body_dwords(op)) return n;
  return varying_body_dwords(op, g);
}

// What the body length of `op` must be on `g`: exactly `dwords` (fixed packets, PM4_LENGTH_BY_GEN)
// or at least `dwords` (variable packets: the last field described there).
struct BodyLength {
  uint32_t dwords;
  bool exact;
};
constexpr BodyLength body_length(Op op, Gen g) {
  bool by_gen = false;
#define PM4_PACKET(...)
#define PM4_FIELD(...)
#define PM4_LENGTH_BY_GEN(id) by_gen |= op == id;
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
#undef PM4_LENGTH_BY_GEN
  return {body_dwords(op, g), fixed_body_dwords(op) != 0 || by_gen};
}

// Whether `op` exists on `g`: some field of it is described there (PacketInfo::exists_on). The
// encoder chooses its wait packet by this (WAIT_REG_MEM64 on gfx10.3: pm4.def says why not).
constexpr bool exists(Op op, Gen g) {
  bool described = false, here = false;
#define PM4_PACKET(...)
#define PM4_FIELD(pkt, f, gens, dw, lo, w) \
  if (op == pkt) {                         \
    described = true;                      \
    here |= has_gen(gens, g);              \
  }
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
  return here || !described;
}

constexpr uint32_t header(Op op, uint32_t body_dwords) {
  return HEADER_TYPE(V_HEADER_TYPE_TYPE3) | HEADER_COUNT(body_dwords - 1) | HEADER_OPCODE(op);
}
constexpr uint32_t header_type(uint32_t h) { return HEADER_TYPE.get(h); }
constexpr uint32_t header_opcode(uint32_t h) { return HEADER_OPCODE.get(h); }
constexpr uint32_t header_body_dwords(uint32_t h) { return HEADER_COUNT.get(h) + 1; }
// The header-only NOP (Mesa sid.h PKT3_NOP_PAD): one dword, whatever follows is a new packet.
inline constexpr uint32_t kNopHeaderOnly =
    HEADER_TYPE(V_HEADER_TYPE_TYPE3) | HEADER_COUNT(V_NOP_COUNT_HEADER_ONLY) | HEADER_OPCODE(NOP);

// PM4 framing, the one rule the decoder, the emulated CP and the hang reports share: how many
// dwords the packet whose header is `h` spans. A type-3 packet is its header and COUNT + 1 body
// dwords, except the header-only NOP (one dword); anything else is one dword (the type-2 filler;
// types 0 and 1, which hcq never emits, are passed or rejected one dword at a time).
constexpr uint32_t packet_dwords(uint32_t h) {
  if (HEADER_TYPE.get(h) != V_HEADER_TYPE_TYPE3) return 1;
  if (HEADER_OPCODE.get(h) == NOP && HEADER_COUNT.get(h) == V_NOP_COUNT_HEADER_ONLY) return 1;
  return HEADER_COUNT.get(h) + 2;
}

// Registers written with SET_SH_REG live at dword addresses [0x2C00, 0x3000) (Mesa sid.h
// SI_SH_REG_OFFSET 0xB000 / 4; SI_UCONFIG_REG_OFFSET 0x30000 / 4).
inline constexpr uint32_t kShRegBase = 0x2C00;
inline constexpr uint32_t kUconfigRegBase = 0xC000;

const PacketInfo* find(uint8_t opcode);
std::span<const PacketInfo> packets();
}  // namespace pm4

// Register dword addresses (regs.def): regs::COMPUTE_PGM_LO(gen) ...
namespace regs {
struct Reg {
  const char* name;
  uint8_t gens;
  uint32_t address;
};
std::span<const Reg> all();
// The address of register `name` on `gen`; 0 when the register does not exist there.
uint32_t address(const char* name, Gen gen);
// The register's name at `address` on `gen`, or null.
const char* name_at(uint32_t address, Gen gen);
// A bit field of a register (REG_FIELD), on the generations in `gens`.
struct RegField {
  const char* reg;
  const char* name;
  uint8_t gens;
  uint8_t lo;
  uint8_t width;
  constexpr desc::Bits bits() const { return {lo, width}; }
  constexpr uint32_t operator()(uint64_t v) const { return bits()(v); }
  constexpr uint32_t get(uint32_t value) const { return bits().get(value); }
};
// Every field, in description order (a register's fields follow it).
std::span<const RegField> fields();
// Registers and their fields: regs::COMPUTE_PGM_RSRC2_ALL, regs::COMPUTE_PGM_RSRC2_LDS_SIZE_ALL.
#define REG(n, gens, addr) inline constexpr Reg n##_##gens{#n, gens, addr};
#define REG_FIELD(r, f, gens, lo, w) inline constexpr RegField r##_##f##_##gens{#r, #f, gens, lo, w};
#include "amd/regs.def"
#undef REG
#undef REG_FIELD
// COMPUTE_NUM_THREAD_X/Y/Z.NUM_THREAD_FULL (axis 0, 1, 2) on `g`: 13 bits for X and Y on gfx12.
constexpr const RegField& num_thread_full(int axis, Gen g) {
  if (axis == 2) return COMPUTE_NUM_THREAD_Z_NUM_THREAD_FULL_ALL;
  if (g == Gen::Gfx12)
    return axis == 0 ? COMPUTE_NUM_THREAD_X_NUM_THREAD_FULL_GFX12
                     : COMPUTE_NUM_THREAD_Y_NUM_THREAD_FULL_GFX12;
  return axis == 0 ? COMPUTE_NUM_THREAD_X_NUM_THREAD_FULL_GFX9_11
                   : COMPUTE_NUM_THREAD_Y_NUM_THREAD_FULL_GFX9_11;
}
}  // namespace regs

namespace sdma {
enum Op : uint8_t {
#define SDMA_PACKET(id, op, sub, n) id = op,
#define SDMA_FIELD(...)
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
};
// Fields (sdma::FENCE_ADDR_LO_ALL), the header's (sdma::HEADER_OP) and named values
// (sdma::V_POLL_REGMEM_FUNC_GREATER_EQUAL).
#define SDMA_PACKET(...)
#define SDMA_FIELD(pkt, f, gens, dw, lo, w) \
  inline constexpr Field pkt##_##f##_##gens{#f, gens, dw, lo, w};
#define SDMA_HEADER(f, lo, w) inline constexpr desc::Bits HEADER_##f{lo, w};
#define SDMA_VALUE(id, f, value, name) inline constexpr uint32_t V_##id##_##f##_##name = value;
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
#undef SDMA_HEADER
#undef SDMA_VALUE

// Each packet's sub-op and whole length (0: variable), as SDMA_PACKET gives them.
constexpr uint32_t sub_op(Op op) {
  switch (op) {
#define SDMA_PACKET(id, opc, sub, n) case id: return sub;
#define SDMA_FIELD(...)
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
  }
  return 0;
}
constexpr uint32_t packet_dwords(Op op) {
  switch (op) {
#define SDMA_PACKET(id, opc, sub, n) case id: return n;
#define SDMA_FIELD(...)
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
  }
  return 0;
}

// The header of `op` with its described sub-op; header(op, sub) for another sub-op.
constexpr uint32_t header(Op op, uint32_t sub) { return HEADER_OP(op) | HEADER_SUB_OP(sub); }
constexpr uint32_t header(Op op) { return header(op, sub_op(op)); }
constexpr uint32_t header_op(uint32_t h) { return HEADER_OP.get(h); }
constexpr uint32_t header_sub_op(uint32_t h) { return HEADER_SUB_OP.get(h); }

// SDMA framing, the one rule the decoder, the emulated engine and the hang reports share: the
// dwords of the packet at `p` (described by `info`, null when unknown) when `avail` dwords
// (at least 1) can be read there. A packet with a tail (NOP, WRITE_LINEAR) is its fixed part
// and COUNT + add dwords; while its count field is not readable, just the fixed part (the
// caller sees the packet is longer than what it has). Unknown packets: one dword (SDMA headers
// carry no length).
uint32_t packet_dwords(const uint32_t* p, uint64_t avail, const PacketInfo* info);

// COPY_LINEAR's byte count (- 1): gfx9 (SDMA 4) has a 22-bit one, SDMA 5.2/6/7 a 30-bit one.
constexpr Field copy_count_field(Gen g) {
  return g == Gen::Gfx9 ? COPY_LINEAR_COUNT_GFX9 : COPY_LINEAR_COUNT_GFX10_12;
}
// The largest copy one COPY_LINEAR moves: what its count holds, less the last 256 bytes, which
// Mesa sid.h documents as unusable (0x3fff00 on gfx9, 0x3fffff00 on SDMA 5.2/6/7).
constexpr uint64_t max_copy_bytes(Gen g) { return uint64_t{copy_count_field(g).mask()} + 1 - 256; }

// The first description of `op` whose sub-op matches.
const PacketInfo* find(uint8_t op, uint8_t sub_op);
std::span<const PacketInfo> packets();
}  // namespace sdma

}  // namespace hcq::amd
