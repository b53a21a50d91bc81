// Seeded interleaving of an emulated GPU's queues (issue 16 item 7), shared by the AMD, NVIDIA
// and Adreno emulators.
//
// Off (the default), an engine visits its queues in a fixed round-robin order and lets each
// run up to its own number of packets per turn: the queue visited first tends to finish its
// work before the next starts, which hides a missing wait between them. On, every pass visits
// the queues in a random order and each turn runs 1 to kMaxTurnPackets packets (AMD PM4/SDMA
// packets, NVIDIA method headers, Adreno CP packets), so queues interleave at packet
// granularity in orders the fixed scheme never produces.
//
// The seed comes from HCQ_EMU_INTERLEAVE_SEED (a decimal number; unset: off), read when an
// emulated device opens. The same seed makes the same choices, but submissions reach the
// engine when the host's threads make them, so a seed reproduces a failing schedule only as
// far as the doorbells arrive at the same points (a failure found with a seed usually comes
// back with it). A pass that ran nothing gives back the numbers it drew (mark and rewind), so
// how long a queue sat blocked, which the host's timing decides, does not change the choices
// after it. Tests that turn it on print the seed with any failure.
//
// Thread safety: an Interleaver belongs to one engine thread; from_environment() may be called
// from several threads (it only reads the environment).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hcq::emu {

class Interleaver {
 public:
  static constexpr const char* kSeedVariable = "HCQ_EMU_INTERLEAVE_SEED";
  static constexpr int kMaxTurnPackets = 4;

  Interleaver() = default;  // off: the fixed order
  explicit Interleaver(uint64_t seed) : on_(true), seed_(seed), state_(seed) {}
  // From HCQ_EMU_INTERLEAVE_SEED: off when unset or empty. Throws hcq::InvalidInput naming
  // the variable for anything but a decimal number that fits 64 bits.
  static Interleaver from_environment();
  static std::optional<uint64_t> parse_seed(const std::string& text);

  bool on() const { return on_; }
  uint64_t seed() const { return seed_; }

  // This pass's visiting order: `queues` shuffled in place when on, untouched when off.
  template <class T>
  void shuffle(std::vector<T>& queues) {
    if (!on_) return;
    for (size_t i = queues.size(); i > 1; i--) std::swap(queues[i - 1], queues[below(i)]);
  }
  // How many packets the next turn runs: `fixed` when off, 1..kMaxTurnPackets when on.
  int turn(int fixed) { return on_ ? 1 + int(below(kMaxTurnPackets)) : fixed; }
  // The generator's position before a pass, and going back to it after a pass that ran
  // nothing: idle passes then leave the sequence as it was.
  uint64_t mark() const { return state_; }
  void rewind(uint64_t mark) { state_ = mark; }
  // A number in [0, n), n > 0 (splitmix64: the same sequence on every compiler, unlike the
  // standard distributions).
  uint64_t below(uint64_t n);

 private:
  bool on_ = false;
  uint64_t seed_ = 0, state_ = 0;
};

}  // namespace hcq::emu
