#include "amd/am/regs.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <unordered_map>

#include "amd/am/discovery.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

constexpr std::array<std::string_view, 6> kFiles = {"gc_11_0_0",   "mmhub_3_0_0",  "nbio_4_3_0",
                                                     "mp_13_0_0",    "osssys_6_0_0", "hdp_6_0_0"};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A compile-time Reg as one number: what describe() looks registers up by.
uint64_t reg_key(const Reg& r) {
  return uint64_t(r.ip) << 40 | uint64_t(r.base_idx) << 32 | r.offset;
}

struct Table {
  std::vector<RegField> fields;
  std::vector<RegDesc> regs;
  std::unordered_map<std::string, size_t> by_name;
  // By register (the first described where two share an address): every RegisterIo access
  // through a Reg comes here, so no linear search over the ~670 registers.
  std::unordered_map<uint64_t, size_t> by_reg;
};

Table build() {
  Table t;
  std::vector<size_t> first_field;  // per register, its first index in t.fields
  std::string_view file;
  auto add_reg = [&](Ip ip, std::string_view name, uint8_t seg, uint32_t off) {
    if (!t.by_name.emplace(std::string(name), t.regs.size()).second)
      throw std::logic_error("AM register " + std::string(name) + " described twice");
    t.regs.push_back({name, file, Reg{ip, seg, off}, {}});
    first_field.push_back(t.fields.size());
  };
  auto add_field = [&](std::string_view reg, std::string_view name, uint8_t lo, uint8_t width) {
    // A field follows its register in the .def.
    if (t.regs.empty() || t.regs.back().name != reg || lo + width > 32 || !width)
      throw std::logic_error("AM field " + std::string(reg) + "." + std::string(name) +
                             " does not follow its register or leaves 32 bits");
    t.fields.push_back({name, lo, width});
  };
  // A register with the fields of one described before it (SDMA1's, by its SDMA0 twin).
  auto add_like = [&](Ip ip, std::string_view name, uint8_t seg, uint32_t off,
                      std::string_view twin) {
    const auto it = t.by_name.find(std::string(twin));
    if (it == t.by_name.end())
      throw std::logic_error("AM register " + std::string(name) + ": its twin " +
                             std::string(twin) + " is not described before it");
    add_reg(ip, name, seg, off);
    const size_t first = first_field[it->second], end = first_field[it->second + 1];
    for (size_t f = first; f < end; ++f) {
      const RegField copy = t.fields[f];  // push_back may move the vector
      t.fields.push_back(copy);
    }
  };
#define AM_REG(ip, name, seg, off) add_reg(Ip::ip, #name, seg, off);
#define AM_ABS_REG(ip, name, dword) add_reg(Ip::ip, #name, kAbsolute, dword);
#define AM_FIELD(reg, field, lo, width) add_field(#reg, #field, lo, width);
#define AM_REG_LIKE(ip, name, seg, off, twin) add_like(Ip::ip, #name, seg, off, #twin);
  file = kFiles[0];
#include "amd/am/gc_11_0_0.def"
  file = kFiles[1];
#include "amd/am/mmhub_3_0_0.def"
  file = kFiles[2];
#include "amd/am/nbio_4_3_0.def"
  file = kFiles[3];
#include "amd/am/mp_13_0_0.def"
  file = kFiles[4];
#include "amd/am/osssys_6_0_0.def"
  file = kFiles[5];
#include "amd/am/hdp_6_0_0.def"
#undef AM_REG
#undef AM_ABS_REG
#undef AM_FIELD
#undef AM_REG_LIKE
  // The field vector no longer grows: point each register at its fields.
  for (size_t i = 0; i < t.regs.size(); ++i) {
    const size_t end = i + 1 < t.regs.size() ? first_field[i + 1] : t.fields.size();
    t.regs[i].fields = std::span<const RegField>(t.fields.data() + first_field[i], end - first_field[i]);
    t.by_reg.emplace(reg_key(t.regs[i].reg), i);
  }
  return t;
}

