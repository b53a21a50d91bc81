// lib/core, lib/batch and lib/io on a device whose memory the CPU cannot map (a GPU behind a
// USB bridge): every emulated target's driver behind PortOnlyDriver, which hides every host
// pointer and counts the requests through the device-memory port.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "batch/batch.hpp"
#include "common/port_driver.hpp"
#include "core/capture.hpp"
#include "core/hcq.hpp"
#include "io/file_load.hpp"
#include "kernels.hpp"

namespace hcq {
namespace {

using testing_support::PortOnlyDriver;
using Counts = PortOnlyDriver::Counts;

class PortDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { open(PortOnlyDriver::kWindowBytes); }
  void open(uint64_t window) {
    kernels::register_cpu_implementations();
    img_.reset();
    dev_.reset();
    auto drv = PortOnlyDriver::open(GetParam(), window);
    port_ = drv.get();
    dev_ = std::make_unique<Device>(std::move(drv), Device::Options{});
  }
  std::shared_ptr<const ProgramImage> image() {
    if (!img_) {
      auto code = kernels::code_object(dev_->properties().arch);
      if (!code.empty()) img_ = load_program(*dev_, code);
    }
    return img_;
  }
  std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = uint8_t(i * 131 + seed + (i >> 11));
    return v;
  }
  Counts since(const Counts& before) const {
    Counts now = port_->counts();
    return {now.writes - before.writes, now.write_bytes - before.write_bytes,
            now.reads - before.reads, now.read_bytes - before.read_bytes};
  }
  PortOnlyDriver* port_ = nullptr;
  std::unique_ptr<Device> dev_;
  std::shared_ptr<const ProgramImage> img_;
};

#define REQUIRE_KERNELS()                                                   \
  if (!image()) GTEST_SKIP() << "no code object built for " << GetParam(); \
  static_assert(true)

TEST_P(PortDevice, UserBuffersHaveNoHostPointerAndVisibleMemoryIsRefused) {
  Buffer b = dev_->allocate(4096);
  EXPECT_EQ(b.host(), nullptr);
  EXPECT_EQ(dev_->allocate(4096, MemoryKind::Host).host(), nullptr);
  try {
    dev_->allocate_visible(4096);
    FAIL() << "allocate_visible on a device the CPU cannot map";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              GetParam() + "+port: memory from allocate_visible must be memory the CPU and the "
                           "device share, but its host memory is not CPU-visible");
  }
  // The staging ring takes half the host window, no more.
  EXPECT_EQ(port_->host_bytes(), PortOnlyDriver::kWindowBytes / 2 + 4096);
}

