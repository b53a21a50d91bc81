// The batch compiler on every emulated AMD target: replays with changed bindings, fencing,
// re-arming, timeline wrap, and random schedules checked against a sequential reference.
#include "batch/batch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/resource.h>
#include <bit>
#include <csignal>
#include <fstream>
#include <filesystem>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <climits>
#include <sstream>

#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <optional>
#include <tuple>
#include <atomic>
#include <cmath>

#include "core/capture.hpp"
#include "core/error.hpp"
#include "common/error_of.hpp"
#include "common/file_size_limit.hpp"
#include "common/hardware_devices.hpp"
#include "common/interleave.hpp"
#include "kernels.hpp"

namespace hcq::batch {
namespace {

using testing_support::device_name;
using testing_support::error_of;

class Batch : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::register_cpu_implementations();
    dev_ = Device::open(device_name(GetParam()), options());
    auto image = kernels::code_object(dev_->properties().arch);
    if (image.empty()) GTEST_SKIP() << "no code object built for " << GetParam();
    img_ = load_program(*dev_, image);
  }
  virtual Device::Options options() { return {}; }
  // From here to the test's end, emulated GPUs opened interleave their queues at random
  // (HCQ_EMU_INTERLEAVE_SEED, unless the environment names a seed already): the fixture's
  // device is opened again so, and devices the test opens later are too. trace() says which.
  void interleave(uint64_t seed) {
    interleaved_.emplace(seed);
    img_.reset();
    dev_.reset();
    dev_ = Device::open(device_name(GetParam()), options());
    img_ = load_program(*dev_, kernels::code_object(dev_->properties().arch));
  }
  std::string trace() const { return interleaved_ ? interleaved_->trace() : "fixed queue order"; }
  Program program(const char* name) { return Program(*dev_, img_, name); }
  template <class T>
  std::vector<T> read(const Buffer& b, size_t n) {
    std::vector<T> v(n);
    dev_->copy_out(v.data(), b, 0, n * sizeof(T));
    return v;
  }
  template <class T>
  void write(const Buffer& b, const std::vector<T>& v) {
    dev_->copy_in(b, 0, v.data(), v.size() * sizeof(T));
  }
  // A word the CPU writes while the device's queued work runs (a kernel waits for it), not
  // after that work as copy_in does: memory the CPU maps where the device has it, else device
  // memory written through the device's port.
  Buffer word_buffer() {
    return dev_->properties().caps.cpu_maps_memory ? dev_->allocate_visible(4096)
                                                   : dev_->allocate(4096);
  }
  void poke(const Buffer& b, uint32_t v) {
    if (b.host())
      __atomic_store_n(static_cast<uint32_t*>(b.host()), v, __ATOMIC_RELEASE);
    else
      dev_->driver().write_memory(b.va(), std::as_bytes(std::span(&v, 1)));
  }
  std::optional<testing_support::InterleavedQueues> interleaved_;  // outlives the devices
  std::unique_ptr<Device> dev_;
  std::shared_ptr<const ProgramImage> img_;
};

TEST_P(Batch, ReplaysWithChangedInputsAndScalars) {
  Program scale = program("scale_add");
  const uint32_t n = 1000, block = 100;
  Schedule s(*dev_);
  Mem x = s.input(n * 4);
  auto a = s.scalar<float>();
  Buffer y = dev_->allocate(n * 4);
  s.launch(scale, {n / block, 1, 1}, {block, 1, 1},
           {Arg::buffer(x), Arg::scalar(a), Arg::value(1.0f), Arg::value(n), Arg::value(block)});
  s.copy(Mem::of(y), 0, x, 0, n * 4);
  Executable exe = s.compile();
  EXPECT_EQ(exe.stats(QueueKind::Copy).waits, 1u);      // the copy waits for the launch
  EXPECT_EQ(exe.stats(QueueKind::Compute).signals, 1u);  // ...which signals for it

  Buffer x1 = dev_->allocate(n * 4), x2 = dev_->allocate(n * 4);
  std::vector<float> v1(n), v2(n);
  for (uint32_t i = 0; i < n; i++) v1[i] = float(i), v2[i] = float(2 * i);
  write(x1, v1);
  write(x2, v2);
  dev_->timeline().wait(exe.run(Bindings().input(x, x1).scalar(a, 2.0f)));
  auto out = read<float>(y, n);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 2.0f * v1[i] + 1.0f) << i;

  // Only what changed is written into the command buffers: the input's kernarg word and copy
  // source and the scalar's kernarg bytes. (Timeline values go into the ring with each run.)
  // Without a copy engine the copy runs on the host and reads the binding: no copy source.
  const bool copy_engine = dev_->queue_count(QueueKind::Copy) > 0;
  dev_->timeline().wait(exe.run(Bindings().input(x, x2).scalar(a, 3.0f)));
  EXPECT_EQ(exe.last_patch_count(), (copy_engine ? 2u : 1u) + 1u);
  out = read<float>(y, n);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 3.0f * v2[i] + 1.0f) << i;

  dev_->timeline().wait(exe.run(Bindings().input(x, x2).scalar(a, 3.0f)));  // nothing changed
  EXPECT_EQ(exe.last_patch_count(), 0u);
  out = read<float>(y, n);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 3.0f * (3.0f * v2[i] + 1.0f) + 1.0f) << i;
}

// Without explicit accesses, the metadata decides: vector_add's `const` inputs are only read,
// so a copy reading them needs no wait; a copy reading its output does.
TEST_P(Batch, AccessesComeFromTheKernelMetadata) {
  Program add = program("vector_add");
  const uint32_t n = 64;
  Buffer a = dev_->allocate(n * 4), b = dev_->allocate(n * 4), c = dev_->allocate(n * 4),
         d = dev_->allocate(n * 4), e = dev_->allocate(n * 4);
  Schedule s(*dev_);
  s.launch(add, {1, 1, 1}, {n, 1, 1},
           {Arg::buffer(Mem::of(a)), Arg::buffer(Mem::of(b)), Arg::buffer(Mem::of(c)),
            Arg::value(n), Arg::value(n)});
  s.copy(Mem::of(d), 0, Mem::of(a), 0, n * 4);  // reads what the launch only reads
  // A cubin does not say which parameters are read-only: there every buffer is also written.
  const bool metadata_has_const = dev_->properties().vendor != "NVIDIA";
  EXPECT_EQ(s.compile().stats(QueueKind::Copy).waits, metadata_has_const ? 0u : 1u);
  s.copy(Mem::of(e), 0, Mem::of(c), 0, n * 4);  // reads what the launch writes
  Executable exe = s.compile();
  EXPECT_EQ(exe.stats(QueueKind::Copy).waits, 1u);
  write(a, std::vector<float>(n, 1.0f));
  write(b, std::vector<float>(n, 2.0f));
  dev_->timeline().wait(exe.run(Bindings()));
  for (float v : read<float>(e, n)) ASSERT_EQ(v, 3.0f);
  for (float v : read<float>(d, n)) ASSERT_EQ(v, 1.0f);
}

