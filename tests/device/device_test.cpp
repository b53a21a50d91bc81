// The integration suite every emulated device runs: the real driver code path (KFD ioctls,
// rings and PM4/SDMA packets on AMD; RM/UVM ioctls, GPFIFO channels, methods and QMDs on
// NVIDIA) against the emulated kernel driver and GPU. What differs by vendor (the packet that
// faults, how a hang report reads) is in one table below.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "amd/decode.hpp"
#include "core/hcq.hpp"
#include "common/hardware_devices.hpp"
#include "common/interleave.hpp"
#include "common/patterns.hpp"
#include "common/cpu_written.hpp"
#include "common/error_of.hpp"
#include "kernels.hpp"
#include "nv/push.hpp"
#include "qcom/decode.hpp"

namespace hcq {
namespace {

using testing_support::device_name;
using testing_support::publish_first;
using testing_support::store_u32;

// What a vendor's emulated devices say: a raw submission its engine rejects, and the lines
// the resulting fault and a hang report must contain.
struct Vendor {
  std::string name;
  uint64_t timestamp_hz;
  std::vector<uint32_t> bad_submission;  // raw words for the compute queue
  std::vector<std::string> bad_submission_says;
  std::vector<std::pair<std::string, std::string>> hang_lines;  // each pair on one line
  std::string memory_fault_says;
  std::string wrong_argument_says;  // vector_add with a value for its third argument
};

const Vendor& vendor_of(std::string target) {
  if (target.starts_with("emu:")) target.erase(0, 4);
  static const Vendor amd{
      "AMD",
      100'000'000,
      {0xC0009900, 0},  // PM4 type 3, opcode 0x99: not one hcq describes
      {"GPU hardware exception",
       "\nemulated GPU: compute queue 0: unknown PM4 opcode 0x99 at ring offset 0x0",
       "compute queue 0: read pointer 0x0, write pointer 0x12 (dwords)",
       "\n  HERE >  0x0000  0xc0009900  UNKNOWN  !! unknown opcode 0x99\n"
       "  pending 0x0008  0xc0064900  RELEASE_MEM"},
      {{"compute queue 0: read pointer", "(dwords)"},
       {"  done    0x0000", "ACQUIRE_MEM"},  // the barrier ran
       {"  HERE >  ", "WAIT_REG_MEM"},       // stuck on the wait (gfx9: the low-word one)
       {"  pending ", "RELEASE_MEM"},
       {"copy queue 1: read pointer", "(bytes)"},
       {"  done    0x0000", "POLL_REGMEM"},  // high word: passed
       {"  HERE >  0x002c", "POLL_REGMEM"}},  // low word: waiting
      "GPU memory fault at 0xdead0000",
      "kernel 'vector_add' argument 2 ('c') expects a buffer, got a value"};
  // An incrementing method to COMPUTE offset 0x1234 on subchannel 1 (clc56f.h header format:
  // sec_op 1 << 29, count 1 << 16, subchannel 1 << 13, dword address 0x1234 >> 2).
  static const Vendor nv{
      "NVIDIA",
      1'000'000'000,
      {0x2001248d, 0},
      {"compute channel 0 stopped with channel error 11 (ROBUST_CHANNEL_GR_ERROR_MISSING_HW)",
       "dword 0: unknown COMPUTE method 0x1234 (data 0x0)",
       // It fetched the bad entry, as GPUs do. GP_PUT is 3 when the signal's submission
       // landed first, 2 when that submission already saw the fault (it checks first): a
       // race with the engine thread, lost about 1 run in 30 on a loaded machine.
       "compute channel 0: GP_GET 2, GP_PUT ",
       "\n  done    entry 1: ",
       "  0x0000  0x2001248d  COMPUTE incrementing  SUBCHANNEL=1  COMPUTE.0x1234=0"},
      // Both queues fetched their entries and wait inside them (an H200 reads the same).
      {{"compute channel 0: GP_GET 2, GP_PUT 2; all fetched", ""},
       {"  fetched entry 1: ", "16 dwords"},  // barrier, wait, release: one entry
       {"INVALIDATE_SHADER_CACHES_NO_WFI", ""},
       {"HOST incrementing", "SEM_EXECUTE.OPERATION=2"},  // the acquire it is stuck on
       {"copy channel 1: GP_GET 2, GP_PUT 2; all fetched", ""}},
      "MMU fault at 0xdead0000",
      "kernel 'vector_add' argument 2 ('param2') is 8 bytes, got 4"};
  // Adreno: CP type-7 opcode 0x7f, not one hcq describes (pkt7: type 7 in 31:28, opcode in
  // 22:16 with odd parity at 23 (0x7f has seven ones: 0), count 0 with parity at 15 (1)).
  static const Vendor qcom{
      "Qualcomm",
      19'200'000,
      {0x707f8000},
      {"the GPU faulted on KGSL context 1",
       "dword 0: unknown CP opcode 0x7f",
       "compute queue (KGSL context 1): retired timestamp 0, submissions after it:",
       "\n  HERE >  timestamp 1\n    IB ",
       "      0x0000  0x707f8000  UNKNOWN  !! unknown opcode 0x7f on a"},  // a6xx or a7xx
      {{"compute queue (KGSL context 1)", "submissions after it"},
       {"  HERE >  timestamp 1", ""},
       {"CP_WAIT_REG_MEM", "POLL_ADDR_LO"},  // the wait on the high word, then the low
       {"CP_COND_EXEC", ""},
       {"CP_MEM_WRITE", ""}},  // the signal it did not reach
      "page fault at 0xdead0000",
      "kernel 'vector_add' argument 2 ('c') expects a buffer, got a value"};
  // Behind msm DRM the same, in its words: a submit queue and fences.
  static const Vendor qcom_msm = [] {
    Vendor v = qcom;
    auto reword = [](std::string& s) {
      for (auto [from, to] : {std::pair{"KGSL context 1", "msm submit queue 1"},
                              std::pair{"timestamp", "fence"}})
        for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, strlen(from), to);
    };
    for (auto& s : v.bad_submission_says) reword(s);
    for (auto& [a, b] : v.hang_lines) reword(a), reword(b);
    return v;
  }();
  // A real NVIDIA GPU, as an H200 on RM 580.159 answered: RM's notifier gives the channel
  // error but neither the method nor the address, and the GPU fetches past a semaphore it
  // waits on, so a hang report shows the entries fetched last.
  static const Vendor nv_hardware{
      "NVIDIA",
      1'000'000'000,
      nv.bad_submission,
      {"compute channel 0 stopped with channel error 11 (ROBUST_CHANNEL_GR_ERROR_MISSING_HW)",
       "COMPUTE incrementing  SUBCHANNEL=1  COMPUTE.0x1234=0"},
      nv.hang_lines,
      "stopped with channel error 31 (ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT)",
      nv.wrong_argument_says};
  if (target.rfind("nv:", 0) == 0) return nv_hardware;
  if (target.rfind("sm_", 0) == 0) return nv;
  if (target.rfind("amd:", 0) == 0) return amd;
  if (target.ends_with("_msm")) return qcom_msm;
  // The GPU hcq boots itself (emu:gfx1100_am, am:<BDF>): faults come from the hubs' fault
  // registers and the IH ring (CP_BAD_OPCODE is IH source 183), not from KFD's events; copy
  // queue i is SDMAi queue 0.
  static const Vendor amd_am = [] {
    Vendor v = amd;
    v.bad_submission_says[0] = "client 0x14 source 0xb7 (CP_BAD_OPCODE)";
    // The engine names its queue by HQD (ME 1 pipe 0 queue 0 is 32), not by KFD queue id.
    v.bad_submission_says[1] = "\nemulated GPU: compute queue 32: unknown PM4 opcode 0x99 at ring offset 0x0";
    for (auto& [a, b] : v.hang_lines)
      if (a == "copy queue 1: read pointer") a = "copy queue 0: read pointer";
    v.memory_fault_says = "gfxhub page fault at 0xdead0000";
    return v;
  }();
  // The same driver behind the emulated USB bridge (gfx1100_usb) and on a real one (usb:).
  if (target.ends_with("_am") || target.rfind("am:", 0) == 0 || target.ends_with("_usb") ||
      target.rfind("usb:", 0) == 0)
    return amd_am;
  return target.rfind("a", 0) == 0 || target.rfind("qcom:", 0) == 0 ? qcom : amd;
}

// Devices without a copy engine (Adreno) have no copy queues: tests of copy queues skip there.
#define REQUIRE_COPY_ENGINE()                                                              \
  if (!dev_->properties().caps.copy_engine)                                                \
  GTEST_SKIP() << GetParam() << " has no copy engine (copies are host copies on its shared " \
                                "memory)"


class EmulatedDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::register_cpu_implementations();
    dev_ = Device::open(device_name(GetParam()));
  }
  // The demo kernels for this target, or skip (no compiler for it at build time).
  std::shared_ptr<const ProgramImage> kernels() {
    auto image = kernels::code_object(dev_->properties().arch);
    if (image.empty()) return nullptr;
    return std::shared_ptr<const ProgramImage>(load_program(*dev_, image));
  }
  // Waiting for `s` to reach 1 fails with a GPU fault whose message contains `says`.
  void expect_fault(const Signal& s, const std::string& says) {
    try {
      s.wait(1, std::chrono::milliseconds(5000));
      FAIL() << "expected a fault";
    } catch (const GpuFaultError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  std::unique_ptr<Device> dev_;
};

#define REQUIRE_KERNELS(img)                                                        \
  auto img = kernels();                                                             \
  if (!img) GTEST_SKIP() << "no code object built for " << GetParam()               \
                         << " (no clang with that target at build time)";

using testing_support::pattern;

TEST_P(EmulatedDevice, ReportsItsProperties) {
  const auto& p = dev_->properties();
  EXPECT_EQ(p.name, device_name(GetParam()));
  const std::string name = device_name(GetParam());
  const bool emulated = name.starts_with("emu:");
  if (emulated) {
    // The chip, not the kernel driver (_msm), the bus (_usb) or hcq's own boot (_am).
    EXPECT_EQ(p.arch, name.substr(4, std::min({name.find("_msm"), name.find("_usb"),
                                               name.find("_am")}) -
                                         4));
  }
  EXPECT_EQ(p.vendor, vendor_of(GetParam()).name);
  EXPECT_EQ(p.emulated, emulated);
  EXPECT_GT(p.compute_units, 0u);
  EXPECT_GE(p.device_memory_bytes, 16ull << 30);  // from amdgpu's VRAM_GTT query / RM's FB info
  EXPECT_EQ(p.timestamp_hz, vendor_of(GetParam()).timestamp_hz);
}

TEST_P(EmulatedDevice, CopiesOfEverySizeAtUnalignedOffsetsRoundTrip) {
  for (size_t n : {size_t(1), size_t(3), size_t(4095), size_t(4097), size_t(1 << 20) + 7,
                   size_t(64 << 20) + 5}) {
    auto in = pattern(n, uint32_t(n));
    Buffer b = dev_->allocate(n + 16);
    dev_->copy_in(b, 3, in.data(), n);
    std::vector<uint8_t> out(n + 2, 0xEE);
    dev_->copy_out(out.data() + 1, b, 3, n);
    ASSERT_EQ(out[0], 0xEE);
    ASSERT_EQ(out[n + 1], 0xEE);
    ASSERT_TRUE(std::equal(in.begin(), in.end(), out.begin() + 1)) << n << " bytes";
  }
}

TEST_P(EmulatedDevice, DeviceToDeviceCopyOnTheCopyQueue) {
  auto in = pattern(100000, 7);
  Buffer a = dev_->allocate(100000), b = dev_->allocate(100000);
  dev_->copy_in(a, 0, in.data(), in.size());
  dev_->copy(b, 11, a, 5, 50000);
  std::vector<uint8_t> out(50000);
  dev_->copy_out(out.data(), b, 11, out.size());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin() + 5));
}

