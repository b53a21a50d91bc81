// KGSL's side of sharing memory between processes (issue 19 part 4, docs/shm.md): the dma-buf
// heap's ioctl as linux/dma-heap.h encodes it, and the emulated heap and KGSL's
// IOCTL_KGSL_GPUOBJ_IMPORT answering bad input with the real drivers' errnos
// (drivers/dma-buf/dma-heap.c dma_heap_ioctl_allocate; kgsl.c _gpuobj_map_dma_buf).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error_of.hpp"
#include "core/error.hpp"
#include "qcom/emu/kgsl.hpp"
#include "qcom/kgsl_abi.hpp"
#include "qcom/kmd.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom::kgsl {
namespace {

using testing_support::error_of;

// _IOWR('H', 0x0, struct dma_heap_allocation_data): len 8 + fd 4 + fd_flags 4 + heap_flags
// 8 = 24 = 0x18, so 0xC0000000 | 0x00180000 | 'H' (0x48) << 8 | 0.
TEST(KgslShare, DmaHeapAllocEncodesAsLinuxDmaHeapHSays) {
  EXPECT_EQ(DMA_HEAP_IOCTL_ALLOC, 0xC0184800ul);
  EXPECT_EQ(sizeof(dma_heap_allocation_data), 24u);
  EXPECT_EQ(offsetof(dma_heap_allocation_data, fd), 8u);
  EXPECT_EQ(offsetof(dma_heap_allocation_data, fd_flags), 12u);
  EXPECT_EQ(offsetof(dma_heap_allocation_data, heap_flags), 16u);
  // msm_kgsl.h: KGSL_USER_MEM_TYPE_DMABUF is 3; struct kgsl_gpuobj_import_dma_buf {int fd;}.
  EXPECT_EQ(KGSL_USER_MEM_TYPE_DMABUF, 3u);
  EXPECT_EQ(sizeof(GpuobjImportDmaBuf), 4u);
  EXPECT_EQ(std::string(kDmaHeapSystem), "/dev/dma_heap/system");
}

class KgslShareEmulated : public ::testing::Test {
 protected:
  void SetUp() override {
    kernel_ = emu::make_emulated_system(*find_target("a740"));
    heap_ = kernel_->open(kDmaHeapSystem, O_RDONLY | O_CLOEXEC);
    kgsl_ = kernel_->open("/dev/kgsl-3d0", O_RDWR | O_CLOEXEC);
    ASSERT_GE(heap_, 0);
    ASSERT_GE(kgsl_, 0);
  }
  void TearDown() override {
    kernel_->close(heap_);
    kernel_->close(kgsl_);
  }
  int alloc(dma_heap_allocation_data& d) { return kernel_->ioctl(heap_, DMA_HEAP_IOCTL_ALLOC, &d); }
  int import(int fd, uint32_t type = KGSL_USER_MEM_TYPE_DMABUF,
             uint64_t flags = KGSL_MEMFLAGS_USE_CPU_MAP) {
    GpuobjImportDmaBuf d{fd};
    GpuobjImport im{};
    im.priv = reinterpret_cast<uint64_t>(&d);
    im.priv_len = sizeof d;
    im.flags = flags;
    im.type = type;
    int r = kernel_->ioctl(kgsl_, IOCTL_KGSL_GPUOBJ_IMPORT, &im);
    return r < 0 ? r : int(im.id);
  }
  std::shared_ptr<os::Kernel> kernel_;
  int heap_ = -1, kgsl_ = -1;
};

TEST_F(KgslShareEmulated, TheHeapGivesPageMultiplesAndRefusesWhatDmaHeapCRefuses) {
  dma_heap_allocation_data d{};
  d.len = 5000;
  d.fd_flags = O_RDWR | O_CLOEXEC;
  ASSERT_EQ(alloc(d), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(int(d.fd), &st), 0);
  EXPECT_EQ(st.st_size, 8192);  // PAGE_ALIGN(len)
  EXPECT_EQ(kernel_->close(int(d.fd)), 0);

  dma_heap_allocation_data bad{};
  bad.len = 0;
  EXPECT_EQ(alloc(bad), -EINVAL);  // nothing to allocate
  bad = {};
  bad.len = 4096;
  bad.fd = 7;  // fd is out only
  EXPECT_EQ(alloc(bad), -EINVAL);
  bad = {};
  bad.len = 4096;
  bad.fd_flags = O_NONBLOCK;  // not in DMA_HEAP_VALID_FD_FLAGS
  EXPECT_EQ(alloc(bad), -EINVAL);
  bad = {};
  bad.len = 4096;
  bad.heap_flags = 1;  // DMA_HEAP_VALID_HEAP_FLAGS is 0
  EXPECT_EQ(alloc(bad), -EINVAL);
  EXPECT_EQ(kernel_->ioctl(heap_, 0x4800, &bad), -ENOTTY);
}

TEST_F(KgslShareEmulated, GpuobjImportRefusesWhatIsNoDmaBuf) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_EQ(import(p[0]), -EINVAL);  // a file, but no dma-buf
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(import(p[0]), -EBADF);  // no file at all
  EXPECT_EQ(import(-1), -EINVAL);