// With a copy kernel, copies are launches on the compute queue: no copy queue is used, the
// data arrives at unaligned offsets, a re-bound input is patched into the kernel's
// arguments, and a wrong kernel or one of another device is a clear error.
TEST_P(Batch, CopyKernelsCopyOnTheComputeQueue) {
  if (!img_->kernel("copy_bytes")) GTEST_SKIP() << GetParam() << " has no copy_bytes kernel";
  Program copy = program("copy_bytes"), fill = program("fill_u32");
  const uint32_t n = 1000;
  Buffer a = dev_->allocate(n * 4), b = dev_->allocate(n * 4 + 64), c = dev_->allocate(5001);
  Schedule s(*dev_);
  Mem x = s.input(5001);
  s.launch(fill, {n / 100, 1, 1}, {100, 1, 1},
           {Arg::buffer(Mem::of(a)), Arg::value(0x01020304u), Arg::value(n), Arg::value(100u)});
  s.copy(Mem::of(b), 3, Mem::of(a), 1, n * 4 - 1);  // reads what the launch wrote
  s.copy(Mem::of(c), 0, x, 0, 5001);
  Executable exe = s.compile({.copy_kernels = {&copy}});
  EXPECT_EQ(exe.stats(QueueKind::Copy).calls, 0u);
  EXPECT_EQ(exe.stats(QueueKind::Compute).calls, 3u);
  EXPECT_EQ(exe.stats(QueueKind::Compute).waits, 0u);  // one queue: its order is enough
  Buffer x1 = dev_->allocate(5001), x2 = dev_->allocate(5001);
  std::vector<uint8_t> v1(5001), v2(5001);
  for (size_t i = 0; i < v1.size(); i++) v1[i] = uint8_t(i * 7), v2[i] = uint8_t(i * 13 + 1);
  dev_->copy_in(x1, 0, v1.data(), v1.size());
  dev_->copy_in(x2, 0, v2.data(), v2.size());
  dev_->timeline().wait(exe.run(Bindings().input(x, x1)));
  std::vector<uint8_t> want(n * 4);
  for (uint32_t i = 0; i < n; i++) std::memcpy(&want[i * 4], "\x04\x03\x02\x01", 4);
  auto got_b = read<uint8_t>(b, n * 4 + 2);
  EXPECT_TRUE(std::equal(want.begin() + 1, want.end(), got_b.begin() + 3));
  EXPECT_EQ(read<uint8_t>(c, 5001), v1);
  dev_->timeline().wait(exe.run(Bindings().input(x, x2)));
  EXPECT_EQ(exe.last_patch_count(), 1u);  // the copy kernel's source address
  EXPECT_EQ(read<uint8_t>(c, 5001), v2);

  try {
    s.compile({.copy_kernels = {&fill}});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "batch: copy kernel 'fill_u32' must take (dst buffer, src "
                                     "buffer, uint32 n, uint32 block)");
  }
  auto other = Device::open(device_name(GetParam()));
  Program elsewhere(*other, load_program(*other, kernels::code_object(
                                                                     other->properties().arch)),
                    "copy_bytes");
  try {
    s.compile({.copy_kernels = {&elsewhere}});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "batch: copy kernel 'copy_bytes' is loaded on " +
                                         device_name(GetParam()) + ", not a schedule device");
  }
}

// A load reads its file range afresh at every run (host read into staging, then a copy), in
// order with the calls around it; a file that went missing fails that run with a clear error.
TEST_P(Batch, LoadsReadTheFileAtEveryRun) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("hcq_batch_load_" + std::to_string(::getpid()));
  auto write_file = [&](uint8_t seed) {
    std::vector<uint8_t> v(6000);
    for (size_t i = 0; i < v.size(); i++) v[i] = uint8_t(i * 31 + seed);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), 6000);
    return v;
  };
  Program fill = program("fill_u32");
  Buffer a = dev_->allocate(4096), b = dev_->allocate(4096);
  Schedule s(*dev_);
  s.launch(fill, {1, 1, 1}, {64, 1, 1},
           {Arg::buffer(Mem::of(a)), Arg::value(0u), Arg::value(1024u), Arg::value(64u)});
  s.load(Mem::of(a), 5, path, 1001, 3000);  // after the fill: overwrites bytes 5..3004
  s.copy(Mem::of(b), 0, Mem::of(a), 0, 4096);  // after the load
  Executable exe = s.compile();
  for (uint8_t seed : {1, 2}) {
    const auto file = write_file(seed);
    exe.run(Bindings());
    exe.wait();
    std::vector<uint8_t> want(4096, 0);
    std::copy(file.begin() + 1001, file.begin() + 4001, want.begin() + 5);
    EXPECT_EQ(read<uint8_t>(a, 4096), want) << int(seed);
    EXPECT_EQ(read<uint8_t>(b, 4096), want) << int(seed);
  }
  std::filesystem::remove(path);
  try {
    exe.run(Bindings());
    exe.wait(std::chrono::milliseconds(2000));
    FAIL();
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("batch: load of " + path), std::string::npos) << e.what();
  }
  // The failed run still finished on the GPU: the next one, with the file back, works.
  const auto file = write_file(3);
  exe.run(Bindings());
  exe.wait();
  EXPECT_TRUE(std::equal(file.begin() + 1001, file.begin() + 4001, read<uint8_t>(b, 4096).begin() + 5));
  std::filesystem::remove(path);
  EXPECT_THROW(s.load(Mem::of(a), 0, path, 0, 0), InvalidInput);
  EXPECT_THROW(s.load(Mem::of(a), 4000, path, 0, 100), InvalidInput);
}

TEST_P(Batch, FirstRunMustBindEverythingAndBadBindingsAreClear) {
  Program fill = program("fill_u32");
  Schedule s(*dev_);
  Mem x = s.input(4096);
  s.launch(fill, {1, 1, 1}, {64, 1, 1},
           {Arg::buffer(x), Arg::value(1u), Arg::value(64u), Arg::value(64u)});
  Executable exe = s.compile();
  try {
    exe.run(Bindings());
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "batch: input 0 is not bound");
  }
  Buffer small = dev_->allocate(100);
  try {
    exe.run(Bindings().input(x, small));
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "batch: input 0 needs 4096 bytes, the buffer has 100");
  }
  try {
    s.launch(fill, {1, 1, 1}, {64, 1, 1}, {Arg::buffer(x)});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "batch: launch #1 ('fill_u32') takes 4 arguments, 1 given");
  }
  EXPECT_THROW(s.copy(x, 4000, x, 0, 200), InvalidInput);
}