// A device opens two copy queues by default (Device::Options::copy_queues) and each copies:
// on emu:gfx1100_am the second is SDMA1's queue 0, with its own ring registers and doorbell.
TEST_P(EmulatedDevice, EveryCopyQueueCopies) {
  REQUIRE_COPY_ENGINE();
  ASSERT_EQ(dev_->queue_count(QueueKind::Copy), 2u);
  auto in = pattern(20000, 9);
  Buffer src = dev_->allocate(in.size());
  dev_->copy_in(src, 0, in.data(), in.size());
  dev_->synchronize();
  Signal s = dev_->new_signal();
  for (uint32_t i = 0; i < 2; ++i) {
    Buffer dst = dev_->allocate(in.size());
    CopyQueue q(*dev_, i);
    q.copy(dst.va(), src.va(), in.size()).signal(s, i + 1);
    q.submit();
    s.wait(i + 1, std::chrono::seconds(10));
    std::vector<uint8_t> out(in.size());
    dev_->copy_out(out.data(), dst, 0, out.size());
    EXPECT_EQ(out, in) << "copy queue " << i;
  }
}

TEST_P(EmulatedDevice, MappedHostMemoryIsReachedWithoutCopies) {
  const size_t n = 3 * 4096;
  const bool reach = dev_->properties().caps.host_reachable;
  if (!dev_->properties().caps.map_host) {  // msm DRM: no userptr buffers; USB: no host memory
    std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(4096, n), &std::free);
    try {
      dev_->map_host(mem.get(), n);
      FAIL() << "map_host worked without caps.map_host";
    } catch (const InvalidInput& e) {
      const uint64_t window = dev_->properties().caps.host_window_bytes;
      std::string why = ": this device cannot reach host memory";
      if (window)  // behind the USB bridge: only the bridge's SRAM, at its PCIe address
        why = ": cannot map user memory [" + hex(reinterpret_cast<uint64_t>(mem.get())) +
              ", +0x3000): the device cannot reach host memory outside the bridge's SRAM "
              "window (" + hex(window) + " bytes at 0x200000)";
      else if (reach)
        why = ": msm DRM cannot map the process's own memory for the GPU (no userptr buffers); "
              "allocate host memory from the device instead";
      EXPECT_EQ(std::string(e.what()), device_name(GetParam()) + why);
    }
    if (reach) return;
    try {
      dev_->allocate(n, MemoryKind::Host);
      FAIL() << "host memory allocated on a device that cannot reach it";
    } catch (const InvalidInput& e) {
      EXPECT_EQ(std::string(e.what()),
                device_name(GetParam()) + ": cannot allocate host memory: this device cannot "
                "reach host memory (allocate_visible gives memory the CPU and the device both "
                "reach)");
    }
    return;
  }
  ASSERT_TRUE(reach);  // a device that cannot reach host memory cannot map it either
  auto* host = static_cast<uint8_t*>(std::aligned_alloc(4096, n));
  std::memset(host, 0, n);
  {
    Buffer h = dev_->map_host(host, n);
    EXPECT_EQ(h.va(), reinterpret_cast<uint64_t>(host));
    auto in = pattern(5000, 3);
    Buffer d = dev_->allocate(5000);
    dev_->copy_in(d, 0, in.data(), in.size());
    dev_->copy(h, 100, d, 0, 5000);  // the copy engine writes straight into host memory
    dev_->synchronize();
    EXPECT_TRUE(std::equal(in.begin(), in.end(), host + 100));
    EXPECT_EQ(host[99], 0);
  }
  try {
    dev_->map_host(host + 1, 4096);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("map_host needs a page-aligned address and size"),
              std::string::npos);
  }
  std::free(host);
}

