#include "common/bitfield.hpp"

#include "core/error.hpp"

#include <string>

namespace hcq::desc {

void throw_does_not_fit(std::string_view what, std::string_view field, uint64_t v,
                        unsigned width) {
  std::string m(what);
  m.append(".").append(field).append(": ").append(std::to_string(v));
  m.append(" does not fit in ").append(std::to_string(width)).append(" bits (at most ");
  m.append(std::to_string(uint64_t(low_mask(width)))).append(")");
  throw InvalidInput(m);
}

}  // namespace hcq::desc