const Table& table() {
  static const Table t = build();
  return t;
}

}  // namespace

std::string_view ip_name(Ip ip) {
  constexpr std::array<std::string_view, kIpCount> names = {"GC",  "MMHUB",  "NBIO", "MP0",
                                                            "MP1", "OSSSYS", "HDP"};
  return names[size_t(ip)];
}

const RegField& RegDesc::field(std::string_view want) const {
  const std::string u = upper(want);
  for (const RegField& f : fields)
    if (f.name == u) return f;
  throw InvalidInput(std::string(name) + " (" + std::string(file) + ") has no field " + std::string(want));
}

uint64_t absolute_dword(const RegDesc& reference, const IpSegmentBases& bases) {
  const RegDesc* found = &reference;
  if (std::span<const RegDesc> t = bases.tables[size_t(reference.reg.ip)]; !t.empty()) {
    found = nullptr;
    for (const RegDesc& d : t)
      if (d.name == reference.name) found = &d;
    if (!found)
      throw InvalidInput(std::string(reference.name) + ": this GPU's " +
                         std::string(ip_name(reference.reg.ip)) + " register table (" +
                         std::string(t.front().file) + ") has no such register");
  }
  const RegDesc& r = *found;
  if (r.reg.base_idx == kAbsolute) return r.reg.offset;
  const std::vector<uint32_t>& segs = bases[r.reg.ip];
  if (r.reg.base_idx >= segs.size())
    throw InvalidInput(std::string(r.name) + " (" + std::string(r.file) + "): " +
                       std::string(ip_name(r.reg.ip)) + " has no segment " +
                       std::to_string(r.reg.base_idx) + " (IP discovery gave " +
                       std::to_string(segs.size()) + (segs.size() == 1 ? " base)" : " bases)"));
  return uint64_t(segs[r.reg.base_idx]) + r.reg.offset;
}

std::span<const RegDesc> registers() { return table().regs; }

std::span<const std::string_view> def_files() { return kFiles; }

const RegDesc& find_register(std::string_view name) {
  const Table& t = table();
  std::string key = upper(name);
  if (key.starts_with("REG") && !t.by_name.count(key)) key.erase(0, 3);
  if (auto it = t.by_name.find(key); it != t.by_name.end()) return t.regs[it->second];
  std::string files;
  for (std::string_view f : kFiles) files += (files.empty() ? "" : ", ") + std::string(f);
  throw InvalidInput("unknown AM register " + std::string(name) + " (" + files + " describe " +
                     std::to_string(t.regs.size()) + ")");
}

const RegDesc& describe(const Reg& r) {
  const Table& t = table();
  if (auto it = t.by_reg.find(reg_key(r)); it != t.by_reg.end()) return t.regs[it->second];
  throw InvalidInput("no AM register description for " + std::string(ip_name(r.ip)) +
                     " segment " + std::to_string(r.base_idx) + " offset " + hex(r.offset));
}

IpSegmentBases segment_bases(const Discovery& d) {
  // Each Ip's hardware id (Linux soc15_hw_ip.h, as discovery.hpp names them).
  static constexpr std::pair<Ip, uint16_t> kHwIds[] = {
      {Ip::GC, hw_id::GC},         {Ip::MMHUB, hw_id::MMHUB},   {Ip::NBIO, hw_id::NBIO},
      {Ip::MP0, hw_id::MP0},       {Ip::MP1, hw_id::MP1},       {Ip::OSSSYS, hw_id::OSSSYS},
      {Ip::HDP, hw_id::HDP}};
  static_assert(std::size(kHwIds) == kIpCount);
  IpSegmentBases out;
  for (const auto& [ip, id] : kHwIds) {
    for (uint64_t base : d.base_addresses(id)) {
      if (base > UINT32_MAX)
        throw InvalidInput("IP discovery table: " + std::string(ip_name(ip)) + " segment base " +
                           hex(base) + " does not fit the 32-bit register offsets");
      out[ip].push_back(uint32_t(base));
    }
  }
  return out;
}

}  // namespace hcq::amd::am
