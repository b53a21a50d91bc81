// The JSON hcq's commands write (ls, info, run, pci, dump's JSON Lines), through nlohmann-json:
// strings escaped as RFC 8259 says, control characters included, keys in the order written.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hcq::tools {

using Json = nlohmann::ordered_json;

// One line of JSON, without the newline. Bytes that are not UTF-8 (a hostile capture's device
// name) become U+FFFD instead of an exception: the line stays valid JSON.
inline std::string json_line(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace hcq::tools
