// Batch compiler speed: compiling a schedule, and replaying it with changed bindings.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "batch/batch.hpp"
#include "emu/kernels.hpp"
#include "kernels.hpp"
#include "ring_drain.hpp"

namespace {

using namespace hcq;

struct Fixture {
  std::unique_ptr<Device> dev;
  std::shared_ptr<const ProgramImage> img;
  bool ok = false;
  explicit Fixture(const std::string& device = "emu:gfx1100") {
    kernels::register_cpu_implementations();
    dev = Device::open(device);
    auto image = kernels::code_object(dev->properties().arch);
    if (image.empty()) return;
    img = load_program(*dev, image);
    ok = true;
  }
};

// The timed replays' own spread: Google Benchmark's manual time is the mean over the
// iterations, which one preempted replay on a shared 2-vCPU machine can double; the median
// and 90th percentile of the iterations say whether it did.
class IterationTimes {
 public:
  explicit IterationTimes(benchmark::State& state) : state_(state) {
    ns_.reserve(size_t(state.max_iterations));
  }
  void add(std::chrono::steady_clock::duration d) {
    state_.SetIterationTime(std::chrono::duration<double>(d).count());
    ns_.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  ~IterationTimes() {
    if (ns_.empty()) return;
    std::sort(ns_.begin(), ns_.end());
    state_.counters["p50_ns"] = ns_[ns_.size() / 2];
    state_.counters["p90_ns"] = ns_[ns_.size() * 9 / 10];
  }

 private:
  benchmark::State& state_;
  std::vector<double> ns_;
};

// `calls` calls: `inputs` copies from inputs into bound buffers (8 unless said), the rest
// fills over a few buffers whose ranges overlap, so the compiler tracks real dependencies.
struct Built {
  batch::Schedule schedule;
  std::vector<batch::Mem> inputs;
  std::vector<Buffer> bound;
};
std::unique_ptr<Built> build(Fixture& f, Program& fill, Program& empty, int calls,
                             bool only_empty, int inputs = 8) {
  auto b = std::make_unique<Built>(Built{batch::Schedule(*f.dev), {}, {}});
  for (int i = 0; i < inputs; i++) {
    b->inputs.push_back(b->schedule.input(4096));
    b->bound.push_back(f.dev->allocate(4096));
  }
  for (int i = 0; i < inputs; i++)
    b->schedule.copy(batch::Mem::of(b->bound[size_t(i)]), 0, b->inputs[size_t(i)], 0, 4096);
  for (int i = inputs; i < calls; i++) {
    if (only_empty) {
      b->schedule.launch(empty, {1, 1, 1}, {1, 1, 1}, {});
      continue;
    }
    auto& buf = b->bound[size_t(i % inputs)];
    uint32_t off = uint32_t(i * 64 % 2048);
    b->schedule.launch(fill, {1, 1, 1}, {64, 1, 1},
                       {batch::Arg::buffer(batch::Mem::of(buf), off), batch::Arg::value(uint32_t(i)),
                        batch::Arg::value(64u), batch::Arg::value(64u)},
                       {batch::Access::written(batch::Mem::of(buf), off, 256)});
  }
  return b;
}

// Two sets of `changed` input buffers and their bindings: a replay alternates between them,
// so each run changes every bound input.
struct Alternating {
  std::vector<Buffer> sets[2];
  batch::Bindings bind[2];
  Alternating(Fixture& f, const Built& b, int changed) {
    for (auto& s : sets)
      for (int i = 0; i < changed; i++) s.push_back(f.dev->allocate(4096));
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < changed; i++) bind[k].input(b.inputs[size_t(i)], sets[k][size_t(i)]);
  }
};

void BM_BatchCompile(benchmark::State& state) {
  Fixture f;
  if (!f.ok) return state.SkipWithError("no gfx1100 code object");
  Program fill(*f.dev, f.img, "fill_u32"), empty(*f.dev, f.img, "empty");
  auto b = build(f, fill, empty, int(state.range(0)), false);
  for (auto _ : state) {
    batch::Executable exe = b->schedule.compile();
    benchmark::DoNotOptimize(&exe);
  }
  state.counters["calls"] = double(state.range(0));
}
BENCHMARK(BM_BatchCompile)->Arg(1000)->Unit(benchmark::kMicrosecond);

// CPU time of run() with `changed` input bindings changed per replay (each input one copy's
// source); the GPU work of the previous replay is waited for outside the timed region. With
// `period_us`, each replay starts that long after the previous one (the host thread busy
// until then), so every schedule size replays after the same gap.
void replays_changed(benchmark::State& state, const std::string& device, int calls, bool idle,
                     int changed, int period_us = 0) {
  Fixture f(device);
  if (!f.ok) return state.SkipWithError("no code object for this device");
  Program fill(*f.dev, f.img, "fill_u32"), empty(*f.dev, f.img, "empty");
  auto b = build(f, fill, empty, calls, true, changed);
  batch::Executable exe = b->schedule.compile();
  Alternating alt(f, *b, changed);
  auto& bind = alt.bind;
  exe.run(bind[1]);
  int k = 0;
  auto last = std::chrono::steady_clock::now();
  IterationTimes times(state);
  for (auto _ : state) {
    exe.wait();
    while (std::chrono::steady_clock::now() - last < std::chrono::microseconds(period_us)) {
    }
    // With idle=1 the emulated GPU's thread has gone back to sleep before the replay, so the
    // figure is the host's own cost without the emulator polling the same cache lines.
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(500));
    auto t0 = last = std::chrono::steady_clock::now();
    exe.run(bind[k]);
    times.add(std::chrono::steady_clock::now() - t0);
    k ^= 1;
  }
  exe.wait();
  state.counters["calls"] = double(calls);
  state.counters["patches"] = double(exe.last_patch_count());
}
void replays_8_changed(benchmark::State& state, const std::string& device) {
  replays_changed(state, device, int(state.range(0)), state.range(1) != 0, 8);
}
void BM_BatchReplay8Changed(benchmark::State& state) { replays_8_changed(state, "emu:gfx1100"); }
BENCHMARK(BM_BatchReplay8Changed)
    ->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->ArgNames({"calls", "idle"})
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