TEST_P(Batch, AReRunWaitsForThePreviousRunAndSaysSoWhenItCannot) {
  Program spin = program("spin_until");
  Buffer flag = word_buffer();
  poke(flag, 0);
  Schedule s(*dev_);
  s.launch(spin, {1, 1, 1}, {1, 1, 1}, {Arg::buffer(Mem::of(flag))});
  Executable exe = s.compile();
  exe.run(Bindings());
  try {
    exe.run(Bindings(), std::chrono::milliseconds(100));
    FAIL() << "expected the fence to time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("batch re-run: the previous run (timeline value"),
              std::string::npos)
        << e.what();
  }
  poke(flag, 1);
  dev_->timeline().wait(exe.run(Bindings()));  // the flag stays set: this run ends at once
}

// A chain that bounces between the queues many times: if the queues' signals were not
// re-armed, the second run's waits would pass on the first run's values.
TEST_P(Batch, SignalsAreReArmedBetweenRuns) {
  Program scale = program("scale_add");
  const uint32_t n = 256;
  Buffer a = dev_->allocate(n * 4), b = dev_->allocate(n * 4);
  Schedule s(*dev_);
  for (int i = 0; i < 10; i++) {
    s.launch(scale, {1, 1, 1}, {n, 1, 1},
             {Arg::buffer(Mem::of(a)), Arg::value(1.0f), Arg::value(1.0f), Arg::value(n),
              Arg::value(n)});
    s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);
    s.copy(Mem::of(a), 0, Mem::of(b), 0, n * 4);
  }
  Executable exe = s.compile();
  EXPECT_EQ(exe.stats(QueueKind::Compute).waits, 9u);
  EXPECT_EQ(exe.stats(QueueKind::Copy).waits, 10u);
  write(a, std::vector<float>(n, 0.0f));
  for (int run = 1; run <= 3; run++) {
    dev_->timeline().wait(exe.run(Bindings()));
    auto out = read<float>(a, n);
    for (float v : out) ASSERT_EQ(v, float(10 * run));
  }
}

TEST_P(Batch, ProfilingWritesATraceWithOneEventPerCall) {
  Program scale = program("scale_add");
  const uint32_t n = 512;
  Buffer a = dev_->allocate(n * 4), b = dev_->allocate(n * 4);
  Schedule s(*dev_);
  for (int i = 0; i < 3; i++) {
    s.launch(scale, {2, 1, 1}, {n / 2, 1, 1},
             {Arg::buffer(Mem::of(a)), Arg::value(1.0f), Arg::value(1.0f), Arg::value(n),
              Arg::value(n / 2)});
    s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);
  }
  Executable exe = s.compile({.profile = true});
  EXPECT_THROW(exe.profile(), InvalidInput);  // nothing ran yet
  write(a, std::vector<float>(n, 0.0f));
  dev_->timeline().wait(exe.run(Bindings()));
  auto calls = exe.profile();
  ASSERT_EQ(calls.size(), 6u);
  int64_t last_end[2] = {INT64_MIN, INT64_MIN};
  for (auto& c : calls) {
    EXPECT_LE(c.start_ns, c.end_ns) << c.name;
    EXPECT_GE(c.start_ns, last_end[int(c.queue)]) << c.name;  // in order on each queue
    last_end[int(c.queue)] = c.end_ns;
    EXPECT_EQ(c.name, c.call % 2 == 0 ? "scale_add" : "copy 2048 bytes");
  }
  std::stringstream json;
  exe.write_trace(json);
  boost::property_tree::ptree tree;
  ASSERT_NO_THROW(boost::property_tree::read_json(json, tree)) << json.str();
  size_t complete = 0, flows = 0;
  for (auto& [_, ev] : tree.get_child("traceEvents")) {
    std::string ph = ev.get<std::string>("ph");
    complete += ph == "X";
    flows += ph == "s";
  }
  EXPECT_EQ(complete, calls.size());
  EXPECT_EQ(flows, exe.stats(QueueKind::Copy).waits + exe.stats(QueueKind::Compute).waits);
  for (float v : read<float>(b, n)) ASSERT_EQ(v, 3.0f);
}

// Schedules of the same structure share one compilation, each with its own buffers.
TEST_P(Batch, SameStructureSchedulesShareACompilation) {
  Program fill = program("fill_u32");
  auto record = [&](const Buffer& src, const Buffer& dst, uint32_t value) {
    Schedule s(*dev_);
    s.launch(fill, {1, 1, 1}, {64, 1, 1},
             {Arg::buffer(Mem::of(src)), Arg::value(value), Arg::value(64u), Arg::value(64u)});
    s.copy(Mem::of(dst), 0, Mem::of(src), 0, 256);
    return s;
  };
  Buffer a1 = dev_->allocate(256), b1 = dev_->allocate(256), a2 = dev_->allocate(256),
         b2 = dev_->allocate(256);
  Executable e1 = record(a1, b1, 5).compile();
  Executable e2 = record(a2, b2, 5).compile();
  Executable e3 = record(a2, b2, 6).compile();  // another constant: another structure
  EXPECT_TRUE(e1.shares_compilation_with(e2));
  EXPECT_FALSE(e1.shares_compilation_with(e3));
  for (int round = 0; round < 2; round++) {
    dev_->timeline().wait(e1.run(Bindings()));
    dev_->timeline().wait(e2.run(Bindings()));
    for (uint32_t v : read<uint32_t>(b1, 64)) ASSERT_EQ(v, 5u);
    for (uint32_t v : read<uint32_t>(b2, 64)) ASSERT_EQ(v, 5u);
    write(b1, std::vector<uint32_t>(64, 0));  // e2's run must not have written b1
    dev_->timeline().wait(e2.run(Bindings()));
    for (uint32_t v : read<uint32_t>(b1, 64)) ASSERT_EQ(v, 0u);
  }
}

class BatchWrap : public Batch {
  Device::Options options() override {
    Device::Options o;
    o.timeline_start = (uint64_t(1) << 32) - 4;
    return o;
  }
};

TEST_P(BatchWrap, ReplaysAcrossTheTimelineWrap) {
  Program fill = program("fill_u32");
  Schedule s(*dev_);
  Mem x = s.input(256);
  auto v = s.scalar<uint32_t>();
  Buffer y = dev_->allocate(256);
  s.launch(fill, {1, 1, 1}, {64, 1, 1},
           {Arg::buffer(x), Arg::scalar(v), Arg::value(64u), Arg::value(64u)});
  s.copy(Mem::of(y), 0, x, 0, 256);
  Executable exe = s.compile();
  Buffer x1 = dev_->allocate(256);
  for (uint32_t run = 0; run < 8; run++) {
    uint64_t done = exe.run(Bindings().input(x, x1).scalar(v, run * 7));
    dev_->timeline().wait(done);
    auto out = read<uint32_t>(y, 64);
    for (uint32_t w : out) ASSERT_EQ(w, run * 7);
  }
  EXPECT_GT(dev_->timeline().last(), uint64_t(1) << 32);
}

