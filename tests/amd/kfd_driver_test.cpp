// The KFD driver opens the targets drivers/amd/targets.cpp lists and refuses any other
// gfx_target_version by name, listing the ones it knows.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "amd/kfd/kfd_dmabuf.hpp"

#include "amd/emu/kfd.hpp"
#include "amd/kfd/kfd_driver.hpp"
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

// The dma-buf ioctls as Linux's uapi kfd_ioctl.h encodes them: 'K' (0x4b), read-write, the
// argument's size; the export's struct (KFD 1.12) as it lays out there.
TEST(KfdDriver, DmabufIoctlsEncodeAsTheUapiHeaderSays) {
  EXPECT_EQ(sizeof(kfd_ioctl_export_dmabuf_args), 16u);
  EXPECT_EQ(offsetof(kfd_ioctl_export_dmabuf_args, flags), 8u);
  EXPECT_EQ(offsetof(kfd_ioctl_export_dmabuf_args, dmabuf_fd), 12u);
  EXPECT_EQ(AMDKFD_IOC_EXPORT_DMABUF, 0xC0104B24u);
  EXPECT_EQ(AMDKFD_IOC_IMPORT_DMABUF, 0xC0184B1Du);
  EXPECT_EQ(AMDKFD_IOC_GET_DMABUF_INFO, 0xC0204B1Cu);
}

// The emulated KFD answers them as amdkfd does: an unknown handle or flags other than the
// new fd's are EINVAL, an import before the VM is acquired EINVAL.
TEST(KfdDriver, TheEmulatedKfdRefusesBadDmabufRequestsAsKfdDoes) {
  auto k = emu::make_emulated_system(*find_target("gfx1100"));
  const int fd = k->open("/dev/kfd", O_RDWR);
  ASSERT_GE(fd, 0);
  kfd_ioctl_export_dmabuf_args e{};
  e.handle = 12345;
  e.flags = O_CLOEXEC;
  EXPECT_EQ(k->ioctl(fd, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL);
  e.flags = O_APPEND;
  EXPECT_EQ(k->ioctl(fd, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL);
  kfd_ioctl_import_dmabuf_args im{};
  im.dmabuf_fd = 0;
  EXPECT_EQ(k->ioctl(fd, AMDKFD_IOC_IMPORT_DMABUF, &im), -EINVAL);
  k->close(fd);
}

}  // namespace
}  // namespace hcq::amd
