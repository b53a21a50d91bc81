// hcq dump: decodes captures (HCQ_CAPTURE) and raw command streams with the drivers'
// decoders, as text or JSON Lines.
#pragma once

#include <string>
#include <vector>

namespace hcq::tools {

int cmd_dump(const std::vector<std::string>& args);
// `s` with quotes and backslashes escaped, for a JSON string.
std::string json_escape(const std::string& s);

}  // namespace hcq::tools
