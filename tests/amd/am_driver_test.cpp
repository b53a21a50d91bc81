// The am: driver's parts that run without the emulated PCI device: the ring queue shared with
// KFD, the memory (GpuMemory: CPU mapping at the GPU address, page tables the emulated MMU
// walks, DMA mappings at IOVA = address, invalidation after every unmap), the boot over an
// emulated register window (plain registers, the emulated SMU, NBIO's SMN pair) and VRAM
// holding the emulated RX 7900 XTX's discovery table, and the device name.
#include "amd/am/am_driver.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "amd/am/boot.hpp"
#include "amd/am/discovery.hpp"
#include "amd/am/gpu_memory.hpp"
#include "amd/am/index_pairs.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_mmu.hpp"
#include "amd/emu/am_smu.hpp"
#include "amd/factory.hpp"
#include "amd/ring_queue.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;

constexpr uint64_t kMiB = 1ull << 20;

// Anonymous memory standing for a BAR (zero pages until touched), or a memfd where the
// memory must be mappable again at another address (VRAM under GpuMemory).
struct Memory {
  explicit Memory(uint64_t bytes, bool file = false) : size(bytes) {
    if (file) {
      fd = memfd_create("hcq-test-vram", 0);
      EXPECT_GE(fd, 0);
      EXPECT_EQ(ftruncate(fd, off_t(bytes)), 0);
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   file ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    base = static_cast<std::byte*>(p);
  }
  ~Memory() {
    munmap(base, size);
    if (fd >= 0) close(fd);
  }
  std::span<std::byte> span() const { return {base, size}; }
  uint64_t size;
  int fd = -1;
  std::byte* base = nullptr;
};

// ---- the ring queue ---------------------------------------------------------------------

// A ring queue over plain memory: the doorbell is a variable, no hardware behind it.
class TestRing final : public RingQueue {
 public:
  TestRing(QueueKind kind, uint64_t ring_bytes) : RingQueue(kind, "test:gpu") {
    ring_.assign(ring_bytes / 4, 0xdeadbeef);
    RingMemory m;
    m.ring = ring_.data();
    m.ring_bytes = ring_bytes;
    m.rptr = &rptr_;
    m.wptr = &wptr_;
    m.doorbell = &doorbell_;
    attach(m, std::string(to_string(kind)) + " queue 7");
  }
  std::vector<uint32_t> ring_;
  uint64_t rptr_ = 0, wptr_ = 0;
  volatile uint64_t doorbell_ = 0;
  int fault_checks = 0;