TEST_P(EmulatedDevice, CopiesBetweenDevicesGoThroughHostMemory) {
  auto other = Device::open("emu:gfx1100");
  auto in = pattern(3 << 20, 9);  // more than one staging chunk
  Buffer a = other->allocate(in.size()), b = dev_->allocate(in.size() + 1);
  other->copy_in(a, 0, in.data(), in.size());
  dev_->copy(b, 1, a, 0, in.size());
  std::vector<uint8_t> out(in.size());
  dev_->copy_out(out.data(), b, 1, out.size());
  EXPECT_EQ(out, in);
}

TEST_P(EmulatedDevice, BadCopyRangesAreClearErrors) {
  Buffer b = dev_->allocate(100);
  char x[200];
  try {
    dev_->copy_in(b, 50, x, 51);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), device_name(GetParam()) +
                                         ": copy_in: range [50, 50+51) is outside the buffer "
                                         "of 100 bytes");
  }
  EXPECT_THROW(dev_->allocate(0), InvalidInput);
}

TEST_P(EmulatedDevice, VectorAddGivesVerifiedResults) {
  REQUIRE_KERNELS(img);
  Program add(*dev_, img, "vector_add");
  const uint32_t n = 1000, block = 64;
  std::vector<float> a(n), b(n), c(n);
  for (uint32_t i = 0; i < n; i++) a[i] = float(i), b[i] = float(3 * i + 1);
  Buffer A = dev_->allocate(n * 4), B = dev_->allocate(n * 4), C = dev_->allocate(n * 4);
  dev_->copy_in(A, 0, a.data(), n * 4);
  dev_->copy_in(B, 0, b.data(), n * 4);
  auto t = add.launch(KernelArgs().buffer(A).buffer(B).buffer(C).value(n).value(block),
                      {(n + block - 1) / block, 1, 1}, {block, 1, 1}, true);
  ASSERT_TRUE(t.has_value());
  EXPECT_GE(*t, 0.0);
  dev_->copy_out(c.data(), C, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_P(EmulatedDevice, CopyComputeCopyChainsAcrossQueues) {
  REQUIRE_KERNELS(img);
  Program scale(*dev_, img, "scale_add");
  const uint32_t n = 4096, block = 128;
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.0f);
  Buffer X = dev_->allocate(n * 4), Y = dev_->allocate(n * 4);
  dev_->copy_in(X, 0, x.data(), n * 4);
  for (int round = 0; round < 5; round++) {
    scale.launch(KernelArgs().buffer(X).value(2.0f).value(1.0f).value(n).value(block),
                 {n / block, 1, 1}, {block, 1, 1});
    dev_->copy(Y, 0, X, 0, n * 4);
    scale.launch(KernelArgs().buffer(Y).value(1.0f).value(-1.0f).value(n).value(block),
                 {n / block, 1, 1}, {block, 1, 1});
    dev_->copy(X, 0, Y, 0, n * 4);
  }
  std::vector<float> out(n);
  dev_->copy_out(out.data(), X, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) {
    float v = float(i);
    for (int r = 0; r < 5; r++) v = (2 * v + 1) - 1;
    ASSERT_EQ(out[i], v) << i;
  }
}

TEST_P(EmulatedDevice, EightThreadsSubmitConcurrently) {
  REQUIRE_KERNELS(img);
  Program fill(*dev_, img, "fill_u32");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 8; t++)
    threads.emplace_back([&, t] {
      try {
        const uint32_t n = 3000, block = 64;
        Buffer b = dev_->allocate(n * 4);
        std::vector<uint32_t> out(n);
        for (uint32_t iter = 0; iter < 10; iter++) {
          uint32_t value = t * 1000 + iter;
          fill.launch(KernelArgs().buffer(b).value(value).value(n).value(block),
                      {(n + block - 1) / block, 1, 1}, {block, 1, 1});
          dev_->copy_out(out.data(), b, 0, n * 4);
          for (uint32_t v : out)
            if (v != value) {
              failures++;
              break;
            }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(EmulatedDevice, AKernelThatNeverFinishesTimesOutWithADiagnostic) {
  REQUIRE_KERNELS(img);
  Program spin(*dev_, img, "spin_until");
  ShadowMemory flag(*dev_, 4096);
  store_u32(flag, 0, 0);
  dev_->synchronize();  // the timeline is where the launch starts (loads may have used it)
  const uint64_t before = dev_->timeline().signal().value();
  try {
    spin.launch(KernelArgs().buffer(flag.buffer()), {1, 1, 1}, {1, 1, 1}, true,
                std::chrono::milliseconds(200));
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(device_name(GetParam()) + ": signal "), std::string::npos) << msg;
    EXPECT_NE(msg.find("timed out after 200 ms: waiting for value >= " + std::to_string(before + 1) +
                       ", value is " + std::to_string(before)),
              std::string::npos)
        << msg;
  }
  store_u32(flag, 0, 1);
  dev_->synchronize();  // the kernel ends once the flag is set; the device stays usable
}

TEST_P(EmulatedDevice, AnUnknownPacketFaultsTheQueueAndTheWaiterHearsOfIt) {
  Signal s = dev_->new_signal();
  const auto& bad = vendor_of(GetParam()).bad_submission;
  dev_->hw_queue(QueueKind::Compute).submit(bad.data(), bad.size());
  ComputeQueue q(*dev_);
  q.signal(s, 1);
  std::string msg;
  try {
    q.submit();  // KGSL refuses work for a context that faulted already
    s.wait(1, std::chrono::milliseconds(5000));
    FAIL() << "expected a fault";
  } catch (const GpuFaultError& e) {
    msg = e.what();
    for (auto& want : vendor_of(GetParam()).bad_submission_says)
      EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;
  }
  // Every later call says the device is unusable since that fault, and how to go on; the
  // fault is not told as if it were new.
  const std::string later = "unusable since an earlier GPU fault; close the device and open it "
                            "again to go on. The fault:\n" + msg;
  EXPECT_EQ(testing_support::error_of<GpuFaultError>([&] { dev_->synchronize(); }), later);
  EXPECT_EQ(testing_support::error_of<GpuFaultError>([&] { s.wait(1, std::chrono::seconds(1)); }),
            later);
  EXPECT_EQ(testing_support::error_of<GpuFaultError>([&] { q.signal(s, 2).submit(); }), later);
}

// A hang: each queue waits for a value that never comes. The timeout names the signal and
// decodes each queue's packets around its read pointer, marking where the engine is.
TEST_P(EmulatedDevice, AHangReportShowsWhereEachQueueWaits) {
  // Each queue signals its own signal: released together, they may finish in either order.
  Signal never = dev_->new_signal(), done = dev_->new_signal(), copied = dev_->new_signal();
  ComputeQueue c(*dev_);
  c.memory_barrier().wait(never, 1).signal(done, 1);
  c.submit();
  std::optional<CopyQueue> k;
  if (dev_->properties().caps.copy_engine) {
    k.emplace(*dev_);
    k->wait(never, 1).signal(copied, 1);
    k->submit();
  }
  const auto& hang_lines = vendor_of(GetParam()).hang_lines;
  auto has_lines = [&](const std::string& text) {
    for (auto& [a, b] : hang_lines) {
      bool found = false;
      std::istringstream lines(text);
      for (std::string l; !found && std::getline(lines, l);)
        found = l.find(a) != std::string::npos && l.find(b) != std::string::npos;
      if (!found) return false;
    }
    return true;
  };
  // The engine reaches the waits on its own thread: let it get there first. 100 ms was not
  // always enough under the sanitizers on a busy machine (issue 44: emu:sm_80 had fetched
  // nothing yet), and the report is of where the queues wait, not of how soon.
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       !has_lines(dev_->driver().hang_report()) && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    done.wait(1, std::chrono::milliseconds(100));
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("waiting for value >= 1, value is 0\n"), std::string::npos) << msg;
    EXPECT_TRUE(has_lines(msg)) << msg;
  }
  never.set(1);  // release both queues so the device drains
  done.wait(1);
  if (k) copied.wait(1);
}

// A recording's words as `props`'s device decodes them (compute queue).
std::vector<DecodedPacket> decode_compute(const DeviceProperties& props,
                                          std::span<const uint32_t> words) {
  if (amd::Gen g; props.vendor == "AMD" && amd::parse_gen(props.arch, g)) return amd::decode_pm4(words, g);
  if (nv::Gen g; props.vendor == "NVIDIA" && nv::parse_gen(props.arch, g)) return nv::decode_push(words, g);
  if (qcom::Gen g; props.vendor == "Qualcomm" && qcom::parse_gen(props.arch, g)) return qcom::decode_cp(words, g);
  ADD_FAILURE() << "no decoder for " << props.vendor << " " << props.arch;
  return {};
}

// A hang inside a bound recording: the ring holds only the call of its indirect buffer (a
// GPFIFO entry, an IB), so the report follows that into the recording, names it and marks
// the wait the engine is on, the packets around it decoded.
TEST_P(EmulatedDevice, AHangReportShowsWhereTheEngineIsInsideABoundRecording) {
  Signal never = dev_->new_signal(), done = dev_->new_signal();
  Buffer scratch = dev_->allocate(4096);
  ComputeQueue c(*dev_);
  for (int i = 0; i < 12; i++) c.signal_at(scratch.va() + 8 * i, i, false);
  const size_t wait_cmd = c.commands();
  c.wait(never, 1);
  for (int i = 12; i < 24; i++) c.signal_at(scratch.va() + 8 * i, i, false);
  c.signal(done, 1);
  c.bind();
  c.submit();
  struct Release {  // a failed ASSERT below still lets the queue drain
    Signal& s;
    ~Release() { s.set(1); }
  } release{never};
  const uint32_t* words = c.patch_bases().second;
  ASSERT_NE(words, nullptr);
  const size_t n = c.stream().size();
  auto packets = decode_compute(dev_->properties(), {words, n});
  const uint32_t wait_dword = c.sites_of(wait_cmd).back().dword;
  size_t here = 0;
  while (here < packets.size() && packets[here].offset + packets[here].dwords <= wait_dword) here++;
  ASSERT_GT(here, 8u);
  ASSERT_LT(here + 8, packets.size());
  std::ostringstream want;
  // The words' device address: their own where the CPU maps the device's memory, else the
  // bound memory's (the words are the CPU's copy of it).
  const uint64_t words_va = c.bound_memory().va() + uint64_t(reinterpret_cast<const std::byte*>(words) -
                                                             c.bound_memory().host());
  want << "    indirect buffer " << hex(words_va) << ", " << n
       << " dwords, the engine at dword " << packets[here].offset << ":";
  for (size_t i = here - 8; i <= here + 8; i++)
    want << "\n      " << (i < here ? "done   " : i == here ? "HERE > " : "pending") << " "
         << to_text(packets[i]);
  const std::string lines = std::string("\n").append(want.str());
  // The engine reaches the wait after twelve writes; on a loaded machine that can take longer
  // than one 100 ms timeout, so the report is asked for again (up to 5 s) until it is there.
  std::string msg;
  for (int tries = 0; tries < 50 && msg.find(lines) == std::string::npos; tries++) {
    try {
      done.wait(1, std::chrono::milliseconds(100));
      ADD_FAILURE() << "expected a timeout";
      break;
    } catch (const TimeoutError& e) {
      msg = e.what();
    }
  }
  never.set(1);
  done.wait(1);
  const size_t at = msg.find(lines);
  ASSERT_NE(at, std::string::npos) << want.str() << "\n----\n" << msg;
  const std::string after = msg.substr(at + lines.size());
  EXPECT_FALSE(after.starts_with("\n      ")) << "more than 8 packets after the wait:\n" << msg;
  // The packet marked is the wait: AMD's WAIT_REG_MEM(64), NVIDIA's semaphore acquire (a HOST
  // method run ending in SEM_EXECUTE), Adreno's CP_WAIT_REG_MEM.
  const std::string wait_text = to_text(packets[here]);
  const bool nv = dev_->properties().vendor == "NVIDIA";
  EXPECT_NE(wait_text.find(nv ? "SEM_EXECUTE" : "WAIT_REG_MEM"), std::string::npos) << wait_text;
}

TEST_P(EmulatedDevice, ACopyToAnUnmappedAddressIsAMemoryFault) {
  Buffer b = dev_->allocate(4096);
  Signal s = dev_->new_signal();
  if (dev_->properties().caps.copy_engine) {
    CopyQueue q(*dev_);
    q.copy(0xdead0000, b.va(), 64);
    q.signal(s, 1);
    q.submit();
  } else {  // no copy queue: the compute queue writes there
    ComputeQueue q(*dev_);
    q.signal_at(0xdead0000, 1, false);
    q.signal(s, 1);
    q.submit();
  }
  expect_fault(s, vendor_of(GetParam()).memory_fault_says);
}

// A device that cannot reach host memory faults on a host address as on any unmapped one;
// the memory it shares with the CPU is its own, at one address for both.
TEST_P(EmulatedDevice, HostMemoryIsUnmappedForADeviceThatCannotReachIt) {
  if (dev_->properties().caps.host_reachable)
    GTEST_SKIP() << GetParam() << " reaches host memory";
  REQUIRE_COPY_ENGINE();
  Buffer b = dev_->allocate(4096);
  Buffer v = dev_->allocate_visible(4096);
  EXPECT_EQ(v.kind(), MemoryKind::Device);
  EXPECT_EQ(reinterpret_cast<uint64_t>(v.host()), v.va());  // one address for CPU and GPU
  std::unique_ptr<void, decltype(&std::free)> host(std::aligned_alloc(4096, 4096), &std::free);
  const uint64_t addr = reinterpret_cast<uint64_t>(host.get());
  Signal s = dev_->new_signal();
  CopyQueue q(*dev_);
  q.copy(b.va(), addr, 64);
  q.signal(s, 1);
  q.submit();
  expect_fault(s, "GPU memory fault at " + hex(addr) + " (page not present)");
}

// Plain, and encoded in place into storage it outgrows (bind() then moves the words to host
// memory and runs a device copy of them, which every patch must reach too).
TEST_P(EmulatedDevice, BoundRecordingsResubmitWithPatchedValues) {
  REQUIRE_COPY_ENGINE();
  for (bool outgrow : {false, true}) {
    SCOPED_TRACE(outgrow ? "outgrown in-place storage" : "plain");
    auto in = pattern(256, 1);
    Buffer src = dev_->allocate(256), d1 = dev_->allocate(256), d2 = dev_->allocate(256);
    dev_->copy_in(src, 0, in.data(), 256);
    dev_->synchronize();
    Signal s = dev_->new_signal();
    CopyQueue q(*dev_);
    if (outgrow) q.encode_in_place(8);  // room for less than a copy and a signal
    auto in_place = q.patch_bases().first;
    q.copy(d1.va(), src.va(), 256);
    q.signal(s, 1);
    q.bind();
    auto [words, device_copy] = q.patch_bases();
    auto same_words = [&, words = words, device_copy = device_copy] {
      const size_t n = q.stream().size();
      return std::equal(words, words + n, device_copy);
    };
    if (outgrow) {
      EXPECT_NE(words, in_place);
      ASSERT_NE(device_copy, nullptr);
      EXPECT_TRUE(same_words());
    }
    q.submit();
    s.wait(1);
    q.update_copy(0, d2.va(), std::nullopt);
    q.update_signal(1, std::nullopt, 2);
    if (outgrow) {
      EXPECT_TRUE(same_words());
    }
    q.submit();
    s.wait(2);
    std::vector<uint8_t> o1(256), o2(256);
    dev_->copy_out(o1.data(), d1, 0, 256);
    dev_->copy_out(o2.data(), d2, 0, 256);
    EXPECT_EQ(o1, in);
    EXPECT_EQ(o2, in);
    EXPECT_THROW(q.update_signal(0, std::nullopt, 3), InvalidInput);  // command 0 is a copy
  }
}

TEST_P(EmulatedDevice, BoundRecordingsOfSeveralQueuesSubmitTogether) {
  REQUIRE_COPY_ENGINE();
  REQUIRE_KERNELS(img);
  Program fill(*dev_, img, "fill_u32");
  const uint32_t n = 256;
  auto in = pattern(n * 4, 3);
  Buffer src = dev_->allocate(n * 4), copied = dev_->allocate(n * 4), filled = dev_->allocate(n * 4);
  dev_->copy_in(src, 0, in.data(), in.size());
  dev_->synchronize();
  ShadowMemory args(*dev_, 4096);
  fill.fill_args(KernelArgs().buffer(filled).value(9u).value(n).value(64u), args.host());
  publish_first(args, 4096);
  Signal s = dev_->new_signal(), t = dev_->new_signal();
  ComputeQueue cq(*dev_);
  cq.memory_barrier().exec(fill, args.va(), {n / 64, 1, 1}, {64, 1, 1}).signal(s, 1);
  CopyQueue kq(*dev_);
  kq.copy(copied.va(), src.va(), n * 4).signal(t, 1);
  cq.bind();
  kq.bind();
  Queue* both[] = {&cq, &kq};
  Queue::submit_together(both);
  s.wait(1);
  t.wait(1);
  std::vector<uint32_t> f(n);
  std::vector<uint8_t> c(n * 4);
  dev_->copy_out(f.data(), filled, 0, n * 4);
  dev_->copy_out(c.data(), copied, 0, n * 4);
  EXPECT_EQ(f, std::vector<uint32_t>(n, 9u));
  EXPECT_EQ(c, in);
  // Again, patched: both queues run their new values.
  cq.update_signal(2, std::nullopt, 2);
  kq.update_signal(1, std::nullopt, 2);
  Queue::submit_together(both);
  s.wait(2);
  t.wait(2);

  CopyQueue unbound(*dev_);
  unbound.copy(copied.va(), src.va(), 4).signal(t, 3);
  Queue* with_unbound[] = {&kq, &unbound};
  auto message_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string name = device_name(GetParam());
  EXPECT_EQ(message_of([&] { Queue::submit_together(with_unbound); }),
            name + ": copy queue: submitting together needs bound recordings");
  auto other = Device::open(device_name(GetParam()));
  CopyQueue elsewhere(*other);
  elsewhere.copy(copied.va(), src.va(), 4);
  elsewhere.bind();
  Queue* two_devices[] = {&cq, &elsewhere};
  EXPECT_EQ(message_of([&] { Queue::submit_together(two_devices); }),
            name + ": queues submitted together must be of one device, not also of " + name);
  std::vector<Queue*> seventeen(17, &cq);
  EXPECT_EQ(message_of([&] { Queue::submit_together(seventeen); }),
            name + ": at most 16 queues submitted together, not 17");
  // No failed call submitted anything: the signals stay where the second submission left them.
  EXPECT_EQ(s.value(), 2u);
  EXPECT_EQ(t.value(), 2u);
}

TEST_P(EmulatedDevice, ComputeRecordingBoundAndPatchedLaunchSize) {
  REQUIRE_KERNELS(img);
  Program fill(*dev_, img, "fill_u32");
  const uint32_t n = 1024, block = 64;
  Buffer b = dev_->allocate(n * 4);
  ShadowMemory args(*dev_, 4096);
  fill.fill_args(KernelArgs().buffer(b).value(7u).value(n).value(block), args.host());
  publish_first(args, 4096);
  Signal s = dev_->new_signal();
  ComputeQueue q(*dev_);
  q.memory_barrier().exec(fill, args.va(), {1, 1, 1}, {block, 1, 1}).signal(s, 1);
  q.bind();
  q.submit();
  s.wait(1);
  std::vector<uint32_t> out(n);
  dev_->copy_out(out.data(), b, 0, n * 4);
  EXPECT_EQ(std::count(out.begin(), out.end(), 7u), block);  // one workgroup ran
  // An NVIDIA launch by address (HCQ_NV_QMD_BY_ADDRESS) keeps its grid in the QMD in memory:
  // nothing in the recording to patch, and update_exec says so.
  if (dev_->properties().description.find("qmd_by_address]") != std::string::npos) {
    try {
      q.update_exec(1, std::nullopt, Dim3{n / block, 1, 1}, std::nullopt);
      ADD_FAILURE() << "expected an error";
    } catch (const InvalidInput& e) {
      EXPECT_EQ(e.what(), dev_->name() + ": launch #1 cannot be updated: its launch descriptor "
                                         "is in memory, not in the recording (record the "
                                         "launch again)");
    }
    return;
  }
  q.update_exec(1, std::nullopt, Dim3{n / block, 1, 1}, std::nullopt);
  q.update_signal(2, std::nullopt, 2);
  q.submit();
  s.wait(2);
  dev_->copy_out(out.data(), b, 0, n * 4);
  EXPECT_EQ(std::count(out.begin(), out.end(), 7u), n);
}

TEST_P(EmulatedDevice, ProgramArgumentErrorsNameTheKernelAndArgument) {
  REQUIRE_KERNELS(img);
  Program add(*dev_, img, "vector_add");
  Buffer b = dev_->allocate(64);
  try {
    add.launch(KernelArgs().buffer(b), {1, 1, 1}, {1, 1, 1});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "kernel 'vector_add' takes 5 arguments, 1 given");
  }
  try {
    add.launch(KernelArgs().buffer(b).buffer(b).value(1u).value(1u).value(1u), {1, 1, 1},
               {1, 1, 1});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.what(), vendor_of(GetParam()).wrong_argument_says);
  }
  EXPECT_THROW(Program(*dev_, img, "no_such_kernel"), InvalidInput);
}

