// PM4 and SDMA packet descriptions (from pm4.def and sdma.def) as constants for the encoders
// and as tables for the decoder, the emulated GPU and the dump tool.
#pragma once

#include <cstdint>
#include <span>

namespace hcq::amd {

// Packet-form generations hcq emits for. Gfx10 parts use the Gfx11 forms.
enum class Gen : uint8_t { Gfx9 = 1, Gfx11 = 2, Gfx12 = 4 };
inline constexpr uint8_t GFX9 = 1, GFX11 = 2, GFX12 = 4, GFX11_12 = GFX11 | GFX12,
                         ALL = GFX9 | GFX11 | GFX12;
constexpr bool has_gen(uint8_t gens, Gen g) { return gens & uint8_t(g); }
const char* to_string(Gen g);

struct Field {
  const char* name;
  uint8_t gens;
  uint8_t dword;  // PM4: 1 = first body dword; SDMA: 0 = header
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
  uint8_t sub_op;   // SDMA only
  uint8_t dwords;   // PM4: body dwords; SDMA: whole packet; 0 = variable
  std::span<const Field> fields;
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

constexpr uint32_t header(Op op, uint32_t body_dwords) {
  return (3u << 30) | (((body_dwords - 1) & 0x3fff) << 16) | (uint32_t(op) << 8);
}
constexpr uint32_t header_type(uint32_t h) { return h >> 30; }
constexpr uint32_t header_opcode(uint32_t h) { return (h >> 8) & 0xff; }
constexpr uint32_t header_body_dwords(uint32_t h) { return ((h >> 16) & 0x3fff) + 1; }

// Registers written with SET_SH_REG live at dword addresses [0x2C00, 0x3000).
inline constexpr uint32_t kShRegBase = 0x2C00;
inline constexpr uint32_t kUconfigRegBase = 0xC000;

// Event types and values used in RELEASE_MEM / EVENT_WRITE / WAIT_REG_MEM.
inline constexpr uint32_t kEventCsPartialFlush = 0x07, kEventIndexPartialFlush = 4;
inline constexpr uint32_t kEventCacheFlushAndInvTs = 0x14, kEventIndexEndOfPipe = 5;
inline constexpr uint32_t kDataSelNone = 0, kDataSel32 = 1, kDataSel64 = 2, kDataSelClock = 3;
inline constexpr uint32_t kIntSelNone = 0, kIntSelAfterWriteConfirm = 2;
inline constexpr uint32_t kFunctionGreaterEqual = 5;

// GCR_CNTL (ACQUIRE_MEM on gfx10+) bits, Linux amdgpu nvd.h.
inline constexpr uint32_t kGcrGliInvAll = 1u << 0, kGcrGlmWb = 1u << 4, kGcrGlmInv = 1u << 5,
                          kGcrGlkWb = 1u << 6, kGcrGlkInv = 1u << 7, kGcrGlvInv = 1u << 8,
                          kGcrGl1Inv = 1u << 9, kGcrGl2Inv = 1u << 14, kGcrGl2Wb = 1u << 15;
// CP_COHER_CNTL (ACQUIRE_MEM on gfx9) bits, Linux amdgpu soc15d.h.
inline constexpr uint32_t kCoherTcWb = 1u << 18, kCoherTcl1 = 1u << 22, kCoherTc = 1u << 23,
                          kCoherShKcache = 1u << 27, kCoherShIcache = 1u << 29;
// COMPUTE_DISPATCH_INITIATOR bits.
inline constexpr uint32_t kInitiatorComputeShaderEn = 1u << 0, kInitiatorForceStartAt000 = 1u << 2,
                          kInitiatorCsW32En = 1u << 15;  // gfx10+

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
  constexpr uint32_t get(uint32_t value) const {
    return (value >> lo) & (width == 32 ? 0xffffffffu : ((1u << width) - 1));
  }
};
// Every field, in description order (a register's fields follow it).
std::span<const RegField> fields();
#define REG(n, gens, addr) inline constexpr Reg n##_##gens{#n, gens, addr};
#define REG_FIELD(...)
#include "amd/regs.def"
#undef REG
#undef REG_FIELD
}  // namespace regs

namespace sdma {
enum Op : uint8_t {
#define SDMA_PACKET(id, op, sub, n) id = op,
#define SDMA_FIELD(...)
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
};
#define SDMA_PACKET(...)
#define SDMA_FIELD(pkt, f, gens, dw, lo, w) \
  inline constexpr Field pkt##_##f##_##gens{#f, gens, dw, lo, w};
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD

constexpr uint32_t header(Op op, uint32_t sub_op) { return uint32_t(op) | (sub_op << 8); }
constexpr uint32_t header_op(uint32_t h) { return h & 0xff; }
constexpr uint32_t header_sub_op(uint32_t h) { return (h >> 8) & 0xff; }

inline constexpr uint32_t kSubOpTimestampGetGlobal = 2;
inline constexpr uint32_t kFuncEqual = 3, kFuncGreaterEqual = 5;

// The largest copy one COPY_LINEAR moves: gfx9 (SDMA 4) has a 22-bit count, SDMA 6/7 a 30-bit
// one; Mesa sid.h documents the last 255 bytes of each range as unusable.
constexpr uint64_t max_copy_bytes(Gen g) { return g == Gen::Gfx9 ? 0x3fff00 : 0x3fffff00; }

// The first description of `op` whose sub-op matches.
const PacketInfo* find(uint8_t op, uint8_t sub_op);
std::span<const PacketInfo> packets();
}  // namespace sdma

}  // namespace hcq::amd
