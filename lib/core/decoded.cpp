#include "core/decoded.hpp"

#include <cstdio>

#include "core/error.hpp"

namespace hcq {

std::string to_text(const DecodedPacket& p) {
  char head[48];
  std::snprintf(head, sizeof head, "0x%04x  0x%08x  ", p.offset * 4, p.header);
  auto value = [](uint64_t v) { return v < 10 ? std::to_string(v) : hex(v); };
  std::string line = head + p.name;
  for (auto& [name, v] : p.fields) {
    line += "  " + name + "=" + value(v);
    for (auto& [field, meaning] : p.value_names)
      if (field == name) line += "(" + meaning + ")";
  }
  for (auto& [name, v] : p.registers) line += "  " + name + "=" + value(v);
  if (!p.ok) line += "  !! " + p.problem;
  return line;
}

void name_values(DecodedPacket& p, std::span<const ValueName> table) {
  for (auto& [field, v] : p.fields)
    for (const ValueName& e : table)
      if (e.value == v && field == e.field && (!*e.packet || p.name == e.packet)) {
        p.value_names.push_back({field, e.name});
        break;
      }
}

}  // namespace hcq
