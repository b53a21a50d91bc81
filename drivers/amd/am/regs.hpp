// Register descriptions for the IP blocks an AM boot touches (issue 17 item 4): one .def per IP
// version (gc_11_0_0.def, mmhub_3_0_0.def, nbio_4_3_0.def, mp_13_0_0.def, osssys_6_0_0.def,
// hdp_6_0_0.def; each names its public source), shared by the driver, the emulated GPU and the
// tools. A register is named by its IP, its segment (Linux's BASE_IDX) and its dword offset in
// that segment; where the segment sits in the register BAR comes from the GPU's IP discovery
// table, so addresses are resolved against caller-supplied segment bases:
//   absolute dword = base[ip][BASE_IDX] + offset      (Linux SOC15_REG_OFFSET)
// A few registers sit at fixed dwords that amdgpu reads before discovery (MM_INDEX,
// RCC_CONFIG_MEMSIZE): their absolute dword is their offset.
//
// Threads: everything here is immutable after first use and may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hcq::amd::am {

// The hardware IPs whose segment bases resolve these registers (Linux amd_hw_ip_block_type
// names: GC_HWIP, MMHUB_HWIP, NBIO_HWIP, MP0_HWIP, MP1_HWIP, OSSSYS_HWIP, HDP_HWIP). SDMA 6.0's
// registers are described with GC's (Linux keeps them in the GC header).
enum class Ip : uint8_t { GC, MMHUB, NBIO, MP0, MP1, OSSSYS, HDP };
inline constexpr size_t kIpCount = 7;
std::string_view ip_name(Ip ip);

// BASE_IDX of a register at a fixed dword (AM_ABS_REG).
inline constexpr uint8_t kAbsolute = 0xff;

struct RegField {
  std::string_view name;
  uint8_t lo = 0, width = 0;
  constexpr uint32_t mask() const {
    return width >= 32 ? 0xffffffffu : ((uint32_t(1) << width) - 1) << lo;
  }
  constexpr uint32_t get(uint32_t reg) const { return (reg & mask()) >> lo; }
  // `reg` with this field replaced by `value` (bits beyond the width dropped).
  constexpr uint32_t set(uint32_t reg, uint32_t value) const {
    return (reg & ~mask()) | ((value << lo) & mask());
  }
  // The field's bits holding `value` (bits beyond the width dropped): CID(5) | RW(1).
  constexpr uint32_t operator()(uint32_t value) const { return set(0, value); }
};

// Fields and the values to give them, applied in order: with_fields(v, {{F::A, 1}, {F::B, 0}}).
using FieldValues = std::initializer_list<std::pair<RegField, uint32_t>>;
constexpr uint32_t with_fields(uint32_t reg, FieldValues fields) {
  for (const auto& [field, value] : fields) reg = field.set(reg, value);
  return reg;
}

// A register as a compile-time constant: am::gc_11_0_0::CP_HQD_ACTIVE.
struct Reg {
  Ip ip;
  uint8_t base_idx;  // kAbsolute: offset is the absolute dword
  uint32_t offset;   // dwords
};

struct RegDesc {
  std::string_view name;  // Linux's name without its "reg" prefix: "CP_HQD_PQ_CONTROL"
  std::string_view file;  // the .def it comes from: "gc_11_0_0"
  Reg reg;
  std::span<const RegField> fields;
  // Throws InvalidInput: "CP_HQD_PQ_CONTROL (gc_11_0_0) has no field QUEUE"; any case.
  const RegField& field(std::string_view name) const;
};