// Random schedules of launches and copies over overlapping ranges of a few buffers, compiled
// and run, must leave exactly what a sequential execution leaves; then again with the inputs
// bound to other buffers. Buffers come in pairs per device (an input and a bound buffer);
// launches use their device's buffers, copies go anywhere (between devices too).
struct RandomOp {
  int kind;  // 0 fill, 1 add, 2 copy
  uint32_t dst, src, src2, doff, soff, soff2, n, value;
};

// Whether a device keeps a batch's signals and staging in memory of its own (it cannot reach
// host memory, or the CPU cannot map its memory: a GPU behind a USB bridge) rather than in
// the host memory the others share.
bool own_area(const Device& d) {
  return !d.properties().caps.host_reachable || !d.properties().caps.cpu_maps_memory;
}

// Copies between a device with an area of its own and another device: the host relays each
// between the two devices' staging areas, on a host queue of kind Copy.
size_t relays_in(const std::vector<Device*>& devs, const std::vector<RandomOp>& ops) {
  size_t n = 0;
  for (const RandomOp& o : ops) {
    const Device *a = devs[o.dst / 2], *b = devs[o.src / 2];
    n += o.kind == 2 && a != b && (own_area(*a) || own_area(*b));
  }
  return n;
}

// With `kernel_copies`, every device copies with copy_bytes on its compute queue.
void check_random_schedules(std::vector<Device*> devs,
                            std::vector<std::shared_ptr<const ProgramImage>> images,
                            uint32_t words, int schedules, int max_calls, uint32_t seed,
                            bool kernel_copies = false) {
  const uint32_t nbuf = uint32_t(devs.size()) * 2;
  auto dev_of = [](uint32_t b) { return b / 2; };
  std::vector<Program> fill, add, copy;
  Schedule::CompileOptions options;
  for (size_t d = 0; d < devs.size(); d++) {
    fill.emplace_back(*devs[d], images[d], "fill_u32");
    add.emplace_back(*devs[d], images[d], "vector_add");
    if (kernel_copies) copy.emplace_back(*devs[d], images[d], "copy_bytes");
  }
  for (const Program& p : copy) options.copy_kernels.push_back(&p);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < schedules; iter++) {
    Schedule s(devs);
    std::vector<Buffer> bound;
    bound.reserve(devs.size());  // Mem::of keeps a pointer to each
    std::vector<Mem> mems;
    for (size_t d = 0; d < devs.size(); d++) {
      bound.push_back(devs[d]->allocate(words * 4));
      mems.push_back(s.input(*devs[d], words * 4));
      mems.push_back(Mem::of(bound.back()));
    }
    std::vector<RandomOp> ops;
    int calls = 4 + int(rng() % uint32_t(max_calls));
    for (int c = 0; c < calls; c++) {
      RandomOp o{};
      o.kind = int(rng() % 3);
      o.n = 1 + rng() % 48;
      o.dst = rng() % nbuf;
      o.src = o.kind == 2 ? rng() % nbuf : dev_of(o.dst) * 2 + rng() % 2;
      o.src2 = dev_of(o.dst) * 2 + rng() % 2;
      o.doff = rng() % (words - o.n + 1);
      o.soff = rng() % (words - o.n + 1);
      o.soff2 = rng() % (words - o.n + 1);
      o.value = rng() % 1000;
      // vector_add reads before it writes per element: an input overlapping its own output
      // would make the result order-dependent, so keep them apart.
      auto overlaps = [&](uint32_t b, uint32_t off) {
        return b == o.dst && off + o.n > o.doff && o.doff + o.n > off;
      };
      if (o.kind == 1 && (overlaps(o.src, o.soff) || overlaps(o.src2, o.soff2))) o.kind = 0;
      ops.push_back(o);
      const uint32_t d = dev_of(o.dst), blk = 64;
      Mem dst = mems[o.dst], src = mems[o.src], src2 = mems[o.src2];
      if (o.kind == 0) {
        std::vector<Access> acc;  // half of them from the metadata (conservative)
        if (rng() % 2) acc = {Access::written(dst, o.doff * 4, o.n * 4)};
        s.launch(fill[d], {1, 1, 1}, {blk, 1, 1},
                 {Arg::buffer(dst, o.doff * 4), Arg::value(o.value), Arg::value(o.n),
                  Arg::value(blk)},
                 acc);
      } else if (o.kind == 1) {
        s.launch(add[d], {1, 1, 1}, {blk, 1, 1},
                 {Arg::buffer(src, o.soff * 4), Arg::buffer(src2, o.soff2 * 4),
                  Arg::buffer(dst, o.doff * 4), Arg::value(o.n), Arg::value(blk)},
                 {Access::read(src, o.soff * 4, o.n * 4), Access::read(src2, o.soff2 * 4, o.n * 4),
                  Access::written(dst, o.doff * 4, o.n * 4)});
      } else {
        s.copy(dst, o.doff * 4, src, o.soff * 4, o.n * 4);
      }
    }
    Executable exe = s.compile(options);
    if (kernel_copies) {  // copy queues only for the host's relays (see relays_in)
      EXPECT_EQ(exe.stats(QueueKind::Copy).calls, relays_in(devs, ops));
    }
    for (int replay = 0; replay < 2; replay++) {
      // Fresh contents everywhere; small integers as floats keep the sums exact.
      std::vector<Buffer> in;
      std::vector<const Buffer*> bufs;
      Bindings bindings;
      for (size_t d = 0; d < devs.size(); d++) in.push_back(devs[d]->allocate(words * 4));
      for (size_t d = 0; d < devs.size(); d++) {
        bufs.push_back(&in[d]);
        bufs.push_back(&bound[d]);
        bindings.input(mems[2 * d], in[d]);
      }
      std::vector<std::vector<float>> ref(nbuf, std::vector<float>(words));
      for (uint32_t b = 0; b < nbuf; b++) {
        for (auto& w : ref[b]) w = float(rng() % 100);
        devs[dev_of(b)]->copy_in(*bufs[b], 0, ref[b].data(), words * 4);
      }
      for (auto& o : ops) {
        auto& d = ref[o.dst];
        if (o.kind == 0) {
          for (uint32_t i = 0; i < o.n; i++) std::memcpy(&d[o.doff + i], &o.value, 4);
        } else if (o.kind == 1) {
          for (uint32_t i = 0; i < o.n; i++)
            d[o.doff + i] = ref[o.src][o.soff + i] + ref[o.src2][o.soff2 + i];
        } else {
          std::vector<float> tmp(ref[o.src].begin() + o.soff, ref[o.src].begin() + o.soff + o.n);
          std::copy(tmp.begin(), tmp.end(), d.begin() + o.doff);
        }
      }
      exe.run(bindings);
      exe.wait();
      for (uint32_t b = 0; b < nbuf; b++) {
        std::vector<uint32_t> got(words);
        devs[dev_of(b)]->copy_out(got.data(), *bufs[b], 0, words * 4);
        for (uint32_t i = 0; i < words; i++) {
          uint32_t want;
          std::memcpy(&want, &ref[b][i], 4);
          ASSERT_EQ(got[i], want) << "schedule " << iter << " replay " << replay << " buffer "
                                  << b << " word " << i;
        }
      }
    }
  }
}

