#include "numbers.hpp"

#include <charconv>
#include <string>

#include "core/error.hpp"

namespace hcq::tools {
namespace {

// Why `text` is not a number up to `max` ("'0140' has a leading 0 ..."); empty when it is one,
// and then `v` holds it.
std::string number_problem(std::string_view text, uint64_t max, uint64_t& v) {
  const std::string seen = "'" + std::string(text) + "'";
  const bool hex_text = has_hex_prefix(text);
  const std::string_view digits = hex_text ? text.substr(2) : text;
  v = 0;
  // from_chars takes no sign, space or prefix for an unsigned type: only the digits.
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v,
                                   hex_text ? 16 : 10);
  if (digits.empty() || end != digits.data() + digits.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range))
    return seen + " is not a number (decimal, or hex with 0x)";
  if (!hex_text && digits.size() > 1 && digits[0] == '0') {
    const size_t nz = digits.find_first_not_of('0');
    std::string d(digits.substr(nz == std::string_view::npos ? digits.size() - 1 : nz));
    return seen + " has a leading 0 (octal is not accepted: write " + d + " or 0x" + d + ")";
  }
  if (ec == std::errc::result_out_of_range || v > max)
    return seen + " is out of range (at most " + (hex_text ? hex(max) : std::to_string(max)) +
           ")";
  return "";
}

}  // namespace

bool has_hex_prefix(std::string_view text) {
  return text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
}

uint64_t parse_uint(std::string_view text, uint64_t max, const char* what) {
  uint64_t v = 0;
  const std::string problem = number_problem(text, max, v);
  if (!problem.empty()) throw InvalidInput(std::string(what) + ": " + problem);
  return v;
}

CLI::Validator uint_option(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        uint64_t v = 0;
        std::string problem = number_problem(text, max, v);
        if (problem.empty() && v < min)
          problem = "'" + text + "' is out of range (at least " + std::to_string(min) + ")";
        if (problem.empty()) text = std::to_string(v);
        return problem;
      },
      "", "uint");
}

}  // namespace hcq::tools
