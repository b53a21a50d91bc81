// The msm DRM interface: ioctl numbers against values worked out by hand from Linux's
// include/uapi/drm/msm_drm.h (DRM_IOWR(nr, size) = 3 << 30 | size << 16 | 'd' << 8 | nr,
// DRM_IOW = 1 << 30 | ..., DRM_COMMAND_BASE 0x40), and the emulated msm DRM driver's answers
// to bad requests (the errnos drm/msm gives).
#include "qcom/msm_abi.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>

#include "core/error.hpp"
#include "qcom/emu/kgsl.hpp"
#include "qcom/emu/msm.hpp"
#include "qcom/kmd.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom::msm {
namespace {

TEST(MsmAbi, IoctlNumbers) {
  // GET_PARAM: pipe, param 8 + value 8 + len, pad 8 = 24 (0x18), nr 0x40: 0xC0186440.
  EXPECT_EQ(IOCTL_MSM_GET_PARAM, 0xC0186440ul);
  // GEM_NEW: size 8 + flags, handle 8 = 16, nr 0x42: 0xC0106442.
  EXPECT_EQ(IOCTL_MSM_GEM_NEW, 0xC0106442ul);
  // GEM_INFO: handle, info 8 + value 8 + len, pad 8 = 24, nr 0x43: 0xC0186443.
  EXPECT_EQ(IOCTL_MSM_GEM_INFO, 0xC0186443ul);
  // GEM_SUBMIT: 4 x u32 16 + bos, cmds 16 + fence_fd, queueid 8 + in/out syncobjs 16 +
  // nr_in, nr_out, syncobj_stride, bos_stride 16 = 72 (0x48), nr 0x46: 0xC0486446.
  EXPECT_EQ(IOCTL_MSM_GEM_SUBMIT, 0xC0486446ul);
  // WAIT_FENCE (IOW): fence, flags 8 + timespec 16 + queueid 4 = 28, aligned to 32 (0x20),
  // nr 0x47: 0x40206447.
  EXPECT_EQ(IOCTL_MSM_WAIT_FENCE, 0x40206447ul);
  // SUBMITQUEUE_NEW: flags, prio, id = 12 (0xc), nr 0x4a: 0xC00C644A.
  EXPECT_EQ(IOCTL_MSM_SUBMITQUEUE_NEW, 0xC00C644Aul);
  // SUBMITQUEUE_CLOSE (IOW): u32 id, nr 0x4b: 0x4004644B.
  EXPECT_EQ(IOCTL_MSM_SUBMITQUEUE_CLOSE, 0x4004644Bul);
  // SUBMITQUEUE_QUERY (IOW): data 8 + id, param, len, pad 16 = 24, nr 0x4c: 0x4018644C.
  EXPECT_EQ(IOCTL_MSM_SUBMITQUEUE_QUERY, 0x4018644Cul);
}

class EmulatedMsm : public ::testing::Test {
 protected:
  void SetUp() override {
    kernel_ = emu::make_emulated_msm_system(*find_target("a660"));
    fd_ = kernel_->open(emu::kMsmRenderNode, O_RDWR);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override { kernel_->close(fd_); }
  int ioctl(unsigned long req, void* arg) { return kernel_->ioctl(fd_, req, arg); }
  uint32_t new_bo(uint64_t size) {
    GemNew g{size, 0, 0};
    EXPECT_EQ(ioctl(IOCTL_MSM_GEM_NEW, &g), 0);
    return g.handle;
  }
  std::shared_ptr<os::Kernel> kernel_;
  int fd_ = -1;
};

TEST_F(EmulatedMsm, ReportsTheChipAndItsAddressWindow) {
  Param p{MSM_PIPE_3D0, MSM_PARAM_CHIP_ID, 0, 0, 0};
  ASSERT_EQ(ioctl(IOCTL_MSM_GET_PARAM, &p), 0);
  EXPECT_EQ(p.value, 0x06060001u);
  p.param = MSM_PARAM_GPU_ID;
  ASSERT_EQ(ioctl(IOCTL_MSM_GET_PARAM, &p), 0);
  EXPECT_EQ(p.value, 660u);
  p.param = MSM_PARAM_VA_START;
  ASSERT_EQ(ioctl(IOCTL_MSM_GET_PARAM, &p), 0);
  EXPECT_EQ(p.value, 1ull << 32);
  p.param = 0x7777;
  EXPECT_EQ(ioctl(IOCTL_MSM_GET_PARAM, &p), -EINVAL);
  p = {0x01, MSM_PARAM_CHIP_ID, 0, 0, 0};  // the 2D pipe: not this GPU's
  EXPECT_EQ(ioctl(IOCTL_MSM_GET_PARAM, &p), -EINVAL);
}

TEST_F(EmulatedMsm, IovasMustBeInTheWindowAlignedAndFree) {
  const uint32_t a = new_bo(8192), b = new_bo(4096);
  GemInfo i{a, MSM_INFO_SET_IOVA, 0x1000, 0, 0};  // below VA_START
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), -EINVAL);
  i.value = (1ull << 32) + 100;  // not page-aligned
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), -EINVAL);
  i.value = 1ull << 47;  // past the window's end
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), -EINVAL);
  i.value = 0x200000000;
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), 0);
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), -EINVAL);  // already placed
  GemInfo j{b, MSM_INFO_SET_IOVA, 0x200001000, 0, 0};  // inside a's two pages
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &j), -EBUSY);
  GemInfo k{999, MSM_INFO_GET_IOVA, 0, 0, 0};
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &k), -ENOENT);
  GemNew bad{4096, 0x100, 0};  // an unknown flag
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_NEW, &bad), -EINVAL);
  drm_gem_close c{a, 0};
  EXPECT_EQ(ioctl(DRM_IOCTL_GEM_CLOSE, &c), 0);
  EXPECT_EQ(ioctl(DRM_IOCTL_GEM_CLOSE, &c), -EINVAL);
}