TEST_P(PortDevice, ALaunchPublishesItsArgumentsInOneWrite) {
  REQUIRE_KERNELS();
  Program add(*dev_, image(), "vector_add");
  const uint32_t n = 1000, block = 64;
  std::vector<float> a(n), b(n), c(n);
  for (uint32_t i = 0; i < n; i++) a[i] = float(i), b[i] = float(3 * i + 1);
  Buffer A = dev_->allocate(n * 4), B = dev_->allocate(n * 4), C = dev_->allocate(n * 4);
  dev_->copy_in(A, 0, a.data(), n * 4);
  dev_->copy_in(B, 0, b.data(), n * 4);
  const Counts before = port_->counts();
  add.launch(KernelArgs().buffer(A).buffer(B).buffer(C).value(n).value(block),
             {(n + block - 1) / block, 1, 1}, {block, 1, 1});
  const Counts launch = since(before);
  EXPECT_EQ(launch.writes, 1u);
  EXPECT_EQ(launch.write_bytes, add.kernarg_size());
  EXPECT_EQ(launch.reads, 0u);
  dev_->copy_out(c.data(), C, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  // A timed launch: its timestamps read through the port.
  auto t = add.launch(KernelArgs().buffer(A).buffer(A).buffer(C).value(n).value(block),
                      {(n + block - 1) / block, 1, 1}, {block, 1, 1}, true);
  ASSERT_TRUE(t.has_value());
  EXPECT_GE(*t, 0.0);
  dev_->copy_out(c.data(), C, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(c[i], 2 * a[i]) << i;
}

TEST_P(PortDevice, SignalsWaitedByTheCpuAndByTheGpu) {
  Signal gate = dev_->new_signal(0), done = dev_->new_signal(3);
  EXPECT_EQ(done.value(), 3u);
  ComputeQueue q(*dev_);
  q.wait(gate, 1).timestamp(done).signal(done, 7);
  q.submit();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.value(), 3u);  // the GPU waits for the CPU
  Counts before = port_->counts();
  gate.set(1);
  EXPECT_EQ(since(before).writes, 1u);
  EXPECT_EQ(since(before).write_bytes, 8u);
  done.wait(7);  // the CPU waits for the GPU
  EXPECT_EQ(done.value(), 7u);
  EXPECT_GT(done.timestamp(), 0u);
  EXPECT_EQ(gate.value(), 1u);
}

TEST_P(PortDevice, ABoundRecordingPublishesOnlyItsPatchedWords) {
  Signal s = dev_->new_signal(0);
  ComputeQueue q(*dev_);
  q.signal(s, 5);
  q.bind();
  Counts before = port_->counts();
  q.submit();
  EXPECT_EQ(since(before).writes, 1u);  // the whole recording, once
  s.wait(5);
  before = port_->counts();
  q.submit();  // nothing patched: nothing written
  EXPECT_EQ(since(before).writes, 0u);
  s.wait(5);
  q.update_signal(0, std::nullopt, 9);
  // One write per contiguous run of the value's patched dwords.
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (const PatchSite& site : q.sites_of(0)) {
    if (site.role != PatchRole::SignalValue) continue;
    const uint64_t b = site.dword * 4ull, e = b + site_bytes(site);
    if (!runs.empty() && runs.back().second >= b) runs.back().second = std::max(runs.back().second, e);
    else runs.push_back({b, e});
  }
  ASSERT_FALSE(runs.empty());
  before = port_->counts();
  q.submit();
  EXPECT_EQ(since(before).writes, runs.size());
  s.wait(9);
  EXPECT_EQ(s.value(), 9u);
}

TEST_P(PortDevice, CopiesAroundTheStagingChunkAndPastTheWindow) {
  // The ring is half the window (0x40000), a chunk half the ring.
  const uint64_t chunk = PortOnlyDriver::kWindowBytes / 4;
  for (uint64_t size : {uint64_t(1), chunk - 1, chunk, chunk + 1,
                        PortOnlyDriver::kWindowBytes + 4097, uint64_t(3) << 20}) {
    SCOPED_TRACE(size);
    Buffer b = dev_->allocate(size + 100);
    auto in = pattern(size, uint8_t(size));
    Counts before = port_->counts();
    dev_->copy_in(b, 7, in.data(), size);
    EXPECT_EQ(since(before).writes, (size + chunk - 1) / chunk);  // one per staged chunk
    EXPECT_EQ(since(before).write_bytes, size);
    std::vector<uint8_t> out(size);
    before = port_->counts();
    dev_->copy_out(out.data(), b, 7, size);
    EXPECT_EQ(since(before).writes, 0u);
    EXPECT_GE(since(before).read_bytes, size);
    ASSERT_EQ(out, in);
  }
}

TEST_P(PortDevice, WithoutAHostWindowCopiesGoStraightThroughThePort) {
  open(0);
  EXPECT_EQ(port_->host_bytes(), 0u);
  const uint64_t size = (1 << 20) + 3;
  Buffer b = dev_->allocate(size);
  auto in = pattern(size, 9);
  Counts before = port_->counts();
  dev_->copy_in(b, 0, in.data(), size);
  EXPECT_EQ(since(before).writes, 1u);
  EXPECT_EQ(since(before).write_bytes, size);
  std::vector<uint8_t> out(size);
  dev_->copy_out(out.data(), b, 0, size);
  ASSERT_EQ(out, in);
  // A program uploads the same way, and runs.
  REQUIRE_KERNELS();
  Program fill(*dev_, image(), "fill_u32");
  fill.launch(KernelArgs().buffer(b).value(0x5eed5eedu).value(64u).value(64u), {1, 1, 1},
              {64, 1, 1});
  std::vector<uint32_t> words(64);
  dev_->copy_out(words.data(), b, 0, 256);
  for (uint32_t w : words) ASSERT_EQ(w, 0x5eed5eedu);
}

TEST_P(PortDevice, BadRangesAreRefusedExactly) {
  Buffer b = dev_->allocate(4096);
  char byte = 0;
  const Counts before = port_->counts();
  try {
    dev_->copy_in(b, 4096, &byte, 1);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), GetParam() + "+port: copy_in: range [4096, 4096+1) is "
                                                   "outside the buffer of 4096 bytes");
  }
  EXPECT_EQ(since(before).writes, 0u);  // refused before any request
  std::byte two[2]{};
  try {
    dev_->driver().write_memory(b.va() + 4095, two);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), GetParam() + "+port: write of 2 bytes at " +
                                         hex(b.va() + 4095) + " is not inside one allocation");
  }
}

