#include "amd/decode.hpp"

#include <cstdio>

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
  else if (name == "gfx11" || name == "gfx10") gen = Gen::Gfx11;
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

std::vector<DecodedPacket> decode_pm4(std::span<const uint32_t> words, Gen gen) {
  std::vector<DecodedPacket> out;
  const uint32_t n = uint32_t(words.size());
  for (uint32_t at = 0; at < n;) {
    DecodedPacket d;
    d.offset = at;
    d.header = words[at];
    const uint32_t type = pm4::header_type(d.header);
    if (d.header == 0x80000000u) {  // type-2 filler
      d.name = "TYPE2_FILLER";
      d.dwords = 1;
    } else if (type != 3) {
      d.name = "INVALID";
      d.ok = false;
      d.problem = "type-" + std::to_string(type) + " header (hcq emits type-3 packets only)";
      d.dwords = 1;  // resynchronise on the next dword
    } else {
      const uint32_t body = pm4::header_body_dwords(d.header);
      const uint8_t op = uint8_t(pm4::header_opcode(d.header));
      const PacketInfo* info = pm4::find(op);
      if (at + 1 + body > n) {
        d.name = info ? info->name : "TRUNCATED";
        d.ok = false;
        d.problem = "truncated: needs " + std::to_string(body) + " body dwords, " +
                    std::to_string(n - at - 1) + " left";
        d.dwords = n - at;
      } else {
        d.dwords = 1 + body;
        const uint32_t* p = words.data() + at;
        if (!info) {
          d.name = "UNKNOWN";
          d.ok = false;
          d.problem = "unknown opcode " + hex(op);
        } else {
          d.name = info->name;
          if (!info->exists_on(gen)) {
            d.ok = false;
            d.problem = std::string("not a ") + to_string(gen) + " packet";
          } else if (info->dwords && info->dwords != body) {
            d.ok = false;
            d.problem = "length " + std::to_string(body) + " body dwords, the description says " +
                        std::to_string(info->dwords);
          }
          read_fields(*info, gen, p, 1 + body, d);
          if (op == pm4::SET_SH_REG || op == pm4::SET_UCONFIG_REG) {
            uint32_t base = (op == pm4::SET_SH_REG ? pm4::kShRegBase : pm4::kUconfigRegBase) +
                            pm4::SET_SH_REG_REG_OFFSET.get(p);
            for (uint32_t i = 0; i + 1 < body; i++) {
              const char* reg = regs::name_at(base + i, gen);
              d.registers.push_back({reg ? reg : hex(base + i), p[2 + i]});
            }
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
    uint32_t len = info ? info->dwords : 1;
    if (info && op == sdma::NOP) len = 1 + sdma::NOP_COUNT_ALL.get(p);
    if (info && op == sdma::WRITE_LINEAR)  // header, address, count, then count+1 data dwords
      len = at + 4 <= n ? 4 + sdma::WRITE_LINEAR_COUNT_ALL.get(p) + 1 : 4;
    if (!info) {
      d.name = "UNKNOWN";
      d.ok = false;
      d.problem = "unknown op " + hex(op) + " sub-op " + hex(sub) + " (skipped one dword)";
      d.dwords = 1;  // SDMA headers carry no length: resynchronise on the next dword
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
