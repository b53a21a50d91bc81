// Numbers on the hcq command line (run --size, reg offsets and values, --bar): one strict
// parser, so that what runs is what was typed.
#pragma once

#include <cstdint>
#include <string_view>

namespace hcq::tools {

// Decimal ("4096") or hex with 0x/0X ("0x1000"); no sign, no spaces, nothing after the
// digits. A leading 0 before more digits ("0140") is refused: strtoul reads it as octal, a
// person often means decimal or forgot the x, so the user says which. Throws InvalidInput
// naming `what` and the text: not a number, or above `max` ("--size: '5000000000' is out of
// range (at most 4294967295)", the limit in hex when the text is hex).
uint64_t parse_uint(std::string_view text, uint64_t max, const char* what);

bool has_hex_prefix(std::string_view text);

}  // namespace hcq::tools
