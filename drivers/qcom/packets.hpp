// Adreno CP packet and register descriptions (from cp.def and regs.def) as constants for the
// encoders and as tables for the decoder, the emulated GPU and the dump tool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/bitfield.hpp"

namespace hcq::qcom {

// Generations whose packet and register layouts differ (the numbers are the family).
enum class Gen : uint8_t { A6xx = 6, A7xx = 7 };
// Masks of generations, as cp.def writes them.
inline constexpr uint8_t A6XX = 1, A7XX = 2, ALL = A6XX | A7XX;
constexpr uint8_t gen_bit(Gen g) { return g == Gen::A6xx ? A6XX : A7XX; }
constexpr bool has_gen(uint8_t gens, Gen g) { return gens & gen_bit(g); }
const char* to_string(Gen g);

// "a6xx" / "a7xx", or a chip ("a630", "a660", "a730", "a740", ...); false when unknown.
bool parse_gen(const std::string& name, Gen& gen);

// ---- Packet headers (cp.def CP_HEADER) ---------------------------------------------------------
// The bits of each header: qcom::PKT4_COUNT, qcom::PKT7_OPCODE ...
#define CP_PACKET(...)
#define CP_FIELD(...)
#define CP_ENUM(...)
#define CP_HEADER(t, f, lo, w) inline constexpr desc::Bits t##_##f{lo, w};
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
#undef CP_HEADER

// The parity bit makes the number of set bits in the value plus the bit odd: freedreno folds the
// value to a nibble (v ^= v >> 16; v ^= v >> 8; v ^= v >> 4) and returns
// (~0x6996 >> (v & 0xf)) & 1, 0x6996 holding the parity of each nibble value.
constexpr uint32_t odd_parity(uint32_t v) {
  v ^= v >> 16;
  v ^= v >> 8;
  v ^= v >> 4;
  return (~0x6996u >> (v & 0xf)) & 1;
}

inline constexpr uint32_t kType4 = PKT4_TYPE(4), kType7 = PKT7_TYPE(7);
inline constexpr uint32_t kType2Filler = 0x80000000;  // freedreno's type-2 NOP, one dword
inline constexpr uint32_t kPkt4MaxCount = PKT4_COUNT.mask(), kPkt7MaxCount = PKT7_COUNT.mask();

// Type 4: write `count` (< 128) consecutive registers from dword address `reg`.
constexpr uint32_t pkt4(uint32_t reg, uint32_t count) {
  return kType4 | PKT4_COUNT(count) | PKT4_COUNT_PARITY(odd_parity(PKT4_COUNT(count))) |
         PKT4_REG(reg) | PKT4_REG_PARITY(odd_parity(PKT4_REG(reg)));
}
// Type 7: opcode with `count` payload dwords.
constexpr uint32_t pkt7(uint32_t opcode, uint32_t count) {
  return kType7 | PKT7_COUNT(count) | PKT7_COUNT_PARITY(odd_parity(PKT7_COUNT(count))) |
         PKT7_OPCODE(opcode) | PKT7_OPCODE_PARITY(odd_parity(PKT7_OPCODE(opcode)));
}

constexpr uint32_t header_type(uint32_t h) { return PKT7_TYPE.get(h); }
constexpr uint32_t pkt4_count(uint32_t h) { return PKT4_COUNT.get(h); }
constexpr uint32_t pkt4_reg(uint32_t h) { return PKT4_REG.get(h); }  // as cffdec reads it
constexpr bool pkt4_parity_ok(uint32_t h) {
  return PKT4_COUNT_PARITY.get(h) == odd_parity(pkt4_count(h)) &&
         PKT4_REG_PARITY.get(h) == odd_parity(pkt4_reg(h));
}
constexpr uint32_t pkt7_count(uint32_t h) { return PKT7_COUNT.get(h); }
constexpr uint32_t pkt7_opcode(uint32_t h) { return PKT7_OPCODE.get(h); }
constexpr bool pkt7_parity_ok(uint32_t h) {
  return PKT7_COUNT_PARITY.get(h) == odd_parity(pkt7_count(h)) &&
         PKT7_OPCODE_PARITY.get(h) == odd_parity(pkt7_opcode(h));
}

// How a CP stream is framed, the one reading of headers the decoder, the emulated CP and the
// hang reports share: what the dword at a packet's start is and how many dwords it spans.
enum class CpKind : uint8_t {
  Pkt4,         // register write (a5xx and later)
  Pkt7,         // opcode packet (a5xx and later)
  Type2Filler,  // one dword of padding
  Pkt0,         // a pre-a5xx register write: reported, skipped by its length
  Invalid,      // bad parity, a pre-a5xx type-3 header or no header at all: one dword
};
struct CpFrame {
  CpKind kind;
  uint32_t dwords;      // the whole packet, header included (1 for Invalid)
  const char* problem;  // why it does not run on a6xx/a7xx (Pkt0, Invalid), else null
};
constexpr CpFrame frame_cp(uint32_t h) {
  if (h == kType2Filler) return {CpKind::Type2Filler, 1, nullptr};
  switch (header_type(h)) {
    case 4:
      if (!pkt4_parity_ok(h)) return {CpKind::Invalid, 1, "type-4 header with bad parity bits"};
      return {CpKind::Pkt4, 1 + pkt4_count(h), nullptr};
    case 7:
      if (PKT7_ZERO.get(h)) return {CpKind::Invalid, 1, "type-7 header with bits 27:24 set"};
      if (!pkt7_parity_ok(h)) return {CpKind::Invalid, 1, "type-7 header with bad parity bits"};
      return {CpKind::Pkt7, 1 + pkt7_count(h), nullptr};
  }
  switch (PKT0_TYPE.get(h)) {
    case 0:  // freedreno's type 0: (count - 1), then the register
      return {CpKind::Pkt0, 1 + PKT0_COUNT_MINUS_ONE.get(h) + 1,
              "type-0 packet (a pre-a5xx register write; a6xx/a7xx take type 4)"};
    case 3: return {CpKind::Invalid, 1, "type-3 header (pre-a5xx; a6xx/a7xx take type 7)"};
  }
  return {CpKind::Invalid, 1, "not a packet header"};
}

// ---- Type-7 packets (cp.def) -------------------------------------------------------------------
// A field of a packet (or of a descriptor), placed by its description.
struct Field {
  const char* name;
  uint8_t gens;
  uint8_t dword;  // 0 = header, 1 = first payload dword
  uint8_t lo;
  uint8_t width;
  constexpr desc::Bits bits() const { return {lo, width}; }
  constexpr uint32_t mask() const { return bits().mask(); }
  // The field's bits for value v, unchecked (see desc::checked for values from outside).
  constexpr uint32_t operator()(uint64_t v) const { return bits()(v); }
  constexpr uint32_t get(const uint32_t* pkt) const { return bits().get(pkt[dword]); }
};
// A 64-bit address in a LO/HI field pair.
constexpr uint64_t get64(const uint32_t* pkt, const Field& lo, const Field& hi) {
  return uint64_t(hi.get(pkt)) << 32 | lo.get(pkt);
}

// A variable-length packet's repeated part: dwords from `dword` to the packet's end.
struct Tail {
  const char* name;
  uint8_t dword;
};

// A packet's opcode and length as the encoder writes it: qcom::pkt::CP_EXEC_CS ...
struct PacketDesc {
  uint8_t opcode;
  uint8_t dwords;  // whole packet, header included; 0 = variable
  uint8_t gens;
};

struct PacketInfo {
  const char* name;
  uint8_t opcode;
  uint8_t gens;
  uint8_t dwords;      // whole packet, header included; 0 = variable
  const char* layout;  // the packet whose fields it has (its own name, or CP_PACKET_LIKE's)
  std::span<const Field> fields;
  Tail tail;  // dword 0: none
};

// Opcodes: qcom::CP_EXEC_CS ... (CP_EVENT_WRITE and CP_EVENT_WRITE7 share 0x46).
enum Opcode : uint8_t {
#define CP_PACKET(id, op, n, gens) id = op,
#define CP_FIELD(...)
#define CP_ENUM(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
};

namespace pkt {
#define CP_PACKET(id, op, n, gens) inline constexpr PacketDesc id{op, n, gens};
#define CP_FIELD(...)
#define CP_ENUM(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
}  // namespace pkt

// Field constants: qcom::CP_EXEC_CS_NGROUPS_X, qcom::CP_EVENT_WRITE7_WRITE_SRC ...; tails:
// qcom::CP_MEM_WRITE_DATA ...; enumerated values: qcom::CACHE_FLUSH_TS, qcom::WRITE_GE,
// qcom::SB6_CS_SHADER ... (CP_LOAD_STATE6_GEOM/_FRAG use CP_LOAD_STATE6's fields).
#define CP_PACKET(...)
#define CP_FIELD(pkt, f, gens, dw, lo, w) inline constexpr Field pkt##_##f{#f, gens, dw, lo, w};
#define CP_TAIL(pkt, n, dw) inline constexpr Tail pkt##_##n{#n, dw};
#define CP_ENUM(type, n, v, gens) inline constexpr uint32_t n = v;
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_TAIL
#undef CP_ENUM

// The packet `opcode` is on `gen`, or null.
const PacketInfo* find_packet(uint8_t opcode, Gen gen);
std::span<const PacketInfo> packets();
// The name of event number `event` on `gen` ("CACHE_FLUSH_TS"), or null.
const char* event_name(uint32_t event, Gen gen);
// The name cp.def gives `value` of `packet`'s field `field` on `gen` ("SS6_INDIRECT"), or null.
const char* value_name(const PacketInfo& packet, const Field& field, uint32_t value, Gen gen);

// ---- Descriptors in memory (descriptors.def) --------------------------------------------------
// Fields as packet fields are, with dword 0 the descriptor's first dword: qcom::TEX_MEMOBJ_FMT ...;
// values: qcom::FMT6_32_UINT, qcom::A6XX_TEX_BUFFER ...
#define DESC(n, dw) inline constexpr uint32_t k##n##_DWORDS = dw;
#define DESC_FIELD(d, f, dw, lo, w) inline constexpr Field d##_##f{#f, ALL, dw, lo, w};
#define DESC_ENUM(type, n, v) inline constexpr uint32_t n = v;
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_ENUM
// TEX_MEMOBJ's fields in description order, for the decoder.
std::span<const Field> tex_memobj_fields();
// The name descriptors.def gives `value` of TEX_MEMOBJ's field `field`, or null.
const char* tex_memobj_value_name(const Field& field, uint32_t value);

// ---- Registers (regs.def) ----------------------------------------------------------------------
enum class RegId : uint8_t {
#define REG(n, a6, a7) n,
#define REG_FIELD(...)
#include "qcom/regs.def"
#undef REG
#undef REG_FIELD
};

namespace detail {
inline constexpr uint32_t kRegAddress[][2] = {
#define REG(n, a6, a7) {a6, a7},
#define REG_FIELD(...)
#include "qcom/regs.def"
#undef REG
#undef REG_FIELD
};
constexpr size_t gen_index(Gen g) { return g == Gen::A6xx ? 0 : 1; }
}  // namespace detail

// The register's dword address on `gen`; 0 when it does not exist there.
constexpr uint32_t reg_address(RegId r, Gen g) {
  return detail::kRegAddress[size_t(r)][detail::gen_index(g)];
}

// A bit field of a register, placed per generation (width 0: absent on that generation).
struct RegField {
  const char* name;
  RegId reg;
  uint8_t lo[2];     // a6xx, a7xx
  uint8_t width[2];
  constexpr bool on(Gen g) const { return width[detail::gen_index(g)] != 0; }
  constexpr desc::Bits bits(Gen g) const {
    return {lo[detail::gen_index(g)], width[detail::gen_index(g)]};
  }
  constexpr uint32_t mask(Gen g) const { return bits(g).mask(); }
  // The field's bits for value v on `g` (0 when the field is absent there), unchecked.
  constexpr uint32_t operator()(Gen g, uint64_t v) const { return on(g) ? bits(g)(v) : 0; }
  constexpr uint32_t get(Gen g, uint32_t value) const { return on(g) ? bits(g).get(value) : 0; }
};

// Field constants: qcom::HLSQ_CS_NDRANGE_0_LOCALSIZEX, qcom::SP_CS_CNTL_1_THREADSIZE ...
#define REG(...)
#define REG_FIELD(r, f, l6, w6, l7, w7) \
  inline constexpr RegField r##_##f{#f, RegId::r, {l6, l7}, {w6, w7}};
#include "qcom/regs.def"
#undef REG
#undef REG_FIELD

struct RegInfo {
  const char* name;
  RegId id;
  uint32_t address[2];  // a6xx, a7xx; 0 = absent
  std::span<const RegField> fields;
};
std::span<const RegInfo> registers();
const RegInfo& reg_info(RegId r);
const char* to_string(RegId r);
// The register at dword `address` on `gen`, or null.
const RegInfo* reg_at(uint32_t address, Gen gen);

}  // namespace hcq::qcom