  dma_heap_allocation_data d{};
  d.len = 4096;
  d.fd_flags = O_RDWR | O_CLOEXEC;
  ASSERT_EQ(alloc(d), 0);
  EXPECT_EQ(import(int(d.fd), KGSL_USER_MEM_TYPE_ADDR), -EINVAL);  // the emulator: dma-bufs only
  EXPECT_EQ(import(int(d.fd), KGSL_USER_MEM_TYPE_DMABUF, 0), -EINVAL);  // SVM only
  const int id = import(int(d.fd));
  ASSERT_GT(id, 0);
  GpuobjInfo info{};
  info.id = uint32_t(id);
  ASSERT_EQ(kernel_->ioctl(kgsl_, IOCTL_KGSL_GPUOBJ_INFO, &info), 0);
  EXPECT_EQ(info.size, 4096u);
  GpuobjFree f{};
  f.id = uint32_t(id);
  EXPECT_EQ(kernel_->ioctl(kgsl_, IOCTL_KGSL_GPUOBJ_FREE, &f), 0);
  EXPECT_EQ(kernel_->close(int(d.fd)), 0);
}

// The Kmd: what it exports is the object's own pages, and an import of it is the same memory.
TEST_F(KgslShareEmulated, AnExportImportedBackIsTheSameMemory) {
  auto kmd = open_kgsl(kernel_, "/dev/kgsl-3d0", "emu:a740");
  ASSERT_TRUE(kmd->shares_memory());
  const uint64_t size = 8192;
  void* space = ::mmap(nullptr, 2 * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
  ASSERT_NE(space, MAP_FAILED);
  const uint64_t a = reinterpret_cast<uint64_t>(space), b = a + size;
  const uint64_t h = kmd->allocate(a, size, MemoryKind::Device);
  const int fd = kmd->export_memory(h);
  ASSERT_GE(fd, 0);
  const uint64_t g = kmd->import_memory(fd, b, size);
  std::memcpy(reinterpret_cast<void*>(a), "shared", 7);
  EXPECT_STREQ(reinterpret_cast<const char*>(b), "shared");
  EXPECT_EQ(error_of([&] { kmd->import_memory(fd, b, 2 * size); }),
            "emu:a740: the imported memory holds 8192 bytes, the handle says 16384");
  EXPECT_EQ(error_of([&] { kmd->export_memory(12345); }),
            "emu:a740: GPU object 12345 is not from /dev/dma_heap/system (it did not open): KGSL "
            "cannot export its own objects");
  ::close(fd);
  reserve_range(*kernel_, b, size);
  kmd->free(g);
  reserve_range(*kernel_, a, size);
  kmd->free(h);
  ::munmap(space, 2 * size);
}

}  // namespace
}  // namespace hcq::qcom::kgsl
