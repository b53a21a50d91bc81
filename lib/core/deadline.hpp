#pragma once
// Deadlines that cannot overflow. now() + milliseconds::max() overflows steady_clock's
// nanoseconds (a wait with the largest timeout then timed out at once), and so does a
// condition variable's wait_for with it. A timeout of more than a century is taken as a
// century (no limit, in practice); a negative one as none.
//
// Thread safety: pure functions.
#include <chrono>

namespace hcq {

inline constexpr std::chrono::hours kLongestWait{24 * 365 * 100};

template <class Rep, class Period>
std::chrono::steady_clock::duration bounded_wait(std::chrono::duration<Rep, Period> timeout) {
  if (timeout <= timeout.zero()) return std::chrono::steady_clock::duration::zero();
  // Compared in the coarser of the two units, so the comparison itself cannot overflow.
  if (timeout >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(kLongestWait))
    return kLongestWait;
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
}

// steady_clock::now() + timeout, with bounded_wait's rules.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout) {
  return std::chrono::steady_clock::now() + bounded_wait(timeout);
}

}  // namespace hcq
