#include "amd/packets.hpp"

#include <string_view>
#include <vector>

namespace hcq::amd {

const char* to_string(Gen g) {
  switch (g) {
    case Gen::Gfx9: return "gfx9";
    case Gen::Gfx10: return "gfx10";
    case Gen::Gfx11: return "gfx11";
    case Gen::Gfx12: return "gfx12";
  }
  return "?";
}

namespace {

struct Table {
  std::vector<PacketInfo> packets;
  std::vector<std::vector<Field>> fields;
  // Fields arrive grouped under their packet, in .def order.
  void packet(const char* name, uint8_t op, uint8_t sub, uint8_t n) {
    packets.push_back({name, op, sub, n, {}});
    fields.emplace_back();
  }
  void field(const Field& f) { fields.back().push_back(f); }
  void tail(uint8_t at, const Field& count, uint8_t add) {
    packets.back().tail_at = at;
    packets.back().tail_count = count;
    packets.back().tail_add = add;
  }
  void finish() {
    for (size_t i = 0; i < packets.size(); i++) packets[i].fields = fields[i];
  }
};

const Table& pm4_table() {
  static const Table t = [] {
    Table t;
#define PM4_PACKET(id, op, n) t.packet(#id, op, 0, n);
#define PM4_FIELD(pkt, f, gens, dw, lo, w) t.field(pm4::pkt##_##f);
#define PM4_TAIL(id, name, first) t.tail(first, Field{}, 0);
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
#undef PM4_TAIL
    t.finish();
    return t;
  }();
  return t;
}

const Table& sdma_table() {
  static const Table t = [] {
    Table t;
#define SDMA_PACKET(id, op, sub, n) t.packet(#id, op, sub, n);
#define SDMA_FIELD(pkt, f, gens, dw, lo, w) t.field(sdma::pkt##_##f##_##gens);
#define SDMA_TAIL(id, first, count, add) t.tail(first, sdma::id##_##count##_ALL, add);
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
#undef SDMA_TAIL
    t.finish();
    return t;
  }();
  return t;
}

}  // namespace

namespace pm4 {
std::span<const PacketInfo> packets() { return pm4_table().packets; }
const PacketInfo* find(uint8_t opcode) {
  for (auto& p : packets())
    if (p.opcode == opcode) return &p;
  return nullptr;
}
}  // namespace pm4

namespace regs {
namespace {
constexpr Reg kAll[] = {
#define REG(n, gens, addr) n##_##gens,
#define REG_FIELD(...)
#include "amd/regs.def"
#undef REG
#undef REG_FIELD
};
constexpr RegField kFields[] = {
#define REG(...)
#define REG_FIELD(r, f, gens, lo, w) {#r, #f, gens, lo, w},
#include "amd/regs.def"
#undef REG
#undef REG_FIELD
};
// Every field inside 32 bits, on generations its register has, after its register.
constexpr bool fields_consistent() {
  for (const RegField& f : kFields) {
    if (f.width == 0 || f.lo + f.width > 32) return false;
    bool found = false;
    for (const Reg& r : kAll)
      if (std::string_view(r.name) == f.reg && (r.gens & f.gens) == f.gens) found = true;
    if (!found) return false;
  }
  return true;
}
static_assert(fields_consistent(), "regs.def: a field outside its register");
}  // namespace
std::span<const Reg> all() { return kAll; }
std::span<const RegField> fields() { return kFields; }
uint32_t address(const char* name, Gen gen) {
  for (auto& r : kAll)
    if (has_gen(r.gens, gen) && std::string_view(r.name) == name) return r.address;
  return 0;
}
const char* name_at(uint32_t address, Gen gen) {
  for (auto& r : kAll)
    if (has_gen(r.gens, gen) && r.address == address) return r.name;
  return nullptr;
}
}  // namespace regs

namespace sdma {
std::span<const PacketInfo> packets() { return sdma_table().packets; }
const PacketInfo* find(uint8_t op, uint8_t sub_op) {
  for (auto& p : packets())
    if (p.opcode == op && (p.sub_op == sub_op || op != TIMESTAMP)) return &p;
  return nullptr;
}
uint32_t packet_dwords(const uint32_t* p, uint64_t avail, const PacketInfo* info) {
  if (!info) return 1;
  if (!info->tail_at) return info->dwords;
  if (avail <= info->tail_count.dword) return info->tail_at;
  return info->tail_at + info->tail_count.get(p) + info->tail_add;
}
}  // namespace sdma

}  // namespace hcq::amd
