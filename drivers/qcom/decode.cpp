#include "qcom/decode.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace hcq::qcom {
namespace {

uint64_t field(const DecodedPacket& d, const char* name) {
  for (auto& [n, v] : d.fields)
    if (n == name) return v;
  return 0;
}

void invalid(DecodedPacket& d, std::string problem) {
  d.name = "INVALID";
  d.ok = false;
  d.problem = std::move(problem);
  d.dwords = 1;  // resynchronise on the next dword
}

// A type-4 packet: `count` registers from the header's address.
void decode_pkt4(const uint32_t* p, uint32_t avail, Gen gen, DecodedPacket& d) {
  const uint32_t reg = pkt4_reg(p[0]), count = pkt4_count(p[0]);
  const uint32_t take = std::min(count, avail - 1);
  d.name = "PKT4";
  d.dwords = 1 + take;
  d.fields.push_back({"REG", reg});
  if (take < count) {
    d.ok = false;
    d.problem = "truncated: " + std::to_string(count) + " registers, " + std::to_string(take) +
                " dwords left";
  }
  for (uint32_t i = 0; i < take; i++) {
    const uint32_t value = p[1 + i];
    const RegInfo* r = reg_at(reg + i, gen);
    if (!r) {
      d.registers.push_back({hex(reg + i), value});
      continue;
    }
    d.registers.push_back({r->name, value});
    for (const RegField& f : r->fields)
      if (f.on(gen)) d.fields.push_back({std::string(r->name) + "." + f.name, f.get(gen, value)});
  }
}

// A type-7 packet whose header checked out.
void decode_pkt7(const uint32_t* p, uint32_t avail, Gen gen, DecodedPacket& d) {
  const uint32_t total = 1 + pkt7_count(p[0]);
  const uint8_t op = uint8_t(pkt7_opcode(p[0]));
  const PacketInfo* info = find_packet(op, gen);
  d.name = info ? info->name : "UNKNOWN";
  if (total > avail) {
    d.ok = false;
    d.problem = "truncated: needs " + std::to_string(total) + " dwords, " + std::to_string(avail) +
                " left";
    d.dwords = avail;
  } else {
    d.dwords = total;
  }
  if (!info) {
    if (d.ok) {
      d.ok = false;
      d.problem =
          "unknown opcode " + hex(op) + " on " + to_string(gen) + " (skipped by its length)";
    }
    return;
  }
  if (d.ok && info->dwords && info->dwords != total) {
    d.ok = false;
    d.problem = "length " + std::to_string(total) + " dwords, the description says " +
                std::to_string(info->dwords);
  }
  for (const Field& f : info->fields)
    if (has_gen(f.gens, gen) && f.dword < d.dwords) d.fields.push_back({f.name, f.get(p)});
  if (op == CP_MEM_WRITE)
    for (uint32_t i = 3; i < d.dwords; i++)
      d.fields.push_back({"DATA_" + std::to_string(i - 3), p[i]});
  if (op == CP_INDIRECT_BUFFER && d.ok) {
    d.ib_address = field(d, "IB_BASE_LO") | field(d, "IB_BASE_HI") << 32;
    d.ib_dwords = uint32_t(field(d, "IB_SIZE"));
  }
}

}  // namespace

// Value names from the description (CP_VALUE).
constexpr ValueName kCpValues[] = {
#define CP_VALUE(pkt, field, value, name) {#pkt, #field, value, #name},
#define CP_PACKET(...)
#define CP_FIELD(...)
#define CP_EVENT(...)
#define CP_CONST(...)
#include "qcom/cp.def"
#undef CP_PACKET
#undef CP_FIELD
#undef CP_EVENT
#undef CP_CONST
#undef CP_VALUE
};

// Value names from descriptors.def (DESC_VALUE).
constexpr ValueName kDescValues[] = {
#define DESC_VALUE(desc, field, value, name) {#desc, #field, value, #name},
#define DESC(...)
#define DESC_FIELD(...)
#define DESC_CONST(...)
#include "qcom/descriptors.def"
#undef DESC
#undef DESC_FIELD
#undef DESC_CONST
#undef DESC_VALUE
};

std::vector<DecodedPacket> decode_descriptors(std::span<const uint32_t> words) {
  std::vector<DecodedPacket> out;
  for (size_t at = 0; at < words.size(); at += kTEX_MEMOBJ_DWORDS) {
    DecodedPacket d;
    d.name = "TEX_MEMOBJ";
    d.offset = uint32_t(at);
    d.header = words[at];
    d.dwords = uint32_t(std::min<size_t>(kTEX_MEMOBJ_DWORDS, words.size() - at));
    const uint32_t* w = words.data() + at;
    if (d.dwords < kTEX_MEMOBJ_DWORDS) {
      d.ok = false;
      d.problem = "truncated: a descriptor is " + std::to_string(kTEX_MEMOBJ_DWORDS) +
                  " dwords, " + std::to_string(d.dwords) + " left";
    }
    for (const Field& f : tex_memobj_fields())
      if (f.dword < d.dwords) d.fields.push_back({f.name, f.get(w)});
    if (d.dwords > TEX_MEMOBJ_BASE_HI.dword)
      d.fields.push_back({"BASE", uint64_t(TEX_MEMOBJ_BASE_HI.get(w)) << 32 |
                                      uint64_t(TEX_MEMOBJ_BASE_LO.get(w)) << TEX_MEMOBJ_BASE_LO.lo});
    name_values(d, kDescValues);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<DecodedPacket> decode_cp(std::span<const uint32_t> words, Gen gen) {
  std::vector<DecodedPacket> out;
  const uint32_t n = uint32_t(words.size());
  for (uint32_t at = 0; at < n;) {
    DecodedPacket d;
    d.offset = at;
    d.header = words[at];
    const uint32_t h = d.header, avail = n - at;
    const uint32_t* p = words.data() + at;
    if (h == kType2Filler) {
      d.name = "TYPE2_FILLER";
      d.dwords = 1;
    } else if (header_type(h) == 4) {
      if (pkt4_parity_ok(h)) decode_pkt4(p, avail, gen, d);
      else invalid(d, "type-4 header with bad parity bits");
    } else if (header_type(h) == 7) {
      if (h & 0x0f000000) invalid(d, "type-7 header with bits 27:24 set");
      else if (!pkt7_parity_ok(h)) invalid(d, "type-7 header with bad parity bits");
      else decode_pkt7(p, avail, gen, d);
    } else if ((h & 0xc0000000) == 0) {
      // freedreno's type 0: (count - 1) in 29:16, register in 14:0; a5xx and later use type 4.
      const uint32_t total = 1 + ((h >> 16) & 0x3fff) + 1;
      d.name = "TYPE0";
      d.ok = false;
      d.problem = "type-0 packet (a pre-a5xx register write; a6xx/a7xx take type 4)";
      d.fields.push_back({"REG", h & 0x7fff});
      d.dwords = std::min(total, avail);
    } else if ((h & 0xc0000000) == 0xc0000000) {
      invalid(d, "type-3 header (pre-a5xx; a6xx/a7xx take type 7)");
    } else {
      invalid(d, "not a packet header");
    }
    at += d.dwords;
    out.push_back(std::move(d));
  }
  for (auto& p : out) {
    name_values(p, kCpValues);
    for (auto& [field, v] : p.fields)  // events: the generation's own names
      if (field == "EVENT")
        if (const char* e = event_name(uint32_t(v), gen)) p.value_names.push_back({field, e});
  }
  return out;
}

}  // namespace hcq::qcom
