#include "core/decoded.hpp"

#include <cstdio>

namespace hcq {

std::string to_text(const DecodedPacket& p) {
  char head[48];
  std::snprintf(head, sizeof head, "0x%04x  0x%08x  ", p.offset * 4, p.header);
  auto value = [](uint64_t v) {
    if (v < 10) return std::to_string(v);
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  std::string line = head + p.name;
  for (auto& [name, v] : p.fields) line += "  " + name + "=" + value(v);
  for (auto& [name, v] : p.registers) line += "  " + name + "=" + value(v);
  if (!p.ok) line += "  !! " + p.problem;
  return line;
}

}  // namespace hcq