TEST_P(PortDevice, ABatchReplaysWithReboundBuffers) {
  REQUIRE_KERNELS();
  using namespace batch;
  Program scale(*dev_, image(), "scale_add");
  const uint32_t n = 1000, block = 100;
  Schedule s(*dev_);
  Mem x = s.input(n * 4);
  auto a = s.scalar<float>();
  Buffer y = dev_->allocate(n * 4);
  s.launch(scale, {n / block, 1, 1}, {block, 1, 1},
           {Arg::buffer(x), Arg::scalar(a), Arg::value(1.0f), Arg::value(n), Arg::value(block)});
  s.copy(Mem::of(y), 0, x, 0, n * 4);
  Schedule::CompileOptions options;
  options.profile = true;
  Executable exe = s.compile(options);
  Buffer x1 = dev_->allocate(n * 4), x2 = dev_->allocate(n * 4);
  std::vector<float> v1(n), v2(n), out(n);
  for (uint32_t i = 0; i < n; i++) v1[i] = float(i), v2[i] = float(2 * i);
  dev_->copy_in(x1, 0, v1.data(), n * 4);
  dev_->copy_in(x2, 0, v2.data(), n * 4);
  dev_->timeline().wait(exe.run(Bindings().input(x, x1).scalar(a, 2.0f)));
  dev_->copy_out(out.data(), y, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 2.0f * v1[i] + 1.0f) << i;
  dev_->timeline().wait(exe.run(Bindings().input(x, x2).scalar(a, 3.0f)));
  dev_->copy_out(out.data(), y, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 3.0f * v2[i] + 1.0f) << i;
  dev_->timeline().wait(exe.run(Bindings().input(x, x2).scalar(a, 3.0f)));  // nothing changed
  dev_->copy_out(out.data(), y, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 3.0f * (3.0f * v2[i] + 1.0f) + 1.0f) << i;
  // The GPU's timestamps, read back through the port: each call's start before its end
  // (calls on different queues compare only within the clock offsets' error).
  auto calls = exe.profile();
  ASSERT_EQ(calls.size(), 2u);
  for (auto& c : calls) {
    EXPECT_GT(c.start_ns, 0);
    EXPECT_LE(c.start_ns, c.end_ns);
  }
}

TEST_P(PortDevice, LoadFileLandsThroughThePort) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("hcq_port_load_" + std::to_string(::getpid()) + "_" +
                     std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  const uint64_t size = (1 << 20) + 4097;
  auto data = pattern(size + 100, 5);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()),
                                              std::streamsize(data.size()));
  Buffer b = dev_->allocate(size + 13);
  io::LoadOptions opts;
  opts.slot_bytes = 256 << 10;
  const io::LoadResult r = io::load_file(*dev_, b, 13, path.string(), 100, size, opts);
  std::filesystem::remove(path);
  EXPECT_TRUE(r.staged);
  dev_->timeline().wait(r.done);
  std::vector<uint8_t> out(size);
  dev_->copy_out(out.data(), b, 13, size);
  ASSERT_TRUE(std::equal(out.begin(), out.end(), data.begin() + 100));
}

