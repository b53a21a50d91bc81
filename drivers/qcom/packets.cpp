#include "qcom/packets.hpp"

#include <string_view>
#include <vector>

namespace hcq::qcom {

const char* to_string(Gen g) {
  switch (g) {
    case Gen::A6xx: return "a6xx";
    case Gen::A7xx: return "a7xx";
  }
  return "?";
}

bool parse_gen(const std::string& name, Gen& gen) {
  // Chips as Mesa's freedreno_devices.py files them (CHIP.A6XX / CHIP.A7XX); a702 is a6xx-class
  // there ("NOT a mistake!").
  static constexpr std::string_view kA6xx[] = {
      "a6xx", "a605", "a608", "a610", "a612", "a615", "a616", "a618", "a619", "a620",
      "a630", "a640", "a643", "a644", "a650", "a660", "a680", "a690", "a702"};
  static constexpr std::string_view kA7xx[] = {"a7xx", "a725", "a730", "a735", "a740", "a750"};
  for (std::string_view n : kA6xx)
    if (name == n) {
      gen = Gen::A6xx;
      return true;
    }
  for (std::string_view n : kA7xx)
    if (name == n) {
      gen = Gen::A7xx;
      return true;
    }
  return false;
}

namespace {

// ---- Checks of the descriptions, at compile time ----

// cp.def in order: a packet, then its fields.
struct CpEntry {
  bool packet;
  uint8_t opcode, gens, dwords;  // packet
  uint8_t dword, lo, width;      // field
};
constexpr CpEntry kCp[] = {
#define CP_PACKET(id, op, n, gens) {true, op, gens, n, 0, 0, 0},
#define CP_FIELD(pkt, f, gens, dw, lo, w) {false, 0, gens, 0, dw, lo, w},
#define CP_ENUM(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
};

constexpr bool cp_def_consistent() {
  uint8_t dwords = 0, gens = 0;
  for (const CpEntry& e : kCp) {
    if (e.packet) {
      if (e.opcode > 0x7f || !e.gens || (e.gens & ~ALL)) return false;
      dwords = e.dwords;
      gens = e.gens;
      continue;
    }
    if (e.width == 0 || e.lo + e.width > 32 || e.dword == 0) return false;  // header is no field
    if (dwords && e.dword >= dwords) return false;  // inside a fixed-size packet
    if ((e.gens & ~gens) || !e.gens) return false;  // only where the packet exists
  }
  // One meaning per opcode on each generation.
  for (const CpEntry& a : kCp)
    for (const CpEntry& b : kCp)
      if (&a != &b && a.packet && b.packet && a.opcode == b.opcode && (a.gens & b.gens))
        return false;
  return true;
}
static_assert(cp_def_consistent(), "cp.def: a field outside its packet, or an opcode twice");

struct RegEntry {
  bool reg;
  uint8_t id;
  uint32_t address[2];
  uint8_t lo[2], width[2];
};
constexpr RegEntry kRegs[] = {
#define REG(n, a6, a7) {true, uint8_t(RegId::n), {a6, a7}, {0, 0}, {0, 0}},
#define REG_FIELD(r, f, l6, w6, l7, w7) {false, uint8_t(RegId::r), {0, 0}, {l6, l7}, {w6, w7}},
#include "qcom/regs.def"
#undef REG
#undef REG_FIELD
};

constexpr bool regs_def_consistent() {
  const RegEntry* reg = nullptr;
  for (const RegEntry& e : kRegs) {
    if (e.reg) {
      if (!e.address[0] && !e.address[1]) return false;
      reg = &e;
      continue;
    }
    if (!reg || reg->id != e.id) return false;  // fields follow their register
    for (int g = 0; g < 2; g++) {
      if (e.lo[g] + e.width[g] > 32) return false;
      if (e.width[g] && !reg->address[g]) return false;  // a field where the register is absent
    }
  }
  for (const RegEntry& a : kRegs)
    for (const RegEntry& b : kRegs)
      if (&a != &b && a.reg && b.reg)
        for (int g = 0; g < 2; g++)
          if (a.address[g] && a.address[g] == b.address[g]) return false;
  return true;
}
static_assert(regs_def_consistent(), "regs.def: a field outside its register, or an address twice");

// descriptors.def: every field inside its descriptor.
constexpr Field kTexMemobj[] = {
#define DESC(...)
#define DESC_FIELD(d, f, dw, lo, w) d##_##f,
#define DESC_ENUM(...)
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_ENUM
};
constexpr bool descriptors_def_consistent() {
  for (const Field& f : kTexMemobj)
    if (f.width == 0 || f.lo + f.width > 32 || f.dword >= kTEX_MEMOBJ_DWORDS) return false;
  return true;
}
static_assert(descriptors_def_consistent(), "descriptors.def: a field outside its descriptor");

// ---- Tables ----

struct CpTable {
  std::vector<PacketInfo> packets;
  std::vector<std::vector<Field>> fields;
};

const CpTable& cp_table() {
  static const CpTable t = [] {
    CpTable t;
    std::vector<const char*> like;  // per packet: the layout it borrows, or null
#define CP_PACKET(id, op, n, gens)                        \
  t.packets.push_back({#id, op, gens, n, #id, {}, {}}); \
  t.fields.emplace_back();                               \
  like.push_back(nullptr);
#define CP_PACKET_LIKE(id, op, n, gens, layout)               \
  t.packets.push_back({#id, op, gens, n, #layout, {}, {}}); \
  t.fields.emplace_back();                                   \
  like.push_back(#layout);
#define CP_FIELD(pkt, f, gens, dw, lo, w) t.fields.back().push_back(pkt##_##f);
#define CP_TAIL(pkt, n, dw) t.packets.back().tail = pkt##_##n;
#define CP_ENUM(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_PACKET_LIKE
#undef CP_FIELD
#undef CP_TAIL
#undef CP_ENUM
    // A CP_PACKET_LIKE packet has its layout's fields and tail (described before it).
    for (size_t i = 0; i < t.packets.size(); i++)
      for (size_t j = 0; like[i] && j < i; j++)
        if (std::string_view(t.packets[j].name) == like[i]) {
          t.fields[i] = t.fields[j];
          t.packets[i].tail = t.packets[j].tail;
        }
    for (size_t i = 0; i < t.packets.size(); i++) t.packets[i].fields = t.fields[i];
    return t;
  }();
  return t;
}

struct EnumValue {
  const char* type;
  const char* name;
  uint32_t value;
  uint8_t gens;
};
constexpr EnumValue kEnums[] = {
#define CP_PACKET(...)
#define CP_FIELD(...)
#define CP_ENUM(type, n, v, gens) {#type, #n, v, gens},
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
};

// A field whose values an enum names: in `layout` (a packet or descriptor), field `field`.
struct FieldEnum {
  const char* layout;
  const char* field;
  const char* type;
};
constexpr FieldEnum kFieldEnums[] = {
#define CP_PACKET(...)
#define CP_FIELD(...)
#define CP_ENUM(...)
#define CP_FIELD_ENUM(pkt, f, type) {#pkt, #f, #type},
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_ENUM
#undef CP_FIELD_ENUM
};

constexpr bool same(const char* a, const char* b) { return std::string_view(a) == b; }

// Every CP_FIELD_ENUM names an enum cp.def defines.
constexpr bool field_enums_consistent() {
  for (const FieldEnum& f : kFieldEnums) {
    bool found = false;
    for (const EnumValue& e : kEnums) found |= same(e.type, f.type);
    if (!found) return false;
  }
  return true;
}
static_assert(field_enums_consistent(), "cp.def: CP_FIELD_ENUM of an enum it does not define");

const char* enum_name(const char* type, uint32_t value, Gen gen) {
  for (const EnumValue& e : kEnums)
    if (e.value == value && has_gen(e.gens, gen) && same(e.type, type)) return e.name;
  return nullptr;
}

struct DescEnumValue {
  const char* type;
  const char* name;
  uint32_t value;
};
constexpr DescEnumValue kDescEnums[] = {
#define DESC(...)
#define DESC_FIELD(...)
#define DESC_ENUM(type, n, v) {#type, #n, v},
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_ENUM
};
constexpr FieldEnum kDescFieldEnums[] = {
#define DESC(...)
#define DESC_FIELD(...)
#define DESC_ENUM(...)
#define DESC_FIELD_ENUM(d, f, type) {#d, #f, #type},
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_ENUM
#undef DESC_FIELD_ENUM
};

struct RegTable {
  std::vector<RegInfo> regs;
  std::vector<std::vector<RegField>> fields;
};

const RegTable& reg_table() {
  static const RegTable t = [] {
    RegTable t;
#define REG(n, a6, a7)                                 \
  t.regs.push_back({#n, RegId::n, {a6, a7}, {}}); \
  t.fields.emplace_back();
#define REG_FIELD(r, f, l6, w6, l7, w7) t.fields.back().push_back(r##_##f);
#include "qcom/regs.def"
#undef REG
#undef REG_FIELD
    for (size_t i = 0; i < t.regs.size(); i++) t.regs[i].fields = t.fields[i];
    return t;
  }();
  return t;
}

}  // namespace

std::span<const PacketInfo> packets() { return cp_table().packets; }

const PacketInfo* find_packet(uint8_t opcode, Gen gen) {
  for (const PacketInfo& p : packets())
    if (p.opcode == opcode && has_gen(p.gens, gen)) return &p;
  return nullptr;
}

const char* event_name(uint32_t event, Gen gen) { return enum_name("vgt_event_type", event, gen); }

const char* value_name(const PacketInfo& packet, const Field& field, uint32_t value, Gen gen) {
  for (const FieldEnum& f : kFieldEnums)
    if (same(f.layout, packet.layout) && same(f.field, field.name))
      return enum_name(f.type, value, gen);
  return nullptr;
}

std::span<const Field> tex_memobj_fields() { return kTexMemobj; }

const char* tex_memobj_value_name(const Field& field, uint32_t value) {
  for (const FieldEnum& f : kDescFieldEnums)
    if (same(f.field, field.name))
      for (const DescEnumValue& e : kDescEnums)
        if (e.value == value && same(e.type, f.type)) return e.name;
  return nullptr;
}

std::span<const RegInfo> registers() { return reg_table().regs; }

const RegInfo& reg_info(RegId r) { return reg_table().regs[size_t(r)]; }

const char* to_string(RegId r) { return reg_info(r).name; }

const RegInfo* reg_at(uint32_t address, Gen gen) {
  if (address == 0) return nullptr;
  for (const RegInfo& r : registers())
    if (r.address[detail::gen_index(gen)] == address) return &r;
  return nullptr;
}

}  // namespace hcq::qcom
