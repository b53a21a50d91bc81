// A command line that asks for something hcq cannot parse (found after CLI11 parsed it, where
// the check needs more than one option or the device): main() reports it like CLI11's own
// errors, with the usage hint and exit status 2; other errors exit 1.
#pragma once

#include "core/error.hpp"

namespace hcq::tools {

class UsageError : public InvalidInput {
 public:
  using InvalidInput::InvalidInput;
};

}  // namespace hcq::tools