// The same replay with every submission captured to a live ring (HCQ_CAPTURE=shm:NAME) that a
// follower thread drains, beside capture off (BM_BatchReplay8Changed): a capturing replay
// records its submissions (batch/executable.cpp) and takes the capture's path.
void BM_BatchReplay8ChangedRingCapture(benchmark::State& state) {
  const std::string name = "hcq-bench-replay-" + std::to_string(::getpid());
  capture::Options o;
  o.ring = name;
  capture::start("", o);
  bench::RingDrain drain(name);
  replays_8_changed(state, "emu:gfx1100");
  capture::stop();
  state.counters["dropped"] = double(drain.join());
}
BENCHMARK(BM_BatchReplay8ChangedRingCapture)
    ->ArgsProduct({{10, 1000}, {0}})->ArgNames({"calls", "idle"})
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

// Parks an emulated GPU's engine thread inside a kernel, so that queues submitted to meanwhile
// are not drained: a CPU implementation of `spin_until` (wait for the host) that blocks on a
// condition variable instead of polling memory, and says when it has started. The engine
// thread runs one kernel at a time for all of the device's queues, so while it is parked it
// reads and writes none of the lines the host's submissions write. Installed for the life of
// the gate; the kernels' own implementation is put back after.
class EngineGate {
 public:
  EngineGate() {
    emu::register_kernel("spin_until", [this](const emu::Dispatch& d) { park(d); });
  }
  ~EngineGate() {
    open();
    kernels::register_cpu_implementations();
  }
  EngineGate(const EngineGate&) = delete;
  EngineGate& operator=(const EngineGate&) = delete;