// A batch's host work on devices whose memory the CPU cannot map: a load (the file read into
// the staging's host copy, then written through the port), and copies between devices the
// host relays between staging areas: out of a port device into host memory, out of host
// memory into a port device, and between two port devices (through a bounce buffer), each
// more than one port request long. Every byte lands, at every run; the host's timestamps of
// its ops reach the profile.
TEST_P(PortDevice, ABatchRunsItsLoadsAndCopiesBetweenDevicesThroughThePort) {
  using namespace batch;
  auto other_drv = PortOnlyDriver::open(GetParam());
  Device other(std::move(other_drv), Device::Options{});
  auto mapped = Device::open("emu:gfx1100");
  const uint64_t size = (4 << 20) + 4097;  // past one 4 MiB port request
  const auto path = std::filesystem::temp_directory_path() /
                    ("hcq_port_batch_" + std::to_string(::getpid()) + "_" + GetParam().substr(4));
  Buffer a = dev_->allocate(size + 3), b = mapped->allocate(size), c = other.allocate(size + 5),
         d = dev_->allocate(size);
  Schedule s({dev_.get(), &other, mapped.get()});
  s.load(Mem::of(a), 3, path.string(), 1001, size);
  s.copy(Mem::of(b), 0, Mem::of(a), 3, size);  // port -> mapped
  s.copy(Mem::of(c), 5, Mem::of(b), 0, size);  // mapped -> port
  s.copy(Mem::of(d), 0, Mem::of(c), 5, size);  // port -> port
  Executable exe = s.compile({.profile = true});
  for (uint8_t seed : {1, 2}) {
    const auto file = pattern(size + 1001, seed);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
    auto now_ns = [] {
      return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count());
    };
    const int64_t before = now_ns();
    exe.run(Bindings());
    exe.wait();
    const int64_t after = now_ns();
    const std::vector<uint8_t> want(file.begin() + 1001, file.end());
    std::vector<uint8_t> got(size);
    dev_->copy_out(got.data(), a, 3, size);
    ASSERT_TRUE(got == want) << "load, seed " << int(seed);
    mapped->copy_out(got.data(), b, 0, size);
    ASSERT_TRUE(got == want) << "port -> mapped, seed " << int(seed);
    other.copy_out(got.data(), c, 5, size);
    ASSERT_TRUE(got == want) << "mapped -> port, seed " << int(seed);
    dev_->copy_out(got.data(), d, 0, size);
    ASSERT_TRUE(got == want) << "port -> port, seed " << int(seed);
    // The host's ops: the file read and three relays, timed on the host clock within the run
    // (a timestamp converts to device ticks and back: a tick's rounding either side).
    size_t host_ops = 0;
    for (auto& call : exe.profile()) {
      if (!call.name.starts_with("read ") && !call.name.ends_with(" between staging areas"))
        continue;
      host_ops++;
      EXPECT_GE(call.start_ns, before - 1000) << call.name;
      EXPECT_LE(call.start_ns, call.end_ns) << call.name;
      EXPECT_LE(call.end_ns, after + 1000) << call.name;
    }
    EXPECT_EQ(host_ops, 4u);
  }
  std::filesystem::remove(path);
}

// A full capture reads the device's buffers through the port (not the host window's memory:
// the CPU cannot read a USB bridge's SRAM).
TEST_P(PortDevice, AFullCaptureReadsBuffersThroughThePort) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hcq_port_capture_" + std::to_string(::getpid()) + "_" +
                             GetParam().substr(4)))
                               .string();
  Buffer b = dev_->allocate(8192);
  Buffer window = dev_->allocate(4096, MemoryKind::Host);
  auto in = pattern(4096, 3);
  dev_->copy_in(b, 0, in.data(), 4096);
  // copy_in returns once `in` may be reused; its staged copy may still be queued, and the
  // full capture records what memory holds when the next submission is made.
  dev_->synchronize();
  capture::start(path, {.full = true});
  Signal s = dev_->new_signal();
  CopyQueue q(*dev_);
  q.copy(b.va() + 4096, b.va(), 4096).signal(s, 1);
  q.submit();
  s.wait(1);
  capture::stop();
  capture::Reader r(path);
  int seen = 0;
  while (auto rec = r.next()) {
    if (rec->type != capture::RecordType::Memory) continue;
    EXPECT_NE(rec->memory.address, window.va());
    if (rec->memory.address != b.va()) continue;
    seen++;
    ASSERT_EQ(rec->memory.bytes.size(), 8192u);
    EXPECT_TRUE(std::equal(in.begin(), in.end(), rec->memory.bytes.begin()));
    // Before the copy ran, then (s.wait) after it.
    EXPECT_EQ(rec->memory.bytes[4096 + 5], seen == 1 ? 0 : in[5]);
  }
  EXPECT_EQ(seen, 2);
  std::filesystem::remove(path);
  std::vector<uint8_t> out(4096);
  dev_->copy_out(out.data(), b, 4096, 4096);
  EXPECT_EQ(out, in);
}

INSTANTIATE_TEST_SUITE_P(Targets, PortDevice, ::testing::Values("emu:gfx1100", "emu:sm_90"),
                         [](const auto& info) { return info.param.substr(4); });

}  // namespace
}  // namespace hcq
