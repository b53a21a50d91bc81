// The exact message a call fails with, for tests that assert it: the what() of the exception
// of type E (by default hcq::InvalidInput) that `f` throws, or "no error" when it returns.
// Any other exception passes through and fails the test by itself.
#pragma once

#include <string>
#include <utility>

#include "core/error.hpp"

namespace hcq::testing_support {

template <class E = InvalidInput, class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace hcq::testing_support
