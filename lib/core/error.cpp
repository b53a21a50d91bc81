#include "core/error.hpp"

#include <cstring>

namespace hcq {

OsError::OsError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")"), err_(err) {}

}  // namespace hcq
