#include "core/error.hpp"

#include <cstdio>
#include <cstring>

namespace hcq {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

OsError::OsError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")"), err_(err) {}

}  // namespace hcq