// The random-schedule tests run with the emulated GPUs' queues interleaved at random, so a
// missing cross-queue wait shows (InterleavedQueuesShowAMissingCrossQueueWait, device tests).
TEST_P(Batch, RandomSchedulesMatchASequentialReference) {
  interleave(1234);
  SCOPED_TRACE(trace());
  check_random_schedules({dev_.get()}, {img_}, 256, 120, 26, 1234);
}

// The same with every copy a copy_bytes launch, on one device and between two (the kernels
// read and write the host staging area).
TEST_P(Batch, RandomSchedulesWithKernelCopiesMatchASequentialReference) {
  if (!img_->kernel("copy_bytes")) GTEST_SKIP() << GetParam() << " has no copy_bytes kernel";
  interleave(4321);
  SCOPED_TRACE(trace());
  check_random_schedules({dev_.get()}, {img_}, 256, 40, 26, 4321, true);
  auto other = Device::open("emu:gfx1100");
  std::shared_ptr<const ProgramImage> other_img =
      load_program(*other, kernels::code_object("gfx1100"));
  check_random_schedules({dev_.get(), other.get()}, {img_, other_img}, 128, 20, 16, 77, true);
}

// Two devices at once: copies between them go through host staging, waited on by the GPUs.
TEST_P(Batch, RandomTwoDeviceSchedulesMatchASequentialReference) {
  interleave(99);
  SCOPED_TRACE(trace());
  auto other = Device::open("emu:gfx1100");
  std::shared_ptr<const ProgramImage> other_img =
      load_program(*other, kernels::code_object("gfx1100"));
  check_random_schedules({dev_.get(), other.get()}, {img_, other_img}, 128, 60, 16, 99);
}

TEST_P(Batch, CopiesBetweenDevicesStageThroughHostMemory) {
  auto other = Device::open("emu:gfx1201");
  const uint32_t n = 1000;
  Buffer a = dev_->allocate(n * 4), b = other->allocate(n * 4), c = dev_->allocate(n * 4);
  Schedule s({dev_.get(), other.get()});
  s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);   // there...
  s.copy(Mem::of(c), 0, Mem::of(b), 0, n * 4);   // ...and back
  Executable exe = s.compile({.profile = true});
  // Each copy-in from staging waits for the other device's copy-out into it; the second
  // copy-out follows the first copy-in on the same queue without a wait. A device that
  // cannot reach host memory has a host relay queue between the two staging areas: it waits
  // for each copy-out, and the copy-ins wait for it.
  const bool relay = own_area(*dev_);
  EXPECT_EQ(exe.stats(*other, QueueKind::Copy).waits, 1u);
  EXPECT_EQ(exe.stats(*dev_, QueueKind::Copy).waits, relay ? 3u : 1u);
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 7u);
  write(a, v);
  exe.run(Bindings());
  auto points = exe.points();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1].first, other.get());
  exe.wait();
  EXPECT_EQ(read<uint32_t>(c, n), v);
  EXPECT_EQ(exe.profile().size(), relay ? 6u : 4u);  // two ops per copy (three with a relay)
  std::stringstream json;
  exe.write_trace(json);
  boost::property_tree::ptree tree;
  ASSERT_NO_THROW(boost::property_tree::read_json(json, tree));
}

// All-to-all between three devices: copies to the peer at distance k use copy queue k-1 on
// both sides, so the traffic spreads over the copy engines.
TEST_P(Batch, AllToAllCopiesSpreadOverCopyQueuesByPeerDistance) {
  auto d1 = Device::open("emu:gfx1100");
  auto d2 = Device::open("emu:gfx942");
  Device* devs[3] = {dev_.get(), d1.get(), d2.get()};
  const uint32_t n = 4096;
  std::vector<Buffer> src;
  std::vector<std::vector<Buffer>> dst(3);
  for (uint32_t d = 0; d < 3; d++) {
    src.push_back(devs[d]->allocate(n));
    devs[d]->copy_in(src[d], 0, std::vector<uint8_t>(n, uint8_t(d + 1)).data(), n);
    for (uint32_t e = 0; e < 3; e++) dst[d].push_back(devs[d]->allocate(n));
  }
  Schedule s({devs[0], devs[1], devs[2]});
  for (uint32_t from = 0; from < 3; from++)
    for (uint32_t to = 0; to < 3; to++)
      if (from != to) s.copy(Mem::of(dst[to][from]), 0, Mem::of(src[from]), 0, n);
  Executable exe = s.compile({.profile = true});
  exe.run(Bindings());
  exe.wait();
  for (uint32_t to = 0; to < 3; to++)
    for (uint32_t from = 0; from < 3; from++) {
      if (from == to) continue;
      std::vector<uint8_t> got(n);
      devs[to]->copy_out(got.data(), dst[to][from], 0, n);
      ASSERT_EQ(got, std::vector<uint8_t>(n, uint8_t(from + 1))) << from << " -> " << to;
    }
  auto calls = exe.profile();
  // 6 copies, each out of one device and into another; a device that cannot reach host
  // memory adds the host's relay between staging areas to its 4 copies.
  const size_t relays = own_area(*dev_) ? 4 : 0;
  ASSERT_EQ(calls.size(), 12u + relays);
  size_t relayed = 0;
  for (auto& c : calls) {
    if (c.name.ends_with(" between staging areas")) {
      relayed++;
      continue;
    }
    uint32_t from = c.call / 2, to_index = c.call % 2;  // calls go in (from, to) order
    uint32_t to = to_index < from ? to_index : to_index + 1;
    uint32_t distance = (to + 3 - from) % 3;
    EXPECT_EQ(c.queue, QueueKind::Copy);
    // Without a copy engine, one host queue per device copies for every distance.
    // A device with fewer copy queues than distances shares its last.
    const uint32_t copy_queues = c.device->queue_count(QueueKind::Copy);
    EXPECT_EQ(c.queue_index, copy_queues ? std::min(distance - 1, copy_queues - 1) : 0)
        << c.name << " " << from << " -> " << to;
  }
  EXPECT_EQ(relayed, relays);
  Executable one = s.compile({.copy_queues = 1});  // everything on the first copy queue
  EXPECT_FALSE(one.shares_compilation_with(exe));
  one.run(Bindings());
  one.wait();
}

