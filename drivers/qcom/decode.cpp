#include "qcom/decode.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace hcq::qcom {
namespace {

void invalid(DecodedPacket& d, std::string problem) {
  d.name = "INVALID";
  d.ok = false;
  d.problem = std::move(problem);
  d.dwords = 1;  // resynchronise on the next dword
}

// A type-4 packet: `count` registers from the header's address.
void decode_pkt4(const uint32_t* p, uint32_t avail, uint32_t total, Gen gen, DecodedPacket& d) {
  const uint32_t reg = pkt4_reg(p[0]), count = total - 1;
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
void decode_pkt7(const uint32_t* p, uint32_t avail, uint32_t total, Gen gen, DecodedPacket& d) {
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
  for (const Field& f : info->fields) {
    if (!has_gen(f.gens, gen) || f.dword >= d.dwords) continue;
    const uint32_t v = f.get(p);
    d.fields.push_back({f.name, v});
    if (const char* name = value_name(*info, f, v, gen)) d.value_names.push_back({f.name, name});
  }
  if (info->tail.dword)  // CP_MEM_WRITE's DATA_0, DATA_1 ...
    for (uint32_t i = info->tail.dword; i < d.dwords; i++)
      d.fields.push_back({std::string(info->tail.name) + "_" + std::to_string(i - info->tail.dword),
                          p[i]});
  if (op == CP_INDIRECT_BUFFER && d.ok) {
    d.ib_address = get64(p, CP_INDIRECT_BUFFER_IB_BASE_LO, CP_INDIRECT_BUFFER_IB_BASE_HI);
    d.ib_dwords = CP_INDIRECT_BUFFER_IB_SIZE.get(p);
  }
}

}  // namespace

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
    for (const Field& f : tex_memobj_fields()) {
      if (f.dword >= d.dwords) continue;
      d.fields.push_back({f.name, f.get(w)});
      if (const char* name = tex_memobj_value_name(f, f.get(w)))
        d.value_names.push_back({f.name, name});
    }
    if (d.dwords > TEX_MEMOBJ_BASE_HI.dword)
      d.fields.push_back({"BASE", uint64_t(TEX_MEMOBJ_BASE_HI.get(w)) << 32 |
                                      uint64_t(TEX_MEMOBJ_BASE_LO.get(w)) << TEX_MEMOBJ_BASE_LO.lo});
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
    const CpFrame frame = frame_cp(h);
    switch (frame.kind) {
      case CpKind::Type2Filler:
        d.name = "TYPE2_FILLER";
        d.dwords = 1;
        break;
      case CpKind::Pkt4: decode_pkt4(p, avail, frame.dwords, gen, d); break;
      case CpKind::Pkt7: decode_pkt7(p, avail, frame.dwords, gen, d); break;
      case CpKind::Pkt0:
        d.name = "TYPE0";
        d.ok = false;
        d.problem = frame.problem;
        d.fields.push_back({"REG", PKT0_REG.get(h)});
        d.dwords = std::min(frame.dwords, avail);
        break;
      case CpKind::Invalid: invalid(d, frame.problem); break;
    }
    at += d.dwords;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace hcq::qcom