// Where one GPU's registers are: the segment bases in dwords per IP (instance 0), as IP
// discovery reports them, and, per IP, the register table of the IP version the GPU has where
// it is not the .def that hcq's constants come from (a version whose registers moved; the
// ASIC's description names it). Registers are matched by name: gc_11_0_0::CP_HQD_ACTIVE
// resolves to the CP_HQD_ACTIVE of the GPU's GC table.
struct IpSegmentBases {
  std::array<std::vector<uint32_t>, kIpCount> dwords;
  std::array<std::span<const RegDesc>, kIpCount> tables{};  // empty: hcq's own .def
  std::vector<uint32_t>& operator[](Ip ip) { return dwords[size_t(ip)]; }
  const std::vector<uint32_t>& operator[](Ip ip) const { return dwords[size_t(ip)]; }
};

struct Discovery;
// The segment bases of instance 0 of each described IP, from the GPU's IP discovery table
// (MP0 and MP1 by their own hardware ids, NBIO as NBIF). Throws InvalidInput naming an IP the
// table lacks, or a base past 32 bits (register offsets are 32-bit dwords).
IpSegmentBases segment_bases(const Discovery& d);

// The register's dword address in the register BAR (its byte offset is 4 times that), from
// the GPU's table for its IP where `bases` has one. Throws InvalidInput when the bases lack its
// segment: "CP_HQD_ACTIVE (gc_11_0_0): GC has no segment 1 (IP discovery gave 1 base)", or
// when the GPU's table lacks it: "IH_RB_BASE: this GPU's OSSSYS register table (osssys_6_0_3)
// has no such register".
uint64_t absolute_dword(const RegDesc& r, const IpSegmentBases& bases);

// Every described register, in .def order (gc, mmhub, nbio, mp, osssys, hdp).
std::span<const RegDesc> registers();
// By name, any case, with or without Linux's "reg" prefix. Throws InvalidInput:
// "unknown AM register CP_HQD_FOO (gc_11_0_0, mmhub_3_0_0, nbio_4_3_0, mp_13_0_0, osssys_6_0_0,
// hdp_6_0_0 describe 584)".
const RegDesc& find_register(std::string_view name);
// The description of a register given as a compile-time `Reg` (am::gc_11_0_0::CP_HQD_ACTIVE).
// Throws InvalidInput: "no AM register description for MP1 segment 0 offset 0x999".
const RegDesc& describe(const Reg& r);
// The .def files in order.
std::span<const std::string_view> def_files();

// Each register is a `Reg` constant and each field a `RegField` constant in a namespace named
// after its register: gc_11_0_0::CP_HQD_PQ_CONTROL and
// gc_11_0_0::fields::CP_HQD_PQ_CONTROL::QUEUE_SIZE. A misspelt register or field is a build
// error; nothing is looked up by name on the driver's paths (issue 35 item 2). A register
// described LIKE a twin gets the twin's fields under its own name (a namespace alias).
#define AM_REG(ip, name, seg, off) inline constexpr Reg name{Ip::ip, seg, off};
#define AM_ABS_REG(ip, name, dword) inline constexpr Reg name{Ip::ip, kAbsolute, dword};
#define AM_FIELD(reg, field, lo, width)               \
  namespace fields::reg {                             \
  inline constexpr RegField field{#field, lo, width}; \
  }
#define AM_REG_LIKE(ip, name, seg, off, twin) \
  AM_REG(ip, name, seg, off)                  \
  namespace fields {                          \
  namespace name = twin;                      \
  }
namespace gc_11_0_0 {
#include "amd/am/gc_11_0_0.def"
}
namespace mmhub_3_0_0 {
#include "amd/am/mmhub_3_0_0.def"
}
namespace nbio_4_3_0 {
#include "amd/am/nbio_4_3_0.def"
}
namespace mp_13_0_0 {
#include "amd/am/mp_13_0_0.def"
}
namespace osssys_6_0_0 {
#include "amd/am/osssys_6_0_0.def"
}
namespace hdp_6_0_0 {
#include "amd/am/hdp_6_0_0.def"
}
#undef AM_REG
#undef AM_ABS_REG
#undef AM_FIELD
#undef AM_REG_LIKE

}  // namespace hcq::amd::am