 private:
  void check_faults() override { fault_checks++; }
  const void* host_view(uint64_t, uint64_t) override { return nullptr; }
};

TEST(AmRingQueue, Pm4WrapsAroundTheRingEnd) {
  TestRing q(QueueKind::Compute, 256);  // 64 dwords
  std::vector<uint32_t> words(60, 0x11);
  q.submit(words.data(), words.size());
  EXPECT_EQ(q.doorbell_, 60u);
  EXPECT_EQ(q.wptr_, 60u);
  q.rptr_ = 60;  // the engine has read it all
  const uint32_t more[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  q.submit(more, 8);
  EXPECT_EQ(q.doorbell_, 68u);
  EXPECT_EQ(std::vector<uint32_t>(q.ring_.begin() + 60, q.ring_.end()),
            (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(std::vector<uint32_t>(q.ring_.begin(), q.ring_.begin() + 4),
            (std::vector<uint32_t>{5, 6, 7, 8}));
  EXPECT_EQ(q.fault_checks, 2);
}

TEST(AmRingQueue, SdmaPadsTheRingEndWithNopsAndCountsBytes) {
  TestRing q(QueueKind::Copy, 256);
  std::vector<uint32_t> words(60, 0x22);
  q.submit(words.data(), words.size());
  EXPECT_EQ(q.doorbell_, 240u);
  q.rptr_ = 240;
  const uint32_t more[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  q.submit(more, 8);
  // The 4 dwords left at the end become NOPs; the packet restarts at dword 0.
  EXPECT_EQ(std::vector<uint32_t>(q.ring_.begin() + 60, q.ring_.end()),
            (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(std::vector<uint32_t>(q.ring_.begin(), q.ring_.begin() + 8),
            (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(q.doorbell_, 256u + 32u);
  EXPECT_EQ(q.indirect_granule_dwords(), 8u);
}

TEST(AmRingQueue, RefusesWhatCannotFit) {
  EXPECT_EQ(error_of([] { TestRing q(QueueKind::Compute, 1000); }),
            "test:gpu: compute queue 7: a ring of 1000 bytes is not a power of two of 256 or more");
  TestRing q(QueueKind::Compute, 256);
  std::vector<uint32_t> words(64, 0);
  EXPECT_EQ(error_of([&] { q.submit(words.data(), words.size()); }),
            "test:gpu: compute queue 7: submission of 64 units does not fit a ring of 64");
}

TEST(AmRingQueue, ReportsThePacketsAroundTheReadPointer) {
  TestRing q(QueueKind::Compute, 4096);
  EXPECT_EQ(q.report(Gen::Gfx11), "");  // idle
  q.submit_indirect(0x10000, 16);
  EXPECT_EQ(q.report(Gen::Gfx11),
            "test:gpu: compute queue 7: read pointer 0x0, write pointer 0x4 (dwords); packets "
            "from the start of the submission it is in:\n"
            "  HERE >  0x0000  0xc0023f00  INDIRECT_BUFFER  IB_BASE_LO=0x10000  IB_BASE_HI=0  "
            "IB_SIZE=0x10  CHAIN=0  VALID=1  VMID=0  CACHE_POLICY=0\n"
            "    indirect buffer 0x10000, 16 dwords: not mapped for the CPU");
  q.rptr_ = 4;  // done
  EXPECT_EQ(q.report(Gen::Gfx11), "");
}

// A ring queue whose ring and pointers the CPU cannot map (VRAM behind a USB bridge): a host
// shadow, published through the hooks, which record every call.
class PublishedRing final : public RingQueue {
 public:
  PublishedRing(QueueKind kind, uint64_t ring_bytes) : RingQueue(kind, "test:gpu") {
    shadow_.assign(ring_bytes / 4, 0);
    device_.assign(ring_bytes / 4, 0xdeadbeef);
    RingMemory m;
    m.ring = shadow_.data();
    m.ring_bytes = ring_bytes;
    m.published = true;  // no rptr, wptr or doorbell pointer
    attach(m, std::string(to_string(kind)) + " queue 7");
  }
  std::vector<uint32_t> shadow_, device_;
  std::vector<std::string> calls;
  uint64_t rptr_ = 0;
  mutable int rptr_reads = 0;
  std::map<uint64_t, std::vector<uint32_t>> memory;  // what read_device finds, by va

 private:
  void check_faults() override {}
  const void* host_view(uint64_t, uint64_t) override { return nullptr; }
  void publish_ring(uint64_t offset, std::span<const uint32_t> words) override {
    calls.push_back("ring " + hex(offset) + " " + std::to_string(words.size()) + " dwords");
    std::copy(words.begin(), words.end(), device_.begin() + long(offset / 4));
  }
  void publish_write_pointer(uint64_t wptr) override { calls.push_back("wptr " + hex(wptr)); }
  uint64_t fetch_read_pointer() const override {
    rptr_reads++;
    return rptr_;
  }
  void write_doorbell(uint64_t value) override { calls.push_back("doorbell " + hex(value)); }
  bool read_device(uint64_t va, std::span<std::byte> out) override {
    auto it = memory.find(va);
    if (it == memory.end() || it->second.size() * 4 != out.size()) return false;
    std::memcpy(out.data(), it->second.data(), out.size());
    return true;
  }
};

TEST(AmRingQueue, APublishedRingWritesWhatChangedInOneRangeOrTwoWhereItWraps) {
  PublishedRing q(QueueKind::Compute, 256);  // 64 dwords
  std::vector<uint32_t> words(60, 0x11);
  q.submit(words.data(), words.size());
  EXPECT_EQ(q.calls, (std::vector<std::string>{"ring 0x0 60 dwords", "wptr 0x3c", "doorbell 0x3c"}));
  EXPECT_EQ(q.rptr_reads, 0);  // the cached read pointer says there is room
  q.calls.clear();
  q.rptr_ = 60;  // the engine has read it all
  const uint32_t more[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  q.submit(more, 8);
  EXPECT_EQ(q.calls, (std::vector<std::string>{"ring 0xf0 4 dwords", "ring 0x0 4 dwords",
                                               "wptr 0x44", "doorbell 0x44"}));
  EXPECT_EQ(q.rptr_reads, 2);
  EXPECT_EQ(std::vector<uint32_t>(q.device_.begin() + 60, q.device_.end()),
            (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(std::vector<uint32_t>(q.device_.begin(), q.device_.begin() + 4),
            (std::vector<uint32_t>{5, 6, 7, 8}));
  EXPECT_EQ(q.device_[4], 0x11u);
  EXPECT_EQ(q.read_pointer(), 60u);
}

TEST(AmRingQueue, APublishedSdmaRingPublishesItsPaddingWithThePacket) {
  PublishedRing q(QueueKind::Copy, 256);
  std::vector<uint32_t> words(60, 0x22);
  q.submit(words.data(), words.size());
  q.calls.clear();
  q.rptr_ = 240;
  const uint32_t more[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  q.submit(more, 8);
  // The 4 NOPs at the end and the packet at dword 0: bytes [0xf0, 0x100) and [0, 0x20).
  EXPECT_EQ(q.calls, (std::vector<std::string>{"ring 0xf0 4 dwords", "ring 0x0 8 dwords",
                                               "wptr 0x120", "doorbell 0x120"}));
  EXPECT_EQ(std::vector<uint32_t>(q.device_.begin() + 60, q.device_.end()),
            (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(std::vector<uint32_t>(q.device_.begin(), q.device_.begin() + 8),
            (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(AmRingQueue, APublishedRingReportsFromItsShadowAndReadsIndirectBuffersThroughThePort) {
  PublishedRing q(QueueKind::Compute, 4096);
  q.submit_indirect(0x10000, 2);
  const std::string head =
      "test:gpu: compute queue 7: read pointer 0x0, write pointer 0x4 (dwords); packets "
      "from the start of the submission it is in:\n"
      "  HERE >  0x0000  0xc0023f00  INDIRECT_BUFFER  IB_BASE_LO=0x10000  IB_BASE_HI=0  "
      "IB_SIZE=2  CHAIN=0  VALID=1  VMID=0  CACHE_POLICY=0\n";
  EXPECT_EQ(q.report(Gen::Gfx11),
            head + "    indirect buffer 0x10000, 2 dwords: not mapped for the CPU");
  q.memory[0x10000] = {0xc0001000, 0};  // a PM4 NOP with one dword of payload
  EXPECT_EQ(q.report(Gen::Gfx11),
            head + "    indirect buffer 0x10000, 2 dwords: position inside the indirect buffer "
                   "unknown; its first packets:\n"
                   "      ?       0x0000  0xc0001000  NOP");
  EXPECT_EQ(q.rptr_reads, 2);  // the read pointer through the hook, once per report
  q.rptr_ = 4;  // done
  EXPECT_EQ(q.report(Gen::Gfx11), "");
}

// ---- memory -----------------------------------------------------------------------------

// VRAM as a memfd mapped whole (the BAR); DMA mappings recorded.
class TestWindows final : public DeviceWindows {
 public:
  explicit TestWindows(const Memory& vram) : vram_(vram) {}
  void map_vram(void* at, uint64_t pa, uint64_t size) override {
    vram_maps++;
    void* p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, vram_.fd, off_t(pa));
    ASSERT_EQ(p, at);
  }
  void map_dma(void* host, uint64_t iova, uint64_t size) override {
    dma[iova] = {reinterpret_cast<uint64_t>(host), size};
  }
  void unmap_dma(uint64_t iova, uint64_t size) override {
    EXPECT_EQ(dma.at(iova).second, size);
    dma.erase(iova);
    unmapped.push_back(iova);
  }
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> dma;  // iova -> (host, size)
  std::vector<uint64_t> unmapped;
  int vram_maps = 0;

 private:
  const Memory& vram_;
};

struct Invalidation {
  VmHub hub;
  std::vector<VaRange> ranges;
};

class AmMemory : public testing::Test {
 protected:
  explicit AmMemory(GpuMemoryReach reach = {})
      : vram_(64 * kMiB, true),
        windows_(vram_),
        access_(vram_.base, vram_.size),
        allocator_(0, 64 * kMiB),
        memory_(os::real_kernel(), windows_, access_, allocator_, 1ull << 30, "test:am", reach),
        mmu_(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(vram_.base), vram_.size)) {
    mmu_.set_context(memory_.page_table_base(), 0, (1ull << 48) - 1);
    memory_.set_invalidate([this](VmHub hub, std::span<const VaRange> ranges) {
      invalidations_.push_back({hub, {ranges.begin(), ranges.end()}});
      mmu_.invalidate();
    });
  }
  emu::MmuTranslation translate(uint64_t va, emu::MmuAccess access = emu::MmuAccess::Read) {
    return mmu_.translate(va, access, emu::kClientCpc);
  }
  Memory vram_;
  TestWindows windows_;
  MappedVram access_;
  VramAllocator allocator_;
  GpuMemory memory_;
  emu::AmMmu mmu_;
  std::vector<Invalidation> invalidations_;
};

TEST_F(AmMemory, DeviceMemoryIsVramAtTheSameAddressForCpuAndGpu) {
  const uint64_t va = memory_.heap_base();
  EXPECT_EQ(va % (2 * kMiB), 0u);
  Allocation a = memory_.allocate(va, 2 * kMiB, MemoryKind::Device, false);
  EXPECT_EQ(a.va, va);
  EXPECT_EQ(a.host, reinterpret_cast<void*>(va));
  EXPECT_EQ(a.handle % (2 * kMiB), 0u);  // VRAM aligned for a 2 MiB page
  std::memcpy(static_cast<char*>(a.host) + 0x1238, "hcq!", 4);
  auto t = translate(va + 0x1238, emu::MmuAccess::Write);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_FALSE(t.system);
  EXPECT_EQ(t.page_bytes, 2 * kMiB);
  EXPECT_EQ(t.pa, a.handle + 0x1238);
  EXPECT_EQ(std::memcmp(vram_.base + t.pa, "hcq!", 4), 0);  // the CPU wrote through the BAR
  EXPECT_FALSE(translate(va, emu::MmuAccess::Execute).ok());
  EXPECT_EQ(memory_.host_view(va + 8, 16), reinterpret_cast<void*>(va + 8));
  EXPECT_EQ(memory_.host_view(va + 2 * kMiB - 8, 16), nullptr);

  EXPECT_TRUE(invalidations_.empty());
  memory_.free(a);
  ASSERT_EQ(invalidations_.size(), 2u);
  EXPECT_EQ(invalidations_[0].hub, VmHub::Gc);
  EXPECT_EQ(invalidations_[1].hub, VmHub::Mm);
  for (auto& i : invalidations_) EXPECT_EQ(i.ranges, (std::vector<VaRange>{{va, 2 * kMiB}}));
  t = translate(va + 0x1238);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.fault->reason, emu::MmuFaultReason::NotValid);
  EXPECT_EQ(allocator_.live_allocations(), 1u);  // the page tables' root only
  EXPECT_EQ(memory_.host_view(va, 4), nullptr);
}

TEST_F(AmMemory, HostMemoryIsReachedAtIovaEqualToTheAddress) {
  const uint64_t va = memory_.heap_base() + 0x10000;
  Allocation a = memory_.allocate(va, 0x2000, MemoryKind::Host, true);
  EXPECT_EQ(a.host, reinterpret_cast<void*>(va));
  ASSERT_EQ(windows_.dma.count(va), 1u);
  EXPECT_EQ(windows_.dma[va], std::make_pair(va, uint64_t(0x2000)));
  static_cast<uint32_t*>(a.host)[3] = 7;  // ordinary host memory
  auto t = translate(va + 0x1004, emu::MmuAccess::Execute);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_TRUE(t.system);
  EXPECT_EQ(t.pa, va + 0x1004);
  EXPECT_EQ(t.page_bytes, 4096u);
  memory_.free(a);
  EXPECT_EQ(windows_.unmapped, (std::vector<uint64_t>{va}));
  EXPECT_EQ(invalidations_.size(), 2u);
  EXPECT_FALSE(translate(va).ok());
}

TEST_F(AmMemory, UserMemoryStaysTheCallersAfterFree) {
  void* p = mmap(nullptr, 0x3000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const uint64_t va = reinterpret_cast<uint64_t>(p);
  Allocation a = memory_.map_user(p, 0x3000);
  EXPECT_TRUE(a.user);
  EXPECT_EQ(a.va, va);
  auto t = translate(va + 0x2ff8, emu::MmuAccess::Write);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t.system);
  EXPECT_EQ(t.pa, va + 0x2ff8);
  memory_.free(a);
  EXPECT_EQ(windows_.unmapped, (std::vector<uint64_t>{va}));
  EXPECT_EQ(invalidations_.size(), 2u);
  static_cast<char*>(p)[0x2fff] = 1;  // still mapped for the caller
  munmap(p, 0x3000);
}

TEST_F(AmMemory, PrivateMemoryAndErrors) {
  Allocation ring = memory_.private_alloc(1 << 20, MemoryKind::Host);
  EXPECT_EQ(ring.va % (1 << 20), 0u);  // a ring's size aligns it
  EXPECT_LT(ring.va, memory_.heap_base());
  Allocation eop = memory_.private_alloc(100, MemoryKind::Device);
  EXPECT_EQ(eop.size, 4096u);
  EXPECT_TRUE(translate(eop.va, emu::MmuAccess::Execute).ok());
  EXPECT_EQ(memory_.live_allocations(), 2u);
  memory_.free(eop);
  memory_.free(ring);
  EXPECT_EQ(memory_.live_allocations(), 0u);

  const uint64_t heap = memory_.heap_base();
  EXPECT_EQ(error_of([&] { memory_.allocate(heap - 4096, 4096, MemoryKind::Device, false); }),
            "test:am: [" + hex(heap - 4096) + ", +0x1000) is not a page-aligned range of the GPU heap [" +
                hex(heap) + ", +0x40000000)");
  EXPECT_EQ(error_of([&] { memory_.free(Allocation{heap, 4096}); }),
            "test:am: free of " + hex(heap) + ", which is no allocation");
  EXPECT_EQ(error_of([&] { memory_.map_user(reinterpret_cast<void*>(0x1234), 4096); }),
            "test:am: user memory [0x1234, +0x1000) is not page aligned");
  // VRAM running out leaves nothing mapped.
  EXPECT_EQ(error_of<Error>([&] { memory_.allocate(heap, 128 * kMiB, MemoryKind::Device, false); }),
            "test:am: 134217728 bytes of device memory: VRAM: out of memory: 0x8000000 bytes aligned to 0x200000 requested, 0x3fff000 bytes "
            "free, largest free range 0x3fff000 bytes");
  EXPECT_EQ(memory_.live_allocations(), 0u);
  Allocation again = memory_.allocate(heap, 4096, MemoryKind::Device, false);
  memory_.free(again);
}

// Behind a USB bridge: VRAM not mapped for the CPU, host memory only the bridge's SRAM window
// (0x80000 bytes at PCI address 0x200000).
class AmUnmappedMemory : public AmMemory {
 protected:
  AmUnmappedMemory() : AmMemory(GpuMemoryReach{false, 0x200000, 0x80000}) {}
};

TEST_F(AmUnmappedMemory, DeviceMemoryHasNoHostPointerAndIsLocatedInVram) {
  const uint64_t va = memory_.heap_base();
  Allocation a = memory_.allocate(va, 0x3000, MemoryKind::Device, false);
  EXPECT_EQ(a.host, nullptr);
  EXPECT_EQ(windows_.vram_maps, 0);
  auto t = translate(va + 0x1238, emu::MmuAccess::Write);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_FALSE(t.system);
  EXPECT_EQ(t.pa, a.handle + 0x1238);
  EXPECT_EQ(memory_.host_view(va, 16), nullptr);
  const MemoryPlace p = memory_.locate(va + 0x1238, 0x10);
  EXPECT_EQ(p.in, MemoryPlace::In::Vram);
  EXPECT_EQ(p.address, a.handle + 0x1238);
  EXPECT_EQ(error_of([&] { memory_.locate(va + 0x2ff8, 16); }),
            "test:am: [" + hex(va + 0x2ff8) + ", +0x10) leaves the allocation [" + hex(va) +
                ", +0x3000)");
  EXPECT_EQ(error_of([&] { memory_.locate(va + 0x3000, 4); }),
            "test:am: [" + hex(va + 0x3000) + ", +0x4) is in no allocation");
  EXPECT_EQ(error_of([&] { memory_.locate(va - 8, 4); }),
            "test:am: [" + hex(va - 8) + ", +0x4) is in no allocation");
  memory_.free(a);
  EXPECT_EQ(allocator_.live_allocations(), 1u);  // the page tables' root only
}

TEST_F(AmUnmappedMemory, HostMemoryIsCarvedFromTheWindowFirstFit) {
  const uint64_t heap = memory_.heap_base();
  Allocation a = memory_.allocate(heap, 0x2000, MemoryKind::Host, false);
  Allocation b = memory_.allocate(heap + 0x10000, 0x1000, MemoryKind::Host, true);
  EXPECT_EQ(a.host, nullptr);
  EXPECT_EQ(b.host, nullptr);
  EXPECT_EQ(a.handle, 0u);  // the offset in the window
  EXPECT_EQ(b.handle, 0x2000u);
  EXPECT_TRUE(windows_.dma.empty());  // the window is the function's, not mapped per buffer
  auto t = translate(heap + 0x10008, emu::MmuAccess::Execute);
  ASSERT_TRUE(t.ok()) << t.fault->describe();
  EXPECT_TRUE(t.system);
  EXPECT_EQ(t.pa, 0x202008u);  // the window's PCI address + offset
  const MemoryPlace p = memory_.locate(heap + 0x1ff0, 0x10);
  EXPECT_EQ(p.in, MemoryPlace::In::HostWindow);
  EXPECT_EQ(p.address, 0x1ff0u);
  EXPECT_EQ(memory_.host_view(heap, 4), nullptr);
  EXPECT_EQ(memory_.window_bytes_free(), 0x7d000u);

  // The first range that fits: a's pages again after it is freed.
  memory_.free(a);
  EXPECT_TRUE(windows_.unmapped.empty());
  Allocation c = memory_.allocate(heap + 0x20000, 0x1000, MemoryKind::Host, false);
  EXPECT_EQ(c.handle, 0u);
  EXPECT_EQ(memory_.window_bytes_free(), 0x7e000u);
  EXPECT_EQ(error_of<Error>([&] { memory_.allocate(heap + 0x100000, 0x7e000, MemoryKind::Host, false); }),
            "test:am: 0x7e000 bytes of host memory do not fit the host window (0x80000 bytes at "
            "0x200000): 0x7e000 bytes free, largest free range 0x7d000");
  EXPECT_EQ(memory_.live_allocations(), 2u);
  Allocation d = memory_.allocate(heap + 0x100000, 0x7d000, MemoryKind::Host, false);
  EXPECT_EQ(d.handle, 0x3000u);
  EXPECT_EQ(memory_.window_bytes_free(), 0x1000u);
  for (const Allocation& x : {b, c, d}) memory_.free(x);
  EXPECT_EQ(memory_.window_bytes_free(), 0x80000u);

  // Rings and other private host memory come from the window too.
  Allocation ring = memory_.private_alloc(0x4000, MemoryKind::Host);
  EXPECT_EQ(ring.handle, 0u);
  EXPECT_EQ(ring.host, nullptr);
  memory_.free(ring);
}

TEST_F(AmUnmappedMemory, UserMemoryCannotBeMapped) {
  void* p = mmap(nullptr, 0x1000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(error_of<InvalidInput>([&] { memory_.map_user(p, 0x1000); }),
            "test:am: cannot map user memory [" + hex(reinterpret_cast<uint64_t>(p)) +
                ", +0x1000): the device cannot reach host memory outside the bridge's SRAM "
                "window (0x80000 bytes at 0x200000)");
  EXPECT_EQ(memory_.live_allocations(), 0u);
  munmap(p, 0x1000);
}

TEST_F(AmMemory, MappedMemoryIsLocatedForThePort) {
  const uint64_t heap = memory_.heap_base();
  Allocation d = memory_.allocate(heap, 0x1000, MemoryKind::Device, false);
  Allocation h = memory_.allocate(heap + 0x1000, 0x1000, MemoryKind::Host, false);
  MemoryPlace p = memory_.locate(heap + 8, 8);
  EXPECT_EQ(p.in, MemoryPlace::In::Vram);
  EXPECT_EQ(p.address, d.handle + 8);
  p = memory_.locate(heap + 0x1008, 8);
  EXPECT_EQ(p.in, MemoryPlace::In::Host);
  EXPECT_EQ(p.address, heap + 0x1008);
  memory_.free(d);
  memory_.free(h);
}

TEST(AmVram, MappedVramIsCheckedAccess) {
  std::vector<uint64_t> words(4, 0);
  MappedVram v(reinterpret_cast<std::byte*>(words.data()), 32);
  v.write64(8, 0x1122334455667788);
  EXPECT_EQ(words[1], 0x1122334455667788u);
  EXPECT_EQ(v.read64(8), 0x1122334455667788u);
  EXPECT_EQ(error_of<Error>([&] { v.read64(32); }), "VRAM BAR: address 0x20 is outside its 0x20 bytes");
  EXPECT_EQ(error_of<Error>([&] { v.write64(4, 0); }), "VRAM BAR: address 0x4 is not 8-byte aligned");
}

// ---- boot memory ------------------------------------------------------------------------

TEST(AmBootMemory, HandsOutZeroedAlignedVramWithMcAddresses) {
  Memory vram(8 * kMiB);
  std::memset(vram.base, 0xff, vram.size);
  VramBootMemory m(vram.span(), 1 * kMiB, 4 * kMiB, 0x8000000000);
  VramBuffer a = m.alloc(0x4000, 4096, "the SMU driver table");
  EXPECT_EQ(a.pa, 1 * kMiB);
  EXPECT_EQ(a.mc, 0x8000000000 + 1 * kMiB);
  EXPECT_EQ(a.size, 0x4000u);
  EXPECT_EQ(a.cpu, vram.base + 1 * kMiB);
  for (std::byte b : a.bytes()) ASSERT_EQ(b, std::byte{0});
  EXPECT_EQ(vram.base[1 * kMiB + 0x4000], std::byte{0xff});  // nothing past it touched
  VramBuffer b = m.alloc(100, 1 * kMiB, "the PSP's firmware buffer");
  EXPECT_EQ(b.pa, 2 * kMiB);
  EXPECT_EQ(b.size, 4096u);
  EXPECT_EQ(m.mc(0x1000), 0x8000001000u);
  EXPECT_EQ(error_of<Error>([&] { m.alloc(2 * kMiB, 4096, "the TMR"); }),
            "boot memory: no room for the TMR: 0x200000 bytes aligned to 0x1000 requested, "
            "0x1ff000 of [0x100000, 0x400000) left");
  EXPECT_EQ(error_of([&] { m.alloc(4096, 0x1800, "a ring"); }),
            "boot memory: alignment 0x1800 for a ring is not a power of two of at least 0x1000");
  EXPECT_EQ(error_of([&] { VramBootMemory(vram.span(), 0, 16 * kMiB, 0); }),
            "boot memory: [0x0, 0x1000000) is not a 4 KiB-aligned range of the 0x800000 bytes of "
            "VRAM");
}

// ---- boot -------------------------------------------------------------------------------

// The register BAR of a GPU: plain storage, the emulated SMU at its registers, and NBIO's
// SMN index/data pair reaching registers past the BAR. A mode-1 reset puts every register
// back to its power-on value (unless told to leave them: a reset that does not take).
class Registers final : public os::MmioHandler {
 public:
  explicit Registers(const IpSegmentBases& bases)
      : bases_(bases), smu_(bases), smn_pair_(rsmu_layout_nbio_4_3_0(bases[Ip::NBIO][1])) {}
  uint64_t at(const Reg& r) const { return absolute_dword(describe(r), bases_) * 4; }
  uint32_t& reg(const Reg& r) { return regs_[at(r)]; }
  uint32_t& smn(const Reg& r) { return smn_[at(r)]; }
  void power_on() { power_on_regs_ = regs_, power_on_smn_ = smn_; }
  bool reset_takes = true;
  emu::AmSmu& smu() { return smu_; }

  uint32_t read32(uint64_t offset) override {
    if (smu_.handles(offset)) return smu_.read32(offset);
    if (offset == smn_pair_.data) return smn_[regs_[smn_pair_.index]];
    return regs_[offset];
  }
  void write32(uint64_t offset, uint32_t value) override {
    if (smu_.handles(offset)) {
      const unsigned resets = smu_.mode1_resets();
      smu_.write32(offset, value);
      if (smu_.mode1_resets() != resets && reset_takes) regs_ = power_on_regs_, smn_ = power_on_smn_;
      return;
    }
    if (offset == smn_pair_.data) {
      smn_[regs_[smn_pair_.index]] = value;
      return;
    }
    regs_[offset] = value;
  }

 private:
  IpSegmentBases bases_;
  emu::AmSmu smu_;
  os::IndexDataLayout smn_pair_;
  std::map<uint64_t, uint32_t> regs_, smn_, power_on_regs_, power_on_smn_;
};

class AmBootTest : public testing::Test {
 protected:
  static constexpr uint64_t kVram = 256 * kMiB;
  AmBootTest()
      : table_(emu::gfx1100_discovery_table()),
        regs_(segment_bases(parse_discovery(table_))),
        window_("BAR5 of test", kMiB, regs_),
        vram_(kVram) {
    std::memcpy(vram_.base + kVram - 64 * 1024, table_.data(), table_.size());
    regs_.reg(nbio_4_3_0::RCC_CONFIG_MEMSIZE) = kVram >> 20;
    regs_.reg(mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE) = 0x8000;
    regs_.smn(nbio_4_3_0::RCC_DEV0_EPF2_STRAP2) = 0x81;
    regs_.power_on();
    options_.timeout = 20ms;
    options_.reset_settle = 0ms;
    options_.bus_master = [this](bool on) { bus_master_.push_back(on); };
  }
  std::vector<std::byte> table_;
  Registers regs_;
  os::EmulatedMmio window_;
  Memory vram_;
  BootOptions options_;
  std::vector<bool> bus_master_;
};

// The boot's own blocks (soc, smu) only: the register model here has no GMC, IH, PSP or GFX.
std::unique_ptr<IpBlockDriver> own_blocks_only(const BlockSpec& spec, AmAsic& asic) {
  if (spec.kind == BlockKind::Soc || spec.kind == BlockKind::Smu)
    return AmAsic::standard_block(spec, asic);
  return nullptr;
}

TEST_F(AmBootTest, ColdBootRunsItsOwnPhasesAndSkipsTheMissingOnes) {
  AmBoot boot(window_, vram_.span(), options_);
  EXPECT_EQ(boot.vram_size(), kVram);
  EXPECT_EQ(boot.fb_base(), 0x8000000000u);
  EXPECT_EQ(boot.allocatable_vram(), kVram - 96 * kMiB);
  EXPECT_EQ(&boot.asic(), &gfx1100_asic());
  AmAsic asic(boot.asic(), own_blocks_only);
  const BootReport& r = boot.run(asic, 0x1234001);
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(r.previous.describe(), "cold (sOS not running, no boot marker), SMU answering");
  EXPECT_TRUE(bus_master_.empty());
  std::vector<std::string> run, skipped;
  for (auto& p : r.phases) (p.run ? run : skipped).push_back(p.name);
  EXPECT_EQ(run, (std::vector<std::string>{"discovery", "soc", "smu"}));
  EXPECT_EQ(skipped, (std::vector<std::string>{"firmware", "reset", "gmc", "ih", "psp", "gfx", "sdma"}));
  // soc: the strap cleared through the SMN pair, the doorbell aperture on.
  EXPECT_EQ(regs_.smn(nbio_4_3_0::RCC_DEV0_EPF2_STRAP2), 0x01u);
  EXPECT_EQ(regs_.reg(nbio_4_3_0::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN), 1u);
  // and the HDP flush registers remapped into the MMIO hole at 0x7f000 (Linux soc21.c).
  EXPECT_EQ(regs_.reg(nbio_4_3_0::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL), 0x7f000u);
  EXPECT_EQ(regs_.reg(nbio_4_3_0::BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL), 0x7f004u);
  // smu: the driver table in boot memory (its first buffer), every feature on.
  EXPECT_EQ(r.smu_version, emu::AmSmu::kVersion);
  EXPECT_TRUE(regs_.smu().features_enabled());
  EXPECT_EQ(regs_.smu().driver_dram_address(), 0x8000000000 + kVram - 96 * kMiB);
  EXPECT_EQ(regs_.reg(gc_11_0_0::SCRATCH_REG7), kHcqBootMarker);
  const std::string text = r.text();
  EXPECT_EQ(text.substr(0, text.find("phases:")),
            "VRAM: 256 MiB, frame buffer at MC 0x8000000000\n"
            "found: cold (sOS not running, no boot marker), SMU answering\n"
            "IP versions: NBIF 4.3.0, MMHUB 3.0.0, OSSSYS 6.0.0, MP0 13.0.0, MP1 13.0.0, "
            "GC 11.0.0, SDMA0 6.0.0, HDP 6.0.0\n"
            "firmware: none read\n"
            "SMU firmware: 78.74.0 (0x4e4a00)\n");
  EXPECT_NE(text.find(", gmc not run, ih not run, psp not run, smu "), std::string::npos) << text;
}

// A block that records its init and fini and checks the context it is given.
class RecordingBlock final : public IpBlockDriver {
 public:
  RecordingBlock(std::string name, std::vector<std::string>& order) : name_(std::move(name)), order_(order) {}
  void init(BootContext& c) override {
    order_.push_back(name_);
    EXPECT_EQ(c.page_table_base, 0x1234001u);
    EXPECT_EQ(c.fb_base, 0x8000000000u);
    EXPECT_EQ(c.vram_size, kMiB * 256);
    EXPECT_EQ(c.discovery.version(hw_id::MP0).to_string(), "13.0.0");
    EXPECT_TRUE(c.firmware.empty());
  }
  void fini(BootContext&) override {
    order_.push_back("fini " + name_);
    if (name_ == "psp") throw Error("the PSP did not answer");  // the others still run
  }
  std::string status() override { return name_ + ": recorded"; }

 private:
  std::string name_;
  std::vector<std::string>& order_;
};

// The boot walks the ASIC's blocks in its order, the shutdown in the reverse one; a fini that
// throws does not stop the others, and its error comes after the last.
TEST_F(AmBootTest, BlocksInitInBootOrderAndFiniInReverse) {
  AmBoot boot(window_, vram_.span(), options_);
  std::vector<std::string> order;
  AmAsic asic(boot.asic(), [&](const BlockSpec& spec, AmAsic& a) -> std::unique_ptr<IpBlockDriver> {
    if (spec.kind == BlockKind::Soc || spec.kind == BlockKind::Smu)
      return AmAsic::standard_block(spec, a);
    return std::make_unique<RecordingBlock>(block_kind_name(spec.kind), order);
  });
  const BootReport& r = boot.run(asic, 0x1234001);
  EXPECT_EQ(order, (std::vector<std::string>{"gmc", "ih", "psp", "gfx", "sdma"}));
  std::vector<std::string> phases;
  for (auto& p : r.phases) phases.push_back(p.name);
  EXPECT_EQ(phases, (std::vector<std::string>{"discovery", "firmware", "reset", "soc", "gmc", "ih",
                                              "psp", "smu", "gfx", "sdma"}));
  for (const char* name : {"soc", "gmc", "ih", "psp", "smu", "gfx", "sdma"}) EXPECT_TRUE(r.phase(name)->run);
  EXPECT_EQ(asic.status(), "gmc: recorded\nih: recorded\npsp: recorded\ngfx: recorded\nsdma: recorded");
  order.clear();
  EXPECT_EQ(error_of<Error>([&] { boot.shutdown(asic); }),
            "AM gfx1100 shutdown: the PSP did not answer");
  EXPECT_EQ(order, (std::vector<std::string>{"fini sdma", "fini gfx", "fini psp", "fini ih", "fini gmc"}));
}

TEST_F(AmBootTest, AGpuBootedBeforeIsResetThroughTheSmu) {
  regs_.reg(mp_13_0_0::MP0_SMN_C2PMSG_81) = 0x1;  // sOS running (amdgpu left it)
  AmBoot boot(window_, vram_.span(), options_);
  AmAsic asic(boot.asic(), own_blocks_only);
  const BootReport& r = boot.run(asic, 0);
  EXPECT_EQ(r.previous.describe(), "booted by another driver (sOS running), SMU answering");
  EXPECT_TRUE(r.reset);
  EXPECT_TRUE(r.phase("reset")->run);
  EXPECT_EQ(regs_.smu().mode1_resets(), 1u);
  EXPECT_EQ(bus_master_, (std::vector<bool>{false, true}));

  // The next boot finds hcq's marker and resets again.
  AmBoot again(window_, vram_.span(), options_);
  EXPECT_EQ(again.inspect().describe(), "booted by hcq (SCRATCH_REG7 0x68637101), SMU answering");
  AmAsic asic_again(again.asic(), own_blocks_only);
  EXPECT_TRUE(again.run(asic_again, 0).reset);
  EXPECT_EQ(regs_.smu().mode1_resets(), 2u);

  regs_.reg(gc_11_0_0::SCRATCH_REG7) = 0xa0000008;  // tinygrad's AMDev.Version
  AmBoot third(window_, vram_.span(), options_);
  EXPECT_EQ(third.inspect().describe(), "booted by tinygrad (SCRATCH_REG7 0xa0000008), SMU answering");
}

TEST_F(AmBootTest, AResetThatLeavesTheSosRunningTimesOutNamingTheRegister) {
  regs_.reg(mp_13_0_0::MP0_SMN_C2PMSG_81) = 0x1;
  regs_.reset_takes = false;
  AmBoot boot(window_, vram_.span(), options_);
  AmAsic asic(boot.asic(), own_blocks_only);
  EXPECT_EQ(error_of<TimeoutError>([&] { boot.run(asic, 0); }),
            "MP0_SMN_C2PMSG_81: waited 20 ms for 0x0 (mask 0xffffffff), last read 0x1");
}

TEST_F(AmBootTest, ASilentSmuIsNotReset) {
  regs_.reg(mp_13_0_0::MP0_SMN_C2PMSG_81) = 0x1;
  regs_.smu().force_response(0);  // never answers
  AmBoot boot(window_, vram_.span(), options_);
  const PreviousState s = boot.inspect();
  EXPECT_EQ(s.describe(), "booted by another driver (sOS running), SMU not answering");
  EXPECT_TRUE(s.booted());
  EXPECT_FALSE(s.smu_alive);
}

TEST_F(AmBootTest, VramAndDiscoveryErrors) {
  regs_.reg(nbio_4_3_0::RCC_CONFIG_MEMSIZE) = 0xffffffff;
  EXPECT_EQ(error_of<Error>([&] { AmBoot(window_, vram_.span(), options_); }),
            "BAR5 of test: RCC_CONFIG_MEMSIZE reads 0xffffffff, not a VRAM size in MiB: the GPU "
            "does not answer (in reset or powered down)");
  regs_.reg(nbio_4_3_0::RCC_CONFIG_MEMSIZE) = 512;
  EXPECT_EQ(error_of<Error>([&] { AmBoot(window_, vram_.span(), options_); }),
            "BAR5 of test: the VRAM BAR maps 0x10000000 of the 0x20000000 bytes of VRAM "
            "RCC_CONFIG_MEMSIZE reports; hcq's AM driver needs all of VRAM mapped (resizable BAR "
            "enabled)");
  regs_.reg(nbio_4_3_0::RCC_CONFIG_MEMSIZE) = 256;
  std::byte* table = vram_.base + kVram - 64 * 1024;
  table[100] ^= std::byte{0x40};  // inside the IP table: its checksum no longer holds
  const std::string expected =
      error_of([&] { parse_discovery(std::span<const std::byte>(table, kDiscoveryTmrSize)); });
  EXPECT_EQ(expected.rfind("IP discovery table: ", 0), 0u) << expected;
  EXPECT_EQ(error_of([&] { AmBoot(window_, vram_.span(), options_); }), expected);
}

TEST_F(AmBootTest, MissingFirmwareNamesTheFile) {
  options_.firmware_dir = "/nonexistent/amdgpu";
  const std::string first = gfx1100_firmware_names().front();
  EXPECT_EQ(error_of<Error>([&] { AmBoot(window_, vram_.span(), options_); }),
            error_of<Error>([&] { load_firmware(first, "/nonexistent/amdgpu"); }));
}

// ---- index/data pairs -------------------------------------------------------------------

TEST(AmIndexPairs, LayoutsCarryTheLinuxOffsets) {
  os::IndexDataLayout mm = mm_index_layout();
  EXPECT_EQ(mm.index, 0x0u);
  EXPECT_EQ(mm.data, 0x4u);
  EXPECT_EQ(mm.vram_index_hi, 0x18u);
  EXPECT_EQ(mm.address_limit, 0x80000000u);
  os::IndexDataLayout p = pcie_index2_layout_nbio_4_3_0(0);
  EXPECT_EQ(p.index, 0x38u);     // regBIF_BX0_PCIE_INDEX2 0x000e
  EXPECT_EQ(p.data, 0x3cu);      // regBIF_BX0_PCIE_DATA2 0x000f
  EXPECT_EQ(p.index_hi, 0x44u);  // regBIF_BX0_PCIE_INDEX2_HI 0x0011
  os::IndexDataLayout moved = pcie_index2_layout_nbio_4_3_0(0x100);
  EXPECT_EQ(moved.index, 0x438u);
  EXPECT_EQ(moved.data, 0x43cu);
  EXPECT_EQ(moved.index_hi, 0x444u);
  // regBIF_BX_PF0_RSMU_INDEX 0x0 / _DATA 0x1 in NBIO segment 1 (0x14 dwords on Navi 31).
  os::IndexDataLayout rsmu = rsmu_layout_nbio_4_3_0(0x14);
  EXPECT_EQ(rsmu.index, 0x50u);
  EXPECT_EQ(rsmu.data, 0x54u);
  EXPECT_EQ(rsmu.index_hi, 0u);
  EXPECT_EQ(rsmu.address_limit, 0x100000000u);
}

// ---- the ASIC table ----------------------------------------------------------------------

// gfx1100's discovery table with `edit` applied to each IP entry; an entry it sets to hw_id 0
// is dropped.
template <class Edit>
Discovery discovery_with(Edit edit) {
  emu::DiscoveryTableSpec spec = emu::gfx1100_discovery_spec();
  for (auto& die : spec.dies) {
    for (emu::DiscoveryIpEntry& ip : die) edit(ip);
    std::erase_if(die, [](const emu::DiscoveryIpEntry& ip) { return ip.hw_id == 0; });
  }
  return parse_discovery(emu::write_discovery_table(spec));
}

TEST(AmAsicTable, Gfx1100IsFoundByItsIpVersionsAndOthersAreExactErrors) {
  const AsicDescription& gfx1100 = gfx1100_asic();
  EXPECT_EQ(&find_asic(discovery_with([](auto&) {})), &gfx1100);
  std::vector<std::string> blocks;
  for (const BlockSpec& b : gfx1100.blocks)
    blocks.push_back(std::string(block_kind_name(b.kind)) + " " + hw_id_name(b.hw_id) + " " +
                     b.version.to_string());
  EXPECT_EQ(blocks, (std::vector<std::string>{"soc NBIF 4.3.0", "gmc MMHUB 3.0.0", "ih OSSSYS 6.0.0",
                                              "psp MP0 13.0.0", "smu MP1 13.0.0", "gfx GC 11.0.0",
                                              "sdma SDMA0 6.0.0"}));
  EXPECT_EQ(gfx1100.firmware, gfx1100_firmware_names());

  EXPECT_EQ(error_of<InvalidInput>([] {
              find_asic(discovery_with([](emu::DiscoveryIpEntry& ip) {
                if (ip.hw_id == hw_id::GC) ip.major = 10, ip.minor = 3;
              }));
            }),
            "IP discovery table: GC 10.3.0: hcq's AM boot knows GC 11.0.0 (gfx1100) only");
  EXPECT_EQ(error_of<InvalidInput>([] {
              find_asic(discovery_with([](emu::DiscoveryIpEntry& ip) {
                if (ip.hw_id == hw_id::MMHUB) ip.revision = 1;
              }));
            }),
            "IP discovery table: MMHUB 3.0.1 where hcq's gfx1100 has MMHUB 3.0.0");
  EXPECT_EQ(error_of<InvalidInput>([] {
              find_asic(discovery_with([](emu::DiscoveryIpEntry& ip) {
                if (ip.hw_id == hw_id::SDMA0) ip.hw_id = 0;
              }));
            }),
            "IP discovery table: SDMA0 missing where hcq's gfx1100 has SDMA0 6.0.0");
  // No description at all.
  EXPECT_EQ(error_of<InvalidInput>([] { find_asic(discovery_with([](auto&) {}), {}); }),
            "IP discovery table: GC 11.0.0: hcq's AM boot knows no ASIC");
}

// ---- the device name --------------------------------------------------------------------

TEST(AmDriverName, PciAddresses) {
  EXPECT_TRUE(is_pci_address("0000:03:00.0"));
  EXPECT_TRUE(is_pci_address("10de:ff:1f.7"));
  for (const char* bad : {"03:00.0", "0000:03:00.8", "0000:03:20.0", "0000:03:00", "0000-03:00.0",
                          "0000:0g:00.0", "0000:03:00.00", ""})
    EXPECT_FALSE(is_pci_address(bad)) << bad;
}

TEST(AmDriverName, FactoryRefusesABadAddressExactly) {
  auto f = amd::factory();
  EXPECT_EQ(error_of([&] { f.open("am:03:00.0"); }),
            "bad device name 'am:03:00.0': expected am:<domain:bus:device.function>, e.g. "
            "am:0000:03:00.0");
  EXPECT_EQ(error_of([&] { f.open("am:"); }),
            "bad device name 'am:': expected am:<domain:bus:device.function>, e.g. "
            "am:0000:03:00.0");
}

TEST(AmDriverName, FirmwareDirectory) {
  const char* old = std::getenv("HCQ_AM_FIRMWARE_DIR");
  const std::string saved = old ? old : "";
  unsetenv("HCQ_AM_FIRMWARE_DIR");
  EXPECT_EQ(am_firmware_dir(), "/lib/firmware/amdgpu");
  setenv("HCQ_AM_FIRMWARE_DIR", "/tmp/fw", 1);
  EXPECT_EQ(am_firmware_dir(), "/tmp/fw");
  EXPECT_EQ(am_firmware_dir("/opt/fw"), "/opt/fw");
  if (old) setenv("HCQ_AM_FIRMWARE_DIR", saved.c_str(), 1);
  else unsetenv("HCQ_AM_FIRMWARE_DIR");
}

}  // namespace
}  // namespace hcq::amd::am
