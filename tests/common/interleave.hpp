// Tests that run the emulated GPUs with their queues interleaved at random (lib/emu/
// interleave.hpp): HCQ_EMU_INTERLEAVE_SEED is set while an object lives, so devices opened
// meanwhile interleave; trace() names the seed for a failure's message. Not thread-safe: set
// it on the test's thread while no other thread reads the environment.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "emu/interleave.hpp"

namespace hcq::testing_support {

class InterleavedQueues {
 public:
  // `seed`, unless the environment already names one (a failure being reproduced) and
  // `forced` is false.
  explicit InterleavedQueues(uint64_t seed, bool forced = false) {
    const char* var = hcq::emu::Interleaver::kSeedVariable;
    if (const char* old = std::getenv(var)) before_ = old;
    seed_ = seed;
    if (!forced && before_)
      if (auto given = hcq::emu::Interleaver::parse_seed(*before_)) seed_ = *given;
    setenv(var, std::to_string(seed_).c_str(), 1);
  }
  ~InterleavedQueues() {
    const char* var = hcq::emu::Interleaver::kSeedVariable;
    if (before_)
      setenv(var, before_->c_str(), 1);
    else
      unsetenv(var);
  }
  InterleavedQueues(const InterleavedQueues&) = delete;
  InterleavedQueues& operator=(const InterleavedQueues&) = delete;
  uint64_t seed() const { return seed_; }
  // "HCQ_EMU_INTERLEAVE_SEED=N": set it so to run a failure again.
  std::string trace() const {
    return std::string(hcq::emu::Interleaver::kSeedVariable) + "=" + std::to_string(seed_);
  }

 private:
  std::optional<std::string> before_;
  uint64_t seed_ = 0;
};

}  // namespace hcq::testing_support