  // Waits until the engine is parked in the `n`th gate launch (counted from 1); polls, so
  // the host thread stays on its core and the timed replay does not start from a wake-up.
  bool wait_parked(uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (parked_.load(std::memory_order_acquire) < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  // Lets every parked launch so far return.
  void open() {
    std::lock_guard lk(mu_);
    opened_ = parked_.load(std::memory_order_relaxed);
    cv_.notify_all();
  }

 private:
  void park(const emu::Dispatch& d) {
    std::unique_lock lk(mu_);
    const uint64_t me = parked_.fetch_add(1, std::memory_order_release) + 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (opened_ < me) {
      if (d.abandoned()) throw emu::Fault("bench gate: abandoned (the device is closing)", 0);
      if (std::chrono::steady_clock::now() > deadline)
        throw emu::Fault("bench gate: not opened for 30 s", 0);
      cv_.wait_for(lk, std::chrono::milliseconds(10));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> parked_{0};  // gate launches started
  uint64_t opened_ = 0;               // gate launches let go (under mu_)
};

// The replay's CPU time alone: each timed run() is submitted while the emulated GPU's engine
// thread is parked (EngineGate), so nothing on the other core polls or drains the queues the
// replay writes; the gate opens and the replay's GPU work runs outside the timed region. What
// the figure still includes: the lines the GPU wrote last (read pointers, signals) move to the
// host's core, as they would from a real GPU. Emulated devices only.
void replays_cpu_only(benchmark::State& state, const std::string& device, int calls,
                      int changed) {
  Fixture f(device);
  if (!f.ok) return state.SkipWithError("no code object for this device");
  Program fill(*f.dev, f.img, "fill_u32"), empty(*f.dev, f.img, "empty"),
      spin(*f.dev, f.img, "spin_until");
  auto b = build(f, fill, empty, calls, true, changed);
  batch::Executable exe = b->schedule.compile();
  Alternating alt(f, *b, changed);
  auto& bind = alt.bind;
  Buffer flag = f.dev->allocate_visible(4096);  // spin_until's argument; the gate ignores it
  EngineGate gate;
  exe.run(bind[1]);
  int k = 0;
  uint64_t gates = 0;
  IterationTimes times(state);
  for (auto _ : state) {
    exe.wait();
    spin.launch(KernelArgs().buffer(flag), {1, 1, 1}, {1, 1, 1});
    if (!gate.wait_parked(++gates)) {
      state.SkipWithError("the emulated engine did not reach the gate within 10 s");
      break;
    }
    auto t0 = std::chrono::steady_clock::now();
    exe.run(bind[k]);
    times.add(std::chrono::steady_clock::now() - t0);
    gate.open();
    k ^= 1;
  }
  gate.open();
  exe.wait();
  f.dev->synchronize();
  state.counters["calls"] = double(calls);
  state.counters["patches"] = double(exe.last_patch_count());
}
void BM_BatchReplayCpuOnly(benchmark::State& state) {
  replays_cpu_only(state, "emu:gfx1100", int(state.range(0)), 8);
}
BENCHMARK(BM_BatchReplayCpuOnly)
    ->Arg(10)->Arg(100)->Arg(1000)->Arg(10000)->ArgName("calls")
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

// Replays every 2 ms, longer than the GPU work of the largest schedule: the figure at 10,000
// calls above includes the longer gap its GPU work leaves before the replay (the host's
// caches cool down; 10 calls replayed after a 1 ms gap cost as much), here every size waits
// alike.
void BM_BatchReplay8ChangedEvery2ms(benchmark::State& state) {
  replays_changed(state, "emu:gfx1100", int(state.range(0)), false, 8, 2000);
}
BENCHMARK(BM_BatchReplay8ChangedEvery2ms)
    ->Arg(10)->Arg(100)->Arg(1000)->Arg(10000)->ArgName("calls")
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

// Wall time of a 10-call replay and its wait, on a UMA device whose copies are host copies
// (their thread waits for the GPU's producers and the GPU for them).
void BM_BatchRunAndWaitHostCopies(benchmark::State& state) {
  Fixture f("emu:a660");
  if (!f.ok) return state.SkipWithError("no a660 code object");
  Program fill(*f.dev, f.img, "fill_u32"), empty(*f.dev, f.img, "empty");
  auto b = build(f, fill, empty, 10, false, 2);
  batch::Executable exe = b->schedule.compile();
  std::vector<Buffer> in;
  for (int i = 0; i < 2; i++) in.push_back(f.dev->allocate(4096));
  batch::Bindings bind;
  for (int i = 0; i < 2; i++) bind.input(b->inputs[size_t(i)], in[size_t(i)]);
  for (auto _ : state) {
    exe.run(bind);
    exe.wait();
  }
}
BENCHMARK(BM_BatchRunAndWaitHostCopies)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same 1,000-call replay with 1 to 64 bindings changed: the cost follows the bindings.
void BM_BatchReplayChangedBindings(benchmark::State& state) {
  replays_changed(state, "emu:gfx1100", 1000, false, int(state.range(0)));
}
BENCHMARK(BM_BatchReplayChangedBindings)
    ->Arg(1)->Arg(8)->Arg(64)->ArgName("changed")
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

}  // namespace

namespace hcq::bench {
// The replay benchmark on a real device (bench_main.cpp's HCQ_BENCH_DEVICES). Fewer
// iterations than on the emulated GPU: each waits for the previous replay's GPU work, which
// for 10,000 launches on an H200 is about 70 ms.
void register_batch_benchmarks(const std::string& device) {
  benchmark::RegisterBenchmark(("BM_BatchReplay8Changed/" + device).c_str(),
                               [device](benchmark::State& s) { replays_8_changed(s, device); })
      ->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}})->ArgNames({"calls", "idle"})
      ->UseManualTime()->Iterations(50)->Unit(benchmark::kNanosecond);
}
}  // namespace hcq::bench
