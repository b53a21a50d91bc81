// Memory the CPU and a device share (signals, kernel arguments, staging): a device whose
// memory of that kind has no CPU mapping cannot be opened, and the error says why. A stub
// driver stands in, since every emulated device maps that memory.
#include <gtest/gtest.h>

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

// Hands out memory no CPU mapping backs (Allocation::host null), of whatever kind is asked.
class UnmappedDriver final : public DeviceDriver {
 public:
  explicit UnmappedDriver(bool host_reachable) {
    props_.name = "stub:0";
    props_.caps.host_reachable = props_.caps.map_host = host_reachable;
  }
  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return 1ull << 40; }
  uint64_t va_size() const override { return 1ull << 30; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool) override {
    return {va, size, nullptr, kind, 0, false};
  }
  void free(const Allocation&) override {}
  Allocation map_user(void*, uint64_t) override { throw InvalidInput("stub: no userptr"); }
  std::unique_ptr<HwQueue> create_queue(QueueKind) override {
    return std::make_unique<NoQueue>();
  }
  std::unique_ptr<Encoder> encoder(QueueKind) override { return std::make_unique<NoEncoder>(); }
  ProgramLayout program_layout(std::span<const std::byte>) override { return {}; }
  void wait_interrupt(std::chrono::milliseconds) override {}
  void check_faults() override {}
  std::string hang_report() override { return ""; }

 private:
  DeviceProperties props_;
};

TEST(VisibleMemory, ADeviceWithoutCpuVisibleSharedMemoryIsAClearError) {
  for (bool reach : {true, false}) {
    try {
      Device dev(std::make_unique<UnmappedDriver>(reach), Device::Options{});
      FAIL() << "opened without memory the CPU can see";
    } catch (const InvalidInput&) {
      FAIL() << "not the caller's mistake";
    } catch (const Error& e) {
      // The timeline's signal needs the first signal page.
      EXPECT_EQ(std::string(e.what()),
                std::string("stub:0: a signal page must be memory the CPU and the device "
                            "share, but ") +
                    (reach ? "its host memory is not CPU-visible"
                           : "it cannot reach host memory and its device memory is not "
                             "CPU-visible (a BAR too small to map it)"));
    }
  }
}

}  // namespace
}  // namespace hcq