// A device with an area of its own (it cannot reach host memory, or the CPU cannot map its
// memory) in a schedule with another device: its signals and staging live in its own memory, and the host relays signals and copies between that and
// the host memory the other device reaches. A chain across both, in both device orders,
// run twice with the input re-bound.
TEST_P(Batch, ADeviceThatCannotReachHostMemorySharesSchedulesThroughHostRelays) {
  if (!own_area(*dev_)) GTEST_SKIP() << GetParam() << " shares host memory with the CPU";
  interleave(55);
  SCOPED_TRACE(trace());
  auto other = Device::open("emu:gfx1100");
  Program fill = program("fill_u32");
  Program add(*other, load_program(*other, kernels::code_object("gfx1100")),
              "vector_add");
  const uint32_t n = 1000;
  Buffer a = dev_->allocate(n * 4), b = other->allocate(n * 4), c = other->allocate(n * 4),
         d = dev_->allocate(n * 4);
  for (bool usb_first : {true, false}) {
    Schedule s(usb_first ? std::vector<Device*>{dev_.get(), other.get()}
                         : std::vector<Device*>{other.get(), dev_.get()});
    Mem x = s.input(*other, n * 4);
    s.launch(fill, {n / 100, 1, 1}, {100, 1, 1},  // on the USB device
             {Arg::buffer(Mem::of(a)), Arg::value(5u), Arg::value(n), Arg::value(100u)});
    s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);  // to the other device
    s.launch(add, {n / 100, 1, 1}, {100, 1, 1},   // there, after the copy
             {Arg::buffer(Mem::of(b)), Arg::buffer(x), Arg::buffer(Mem::of(c)), Arg::value(n),
              Arg::value(100u)});
    s.copy(Mem::of(d), 0, Mem::of(c), 0, n * 4);  // and back
    Executable exe = s.compile({.profile = true});
    for (uint32_t run = 1; run <= 2; run++) {
      Buffer in = other->allocate(n * 4);
      other->copy_in(in, 0, std::vector<float>(n, float(run)).data(), n * 4);
      exe.run(Bindings().input(x, in));
      exe.wait();
      float five;
      const uint32_t bits = 5;
      std::memcpy(&five, &bits, 4);  // vector_add adds fill_u32's words as floats
      EXPECT_EQ(read<float>(d, n), std::vector<float>(n, five + float(run))) << usb_first;
    }
    size_t relays = 0;
    for (auto& call : exe.profile()) relays += call.name.ends_with(" between staging areas");
    EXPECT_EQ(relays, 2u);
  }
  // Two such devices: each its own area, the host relaying between them.
  auto usb = Device::open(device_name(GetParam()));
  check_random_schedules({dev_.get(), usb.get()},
                         {img_, load_program(*usb, kernels::code_object(
                                                                     usb->properties().arch))},
                         128, 20, 16, 55);
}

// A run whose submission fails (here the capture cannot be written: the file system "fills"
// after the first device's records) submits nothing on any device, not the first device's
// queues alone (they would wait for the second's forever), and gives the timeline values
// back: both devices stay usable and the next run gives verified results.
TEST_P(Batch, ARunWhoseCaptureFailsLeavesEveryDeviceUsable) {
  auto other = Device::open("emu:gfx1100");
  Program fill = program("fill_u32");
  const uint32_t n = 1000;
  Buffer a = dev_->allocate(n * 4), b = other->allocate(n * 4);
  Schedule s({dev_.get(), other.get()});
  auto value = s.scalar<uint32_t>();
  s.launch(fill, {n / 100, 1, 1}, {100, 1, 1},
           {Arg::buffer(Mem::of(a)), Arg::scalar(value), Arg::value(n), Arg::value(100u)});
  s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);  // to the other device
  Executable exe = s.compile();
  const std::string path = ::testing::TempDir() + "/hcq_batch_capture_" + std::to_string(::getpid());
  // Where the second device's first record starts in a capture of one run (records: a 16-byte
  // header of type, flags and length, then the payload; a device record's payload starts with
  // its 4-byte id; docs/capture-format.md): the first device's records fit before it.
  uint64_t second_device_at = 0;
  {
    capture::start(path);
    exe.run(Bindings().scalar(value, 1u));
    exe.wait();
    capture::stop();
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    for (uint64_t at = 16; at + 20 <= bytes.size();) {
      uint32_t type, id;
      uint64_t len;
      std::memcpy(&type, &bytes[at], 4);
      std::memcpy(&len, &bytes[at + 8], 8);
      std::memcpy(&id, &bytes[at + 16], 4);
      if (type == 1 && id == 1) {
        second_device_at = at;
        break;
      }
      at += 16 + len;
    }
    ASSERT_GT(second_device_at, 16u) << "no second device in the capture";
  }
  capture::start(path);
  // The first device's records fit, the second's do not.
  testing_support::FileSizeLimit limit(second_device_at);
  const uint64_t before[2] = {dev_->timeline().last(), other->timeline().last()};
  std::string error;
  try {
    exe.run(Bindings().scalar(value, 7u));
  } catch (const OsError& e) {
    error = e.what();
  }
  limit.lift();
  EXPECT_NO_THROW(capture::stop());
  std::remove(path.c_str());
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  EXPECT_EQ(dev_->timeline().last(), before[0]);
  EXPECT_EQ(other->timeline().last(), before[1]);
  dev_->synchronize(std::chrono::milliseconds(2000));
  other->synchronize(std::chrono::milliseconds(2000));
  exe.run(Bindings().scalar(value, 9u));
  exe.wait(std::chrono::milliseconds(5000));
  std::vector<uint32_t> got(n);
  other->copy_out(got.data(), b, 0, n * 4);
  EXPECT_EQ(got, std::vector<uint32_t>(n, 9u));
}

