// The KFD driver opens the targets drivers/amd/targets.cpp lists and refuses any other
// gfx_target_version by name, listing the ones it knows.
#include <gtest/gtest.h>

#include "amd/emu/kfd.hpp"
#include "amd/kfd_driver.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"

namespace hcq::amd {
namespace {

// gfx1010 (RDNA1, KFD 100100) has gfx10 forms but no row: hcq does not guess its packets.
TEST(KfdDriver, ATargetWithoutARowIsRefusedByName) {
  Target navi10 = *find_target("gfx1030");
  navi10.name = "gfx1010";
  navi10.gfx_target_version = 100100;
  try {
    open_kfd_device(emu::make_emulated_system(navi10), 0, "amd:0");
    FAIL() << "opened a GPU of a target hcq has no row for";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "amd:0: GPU target gfx?100100 (gfx_target_version 100100) is not one hcq emits "
                 "packets for (gfx90a, gfx942, gfx1030, gfx1100, gfx1201)");
  }
}

}  // namespace
}  // namespace hcq::amd
