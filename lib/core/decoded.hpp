// A decoded command packet, vendor-neutral: each driver's decoder produces these from its
// packet descriptions, and the dump tool and hang reports print them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hcq {

struct DecodedPacket {
  uint32_t offset = 0;  // in dwords from the start of the stream
  uint32_t dwords = 0;  // how many the packet spans (at least 1)
  uint32_t header = 0;
  std::string name;     // "RELEASE_MEM"; "UNKNOWN" / "INVALID" / "TRUNCATED" when not decoded
  bool ok = true;
  std::string problem;  // what could not be decoded, when !ok
  std::vector<std::pair<std::string, uint64_t>> fields;
  // Registers (or methods) the packet writes: name (or address) and value.
  std::vector<std::pair<std::string, uint32_t>> registers;
  // A command buffer the packet runs: GPU address and size in dwords.
  uint64_t ib_address = 0;
  uint32_t ib_dwords = 0;
};

// One line: byte offset, raw header, name, fields and registers by name, and any problem.
std::string to_text(const DecodedPacket& p);

}  // namespace hcq
