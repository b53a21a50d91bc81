// Device operations from several threads at once, and a failed submission, on every emulated
// target: what Device's header promises may be called concurrently is called so here, and
// every result is checked byte for byte.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include <sys/stat.h>
#include <unistd.h>

#include "common/cpu_written.hpp"
#include "common/hardware_devices.hpp"
#include "common/patterns.hpp"
#include "batch/batch.hpp"
#include "core/hcq.hpp"
#include "kernels.hpp"

namespace hcq {
namespace {

using testing_support::device_name;

class Concurrency : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { kernels::register_cpu_implementations(); }
  std::shared_ptr<const ProgramImage> kernels_for(Device& dev) {
    auto image = kernels::code_object(dev.properties().arch);
    if (image.empty()) return nullptr;
    return load_program(dev, image);
  }
};

using testing_support::pattern;

// Eight threads round-trip their own bytes through one device's staging ring, small enough
// that every copy wraps it several times: a copy-out slot must not be handed to another copy
// before its host read is done.
TEST_P(Concurrency, EightThreadsOfStagedCopiesGetTheirOwnBytes) {
  Device::Options opt;
  opt.staging_ring_bytes = 256 << 10;
  opt.staging_chunk_bytes = 32 << 10;
  auto dev = Device::open(device_name(GetParam()), opt);
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 8; t++)
    threads.emplace_back([&, t] {
      try {
        std::mt19937 rng(t);
        Buffer b = dev->allocate(600 << 10);
        for (uint32_t iter = 0; iter < 12; iter++) {
          const size_t n = 1 + rng() % (600 << 10);
          auto in = pattern(n, t * 1000 + iter);
          dev->copy_in(b, 0, in.data(), n);
          std::vector<uint8_t> out(n);
          dev->copy_out(out.data(), b, 0, n);
          if (out != in) wrong++;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        errors++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << "round trips that returned other bytes (of 96)";
  EXPECT_EQ(errors.load(), 0);
}

// Launches, fills and copies from eight threads, each on its own buffers.
TEST_P(Concurrency, EightThreadsOfLaunchesAndCopiesGetTheirOwnResults) {
  Device::Options opt;
  opt.staging_ring_bytes = 256 << 10;
  opt.staging_chunk_bytes = 32 << 10;
  auto dev = Device::open(device_name(GetParam()), opt);
  auto img = kernels_for(*dev);
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam();
  Program fill(*dev, img, "fill_u32");
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 8; t++)
    threads.emplace_back([&, t] {
      try {
        const uint32_t n = 40000, block = 64;
        Buffer a = dev->allocate(n * 4), c = dev->allocate(n * 4);
        for (uint32_t iter = 0; iter < 6; iter++) {
          const uint32_t value = t * 1000 + iter;
          fill.launch(KernelArgs().buffer(a).value(value).value(n).value(block),
                      {(n + block - 1) / block, 1, 1}, {block, 1, 1});
          std::vector<uint32_t> in(n, value + 1), out(n);
          dev->copy_in(c, 0, in.data(), n * 4);
          dev->copy_out(out.data(), a, 0, n * 4);
          for (uint32_t v : out)
            if (v != value) {
              wrong++;
              break;
            }
          dev->copy_out(out.data(), c, 0, n * 4);
          if (out != in) wrong++;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        errors++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

// A submission that fails after its timeline value was handed out (here: kernel arguments
// that cannot fit the argument ring) must not leave that value unsignalled: everything after
// it would wait for it forever.
TEST_P(Concurrency, AFailedSubmissionDoesNotLeaveTheDeviceStuck) {
  Device::Options opt;
  opt.kernarg_ring_bytes = 8;  // no kernel's arguments fit
  auto dev = Device::open(device_name(GetParam()), opt);
  auto img = kernels_for(*dev);
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam();
  Program fill(*dev, img, "fill_u32");
  Buffer b = dev->allocate(4096);
  const uint64_t before = dev->timeline().last();
  try {
    fill.launch(KernelArgs().buffer(b).value(7u).value(1024u).value(64u), {16, 1, 1}, {64, 1, 1});
    FAIL() << "a launch whose arguments cannot fit the ring succeeded";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("ring of 8 bytes cannot hold a chunk of"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dev->timeline().last(), before);
  dev->synchronize(std::chrono::milliseconds(2000));
  std::vector<uint32_t> in(1024, 5), out(1024);
  dev->copy_in(b, 0, in.data(), 4096);
  dev->copy_out(out.data(), b, 0, 4096);
  EXPECT_EQ(out, in);
  dev->synchronize(std::chrono::milliseconds(2000));
}

// Buffers, Signals, Programs (and the program image's code memory) and batch executables
// that outlive their Device: releasing them does nothing, using them is an exact error, and
// ASan (CI) sees no use after free.
TEST_P(Concurrency, HandlesThatOutliveTheirDeviceAreDetached) {
  Buffer buffer, mapped;
  Signal signal;
  std::shared_ptr<const ProgramImage> image;
  std::optional<Program> program;
  std::optional<batch::Executable> exe;
  const std::string name = device_name(GetParam());
  alignas(4096) static char host_page[4096];
  {
    auto dev = Device::open(name);
    buffer = dev->allocate(8192);
    signal = dev->new_signal(5);
    try {
      mapped = dev->map_host(host_page, 4096);
    } catch (const Error&) {
      // msm DRM and devices that cannot reach host memory map no user memory
    }
    image = kernels_for(*dev);
    if (image) {
      program.emplace(*dev, image, "fill_u32");
      batch::Schedule s(*dev);
      s.launch(*program, {1, 1, 1}, {64, 1, 1},
               {batch::Arg::buffer(batch::Mem::of(buffer)), batch::Arg::value(1u),
                batch::Arg::value(64u), batch::Arg::value(64u)});
      exe.emplace(s.compile());
      exe->run(batch::Bindings());
    }
    EXPECT_EQ(signal.value(), 5u);
  }
  EXPECT_TRUE(buffer);
  EXPECT_EQ(buffer.device(), nullptr);
  auto says = [&](auto&& call, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), text);
    }
  };
  const std::string sig = "signal " + std::to_string(signal.id());
  says([&] { (void)signal.value(); },
       sig + " of " + name + " used after " + name +
           " was closed (a handle must not outlive its Device)");
  says([&] { signal.wait(6, std::chrono::milliseconds(10)); },
       sig + " of " + name + " used after " + name +
           " was closed (a handle must not outlive its Device)");
  if (program) {
    says([&] { program->launch(KernelArgs().buffer(buffer).value(1u).value(1u).value(1u),
                               {1, 1, 1}, {1, 1, 1}); },
         "program 'fill_u32' of " + name + " used after " + name +
             " was closed (a handle must not outlive its Device)");
    says([&] { exe->run(batch::Bindings()); },
         "batch executable of " + name + " used after " + name +
             " was closed (a handle must not outlive its Device)");
  }
  // Another device refuses the detached buffer by name.
  auto other = Device::open("emu:gfx1100");
  std::vector<uint8_t> bytes(16);
  says([&] { other->copy_out(bytes.data(), buffer, 0, 16); },
       "emu:gfx1100: copy_out: the buffer's device was closed");
  // Released in an order that once used the freed device.
  exe.reset();
  program.reset();
  image.reset();
  signal.reset();
  buffer.reset();
  mapped.reset();
  EXPECT_FALSE(buffer);
}

// Destroying a device whose GPU is stuck in a kernel that never ends returns within the bound
// Device's header gives (2 s of waiting for the work, then the GPU abandons it), not after the
// kernel's own 30 s.
TEST_P(Concurrency, DestroyingADeviceWithAKernelThatNeverEndsIsBounded) {
  auto dev = Device::open(device_name(GetParam()));
  auto img = kernels_for(*dev);
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam();
  ShadowMemory flag(*dev, 4096);  // CPU-visible memory, or written through the port
  testing_support::store_u32(flag, 0, 0);
  {
    Program spin(*dev, img, "spin_until");
    spin.launch(KernelArgs().buffer(flag.buffer()), {1, 1, 1}, {1, 1, 1});
  }
  img.reset();
  const auto start = std::chrono::steady_clock::now();
  dev.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::milliseconds(2000 + 3000))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// A batch whose host load is blocked (a FIFO no one writes): run() returns, wait() times out,
// and destroying the executable returns too instead of waiting for a writer forever.
TEST_P(Concurrency, AnExecutableWhoseFileLoadIsBlockedIsDestroyedInBoundedTime) {
  auto dev = Device::open(device_name(GetParam()));
  const std::string fifo = ::testing::TempDir() + "/hcq_blocked_fifo_" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Buffer dst = dev->allocate(4096);
  {
    batch::Schedule s(*dev);
    s.load(batch::Mem::of(dst), 0, fifo, 0, 4096);
    auto exe = std::make_unique<batch::Executable>(s.compile());
    exe->run(batch::Bindings());
    EXPECT_THROW(exe->wait(std::chrono::milliseconds(200)), TimeoutError);
    const auto start = std::chrono::steady_clock::now();
    exe.reset();
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::milliseconds(3000 + 2000))
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  }
  ::unlink(fifo.c_str());
}

// Freed buffers wait in the device's cache for a buffer of their size; when the device runs
// out of memory, what the cache holds is given back before the allocation fails.
TEST_P(Concurrency, MemoryTheBufferCacheHoldsIsGivenBackWhenTheDeviceRunsOut) {
  Device::Options opt;
  opt.buffer_cache_bytes = uint64_t(1) << 40;  // keep everything freed
  auto dev = Device::open(device_name(GetParam()), opt);
  const uint64_t total = dev->properties().device_memory_bytes;
  if (dev->driver().va_size() < total)
    GTEST_SKIP() << "the GPU address range is smaller than the device memory";
  const uint64_t quarter = total / 4 / (2 << 20) * (2 << 20);
  {
    std::vector<Buffer> held;
    for (int i = 0; i < 3; i++) held.push_back(dev->allocate(quarter));
  }  // three quarters now sit in the cache
  Buffer big = dev->allocate(quarter * 2);  // another size: fits only once the cache gives back
  EXPECT_EQ(big.size(), quarter * 2);
}

// Executable's contract: one executable replayed from several threads, and executables of
// one compilation (identical schedules share their command buffers) run from several threads,
// each see their own bindings: runs of a compilation are serialised, each fencing on the one
// before. Each thread checks every result of its own runs.
void replay_from_threads(Device& dev, const Program& scale, bool one_executable,
                         uint32_t threads_n) {
  const uint32_t n = 2000, block = 100;
  auto make = [&](batch::Schedule& s) {
    batch::Mem x = s.input(n * 4), y = s.input(n * 4);
    auto a = s.scalar<float>();
    s.launch(scale, {n / block, 1, 1}, {block, 1, 1},
             {batch::Arg::buffer(x), batch::Arg::scalar(a), batch::Arg::value(1.0f),
              batch::Arg::value(n), batch::Arg::value(block)});
    s.copy(y, 0, x, 0, n * 4);
    return std::tuple{x, y, a};
  };
  batch::Schedule shared_schedule(dev);
  // Plain variables, not a structured binding: the threads capture them (clang before 16
  // cannot capture a binding).
  const auto shared_parts = make(shared_schedule);
  const batch::Mem sx = std::get<0>(shared_parts), sy = std::get<1>(shared_parts);
  const auto sa = std::get<2>(shared_parts);
  batch::Executable shared = shared_schedule.compile();
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < threads_n; t++)
    threads.emplace_back([&, t] {
      try {
        batch::Schedule own_schedule(dev);
        auto [ox, oy, oa] = make(own_schedule);
        std::optional<batch::Executable> own;
        if (!one_executable) {
          own.emplace(own_schedule.compile());
          if (!own->shares_compilation_with(shared)) errors++;  // the case under test
        }
        batch::Executable& exe = one_executable ? shared : *own;
        batch::Mem x = one_executable ? sx : ox, y = one_executable ? sy : oy;
        auto a = one_executable ? sa : oa;
        Buffer bx = dev.allocate(n * 4), by = dev.allocate(n * 4);
        for (uint32_t iter = 0; iter < 15; iter++) {
          std::vector<float> in(n);
          for (uint32_t i = 0; i < n; i++) in[i] = float(i + t * 7 + iter);
          dev.copy_in(bx, 0, in.data(), n * 4);
          const float factor = float(t + 2);
          dev.timeline().wait(exe.run(batch::Bindings().input(x, bx).input(y, by).scalar(a, factor)));
          std::vector<float> out(n);
          dev.copy_out(out.data(), by, 0, n * 4);
          for (uint32_t i = 0; i < n; i++)
            if (out[i] != std::fma(factor, in[i], 1.0f)) {
              wrong++;
              break;
            }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        errors++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << "runs whose results were another thread's";
  EXPECT_EQ(errors.load(), 0);
}

TEST_P(Concurrency, OneBatchExecutableReplayedFromTwoThreadsGivesEachItsResults) {
  auto dev = Device::open(device_name(GetParam()));
  auto img = kernels_for(*dev);
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam();
  replay_from_threads(*dev, Program(*dev, img, "scale_add"), true, 2);
}

TEST_P(Concurrency, BatchExecutablesSharingACompilationRunFromTwoThreads) {
  auto dev = Device::open(device_name(GetParam()));
  auto img = kernels_for(*dev);
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam();
  replay_from_threads(*dev, Program(*dev, img, "scale_add"), false, 2);
}

INSTANTIATE_TEST_SUITE_P(Targets, Concurrency,
                         ::testing::Values("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201",
                                           "gfx1100_usb", "gfx1100_am", "sm_80", "sm_90", "sm_100", "a660",
                                           "a740", "a660_msm", "a740_msm"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Hardware, Concurrency,
                         ::testing::ValuesIn(testing_support::devices_from_env("HCQ_TEST_DEVICES")),
                         [](const auto& info) { return testing_support::test_name(info.param); });

}  // namespace
}  // namespace hcq
