// Decoding PM4 and SDMA streams with the same descriptions the encoders and the emulated GPU
// use (pm4.def, sdma.def, regs.def). The decoder only produces structured packets; the dump
// tool and the hang reports print them (text or JSON).
//
// It survives anything: an unknown opcode is skipped by its header's length where the format
// has one (PM4 type 3), type-2 filler dwords are skipped, and anything else is reported and
// passed one dword at a time until a packet decodes again. It never reads past the input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amd/packets.hpp"

namespace hcq::amd {

struct DecodedPacket {
  uint32_t offset = 0;  // in dwords from the start of the stream
  uint32_t dwords = 0;  // how many the packet spans (at least 1)
  uint32_t header = 0;
  std::string name;     // "RELEASE_MEM"; "UNKNOWN" / "INVALID" / "TRUNCATED" when not decoded
  bool ok = true;
  std::string problem;  // what could not be decoded, when !ok
  std::vector<std::pair<std::string, uint64_t>> fields;
  // Registers a SET_SH_REG / SET_UCONFIG_REG writes: name (or its address) and value.
  std::vector<std::pair<std::string, uint32_t>> registers;
  // An indirect buffer the packet runs: GPU address and size in dwords.
  uint64_t ib_address = 0;
  uint32_t ib_dwords = 0;
};

std::vector<DecodedPacket> decode_pm4(std::span<const uint32_t> words, Gen gen);
std::vector<DecodedPacket> decode_sdma(std::span<const uint32_t> words, Gen gen);

// One line: byte offset, raw header, name, fields and registers by name, and any problem.
std::string to_text(const DecodedPacket& p);

// "gfx9" / "gfx11" / "gfx12", or a target name ("gfx1100"); false when unknown.
bool parse_gen(const std::string& name, Gen& gen);

}  // namespace hcq::amd