// Tiny rings wrap many times: kernel arguments and staging chunks are reused only after the
// work that reads them is done.
TEST_P(EmulatedDevice, SmallRingsNeverOverwriteWhatQueuedWorkStillNeeds) {
  Device::Options opt;
  opt.kernarg_ring_bytes = 4096;  // ~100 launches' arguments
  opt.staging_ring_bytes = 64 << 10;
  opt.staging_chunk_bytes = 16 << 10;
  auto dev = Device::open(device_name(GetParam()), opt);
  auto in = pattern((1 << 20) + 3, 5);  // 64 staging chunks through a 4-chunk ring
  Buffer b = dev->allocate(in.size());
  dev->copy_in(b, 0, in.data(), in.size());
  std::vector<uint8_t> out(in.size());
  dev->copy_out(out.data(), b, 0, out.size());
  EXPECT_EQ(out, in);
  auto image = kernels::code_object(dev_->properties().arch);
  if (image.empty()) return;
  std::shared_ptr<const ProgramImage> img = load_program(*dev, image);
  Program fill(*dev, img, "fill_u32"), spin(*dev, img, "spin_until");
  const uint32_t launches = 600;
  Buffer vals = dev->allocate(launches * 4);
  // Hold the GPU in a kernel until 100 ms have passed, so the launches below queue up behind
  // it and the host must wait for the ring instead of reusing argument space.
  ShadowMemory flag(*dev, 4096);
  store_u32(flag, 0, 0);
  spin.launch(KernelArgs().buffer(flag.buffer()), {1, 1, 1}, {1, 1, 1});
  std::jthread release([&] {  // joined on the way out, also when a launch throws
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    store_u32(flag, 0, 1);
  });
  for (uint32_t i = 0; i < launches; i++)  // each launch writes one element with its value
    fill.launch(KernelArgs().buffer(vals, i * 4).value(i + 1).value(1u).value(1u), {1, 1, 1},
                {1, 1, 1});
  release.join();
  std::vector<uint32_t> got(launches);
  dev->copy_out(got.data(), vals, 0, launches * 4);
  for (uint32_t i = 0; i < launches; i++) ASSERT_EQ(got[i], i + 1) << i;
}

