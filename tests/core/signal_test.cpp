#include <gtest/gtest.h>

#include <thread>

#include "common/port_driver.hpp"
#include "core/deadline.hpp"
#include "core/hcq.hpp"

namespace hcq {
namespace {

TEST(Signal, WaitReturnsOnceAnotherThreadSetsTheValue) {
  auto dev = Device::open("emu:gfx1100");
  Signal s = dev->new_signal(5);
  EXPECT_EQ(s.value(), 5u);
  s.wait(5);  // already there
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.set(9);
  });
  s.wait(9, std::chrono::milliseconds(5000));
  t.join();
  EXPECT_EQ(s.value(), 9u);
}

TEST(Signal, TimeoutNamesDeviceSignalExpectedAndSeen) {
  auto dev = Device::open("emu:gfx90a");
  Signal s = dev->new_signal(3);
  auto start = std::chrono::steady_clock::now();
  try {
    s.wait(4, std::chrono::milliseconds(50));
    FAIL();
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("emu:gfx90a: signal " + std::to_string(s.id()), 0), 0u) << msg;
    EXPECT_NE(msg.find("timed out after 50 ms: waiting for value >= 4, value is 3"),
              std::string::npos)
        << msg;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// A timed-out wait says the value it saw at its deadline. The hang report that follows decodes
// the queued packets (seconds under the sanitizers on a busy machine), and work that ends
// meanwhile must not make the error read "waiting for value >= 4, value is 4": the sanitizer
// stage failed so in Adreno/Uav.AnIndirectBufferPastIbSizeIsRefused.
TEST(Signal, ATimeoutSaysTheValueSeenAtItsDeadlineNotOneReadAfterTheReport) {
  auto drv = testing_support::PortOnlyDriver::open("emu:gfx90a");
  auto* port = drv.get();
  Device dev(std::move(drv), Device::Options{});
  Signal s = dev.new_signal(3);
  port->on_hang_report = [&] { s.set(4); };  // the work ends while the report is made
  try {
    s.wait(4, std::chrono::milliseconds(20));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("timed out after 20 ms: waiting for value >= 4, value is 3"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(s.value(), 4u);
}

// Issue 33, item 13: a thread asleep in wait() for a value another host thread sets is woken
// by that set(), not by the end of its sleep: set() ends the driver's wait (KFD: SET_EVENT).
// Here the driver's waits end only so (after 30 s else, past the waits' own 10 s timeout).
TEST(Signal, AHostSetWakesAThreadAsleepInTheDriver) {
  auto drv = testing_support::PortOnlyDriver::open("emu:gfx1100");
  auto* port = drv.get();
  port->waits_end_only_on_wake = true;
  Device dev(std::move(drv), Device::Options{});
  Signal s = dev.new_signal(0);
  std::string error;
  std::thread waiter([&] {
    try {
      s.wait(1, std::chrono::seconds(10));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (port->waits.load() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(port->waits.load(), 1u);  // asleep in the driver
  s.set(1);
  waiter.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(port->wakes.load(), 1u);
  EXPECT_EQ(port->waits.load(), 1u);
}

// Two host threads ping-pong 2,000 values, each asleep in wait() when the other sets: no
// wake-up is lost (a lost one would sleep out the driver's 30 s, past the 10 s timeout).
TEST(Signal, TwoHostThreadsPingPongWithoutALostWakeUp) {
  auto drv = testing_support::PortOnlyDriver::open("emu:gfx1100");
  drv->waits_end_only_on_wake = true;
  Device dev(std::move(drv), Device::Options{});
  Signal ping = dev.new_signal(0), pong = dev.new_signal(0);
  constexpr uint64_t kRounds = 2000;
  std::string error;
  std::thread peer([&] {
    try {
      for (uint64_t i = 1; i <= kRounds; i++) {
        ping.wait(i, std::chrono::seconds(10));
        pong.set(i);
      }
    } catch (const Error& e) {
      error = e.what();
    }
  });
  for (uint64_t i = 1; i <= kRounds && error.empty(); i++) {
    ping.set(i);
    EXPECT_NO_THROW(pong.wait(i, std::chrono::seconds(10))) << "round " << i;
  }
  peer.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(pong.value(), kRounds);
}

// The largest timeout means no limit (issue 33): milliseconds::max() once overflowed the
// deadline and timed out at once ("timed out after 9223372036854775807 ms").
TEST(Signal, TheLargestTimeoutMeansNoLimit) {
  auto dev = Device::open("emu:gfx1100");
  Signal s = dev->new_signal(0);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s.set(1);
  });
  EXPECT_NO_THROW(s.wait(1, std::chrono::milliseconds::max()));
  t.join();
  EXPECT_EQ(s.value(), 1u);
  EXPECT_EQ(bounded_wait(std::chrono::milliseconds::max()), kLongestWait);
  EXPECT_EQ(bounded_wait(std::chrono::nanoseconds::max()), kLongestWait);
  EXPECT_EQ(bounded_wait(std::chrono::milliseconds(-5)), std::chrono::nanoseconds(0));
  EXPECT_EQ(bounded_wait(std::chrono::milliseconds(7)), std::chrono::milliseconds(7));
}

TEST(Signal, ValuesAreFull64Bit) {
  auto dev = Device::open("emu:gfx1100");
  Signal s = dev->new_signal((uint64_t(1) << 32) + 1);
  s.wait(uint64_t(1) << 32);
  EXPECT_THROW(s.wait((uint64_t(1) << 32) + 2, std::chrono::milliseconds(10)), TimeoutError);
}

TEST(Signal, SlotsAreReusedAfterRelease) {
  auto dev = Device::open("emu:gfx1100");
  uint32_t id;
  {
    Signal a = dev->new_signal();
    id = a.id();
  }
  Signal b = dev->new_signal();
  EXPECT_EQ(b.id(), id);
  std::vector<Signal> many;
  for (int i = 0; i < 600; i++) many.push_back(dev->new_signal(uint64_t(i)));  // > one page
  for (int i = 0; i < 600; i++) EXPECT_EQ(many[size_t(i)].value(), uint64_t(i));
}

TEST(Timeline, StartsAtTheConfiguredValue) {
  Device::Options opt;
  opt.timeline_start = (uint64_t(1) << 31) - 1;
  auto dev = Device::open("emu:gfx1100", opt);
  auto& tl = dev->timeline();
  EXPECT_EQ(tl.last(), (uint64_t(1) << 31) - 1);
  EXPECT_EQ(tl.signal().value(), tl.last());
  dev->synchronize();
}

}  // namespace
}  // namespace hcq