TEST_F(EmulatedMsm, SubmitsCheckQueuesBosAndCommandBounds) {
  Submitqueue q{};
  ASSERT_EQ(ioctl(IOCTL_MSM_SUBMITQUEUE_NEW, &q), 0);
  const uint32_t bo = new_bo(4096);
  GemInfo i{bo, MSM_INFO_SET_IOVA, 0x300000000, 0, 0};
  ASSERT_EQ(ioctl(IOCTL_MSM_GEM_INFO, &i), 0);
  SubmitBo bos[1] = {{MSM_SUBMIT_BO_READ, bo, 0x300000000}};
  SubmitCmd cmd{MSM_SUBMIT_CMD_BUF, 0, 4000, 200, 0, 0, 0};  // runs past the buffer's end
  GemSubmit s{};
  s.flags = MSM_PIPE_3D0;
  s.nr_bos = 1;
  s.nr_cmds = 1;
  s.bos = reinterpret_cast<uint64_t>(bos);
  s.cmds = reinterpret_cast<uint64_t>(&cmd);
  s.queueid = q.id;
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_SUBMIT, &s), -EINVAL);
  cmd.submit_offset = 0;
  cmd.submit_idx = 1;  // no such bo in the table
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_SUBMIT, &s), -EINVAL);
  cmd.submit_idx = 0;
  s.queueid = q.id + 5;
  EXPECT_EQ(ioctl(IOCTL_MSM_GEM_SUBMIT, &s), -ENOENT);
  WaitFence w{};
  w.fence = 1;
  w.queueid = q.id;
  EXPECT_EQ(ioctl(IOCTL_MSM_WAIT_FENCE, &w), -EINVAL);  // a fence never issued
  uint32_t faults = 7;
  SubmitqueueQuery query{reinterpret_cast<uint64_t>(&faults), q.id, MSM_SUBMITQUEUE_PARAM_FAULTS, 4, 0};
  EXPECT_EQ(ioctl(IOCTL_MSM_SUBMITQUEUE_QUERY, &query), 0);
  EXPECT_EQ(faults, 0u);
  EXPECT_EQ(ioctl(IOCTL_MSM_SUBMITQUEUE_CLOSE, &q.id), 0);
  EXPECT_EQ(ioctl(IOCTL_MSM_SUBMITQUEUE_CLOSE, &q.id), -ENOENT);
}

// The driver side: a missing node is an error naming the device and the path.
TEST(MsmKmd, AMissingNodeIsAClearErrorAndTheNodeSaysWhatItIs) {
  auto kernel = emu::make_emulated_msm_system(*find_target("a740"));
  try {
    open_msm(kernel, "/dev/dri/renderD129", "qcom:1");
    FAIL();
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("qcom:1: open /dev/dri/renderD129"), std::string::npos)
        << e.what();
  }
  auto kmd = open_msm(kernel, emu::kMsmRenderNode, "emu:a740_msm");
  EXPECT_EQ(kmd->chip_id(), 0x43050a01u);
  EXPECT_EQ(kmd->va_window(), (std::pair<uint64_t, uint64_t>{emu::kMsmVaStart, emu::kMsmVaSize}));
  EXPECT_EQ(kmd->context(), "msm submit queue 1");
  EXPECT_FALSE(kmd->maps_user_memory());
}

// Both kernel drivers: host memory is cached where the GPU snoops the CPU's caches and
// write-combined where it does not (the kernel refuses or drops the coherent flag), so host
// copies never need cache maintenance; either way the memory works at the same address.
TEST(Kmds, HostMemoryIsWriteCombinedWhereTheGpuDoesNotSnoop) {
  const Target& t = *find_target("a660");
  for (bool coherent : {true, false})
    for (bool is_msm : {false, true}) {
      SCOPED_TRACE(std::string(is_msm ? "msm" : "kgsl") + (coherent ? " coherent" : " not coherent"));
      auto kernel = is_msm ? emu::make_emulated_msm_system(t, coherent)
                           : emu::make_emulated_system(t, coherent);
      auto kmd = is_msm ? open_msm(kernel, emu::kMsmRenderNode, "emu:a660_msm")
                        : open_kgsl(kernel, "/dev/kgsl-3d0", "emu:a660");
      const uint64_t bytes = 1 << 20;
      void* base = kernel->mmap(nullptr, bytes, PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      ASSERT_NE(base, MAP_FAILED);
      const uint64_t va = reinterpret_cast<uint64_t>(base);
      const uint64_t device = kmd->allocate(va, 4096, MemoryKind::Device);
      EXPECT_TRUE(kmd->host_memory_cached());  // device memory says nothing about it
      const uint64_t host = kmd->allocate(va + 4096, 8192, MemoryKind::Host);
      EXPECT_EQ(kmd->host_memory_cached(), coherent);
      auto* words = reinterpret_cast<volatile uint32_t*>(va + 4096);
      words[2047] = 0x5eed;
      EXPECT_EQ(words[2047], 0x5eedu);
      reserve_range(*kernel, va, 3 * 4096);
      kmd->free(host);
      kmd->free(device);
      kernel->munmap(base, bytes);
    }
}

}  // namespace
}  // namespace hcq::qcom::msm
