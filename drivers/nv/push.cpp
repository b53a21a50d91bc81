#include "nv/push.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.hpp"

namespace hcq::nv {
namespace {


struct Tables {
  std::vector<MethodInfo> methods;
  std::vector<std::vector<MethodField>> fields;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
#define NV_METHOD(g, m, off)                   \
  t.methods.push_back({#m, Group::g, off, {}}); \
  t.fields.emplace_back();
#define NV_FIELD(g, m, f, gens, lo, w) t.fields.back().push_back(g##_##m##_##f##_##gens);
#include "nv/classes.def"
#undef NV_METHOD
#undef NV_FIELD
    for (size_t i = 0; i < t.methods.size(); i++) t.methods[i].fields = t.fields[i];
    return t;
  }();
  return t;
}

constexpr QmdField kQmdFields[] = {
#define QMD_FIELD(v, f, hi, lo) QMD_##v##_##f,
#include "nv/qmd.def"
#undef QMD_FIELD
};
// Every field sits in one dword, as QmdField::get/put assume.
#define QMD_FIELD(v, f, hi, lo) \
  static_assert((hi) / 32 == (lo) / 32 && (hi) >= (lo), "QMD field " #v "." #f " crosses a dword");
#include "nv/qmd.def"
#undef QMD_FIELD

void describe_method(Group g, uint16_t offset, uint32_t value, Gen gen, DecodedPacket& d) {
  const MethodInfo* m = find_method(g, offset);
  if (!m) {
    d.registers.push_back({std::string(to_string(g)) + "." + hex(offset), value});
    return;
  }
  d.registers.push_back({m->name, value});
  for (const MethodField& f : m->fields)
    if (f.gens & uint8_t(gen)) d.fields.push_back({std::string(m->name) + "." + f.name, f.get(value)});
}

// The QMD versions whose major-version field the first dwords match.
void describe_inline_qmd(std::span<const uint32_t> w, DecodedPacket& d) {
  struct Candidate {
    QmdVersion v;
    const QmdField& major;
  };
  const Candidate candidates[] = {{QmdVersion::V03, QMD_V03_QMD_MAJOR_VERSION},
                                  {QmdVersion::V04, QMD_V04_QMD_MAJOR_VERSION},
                                  {QmdVersion::V05, QMD_V05_QMD_MAJOR_VERSION}};
  for (const Candidate& c : candidates) {
    if (w.size() < qmd_bytes(c.v) / 4 || c.major.get(w.data()) != uint32_t(c.v)) continue;
    d.fields.push_back({"QMD.VERSION", uint32_t(c.v)});
    for (const QmdField& f : kQmdFields)
      if (f.version == c.v) d.fields.push_back({std::string("QMD.") + f.name, f.get(w.data())});
    return;
  }
}

}  // namespace

const char* to_string(Group g) {
  switch (g) {
    case Group::HOST: return "HOST";
    case Group::COMPUTE: return "COMPUTE";
    case Group::COPY: return "COPY";
  }
  return "?";
}

const MethodInfo* find_method(Group g, uint16_t offset) {
  // By group and method dword: the emulated GPU looks up every method it executes.
  static const auto index = [] {
    std::vector<const MethodInfo*> ix(3 * 0x1000, nullptr);
    for (const MethodInfo& m : tables().methods) ix[size_t(m.group) * 0x1000 + m.offset / 4] = &m;
    return ix;
  }();
  if (offset % 4 || offset >= 0x4000) return nullptr;
  return index[size_t(g) * 0x1000 + offset / 4];
}

uint64_t encode_gpfifo(const GpfifoEntry& e) {
  uint32_t w[2] = {0, 0};
  auto put = [&](const WordField& f, uint64_t v) { w[f.dword] |= f.bits()(v); };
  put(GP_ENTRY_GET, e.address >> GP_ENTRY_GET.lo);
  put(GP_ENTRY_GET_HI, e.address >> 32);
  put(GP_ENTRY_LEVEL, e.subroutine);
  put(GP_ENTRY_LENGTH, e.dwords);
  put(GP_ENTRY_SYNC, e.sync);
  return uint64_t(w[1]) << 32 | w[0];
}

GpfifoEntry decode_gpfifo(uint64_t v) {
  const uint32_t w[2] = {uint32_t(v), uint32_t(v >> 32)};
  auto get = [&](const WordField& f) { return f.bits().get(w[f.dword]); };
  GpfifoEntry e;
  e.address = uint64_t(get(GP_ENTRY_GET)) << GP_ENTRY_GET.lo | uint64_t(get(GP_ENTRY_GET_HI)) << 32;
  e.subroutine = get(GP_ENTRY_LEVEL);
  e.dwords = get(GP_ENTRY_LENGTH);
  e.sync = get(GP_ENTRY_SYNC);
  return e;
}

void check_gpfifo_length(uint64_t dwords, std::string_view what) {
  desc::checked(GP_ENTRY_LENGTH, dwords, what);
}

// Value names from the description (NV_VALUE): fields are "METHOD.FIELD".
constexpr ValueName kNvValues[] = {
#define NV_VALUE(g, m, f, value, name) {"", #m "." #f, value, #name},
#define NV_METHOD(...)
#define NV_FIELD(...)
#include "nv/classes.def"
#undef NV_METHOD
#undef NV_FIELD
#undef NV_VALUE
};

std::vector<DecodedPacket> decode_push(std::span<const uint32_t> words, Gen gen,
                                       const SubchannelMap& subchannels) {
  std::vector<DecodedPacket> out;
  const uint32_t n = uint32_t(words.size());
  for (uint32_t at = 0; at < n;) {
    DecodedPacket d;
    d.offset = at;
    d.header = words[at];
    const MethodHeader h = parse_method_header(d.header);
    const uint32_t op = h.op, count = h.count, subc = h.subchannel;
    const uint16_t method = h.method;
    const Group g = subchannels[subc];
    d.fields.push_back({"SUBCHANNEL", subc});
    switch (h.framing) {
      case Framing::Nop:
        d.name = "NOP";
        break;
      case Framing::Immediate:
        d.name = std::string(to_string(g)) + " immediate";
        describe_method(g, method, count, gen, d);
        break;
      case Framing::Methods: {
        const char* kind = op == uint32_t(SecOp::IncMethod) ? "incrementing"
                           : op == uint32_t(SecOp::NonIncMethod) ? "non-incrementing"
                                                                  : "one-incrementing";
        d.name = std::string(to_string(g)) + " " + kind;
        uint32_t avail = n - at - 1, take = count <= avail ? count : avail;
        if (take < count) {
          d.ok = false;
          d.problem = "truncated: " + std::to_string(count) + " data dwords, " +
                      std::to_string(avail) + " left";
        }
        for (uint32_t i = 0; i < take; i++)
          describe_method(g, h.method_of(i), words[at + 1 + i], gen, d);
        // Inline data that is a QMD (hcq writes launches this way): its fields, nested by name.
        if (g == Group::COMPUTE && op == uint32_t(SecOp::NonIncMethod) &&
            method == COMPUTE_LOAD_INLINE_DATA)
          describe_inline_qmd(words.subspan(at + 1, take), d);
        break;
      }
      case Framing::EndSegment:
        d.name = "END_PB_SEGMENT";
        break;
      case Framing::Invalid:
        d.name = "INVALID";
        d.ok = false;
        d.problem = "method header with sec_op " + std::to_string(op) +
                    " (hcq emits incrementing, non-incrementing and immediate methods)";
        break;
    }
    // The framing's length, cut to what the words hold.
    d.dwords = std::min(h.dwords(), n - at);
    at += d.dwords;
    out.push_back(std::move(d));
  }
  for (auto& p : out) name_values(p, kNvValues);
  return out;
}

DecodedPacket decode_qmd(std::span<const uint32_t> words, QmdVersion v) {
  DecodedPacket d;
  d.name = "QMD V0" + std::to_string(int(v)) + "_00";
  d.dwords = uint32_t(words.size());
  const uint32_t need = qmd_bytes(v) / 4;
  if (words.size() < need) {
    d.ok = false;
    d.problem = "truncated: a V0" + std::to_string(int(v)) + " QMD is " + std::to_string(need) +
                " dwords, " + std::to_string(words.size()) + " given";
  }
  for (const QmdField& f : kQmdFields)
    if (f.version == v && f.dword < words.size()) d.fields.push_back({f.name, f.get(words.data())});
  return d;
}

bool parse_gen(const std::string& name, Gen& gen) {
  if (name == "ampere" || name == "sm_80" || name == "sm_86" || name == "sm_87") gen = Gen::Ampere;
  else if (name == "ada" || name == "sm_89") gen = Gen::Ada;
  else if (name == "hopper" || name == "sm_90") gen = Gen::Hopper;
  else if (name == "blackwell" || name == "sm_100" || name == "sm_120") gen = Gen::Blackwell;
  else return false;
  return true;
}

}  // namespace hcq::nv
