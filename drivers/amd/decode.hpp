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
#include "core/decoded.hpp"

namespace hcq::amd {

using hcq::DecodedPacket;

std::vector<DecodedPacket> decode_pm4(std::span<const uint32_t> words, Gen gen);
std::vector<DecodedPacket> decode_sdma(std::span<const uint32_t> words, Gen gen);

// "gfx9" / "gfx10" (gfx10.3) / "gfx11" / "gfx12", or a target name ("gfx1100"); false when unknown.
bool parse_gen(const std::string& name, Gen& gen);

}  // namespace hcq::amd
