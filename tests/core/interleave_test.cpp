// emu::Interleaver, the emulated GPUs' seeded queue order: off it changes nothing; on, the
// same seed makes the same choices, every order and turn length comes up, and a bad
// HCQ_EMU_INTERLEAVE_SEED is an exact error.
#include "emu/interleave.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "common/interleave.hpp"
#include "core/error.hpp"

namespace hcq::emu {
namespace {

TEST(Interleaver, OffKeepsTheFixedOrderAndTurn) {
  Interleaver off;
  std::vector<int> q{0, 1, 2, 3};
  off.shuffle(q);
  EXPECT_EQ(q, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(off.turn(256), 256);
  EXPECT_FALSE(off.on());
}

TEST(Interleaver, OneSeedMakesOneSequenceAndEveryOrderComesUp) {
  Interleaver a(42), b(42), c(43);
  std::set<std::vector<int>> orders;
  std::set<int> turns;
  bool differs = false;
  for (int i = 0; i < 200; i++) {
    std::vector<int> qa{0, 1, 2}, qb{0, 1, 2}, qc{0, 1, 2};
    a.shuffle(qa);
    b.shuffle(qb);
    c.shuffle(qc);
    EXPECT_EQ(qa, qb);
    differs |= qa != qc;
    orders.insert(qa);
    const int t = a.turn(256);
    EXPECT_EQ(t, b.turn(256));
    c.turn(256);
    turns.insert(t);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(orders.size(), 6u);  // all 3! orders
  EXPECT_EQ(turns, (std::set<int>{1, 2, 3, 4}));
}

// An engine marks the generator before a pass and rewinds after one that ran nothing: however
// many idle passes come between, the choices after them are those of a run without them.
TEST(Interleaver, IdlePassesThatRewindLeaveTheSequenceAsItWas) {
  Interleaver busy(9), waited(9);
  std::vector<int> want, got;
  for (int pass = 0; pass < 50; pass++) {
    std::vector<int> q{0, 1, 2, 3};
    busy.shuffle(q);
    want.insert(want.end(), q.begin(), q.end());
    want.push_back(busy.turn(256));
    for (int idle = 0; idle < pass % 5; idle++) {  // a queue blocked for a while
      const uint64_t mark = waited.mark();
      std::vector<int> unused{0, 1, 2, 3};
      waited.shuffle(unused);
      waited.turn(256);
      waited.rewind(mark);
    }
    std::vector<int> r{0, 1, 2, 3};
    waited.shuffle(r);
    got.insert(got.end(), r.begin(), r.end());
    got.push_back(waited.turn(256));
  }
  EXPECT_EQ(got, want);
}

TEST(Interleaver, TheSeedComesFromTheEnvironmentAndABadOneIsAnExactError) {
  EXPECT_EQ(Interleaver::parse_seed("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Interleaver::parse_seed("18446744073709551616"), std::nullopt);
  EXPECT_EQ(Interleaver::parse_seed("0x10"), std::nullopt);
  EXPECT_EQ(Interleaver::parse_seed(""), std::nullopt);
  {
    testing_support::InterleavedQueues scoped(7, /*forced=*/true);
    EXPECT_EQ(Interleaver::from_environment().seed(), 7u);
    EXPECT_TRUE(Interleaver::from_environment().on());
    EXPECT_EQ(scoped.trace(), "HCQ_EMU_INTERLEAVE_SEED=7");
    setenv(Interleaver::kSeedVariable, "-1", 1);
    try {
      Interleaver::from_environment();
      FAIL() << "accepted -1";
    } catch (const InvalidInput& e) {
      EXPECT_STREQ(e.what(),
                   "HCQ_EMU_INTERLEAVE_SEED='-1' is not a decimal number below 2^64 (the "
                   "emulated GPUs' queue interleaving seed)");
    }
  }
  if (!std::getenv(Interleaver::kSeedVariable)) {  // restored: unset again
    EXPECT_FALSE(Interleaver::from_environment().on());
  }
}

}  // namespace
}  // namespace hcq::emu
