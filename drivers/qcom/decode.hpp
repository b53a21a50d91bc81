// Decoding Adreno CP streams (ring buffers and IBs) with the same descriptions the encoder and the
// emulated GPU use (cp.def, regs.def). The decoder only produces structured packets; the dump tool
// and the hang reports print them (text or JSON).
//
// A type-4 packet becomes one "PKT4" packet: REG is the first dword address, `registers` names
// each register written (an unknown one by its address) and `fields` holds their described fields
// as "REG.FIELD". A type-7 packet becomes its CP_* name and fields.
//
// It survives anything, the way freedreno's cffdec reads streams: a header whose parity bits do
// not check out, or that is no header at all, is reported and passed one dword at a time until a
// packet decodes again; a type-7 header with good parity but an opcode unknown on the generation
// is skipped by its length; type-2 filler (0x80000000) is one dword; a type-0 header (a pre-a5xx
// register write) is reported and skipped by its length. It never reads past the input.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/decoded.hpp"
#include "qcom/packets.hpp"

namespace hcq::qcom {

using hcq::DecodedPacket;

std::vector<DecodedPacket> decode_cp(std::span<const uint32_t> words, Gen gen);

// UAV (and texture) descriptors laid one after another, as SP_CS_IBO points at them: one
// "TEX_MEMOBJ" per 16 dwords with the fields of descriptors.def (the same on a6xx and a7xx)
// and BASE, the address BASE_LO / BASE_HI give; a last partial descriptor is reported.
std::vector<DecodedPacket> decode_descriptors(std::span<const uint32_t> words);

}  // namespace hcq::qcom
