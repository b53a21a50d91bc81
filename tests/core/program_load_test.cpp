// lib/core's load_program: a driver only lays a code object out (DeviceDriver::program_layout,
// no Device in reach); core allocates, relocates, copies and builds the kernels. A stub
// driver hands out host memory and returns a fixed layout.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "core/hcq.hpp"

namespace hcq {
namespace {

class NoQueue final : public HwQueue {
 public:
  void submit(const uint32_t*, size_t) override {}
  void submit_indirect(uint64_t, size_t) override {}
  size_t max_indirect_dwords() const override { return SIZE_MAX; }
};

class NoEncoder final : public Encoder {
 public:
  void wait(CommandStream&, uint64_t, uint64_t, std::vector<PatchSite>&) override {}
  void signal(CommandStream&, uint64_t, uint64_t, bool, std::vector<PatchSite>&) override {}
  void timestamp(CommandStream&, uint64_t, std::vector<PatchSite>&) override {}
  void memory_barrier(CommandStream&) override {}
  void exec(CommandStream&, const KernelObject&, uint64_t, Dim3, Dim3,
            std::vector<PatchSite>&) override {}
  void copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) override {}
};

class LayoutDriver final : public DeviceDriver {
 public:
  LayoutDriver() {
    props_.name = "stub:0";
    props_.caps.host_reachable = props_.caps.map_host = true;
  }
  ~LayoutDriver() override {
    for (auto& [va, host] : memory_) std::free(host);
  }
  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return 1ull << 40; }
  uint64_t va_size() const override { return 1ull << 30; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override {
    void* host = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!host) throw Error("stub: out of memory");
    memory_[va] = host;
    if (executable) executable_va = va;
    return {va, size, host, kind, 0, false};
  }
  void free(const Allocation& a) override {
    std::free(memory_.at(a.va));
    memory_.erase(a.va);
  }
  Allocation map_user(void*, uint64_t) override { throw InvalidInput("stub: no userptr"); }
  std::unique_ptr<HwQueue> create_queue(QueueKind) override { return std::make_unique<NoQueue>(); }
  std::unique_ptr<Encoder> encoder(QueueKind) override { return std::make_unique<NoEncoder>(); }
  // 6 bytes "abcdef" in a 16-byte image; the relocation writes the address's low byte at 8.
  // Kernel "k" at offset 4, "nope" not launchable.
  ProgramLayout program_layout(std::span<const std::byte>) override {
    ProgramLayout l;
    l.vendor = std::string("Stub");
    for (char c : std::string("abcdef")) l.bytes.push_back(std::byte(c));
    l.size = 16;
    l.alignment = alignment;
    l.relocate = [](std::span<std::byte> image, uint64_t va) {
      ASSERT_EQ(image.size(), 16u);
      image[8] = std::byte(va & 0xff);
    };
    l.kernels = {{kernel(std::string("k"), 4), ""},
                 {kernel(std::string("nope"), 8), "needs scratch memory"}};
    l.place = [this](KernelObject& kernel, uint64_t va) {
      kernel.code_va += va;
      placed++;
    };
    return l;
  }
  // (A string moved in: GCC 12's -O3 -Wrestrict misreads a literal assigned to a member.)
  static std::shared_ptr<KernelObject> kernel(std::string name, uint64_t offset) {
    auto k = std::make_shared<KernelObject>();
    k->name = std::move(name);
    k->code_va = offset;
    return k;
  }
  void wait_interrupt(std::chrono::milliseconds) override {}
  void check_faults() override {}
  std::string hang_report() override { return ""; }

  uint64_t alignment = 256;
  uint64_t executable_va = 0;
  int placed = 0;
  std::map<uint64_t, void*> memory_;

 private:
  DeviceProperties props_;
};

struct Stub {
  Stub() {
    auto d = std::make_unique<LayoutDriver>();
    drv = d.get();
    Device::Options opt;
    opt.kernarg_ring_bytes = opt.staging_ring_bytes = 8192;
    opt.staging_chunk_bytes = 4096;
    dev = std::make_unique<Device>(std::move(d), opt);
  }
  LayoutDriver* drv;
  std::unique_ptr<Device> dev;
};

TEST(ProgramLoad, CoreAllocatesRelocatesCopiesAndPlacesTheKernelsTheLayoutNames) {
  Stub s;
  std::unique_ptr<ProgramImage> img = load_program(*s.dev, {});
  const uint64_t va = s.drv->executable_va;
  ASSERT_NE(va, 0u);
  const auto* host = static_cast<const unsigned char*>(s.drv->memory_.at(va));
  unsigned char want[16] = {'a', 'b', 'c', 'd', 'e', 'f', 0, 0, uint8_t(va & 0xff)};
  EXPECT_EQ(std::memcmp(host, want, 16), 0);
  auto k = img->kernel("k");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->code_va, va + 4);
  EXPECT_EQ(s.drv->placed, 1);  // the launchable kernel only
  EXPECT_EQ(img->kernel_names(), std::vector<std::string>{"k"});
  try {
    img->kernel("nope");
    FAIL() << "a kernel that cannot launch was handed out";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "kernel 'nope' needs scratch memory, which hcq's Stub launches do not provide yet");
  }
}

TEST(ProgramLoad, AnAddressOffTheLayoutsAlignmentIsAnError) {
  Stub s;
  s.drv->alignment = 1ull << 41;  // no address in the stub's range is a multiple
  try {
    load_program(*s.dev, {});
    FAIL() << "loaded at a misaligned address";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "stub:0: code memory at " + hex(s.drv->executable_va) +
                                         " is not aligned to " + std::to_string(1ull << 41));
  }
}

}  // namespace
}  // namespace hcq
