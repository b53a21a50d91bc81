// Device ownership through the AM driver's open paths (os/device_owner.hpp): emu:gfx1100_am
// (claimed before the emulated VFIO device is opened) and emu:gfx1100_usb (before the bridge
// is). Two opens share one emulated scope here, as two processes of one machine would share
// the real one; without a scope each emulated machine is its own and they never meet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "amd/am/am_driver.hpp"
#include "amd/factory.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/device_owner.hpp"

namespace hcq::amd {
namespace {

using testing_support::error_of;

class AmOwnership : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { os::set_emulated_scope("am-owner-" + std::to_string(::getpid())); }
  void TearDown() override { os::set_emulated_scope(""); }
};

TEST_P(AmOwnership, ASecondOpenNamesTheHolderUntilTheFirstCloses) {
  const std::string name = GetParam();
  std::unique_ptr<am::AmDriver> first = open_am_driver(name);
  ASSERT_TRUE(first);
  const std::optional<os::DeviceHolder> h = device_holder(name);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->pid, ::getpid());
  EXPECT_EQ(h->command, os::own_command_line());
  EXPECT_EQ(h->device, name);
  EXPECT_EQ(error_of([&] { open_am_driver(name); }), name + ": in use by " + h->describe());
  first.reset();
  EXPECT_FALSE(device_holder(name));
  EXPECT_TRUE(open_am_driver(name));
}

TEST_P(AmOwnership, EmulatedMachinesWithoutAScopeNeverMeet) {
  os::set_emulated_scope("");
  std::unique_ptr<am::AmDriver> a = open_am_driver(GetParam());
  std::unique_ptr<am::AmDriver> b = open_am_driver(GetParam());
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(device_holder(GetParam()));  // neither is in the scope ls looks at
}

INSTANTIATE_TEST_SUITE_P(Emulated, AmOwnership,
                         ::testing::Values("emu:gfx1100_am", "emu:gfx1100_usb"),
                         [](const auto& info) { return std::string(info.param).substr(4); });

}  // namespace
}  // namespace hcq::amd
