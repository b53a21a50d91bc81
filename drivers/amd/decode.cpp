#include "amd/decode.hpp"

#include <cstdio>
#include <string_view>

#include "amd/targets.hpp"

#include "core/error.hpp"

namespace hcq::amd {
namespace {


// The fields of `info` that exist on `gen`, read from the packet at `p` (n dwords available).
void read_fields(const PacketInfo& info, Gen gen, const uint32_t* p, uint32_t n,
                 DecodedPacket& out) {
  for (const Field& f : info.fields)
    if (has_gen(f.gens, gen) && f.dword < n) out.fields.push_back({f.name, f.get(p)});
}

uint64_t field(const DecodedPacket& d, const char* name) {
  for (auto& [n, v] : d.fields)
    if (n == name) return v;
  return 0;
}

}  // namespace


bool parse_gen(const std::string& name, Gen& gen) {
  if (name == "gfx9") gen = Gen::Gfx9;
  else if (name == "gfx10") gen = Gen::Gfx10;
  else if (name == "gfx11") gen = Gen::Gfx11;
  else if (name == "gfx12") gen = Gen::Gfx12;
  else if (const Target* t = find_target(name)) gen = t->gen;
  else return false;
  return true;
}

// Value names from the descriptions (PM4_VALUE, SDMA_VALUE).
constexpr ValueName kPm4Values[] = {
#define PM4_VALUE(id, field, value, name) {#id, #field, value, #name},
#define PM4_PACKET(...)
#define PM4_FIELD(...)
#include "amd/pm4.def"
#undef PM4_PACKET
#undef PM4_FIELD
#undef PM4_VALUE
};
constexpr ValueName kSdmaValues[] = {
#define SDMA_VALUE(id, field, value, name) {#id, #field, value, #name},
#define SDMA_PACKET(...)
#define SDMA_FIELD(...)
#include "amd/sdma.def"
#undef SDMA_PACKET
#undef SDMA_FIELD
#undef SDMA_VALUE
};

// A register write: its value, then each described field of it that is not zero as
// "REGISTER.FIELD" (Mesa's ac_dump_reg prints every field; the non-zero ones keep a dump of a
// whole dispatch readable, and a field that is absent reads as 0).
static void add_register(DecodedPacket& d, uint32_t address, uint32_t value, Gen gen) {
  const char* reg = regs::name_at(address, gen);
  if (!reg) {
    d.registers.push_back({hex(address), value});
    return;
  }
  d.registers.push_back({reg, value});
  for (const regs::RegField& f : regs::fields())
    if (has_gen(f.gens, gen) && std::string_view(f.reg) == reg && f.get(value))
      d.registers.push_back({std::string(reg) + "." + f.name, f.get(value)});
}

std::vector<DecodedPacket> decode_pm4(std::span<const uint32_t> words, Gen gen) {
  std::vector<DecodedPacket> out;
  const uint32_t n = uint32_t(words.size());
  for (uint32_t at = 0; at < n;) {
    DecodedPacket d;
    d.offset = at;
    d.header = words[at];
    const uint32_t type = pm4::header_type(d.header);
    const uint32_t len = pm4::packet_dwords(d.header);  // the framing the CP uses
    if (type == pm4::V_HEADER_TYPE_TYPE2_FILLER) {
      d.name = "TYPE2_FILLER";
      d.dwords = len;
    } else if (type != pm4::V_HEADER_TYPE_TYPE3) {
      d.name = "INVALID";
      d.ok = false;
      d.problem = "type-" + std::to_string(type) + " header (hcq emits type-3 packets only)";
      d.dwords = len;  // resynchronise on the next dword
    } else {
      const uint32_t body = len - 1;
      const uint8_t op = uint8_t(pm4::header_opcode(d.header));
      const PacketInfo* info = pm4::find(op);
      if (at + len > n) {
        d.name = info ? info->name : "TRUNCATED";
        d.ok = false;
        d.problem = "truncated: needs " + std::to_string(body) + " body dwords, " +
                    std::to_string(n - at - 1) + " left";
        d.dwords = n - at;
      } else {
        d.dwords = len;
        const uint32_t* p = words.data() + at;
        if (!info) {
          d.name = "UNKNOWN";
          d.ok = false;
          d.problem = "unknown opcode " + hex(op);
        } else {
          d.name = info->name;
          const bool header_only = op == pm4::NOP && len == 1;
          const pm4::BodyLength want = pm4::body_length(pm4::Op(op), gen);
          if (!info->exists_on(gen)) {
            d.ok = false;
            d.problem = std::string("not a ") + to_string(gen) + " packet";
          } else if (want.exact && want.dwords != body && !header_only) {
            d.ok = false;
            d.problem = "length " + std::to_string(body) + " body dwords, the description says " +
                        std::to_string(want.dwords);
          }
          read_fields(*info, gen, p, len, d);
          if (op == pm4::SET_SH_REG || op == pm4::SET_UCONFIG_REG) {
            uint32_t base = (op == pm4::SET_SH_REG ? pm4::kShRegBase : pm4::kUconfigRegBase) +
                            pm4::SET_SH_REG_REG_OFFSET.get(p);
            for (uint32_t i = info->tail_at; i < len; i++)
              add_register(d, base + i - info->tail_at, p[i], gen);
          } else if (op == pm4::INDIRECT_BUFFER) {
            d.ib_address = field(d, "IB_BASE_LO") | field(d, "IB_BASE_HI") << 32;
            d.ib_dwords = uint32_t(field(d, "IB_SIZE"));
          }
        }
      }
    }
    at += d.dwords;
    out.push_back(std::move(d));
  }
  for (auto& p : out) name_values(p, kPm4Values);
  return out;
}

std::vector<DecodedPacket> decode_sdma(std::span<const uint32_t> words, Gen gen) {
  std::vector<DecodedPacket> out;
  const uint32_t n = uint32_t(words.size());
  for (uint32_t at = 0; at < n;) {
    DecodedPacket d;
    d.offset = at;
    d.header = words[at];
    const uint8_t op = uint8_t(sdma::header_op(d.header));
    const uint8_t sub = uint8_t(sdma::header_sub_op(d.header));
    const PacketInfo* info = sdma::find(op, sub);
    const uint32_t* p = words.data() + at;
    const uint32_t len = sdma::packet_dwords(p, n - at, info);  // the framing the engine uses
    if (!info) {
      d.name = "UNKNOWN";
      d.ok = false;
      d.problem = "unknown op " + hex(op) + " sub-op " + hex(sub) + " (skipped one dword)";
      d.dwords = len;  // SDMA headers carry no length: resynchronise on the next dword
    } else if (at + len > n) {
      d.name = info->name;
      d.ok = false;
      d.problem = "truncated: needs " + std::to_string(len) + " dwords, " +
                  std::to_string(n - at) + " left";
      d.dwords = n - at;
      read_fields(*info, gen, p, n - at, d);
    } else {
      d.name = info->name;
      d.dwords = len;
      read_fields(*info, gen, p, len, d);
      if (op == sdma::INDIRECT) {
        d.ib_address = field(d, "IB_BASE_LO") | field(d, "IB_BASE_HI") << 32;
        d.ib_dwords = uint32_t(field(d, "IB_SIZE"));
      }
    }
    at += d.dwords;
    out.push_back(std::move(d));
  }
  for (auto& p : out) name_values(p, kSdmaValues);
  return out;
}

}  // namespace hcq::amd