// The timeline crosses 2^31 and 2^32 with launches and copies in flight.
TEST_P(EmulatedDevice, TimelineCrossesTheWrapPoints) {
  for (uint64_t start : {(uint64_t(1) << 31) - 3, (uint64_t(1) << 32) - 3}) {
    Device::Options opt;
    opt.timeline_start = start;
    auto dev = Device::open(device_name(GetParam()), opt);
    auto image = kernels::code_object(dev_->properties().arch);
    std::shared_ptr<const ProgramImage> img;
    if (!image.empty()) img = load_program(*dev, image);
    Buffer b = dev->allocate(4096), c = dev->allocate(4096);
    std::vector<uint32_t> out(1024);
    for (uint32_t i = 0; i < 8; i++) {
      std::vector<uint32_t> in(1024, i);
      dev->copy_in(b, 0, in.data(), 4096);
      if (img) {
        Program fill(*dev, img, "fill_u32");
        fill.launch(KernelArgs().buffer(b).value(i * 10).value(1024u).value(64u), {16, 1, 1},
                    {64, 1, 1});
      }
      dev->copy(c, 0, b, 0, 4096);
      dev->copy_out(out.data(), c, 0, 4096);
      ASSERT_EQ(out[1023], img ? i * 10 : i);
    }
    dev->synchronize();
    EXPECT_GE(dev->timeline().last(), start + 8);  // the launches (host copies take no value)
    EXPECT_EQ(dev->timeline().signal().value(), dev->timeline().last());
  }
}