// A schedule whose compute recording is longer than one PM4 indirect buffer holds (IB_SIZE:
// 20 bits of dwords, about 17,000 launches on gfx1100) runs split into several indirect
// buffers: every launch's word is checked (a truncated buffer would leave the last ones
// unwritten and never signal).
TEST(BatchPastTheIndirectBufferLimit, SeventeenThousandLaunchesRunInSeveralIndirectBuffers) {
  kernels::register_cpu_implementations();
  auto dev = Device::open("emu:gfx1100");
  const auto image = kernels::code_object("gfx1100");
  if (image.empty()) GTEST_SKIP() << "no code object built for gfx1100";
  std::shared_ptr<const ProgramImage> img = load_program(*dev, image);
  Program fill(*dev, img, "fill_u32");
  const size_t limit = dev->max_indirect_dwords(QueueKind::Compute);
  EXPECT_EQ(limit, (size_t{1} << 20) - 1);
  size_t per_launch;  // one launch's dwords
  {
    ComputeQueue q(*dev);
    q.exec(fill, 0, {1, 1, 1}, {64, 1, 1});
    per_launch = q.stream().size();
  }
  const uint32_t n = uint32_t(limit / per_launch) + 100;
  EXPECT_GT(n, 17000u);
  EXPECT_GT(uint64_t(n) * per_launch, limit);
  Buffer out = dev->allocate(uint64_t(n) * 4);
  Schedule s(*dev);
  for (uint32_t i = 0; i < n; i++)
    s.launch(fill, {1, 1, 1}, {64, 1, 1},
             {Arg::buffer(Mem::of(out), uint64_t(i) * 4), Arg::value(i ^ 0x5a000000u),
              Arg::value(1u), Arg::value(64u)},
             {Access::written(Mem::of(out), uint64_t(i) * 4, 4)});
  Executable exe = s.compile();
  exe.run(Bindings());
  exe.wait(std::chrono::milliseconds(120000));
  std::vector<uint32_t> got(n);
  dev->copy_out(got.data(), out, 0, uint64_t(n) * 4);
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(got[i], i ^ 0x5a000000u) << "launch " << i;
}

// Remote writes and waits within one process (the cross-process test over rdma/ is in
// tests/rdma/local_test.cpp): a peer that copies into buffers of this device by their device
// address and sets a signal of this process stands in for a transport.
struct LoopbackPeer : RemotePeer {
  std::vector<const Buffer*> targets;
  Signal* raised = nullptr;  // the peer's signal
  void write_and_signal(Local src, uint64_t size, uint64_t addr, uint64_t value) override {
    for (const Buffer* b : targets)
      if (addr >= b->va() && addr + size <= b->va() + b->size()) {
        std::memcpy(static_cast<std::byte*>(b->host()) + (addr - b->va()), src.host, size);
        raised->set(value);
        return;
      }
    throw Error("loopback peer: nothing at " + hex(addr));
  }
  void read(Local dst, uint64_t size, uint64_t addr) override {
    for (const Buffer* b : targets)
      if (addr >= b->va() && addr + size <= b->va() + b->size()) {
        std::memcpy(dst.host, static_cast<const std::byte*>(b->host()) + (addr - b->va()), size);
        return;
      }
    throw Error("loopback peer: nothing at " + hex(addr));
  }
  void signal(uint64_t value) override { raised->set(value); }
};

