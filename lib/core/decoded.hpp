// A decoded command packet, vendor-neutral: each driver's decoder produces these from its
// packet descriptions, and the dump tool and hang reports print them.
#pragma once

#include <cstdint>
#include <span>
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
  // Names of field values that have one: {"EVENT_TYPE", "CACHE_FLUSH_AND_INV_TS_EVENT"}.
  std::vector<std::pair<std::string, std::string>> value_names;
};

// A named value of a packet's field, as a packet family's description lists it. `packet`
// empty matches any packet (NVIDIA fields are named "METHOD.FIELD" already).
struct ValueName {
  const char* packet;
  const char* field;
  uint32_t value;
  const char* name;
};
// The lines a hang report shows for a command buffer a queue runs (at `va`, `dwords` long,
// decoded into `packets`): a title line, then the packets around dword `at` (where the engine
// is) marked "done   ", "HERE > " or "pending", each line starting with `indent`. Without a
// position, its first packets under the line "position inside the indirect buffer unknown".
std::string indirect_buffer_text(uint64_t va, size_t dwords, std::span<const DecodedPacket> packets,
                                 const uint32_t* at, const std::string& indent);

// Adds the names `table` has for `p`'s field values.
void name_values(DecodedPacket& p, std::span<const ValueName> table);

// One line: byte offset, raw header, name, fields and registers by name, and any problem.
std::string to_text(const DecodedPacket& p);

}  // namespace hcq
