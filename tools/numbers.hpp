// Numbers on the hcq command line (run --size, reg offsets and values, --bar, --count,
// --submissions): one strict parser, so that what runs is what was typed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace hcq::tools {

// Decimal ("4096") or hex with 0x/0X ("0x1000"); no sign, no spaces, nothing after the
// digits. A leading 0 before more digits ("0140") is refused: strtoul reads it as octal, a
// person often means decimal or forgot the x, so the user says which. Throws InvalidInput
// naming `what` and the text: not a number, or above `max` ("--size: '5000000000' is out of
// range (at most 4294967295)", the limit in hex when the text is hex).
uint64_t parse_uint(std::string_view text, uint64_t max, const char* what);

// The same check as a CLI11 transform for an option's value: the text is refused with
// parse_uint's reason (CLI11 puts the option's name before it), or rewritten in decimal for
// CLI11 to convert. `min` refuses a smaller value ("'0' is out of range (at least 1)").
CLI::Validator uint_option(uint64_t min, uint64_t max);

bool has_hex_prefix(std::string_view text);

// The median of a benchmark's rounds (usb bench, rdma bench).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace hcq::tools