// `fn` throws InvalidInput with exactly `msg`.
template <class F>
void expect_error(F fn, const std::string& msg) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected " << msg;
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}
// A run with `b` fails with exactly `msg`, reported by wait().
void expect_run_error(Executable& exe, const Bindings& b, const std::string& msg) {
  exe.run(b);
  try {
    exe.wait();
    ADD_FAILURE() << "no error, expected " << msg;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}

// A pull: wait on the GPU for the peer's "ready", read its buffer into Y on the host queue,
// add 1 on the GPU, copy out, and signal "consumed"; replayed with other buffers and
// addresses, every element checked, and the recording errors exact.
// A freed or moved-from Buffer hands out no address (issue 33): the next allocation may get
// its old one, and a launch through the stale handle would write into that live buffer.
TEST(FreedBuffer, HasNoAddressAndEveryApiTakingItRefusesIt) {
  auto dev = Device::open("emu:gfx1100");
  Buffer a = dev->allocate(4096);
  const uint64_t old_va = a.va();
  a.reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(a.va(), 0u);
  EXPECT_EQ(a.host(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  Buffer next = dev->allocate(4096);
  EXPECT_EQ(next.va(), old_va);  // the cache hands the range out again: why `a` must not
  Buffer moved = std::move(next);
  EXPECT_FALSE(next);  // NOLINT(bugprone-use-after-move): what a moved-from handle says
  EXPECT_EQ(next.va(), 0u);
  EXPECT_EQ(next.host(), nullptr);
  EXPECT_EQ(next.size(), 0u);
  EXPECT_EQ(moved.va(), old_va);
  for (const Buffer* empty : {&a, &next}) {
    EXPECT_EQ(error_of([&] { KernelArgs().value(1u).buffer(*empty); }),
              "kernel argument 1: an empty Buffer (freed or moved from) has no address");
    EXPECT_EQ(error_of([&] { Mem::of(*empty); }),
              "batch: Mem::of an empty Buffer (freed or moved from)");
    EXPECT_EQ(error_of([&] { dev->copy_in(*empty, 0, "x", 1); }), "emu:gfx1100: copy_in: empty buffer");
  }
  Schedule s(*dev);
  Mem in = s.input(4096);
  s.copy(Mem::of(moved), 0, in, 0, 4096);
  EXPECT_EQ(error_of([&] { Bindings().input(in, a); }),
            "batch: input 0 bound to an empty Buffer (freed or moved from)");
  Executable exe = s.compile();
  Buffer src = dev->allocate(4096);
  Bindings b;
  b.input(in, src);
  src.reset();  // freed after it was bound: the run refuses it
  EXPECT_EQ(error_of([&] { exe.run(b); }),
            "batch: input 0 is an empty Buffer (freed or moved from)");
}

TEST(BatchRemote, ReadAfterGpuWaitThenSignalReplaysWithReboundBuffers) {
  kernels::register_cpu_implementations();
  auto dev = Device::open("emu:gfx1100");
  const auto image = kernels::code_object("gfx1100");
  if (image.empty()) GTEST_SKIP() << "no code object built for gfx1100";
  std::shared_ptr<const ProgramImage> img = load_program(*dev, image);
  Program scale(*dev, img, "scale_add");
  const uint32_t n = 4096, block = 64;
  Signal ready = dev->new_signal(0), consumed = dev->new_signal(0);
  Buffer src[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  LoopbackPeer peer;  // the producer's side: its buffers, and its "consumed" signal
  peer.targets = {&src[0], &src[1]};
  peer.raised = &consumed;
  Schedule r(*dev);
  Mem yy = r.input(n * 4), out = r.input(n * 4);
  auto addr = r.scalar<uint64_t>(), want = r.scalar<uint64_t>(), done = r.scalar<uint64_t>();
  r.remote_wait(*dev, ready, want, {Access::written(yy, 0, n * 4)});
  r.remote_read(peer, addr, yy, 0, n * 4);
  r.launch(scale, {n / block, 1, 1}, {block, 1, 1},
           {Arg::buffer(yy), Arg::value(1.0f), Arg::value(1.0f), Arg::value(n), Arg::value(block)});
  r.copy(out, 0, yy, 0, n * 4);
  r.remote_signal(peer, done, {Access::read(yy, 0, n * 4)});
  Executable re = r.compile();
  EXPECT_EQ(re.stats(QueueKind::Copy).calls, 3u);  // the copy; the read and signal on the host
  Buffer yb[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  Buffer ob[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  for (int run = 0; run < 2; run++) {
    const float v = 7.0f + float(run);
    std::vector<float> produced(n, v);
    std::memcpy(src[run].host(), produced.data(), n * 4);
    re.run(Bindings()
               .input(yy, yb[run])
               .input(out, ob[run])
               .scalar(addr, src[run].va())
               .scalar(want, uint64_t(run + 1))
               .scalar(done, uint64_t(10 + run)));
    // Held on the GPU until the producer is ready: nothing read, nothing consumed.
    EXPECT_THROW(re.wait(std::chrono::milliseconds(30)), TimeoutError);
    EXPECT_EQ(consumed.value(), uint64_t(run ? 10 : 0));
    ready.set(uint64_t(run + 1));
    re.wait();
    EXPECT_EQ(consumed.value(), uint64_t(10 + run));
    std::vector<float> got(n);
    dev->copy_out(got.data(), ob[run], 0, n * 4);
    for (uint32_t i = 0; i < n; i++) ASSERT_EQ(got[i], v + 1.0f) << "run " << run << " element " << i;
  }
  // A peer's error fails the run, reported by wait() with its message.
  expect_run_error(re, Bindings().scalar(addr, uint64_t(0x2000)), "loopback peer: nothing at 0x2000");
  auto f = r.scalar<float>();
  expect_error([&] { r.remote_read(peer, addr, yy, 0, 0); }, "batch: remote read #5 reads 0 bytes");
  expect_error([&] { r.remote_read(peer, addr, yy, 8, n * 4); },
               "batch: remote read #5 destination: range [8, 8+16384) is outside the buffer of "
               "16384 bytes");
  expect_error([&] { r.remote_read(peer, Scalar<uint64_t>{f.slot}, yy, 0, 4); },
               "batch: remote read #5 needs an 8-byte scalar of this schedule");
  expect_error([&] { r.remote_signal(peer, done, {}); },
               "batch: remote signal #5 follows no range (its device is the first range's)");
  expect_error([&] { r.remote_signal(peer, Scalar<uint64_t>{f.slot}, {Access::read(yy, 0, 4)}); },
               "batch: remote signal #5 needs an 8-byte scalar of this schedule");
}

TEST(BatchRemote, WriteThenGpuWaitReplayWithReboundBuffersAndScalars) {
  kernels::register_cpu_implementations();
  auto dev = Device::open("emu:gfx1100");
  const auto image = kernels::code_object("gfx1100");
  if (image.empty()) GTEST_SKIP() << "no code object built for gfx1100";
  std::shared_ptr<const ProgramImage> img = load_program(*dev, image);
  Program fill(*dev, img, "fill_u32"), scale(*dev, img, "scale_add");
  const uint32_t n = 4096, block = 64;
  Signal arrived = dev->new_signal(0);
  Buffer y[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  LoopbackPeer peer;
  peer.targets = {&y[0], &y[1]};
  peer.raised = &arrived;
  // The writer: fill X, write it to the peer.
  Schedule w(*dev);
  Mem x = w.input(n * 4);
  auto bits = w.scalar<uint32_t>();
  auto addr = w.scalar<uint64_t>(), value = w.scalar<uint64_t>();
  w.launch(fill, {n / block, 1, 1}, {block, 1, 1},
           {Arg::buffer(x), Arg::scalar(bits), Arg::value(n), Arg::value(block)});
  w.remote_write(peer, x, 0, n * 4, addr, value);
  Executable we = w.compile();
  EXPECT_EQ(we.stats(QueueKind::Copy).calls, 1u);  // the remote write, on a host queue
  // The receiver: wait for the signal on the GPU, add 1, copy out.
  Schedule r(*dev);
  Mem yy = r.input(n * 4), out = r.input(n * 4);
  auto want = r.scalar<uint64_t>();
  r.remote_wait(*dev, arrived, want, {Access::written(yy, 0, n * 4)});
  r.launch(scale, {n / block, 1, 1}, {block, 1, 1},
           {Arg::buffer(yy), Arg::value(1.0f), Arg::value(1.0f), Arg::value(n), Arg::value(block)});
  r.copy(out, 0, yy, 0, n * 4);
  Executable re = r.compile();
  Buffer xb[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  Buffer ob[2] = {dev->allocate(n * 4), dev->allocate(n * 4)};
  for (int run = 0; run < 2; run++) {
    const float v = 5.0f + float(run);
    we.run(Bindings()
               .input(x, xb[run])
               .scalar(bits, std::bit_cast<uint32_t>(v))
               .scalar(addr, y[run].va())
               .scalar(value, uint64_t(run + 1)));
    we.wait();
    EXPECT_EQ(arrived.value(), uint64_t(run + 1));
    re.run(Bindings().input(yy, y[run]).input(out, ob[run]).scalar(want, uint64_t(run + 1)));
    re.wait();
    std::vector<float> got(n);
    dev->copy_out(got.data(), ob[run], 0, n * 4);
    for (uint32_t i = 0; i < n; i++) ASSERT_EQ(got[i], v + 1.0f) << "run " << run << " element " << i;
  }
  // The wait is on the GPU: with the signal short of the value the run does not finish.
  re.run(Bindings().scalar(want, uint64_t(3)));
  EXPECT_THROW(re.wait(std::chrono::milliseconds(50)), TimeoutError);
  arrived.set(3);
  re.wait();
  // A peer's error fails the writer's run, reported by wait() with its message.
  expect_run_error(we, Bindings().scalar(addr, uint64_t(0x1000)), "loopback peer: nothing at 0x1000");
  // Bad recordings: the exact refusals.
  auto f = w.scalar<float>();
  expect_error([&] { w.remote_write(peer, x, 0, 0, addr, value); },
               "batch: remote write #2 writes 0 bytes");
  expect_error([&] { w.remote_write(peer, x, 0, 4, Scalar<uint64_t>{f.slot}, value); },
               "batch: remote write #2 needs 8-byte scalars of this schedule");
  expect_error([&] { r.remote_wait(*dev, Signal(), want, {}); },
               "batch: remote wait #3 waits on an empty signal");
  expect_error([&] { r.remote_wait(*dev, arrived, Scalar<uint64_t>{9}, {}); },
               "batch: remote wait #3 needs an 8-byte scalar of this schedule");
}

INSTANTIATE_TEST_SUITE_P(Targets, Batch,
                         ::testing::Values("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201",
                                           "gfx1100_usb", "gfx1100_am", "sm_80", "sm_90", "sm_100", "a660",
                                           "a740", "a740_msm"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Hardware, Batch,
                         ::testing::ValuesIn(testing_support::devices_from_env("HCQ_TEST_DEVICES")),
                         [](const auto& info) { return testing_support::test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Targets, BatchWrap,
                         ::testing::Values("gfx1100", "gfx90a", "sm_90", "gfx1100_usb"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hcq::batch
