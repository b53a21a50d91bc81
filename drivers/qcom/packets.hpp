// Adreno CP packet and register descriptions (from cp.def and regs.def) as constants for the
// encoders and as tables for the decoder, the emulated GPU and the dump tool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

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

// ---- Packet headers ----------------------------------------------------------------------------
// Mesa src/freedreno/common/freedreno_pm4.h (pm4_pkt4_hdr / pm4_pkt7_hdr, and the pkt_is_type4 /
// pkt_is_type7 checks cffdec decodes with); tinygrad's ops_qcom.py pkt4_hdr / pkt7_hdr compute the
// same bits.
//
// The parity bit makes the number of set bits in the value plus the bit odd: freedreno folds the
// value to a nibble (v ^= v >> 16; v ^= v >> 8; v ^= v >> 4) and returns
// (~0x6996 >> (v & 0xf)) & 1, 0x6996 holding the parity of each nibble value.
constexpr uint32_t odd_parity(uint32_t v) {
  v ^= v >> 16;
  v ^= v >> 8;
  v ^= v >> 4;
  return (~0x6996u >> (v & 0xf)) & 1;
}

inline constexpr uint32_t kType4 = 0x40000000, kType7 = 0x70000000, kType2Filler = 0x80000000;
inline constexpr uint32_t kPkt4MaxCount = 0x7f, kPkt7MaxCount = 0x3fff;

// Type 4: write `count` (< 128) consecutive registers from dword address `reg` (< 0x40000).
//   31:28 = 4, 27 = odd parity of reg, 25:8 = reg, 7 = odd parity of count, 6:0 = count.
constexpr uint32_t pkt4(uint32_t reg, uint32_t count) {
  return kType4 | (count & 0x7f) | odd_parity(count & 0x7f) << 7 | (reg & 0x3ffff) << 8 |
         odd_parity(reg & 0x3ffff) << 27;
}
// Type 7: opcode with `count` payload dwords.
//   31:28 = 7, 27:24 = 0, 23 = odd parity of opcode, 22:16 = opcode, 15 = odd parity of count,
//   13:0 = count.
constexpr uint32_t pkt7(uint32_t opcode, uint32_t count) {
  return kType7 | (count & 0x3fff) | odd_parity(count & 0x3fff) << 15 | (opcode & 0x7f) << 16 |
         odd_parity(opcode & 0x7f) << 23;
}

constexpr uint32_t header_type(uint32_t h) { return h >> 28; }
constexpr uint32_t pkt4_count(uint32_t h) { return h & 0x7f; }
constexpr uint32_t pkt4_reg(uint32_t h) { return (h >> 8) & 0x7ffff; }  // as cffdec reads it
constexpr bool pkt4_parity_ok(uint32_t h) {
  return ((h >> 7) & 1) == odd_parity(pkt4_count(h)) && ((h >> 27) & 1) == odd_parity(pkt4_reg(h));
}
constexpr uint32_t pkt7_count(uint32_t h) { return h & 0x3fff; }
constexpr uint32_t pkt7_opcode(uint32_t h) { return (h >> 16) & 0x7f; }
constexpr bool pkt7_parity_ok(uint32_t h) {
  return ((h >> 15) & 1) == odd_parity(pkt7_count(h)) &&
         ((h >> 23) & 1) == odd_parity(pkt7_opcode(h));
}

// ---- Type-7 packets (cp.def) -------------------------------------------------------------------
struct Field {
  const char* name;
  uint8_t gens;
  uint8_t dword;  // 0 = header, 1 = first payload dword
  uint8_t lo;
  uint8_t width;
  constexpr uint32_t mask() const { return width == 32 ? 0xffffffffu : ((1u << width) - 1); }
  // The field's bits for value v; v must fit (encoders pass values that do).
  constexpr uint32_t operator()(uint64_t v) const { return (uint32_t(v) & mask()) << lo; }
  constexpr uint32_t get(const uint32_t* pkt) const { return (pkt[dword] >> lo) & mask(); }
};

struct PacketInfo {
  const char* name;
  uint8_t opcode;
  uint8_t gens;
  uint8_t dwords;  // whole packet, header included; 0 = variable
  std::span<const Field> fields;
};

// Opcodes: qcom::CP_EXEC_CS ... (CP_EVENT_WRITE and CP_EVENT_WRITE7 share 0x46).
enum Opcode : uint8_t {
#define CP_PACKET(id, op, n, gens) id = op,
#define CP_FIELD(...)
#define CP_EVENT(...)
#define CP_CONST(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_EVENT
#undef CP_CONST
};

// Field constants: qcom::CP_EXEC_CS_NGROUPS_X, qcom::CP_EVENT_WRITE7_WRITE_SRC ...
// Event numbers: qcom::CACHE_FLUSH_TS ...; field values: qcom::WRITE_GE, qcom::SB6_CS_SHADER ...
#define CP_PACKET(...)
#define CP_FIELD(pkt, f, gens, dw, lo, w) inline constexpr Field pkt##_##f{#f, gens, dw, lo, w};
#define CP_EVENT(n, v, gens) inline constexpr uint32_t n = v;
#define CP_CONST(n, v, gens) inline constexpr uint32_t n = v;
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_EVENT
#undef CP_CONST

// The packet `opcode` is on `gen`, or null.
const PacketInfo* find_packet(uint8_t opcode, Gen gen);
std::span<const PacketInfo> packets();
// The name of event number `event` on `gen` ("CACHE_FLUSH_TS"), or null.
const char* event_name(uint32_t event, Gen gen);

// ---- Descriptors in memory (descriptors.def) --------------------------------------------------
// Fields as packet fields are, with dword 0 the descriptor's first dword: qcom::TEX_MEMOBJ_FMT ...;
// values: qcom::FMT6_32_UINT, qcom::A6XX_TEX_BUFFER ...
#define DESC(n, dw) inline constexpr uint32_t k##n##_DWORDS = dw;
#define DESC_FIELD(d, f, dw, lo, w) inline constexpr Field d##_##f{#f, ALL, dw, lo, w};
#define DESC_CONST(n, v) inline constexpr uint32_t n = v;
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_CONST
// TEX_MEMOBJ's fields in description order, for the decoder.
std::span<const Field> tex_memobj_fields();

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
  constexpr uint32_t mask(Gen g) const {
    const uint8_t w = width[detail::gen_index(g)];
    return w == 32 ? 0xffffffffu : ((1u << w) - 1);
  }
  // The field's bits for value v on `g` (0 when the field is absent there).
  constexpr uint32_t operator()(Gen g, uint64_t v) const {
    return (uint32_t(v) & mask(g)) << lo[detail::gen_index(g)];
  }
  constexpr uint32_t get(Gen g, uint32_t value) const {
    return (value >> lo[detail::gen_index(g)]) & mask(g);
  }
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