// A recording longer than one indirect buffer runs as several, split between commands, with
// the results of one: the limit lowered (Device::Options::max_indirect_dwords) to the
// recording's length (one buffer), one granule below it (two) and one above (one), and to
// about two commands (one buffer per command or two). Launches write a word each; the copy
// queue, where there is one, copies them back a word per copy.
TEST_P(EmulatedDevice, RecordingsLongerThanOneIndirectBufferRunInPieces) {
  REQUIRE_KERNELS(img0);
  if (!dev_->properties().caps.indirect_buffers)
    GTEST_SKIP() << GetParam() << " runs no indirect buffers";
  const uint32_t launches = 12;
  const bool copies = dev_->properties().caps.copy_engine;
  struct Recorded {
    size_t dwords[2];  // compute, copy
    size_t pieces[2];
  };
  // `launch`: the words come from launches; else (limits too short for a launch, which apply
  // to every queue) from the host.
  auto run = [&](uint64_t option, bool launch = true) -> Recorded {
    Device::Options opt;
    opt.max_indirect_dwords = option;
    auto d = Device::open(device_name(GetParam()), opt);
    std::shared_ptr<const ProgramImage> img(
        load_program(*d, kernels::code_object(d->properties().arch)));
    Program fill(*d, img, "fill_u32");
    const uint64_t stride = (std::max<uint32_t>(fill.kernel().kernarg_size, 16) + 255) / 256 * 256;
    Buffer out = d->allocate(launches * 4), back = d->allocate(launches * 4);
    ShadowMemory args(*d, launches * stride);
    Signal s = d->new_signal(), t = d->new_signal();
    std::vector<uint32_t> want(launches), got(launches);
    std::iota(want.begin(), want.end(), 1u);
    ComputeQueue cq(*d);
    cq.memory_barrier();
    for (uint32_t i = 0; i < launches && launch; i++) {
      auto* at = reinterpret_cast<char*>(args.host()) + i * stride;
      fill.fill_args(KernelArgs().buffer(out, i * 4).value(i + 1).value(1u).value(64u), at);
      cq.exec(fill, args.va() + i * stride, {1, 1, 1}, {64, 1, 1});
    }
    publish_first(args, launches * stride);
    cq.signal(s, 1);
    if (!launch) d->copy_in(out, 0, want.data(), launches * 4);
    cq.bind();
    cq.submit();
    std::optional<CopyQueue> kq;
    if (copies) {
      kq.emplace(*d);
      kq->wait(s, 1);
      for (uint32_t i = 0; i < launches; i++) kq->copy(back.va() + i * 4, out.va() + i * 4, 4);
      kq->signal(t, 1);
      kq->bind();
      kq->submit();
      t.wait(1, std::chrono::milliseconds(10000));
    }
    s.wait(1, std::chrono::milliseconds(10000));
    d->copy_out(got.data(), copies ? back : out, 0, launches * 4);
    EXPECT_EQ(got, want) << "limit " << option;
    Recorded r{{cq.stream().size(), kq ? kq->stream().size() : 0},
               {cq.piece_starts().size(), kq ? kq->piece_starts().size() : 0}};
    d->synchronize();
    return r;
  };
  const Recorded whole = run(0);
  EXPECT_EQ(whole.pieces[0], 1u);
  for (int k = 0; k < (copies ? 2 : 1); k++) {
    const QueueKind kind = k == 0 ? QueueKind::Compute : QueueKind::Copy;
    SCOPED_TRACE(to_string(kind));
    const size_t g = dev_->hw_queue(kind).indirect_granule_dwords();
    const size_t fits = (whole.dwords[k] + g - 1) / g * g;  // the smallest limit it fits
    const bool launch = k == 0;
    EXPECT_EQ(run(fits, launch).pieces[k], 1u);
    EXPECT_EQ(run(fits + g, launch).pieces[k], 1u);
    EXPECT_EQ(run(fits - g, launch).pieces[k], 2u);
    // About two commands' worth: several buffers, padded only where the granule is above 1.
    const size_t per = whole.dwords[k] / (launches + 1);
    const Recorded small = run((2 * per + g - 1) / g * g + g, launch);
    EXPECT_GT(small.pieces[k], 3u);
    if (g == 1) {
      EXPECT_EQ(small.dwords[k], whole.dwords[k]);
    }
  }
}

