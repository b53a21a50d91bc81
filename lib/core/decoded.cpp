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

std::string indirect_buffer_text(uint64_t va, size_t dwords, std::span<const DecodedPacket> packets,
                                 const uint32_t* at, const std::string& indent) {
  constexpr size_t kAround = 8;  // packets shown either side of the current one
  std::string out = indent + "indirect buffer " + hex(va) + ", " + std::to_string(dwords) + " dwords";
  size_t current = packets.size();
  if (at)
    for (size_t i = 0; i < packets.size(); i++)
      if (*at >= packets[i].offset && *at < packets[i].offset + packets[i].dwords) current = i;
  if (current == packets.size()) {
    out += ": position inside the indirect buffer unknown; its first packets:";
    for (size_t i = 0; i < packets.size() && i < 2 * kAround + 1; i++)
      out.append("\n").append(indent).append("  ?       ").append(to_text(packets[i]));
    return out;
  }
  out += ", the engine at dword " + std::to_string(*at) + ":";
  for (size_t i = current > kAround ? current - kAround : 0;
       i < packets.size() && i <= current + kAround; i++) {
    const char* mark = i < current ? "done   " : i == current ? "HERE > " : "pending";
    out.append("\n").append(indent).append("  ").append(mark).append(" ").append(to_text(packets[i]));
  }
  return out;
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