// The emulated GPUs interleave their queues at random with HCQ_EMU_INTERLEAVE_SEED: a copy
// that should wait for a kernel on the compute queue and does not then copies what was there
// before the kernel for some seed of a few, where with the wait every seed gives the
// kernel's data. Both queues wait on a gate the host opens once both are submitted.
TEST_P(EmulatedDevice, InterleavedQueuesShowAMissingCrossQueueWait) {
  if (!device_name(GetParam()).starts_with("emu:"))
    GTEST_SKIP() << GetParam() << " is not emulated: its queues interleave as the GPU runs them";
  REQUIRE_COPY_ENGINE();
  REQUIRE_KERNELS(img0);
  const uint32_t n = 64;
  auto run = [&](uint64_t seed, bool with_wait) {
    testing_support::InterleavedQueues interleaved(seed, /*forced=*/true);
    SCOPED_TRACE(interleaved.trace());
    auto d = Device::open(device_name(GetParam()));
    std::shared_ptr<const ProgramImage> img(
        load_program(*d, kernels::code_object(d->properties().arch)));
    Program fill(*d, img, "fill_u32");
    Buffer x = d->allocate(n * 4), y = d->allocate(n * 4);
    const std::vector<uint32_t> zeros(n, 0);
    d->copy_in(x, 0, zeros.data(), n * 4);
    d->copy_in(y, 0, zeros.data(), n * 4);
    // The zeros are in place before the gate opens: the kernel below waits only for the gate,
    // and a staged copy_in still queued on the copy queue would land on its values.
    d->synchronize();
    ShadowMemory args(*d, 4096);
    fill.fill_args(KernelArgs().buffer(x).value(7u).value(n).value(64u), args.host());
    publish_first(args, 4096);
    Signal gate = d->new_signal(), s = d->new_signal(), done = d->new_signal();
    ComputeQueue cq(*d);
    cq.wait(gate, 1);
    cq.memory_barrier().exec(fill, args.va(), {1, 1, 1}, {64, 1, 1}).signal(s, 1);
    CopyQueue kq(*d);
    kq.wait(gate, 1);
    if (with_wait) kq.wait(s, 1);
    kq.copy(y.va(), x.va(), n * 4).signal(done, 1);
    cq.bind();
    kq.bind();
    Queue* both[] = {&cq, &kq};
    Queue::submit_together(both);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // both reach the gate
    gate.set(1);
    s.wait(1, std::chrono::milliseconds(5000));
    done.wait(1, std::chrono::milliseconds(5000));
    std::vector<uint32_t> got(n);
    d->copy_out(got.data(), y, 0, n * 4);
    return got == std::vector<uint32_t>(n, 7u);
  };
  for (uint64_t seed = 1; seed <= 8; seed++)
    EXPECT_TRUE(run(seed, true)) << "with the wait, HCQ_EMU_INTERLEAVE_SEED=" << seed;
  // Without it, how many seeds run the copy first depends on how many method headers each
  // launch takes (on NVIDIA with QMDs by address, 1 to 4 of 8): look until one does. CI once
  // saw none of 1..8 do so.
  uint64_t seed = 1;
  while (seed <= 64 && run(seed, false)) seed++;
  EXPECT_LE(seed, 64u) << "no seed of 1..64 ran the copy before the kernel without the wait";
}

INSTANTIATE_TEST_SUITE_P(Targets, EmulatedDevice,
                         ::testing::Values("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201",
                                           "gfx1100_usb", "gfx1100_am", "sm_80", "sm_90", "sm_100", "a660",
                                           "a740", "a660_msm", "a740_msm"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Hardware, EmulatedDevice,
                         ::testing::ValuesIn(testing_support::devices_from_env("HCQ_TEST_DEVICES")),
                         [](const auto& info) { return testing_support::test_name(info.param); });

TEST(Devices, ListShowsEmulatedTargetsAndUnknownNamesAreClearErrors) {
  auto all = Device::list();
  std::vector<std::string> emulated;
  for (auto& l : all)
    if (l.emulated) emulated.push_back(l.name);
  EXPECT_EQ(emulated, (std::vector<std::string>{"emu:gfx90a", "emu:gfx942", "emu:gfx1030",
                                                "emu:gfx1100", "emu:gfx1201", "emu:gfx1100_usb",
                                                "emu:gfx1100_am", "emu:sm_80", "emu:sm_90",
                                                "emu:sm_100", "emu:a660", "emu:a740",
                                                "emu:a660_msm", "emu:a740_msm"}));
  try {
    Device::open("emu:gfx000");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device 'emu:gfx000'"), std::string::npos);
  }
  EXPECT_THROW(Device::open("amd:x"), InvalidInput);
  EXPECT_THROW(Device::open("amd:7"), InvalidInput);  // no KFD GPU on this machine
  EXPECT_THROW(Device::open("nv:x"), InvalidInput);
  EXPECT_THROW(Device::open("nv:7"), Error);  // no NVIDIA kernel module here
}


// Bytes of address space the process has mapped (every line of /proc/self/maps).
uint64_t mapped_address_space() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return 0;
  uint64_t total = 0;
  unsigned long long lo, hi;
  char line[4096];
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "%llx-%llx", &lo, &hi) == 2) total += hi - lo;
  std::fclose(f);
  return total;
}

// Each open reserves a GPU address range of hundreds of GiB; closing must give it back, or
// a few hundred opens exhaust the process's address space. Allocator arenas of the engine
// threads may stay, hence the slack (one leaked reservation alone is far larger).
TEST_P(EmulatedDevice, OpenAndCloseGiveBackTheirAddressSpace) {
  const std::string name = device_name(GetParam());
  dev_.reset();
  Device::open(name).reset();  // warm up: arenas, registries
  const uint64_t before = mapped_address_space();
  // The leak this guards against cost about 260 GiB an open: five opens show it as well as
  // twenty, and a GPU hcq boots itself (_am, _usb) takes a second or more to open.
  const bool boots = name.ends_with("_am") || name.ends_with("_usb");
  for (int i = 0; i < (boots ? 5 : 20); i++) {
    auto d = Device::open(name);
    Buffer b = d->allocate(1 << 20);
  }
  const uint64_t after = mapped_address_space();
  EXPECT_LT(after, before + (2ull << 30)) << "before " << (before >> 20) << " MiB, after "
                                          << (after >> 20) << " MiB";
}

// An emulated GPU hands out no more device memory than it advertises, as hardware does: an
// allocation beyond what is free is an hcq::Error naming the device, the request and what is
// free, and freed memory counts again. (Untouched memory costs the host nothing.)
TEST_P(EmulatedDevice, DeviceMemoryBeyondTheAdvertisedSizeIsAClearErrorAndFreeingGivesItBack) {
  const uint64_t total = dev_->properties().device_memory_bytes;
  if (dev_->driver().va_size() < total)
    GTEST_SKIP() << "the GPU address range is smaller than the device memory (under "
                    "AddressSanitizer the drivers reserve a small range)";
  const uint64_t eighth = total / 8 / (2 << 20) * (2 << 20);
  std::vector<Buffer> held;
  std::string msg;
  for (int i = 0; i < 9 && msg.empty(); i++) {
    try {
      held.push_back(dev_->allocate(eighth));
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  // Seven fit; the eighth too unless rings and signals took device memory already.
  EXPECT_GE(held.size(), 7u) << msg;
  EXPECT_LE(held.size(), 8u) << msg;
  EXPECT_NE(msg.find(device_name(GetParam())), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(eighth)), std::string::npos) << msg;
  EXPECT_NE(msg.find("free"), std::string::npos) << msg;
  held.pop_back();  // larger than the buffer cache: back to the driver
  EXPECT_NO_THROW(held.push_back(dev_->allocate(eighth)));
}


// A launch with a timeout returns by its deadline (plus a margin for a loaded machine) while
// the GPU is busy with another kernel that spins: no submit or wait waits for that kernel.
TEST_P(EmulatedDevice, ALaunchTimesOutOnTimeWhileAnotherKernelSpins) {
  REQUIRE_KERNELS(img);
  Program spin(*dev_, img, "spin_until"), empty(*dev_, img, "empty");
  ShadowMemory flag(*dev_, 4096);
  store_u32(flag, 0, 0);
  spin.launch(KernelArgs().buffer(flag.buffer()), {1, 1, 1}, {1, 1, 1});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the GPU is in it
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(empty.launch(KernelArgs(), {1, 1, 1}, {1, 1, 1}, true,
                            std::chrono::milliseconds(300)),
               TimeoutError);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(300 + 1500))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  store_u32(flag, 0, 1);
  dev_->synchronize();
}

// A buffer freed while queued work still uses it: a fill waits behind a spinning kernel when
// its buffer goes. The process must not crash and the device must stay usable; the fill either
// writes memory the driver kept alive (the kernel driver keeps a freed object until the work
// that uses it retires) or the device reports a clean fault. On Adreno, where the CPU and the
// GPU share each object's mapping, it must be the former, and a new buffer that gets the freed
// address waits for that work instead of receiving its writes.
TEST_P(EmulatedDevice, FreeingABufferAKernelStillUsesIsSafe) {
  REQUIRE_KERNELS(img);
  Device::Options opt;
  opt.buffer_cache_bytes = 0;  // a released buffer goes back to the driver at once
  auto dev = Device::open(device_name(GetParam()), opt);
  std::shared_ptr<const ProgramImage> prog =
      load_program(*dev, kernels::code_object(dev->properties().arch));
  Program spin(*dev, prog, "spin_until"), fill(*dev, prog, "fill_u32");
  const bool adreno = vendor_of(GetParam()).name == "Qualcomm";
  const uint32_t n = (1 << 20) / 4;
  ShadowMemory flag(*dev, 4096);
  store_u32(flag, 0, 0);
  auto release = [&] {
    store_u32(flag, 0, 1);
  };
  spin.launch(KernelArgs().buffer(flag.buffer()), {1, 1, 1}, {1, 1, 1});
  uint64_t freed_va = 0;
  {
    Buffer b = dev->allocate(n * 4);
    freed_va = b.va();
    fill.launch(KernelArgs().buffer(b).value(7u).value(n).value(64u), {n / 64, 1, 1}, {64, 1, 1});
  }  // freed: the fill still waits behind the spin
  std::optional<Buffer> again;
  if (adreno) {
    // The heap hands out the freed range again: the allocation waits for the fill to retire.
    std::jthread later([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release();
    });
    again = dev->allocate(n * 4);
  }
  release();
  try {
    dev->synchronize(std::chrono::milliseconds(5000));
  } catch (const GpuFaultError& e) {
    EXPECT_FALSE(adreno) << e.what();
    return;
  }
  if (again && again->va() == freed_va) {
    std::vector<uint32_t> out(n, 1);
    dev->copy_out(out.data(), *again, 0, n * 4);
    size_t written = 0;
    for (uint32_t v : out) written += v == 7;
    EXPECT_EQ(written, 0u) << "the fill wrote into the new buffer at the freed address";
  }
  Buffer c = dev->allocate(n * 4);  // the device still works
  fill.launch(KernelArgs().buffer(c).value(9u).value(n).value(64u), {n / 64, 1, 1}, {64, 1, 1});
  uint32_t last = 0;
  dev->copy_out(&last, c, (n - 1) * 4, 4);
  EXPECT_EQ(last, 9u);
  if (!adreno) return;
  // Adreno: the flag of the kernel that reads it right now goes (the driver keeps its pages
  // mapped until that kernel retires, so the pointer kept here may still release it).
  uint32_t* kept = nullptr;
  {
    Buffer f = dev->allocate_visible(4096);
    kept = static_cast<uint32_t*>(f.host());
    *kept = 0;
    spin.launch(KernelArgs().buffer(f), {1, 1, 1}, {1, 1, 1});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the GPU is in it
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  __atomic_store_n(kept, 1u, __ATOMIC_RELEASE);
  EXPECT_NO_THROW(dev->synchronize(std::chrono::milliseconds(5000)));
}

}  // namespace
}  // namespace hcq
