// hcq's speed targets, measured with Google Benchmark (JSON with --benchmark_format=json).
// docs/performance.md records the figures and the command that reproduces them.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "amd/am/am_driver.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/emu/am_system.hpp"
#include "amd/code_object.hpp"
#include "amd/encoders.hpp"
#include "core/capture.hpp"
#include "core/hcq.hpp"
#include "io/file_load.hpp"
#include "common/hardware_devices.hpp"
#include "kernels.hpp"
#include "nv/encoders.hpp"
#include "ring_drain.hpp"
#include "qcom/encoders.hpp"

namespace {

using namespace hcq;

// The loop shared by the template-encoder benchmarks: prepare once as program loading does,
// then encode a launch and its signal per iteration.
template <class Encoder, class Kernel>
void encode_launches(benchmark::State& state, Encoder& enc, Kernel& k, Dim3 block) {
  enc.prepare(k);
  CommandStream cs;
  cs.reserve(256);
  std::vector<PatchSite> sites;
  sites.reserve(64);
  uint64_t value = 0;
  for (auto _ : state) {
    cs.clear();
    sites.clear();
    enc.exec(cs, k, 0x7f0000200000, {64, 1, 1}, block, sites);
    enc.signal(cs, 0x7f0000300000, ++value, false, sites);
    benchmark::DoNotOptimize(cs.data());
  }
  state.counters["dwords"] = double(cs.size());
}

// Encoding one dispatch: SET_SH_REG program/resources/user data/sizes, DISPATCH_DIRECT and
// the RELEASE_MEM signal, into a reused command stream.
void BM_EncodeDispatch(benchmark::State& state) {
  amd::Pm4Encoder enc(amd::Gen::Gfx11, {0x7f0000001000, 3});
  amd::AmdKernel k;
  k.code_va = 0x7f0000100000;
  k.kd.compute_pgm_rsrc2 = 0x8C;
  k.kd.kernel_code_properties = 0x9;
  k.wave_size = 32;
  encode_launches(state, enc, k, {256, 1, 1});
}
BENCHMARK(BM_EncodeDispatch);

// Encoding one NVIDIA launch: the inline DMA of the QMD and launch dimensions, SEND_PCAS, the
// WFI, and the semaphore release that signals it, for each QMD version (arg: 3, 4, 5).
void BM_EncodeLaunchNv(benchmark::State& state) {
  const auto v = nv::QmdVersion(state.range(0));
  nv::ComputeEncoder enc(v);
  nv::NvKernel k;
  k.name = "k";
  k.code_va = 0x7f0000100000;
  k.code_bytes = 0x400;
  k.sm = 90;
  k.registers = 16;
  k.param_base = 0x210;
  k.cbuf0_bytes = 0x230;
  encode_launches(state, enc, k, {256, 1, 1});
}
BENCHMARK(BM_EncodeLaunchNv)->Arg(3)->Arg(4)->Arg(5);

// Encoding one Adreno compute dispatch: compute state, the shader and argument loads, the
// NDRANGE and CP_EXEC_CS, and the signal after it (arg: 6 for a6xx, 7 for a7xx).
void BM_EncodeDispatchAdreno(benchmark::State& state) {
  const auto gen = qcom::Gen(state.range(0));
  qcom::CpEncoder enc(gen, {0x7f0000001000, 0x7f0000001040});
  qcom::AdrenoKernel k;
  k.name = "k";
  k.code_va = 0x7f0000100000;
  k.instr_dwords = 256;
  k.full_regs = 8;
  k.const_dwords = 16;
  k.args_bytes = 32;
  encode_launches(state, enc, k, {128, 1, 1});
}
BENCHMARK(BM_EncodeDispatchAdreno)->Arg(6)->Arg(7);

// A host signal round trip between two threads, each waiting with Signal::wait (it spins, then
// sleeps until the other's set() wakes it): A sets ping, B sees it and sets pong, A sees it.
// Twenty repetitions, reported one by one and as median, max and max/median: the spread
// (issue 33: a wait once slept out its whole slice when the other thread was slow to come).
void BM_HostSignalRoundTrip(benchmark::State& state) {
  auto dev = Device::open("emu:gfx1100");
  Signal ping = dev->new_signal(), pong = dev->new_signal();
  std::atomic<bool> done{false};
  std::thread peer([&] {
    for (uint64_t i = 1;; i++) {
      while (true) {
        try {
          ping.wait(i, std::chrono::milliseconds(50));
          break;
        } catch (const TimeoutError&) {
          if (done.load(std::memory_order_relaxed)) return;
        }
      }
      pong.set(i);
    }
  });
  uint64_t i = 0;
  for (auto _ : state) {
    ping.set(++i);
    pong.wait(i);
  }
  done = true;
  peer.join();
}
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}
BENCHMARK(BM_HostSignalRoundTrip)
    ->UseRealTime()
    ->Repetitions(20)
    ->ComputeStatistics("max", max_of)
    ->ComputeStatistics("max/median",
                        [](const std::vector<double>& v) { return max_of(v) / median_of(v); },
                        benchmark::StatisticUnit::kPercentage);

// An empty kernel launched and waited for: encode, ring, doorbell, the (emulated) command
// processor, the signal back; optionally with every submission captured to a file
// (HCQ_CAPTURE's cost).
void empty_launch_round_trips(benchmark::State& state, bool captured,
                              const std::string& device = "emu:gfx1100") {
  kernels::register_cpu_implementations();
  auto dev = Device::open(device);
  auto image = kernels::code_object(dev->properties().arch);
  if (image.empty()) {
    state.SkipWithError(("no " + dev->properties().arch + " code object was built").c_str());
    return;
  }
  Program empty(*dev, image, "empty");
  const std::string path = "/tmp/hcq_bench_capture.bin";
  if (captured) capture::start(path);
  for (auto _ : state) empty.launch(KernelArgs(), {1, 1, 1}, {1, 1, 1}, true);
  if (captured) {
    capture::stop();
    std::remove(path.c_str());
  }
}
void BM_EmulatedEmptyLaunchRoundTrip(benchmark::State& state) {
  empty_launch_round_trips(state, false);
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTrip)->UseRealTime();

// The same on the register-level gfx1100 hcq boots itself (issue 17), beside emu:gfx1100 in
// the same run: its queues are MEC HQDs and its memory goes through the emulated MMU.
void BM_EmulatedEmptyLaunchRoundTripAm(benchmark::State& state) {
  empty_launch_round_trips(state, false, "emu:gfx1100_am");
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTripAm)->UseRealTime();

void BM_EmulatedEmptyLaunchRoundTripCaptured(benchmark::State& state) {
  empty_launch_round_trips(state, true);
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTripCaptured)->UseRealTime();

// The capture's own cost per submission: capture::submission() for a 64-dword submission of
// an open device, to a file (os::OutputFile: one write(2) per record), to the live ring (with
// a follower draining it), or to both.
void capture_submissions(benchmark::State& state, bool file, bool ring) {
  auto dev = Device::open("emu:gfx1100");
  std::vector<capture::Segment> segs(1);
  segs[0].words.assign(64, 0xffff1000u);
  const std::string path = "/tmp/hcq_bench_capture.bin",
                    name = "hcq-bench-ring-" + std::to_string(::getpid());
  capture::Options o;
  if (ring) o.ring = name;
  capture::start(file ? path : "", o);
  std::unique_ptr<bench::RingDrain> drain;
  if (ring) drain = std::make_unique<bench::RingDrain>(name);
  for (auto _ : state)
    benchmark::DoNotOptimize(capture::submission(*dev, QueueKind::Compute, 0, segs));
  capture::stop();
  // The share of submissions the ring dropped (its follower fell behind): those cost less.
  if (drain) state.counters["dropped"] = double(drain->join()) / double(state.iterations());
  if (file) std::remove(path.c_str());
}
void BM_CaptureSubmissionToFile(benchmark::State& state) { capture_submissions(state, true, false); }
BENCHMARK(BM_CaptureSubmissionToFile)->UseRealTime();
void BM_CaptureSubmissionToRing(benchmark::State& state) { capture_submissions(state, false, true); }
BENCHMARK(BM_CaptureSubmissionToRing)->UseRealTime();
void BM_CaptureSubmissionToFileAndRing(benchmark::State& state) {
  capture_submissions(state, true, true);
}
BENCHMARK(BM_CaptureSubmissionToFileAndRing)->UseRealTime();

void BM_EmulatedEmptyLaunchRoundTripNv(benchmark::State& state) {
  empty_launch_round_trips(state, false, "emu:sm_90");
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTripNv)->UseRealTime();

void BM_EmulatedEmptyLaunchRoundTripAdreno(benchmark::State& state) {
  empty_launch_round_trips(state, false, "emu:a660");
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTripAdreno)->UseRealTime();

void BM_EmulatedEmptyLaunchRoundTripAdrenoMsm(benchmark::State& state) {
  empty_launch_round_trips(state, false, "emu:a660_msm");
}
BENCHMARK(BM_EmulatedEmptyLaunchRoundTripAdrenoMsm)->UseRealTime();

constexpr uint64_t kCopyBytes = 256ull << 20;

// Staged copy-in: host memory -> staging ring -> copy queue -> device buffer.
void staged_copies_in(benchmark::State& state, const std::string& device) {
  auto dev = Device::open(device);
  std::vector<char> src(kCopyBytes, 1);
  Buffer dst = dev->allocate(kCopyBytes);
  dev->copy_in(dst, 0, src.data(), kCopyBytes);  // fault the pages in once
  dev->synchronize();
  for (auto _ : state) {
    dev->copy_in(dst, 0, src.data(), kCopyBytes);
    dev->synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kCopyBytes));
}
void BM_StagedCopyIn(benchmark::State& state) { staged_copies_in(state, "emu:gfx1100"); }
BENCHMARK(BM_StagedCopyIn)->UseRealTime()->Unit(benchmark::kMillisecond);

// The reference: one thread's memcpy of the same size between two host buffers.
void BM_Memcpy(benchmark::State& state) {
  std::vector<char> src(kCopyBytes, 1), dst(kCopyBytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kCopyBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kCopyBytes));
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr uint64_t kFileBytes = 1ull << 30;

// A 1 GiB file in the page cache (written once per process, removed at exit). Each page
// holds different bytes, so no two pages of the file (or of a buffer it is read into) are
// alike.
std::string& cached_file_path() {
  static std::string path;
  return path;
}
const std::string& page_cached_file() {
  std::string& path = cached_file_path();
  if (path.empty()) {
    const auto p =
        std::filesystem::temp_directory_path() / ("hcq_bench_1g_" + std::to_string(getpid()));
    std::vector<uint64_t> block((64 << 20) / sizeof(uint64_t));
    std::ofstream out(p, std::ios::binary);
    for (uint64_t i = 0; i < kFileBytes / (64 << 20); i++) {
      for (uint64_t w = 0; w < block.size(); w++) block[w] = i * block.size() + w;
      out.write(reinterpret_cast<const char*>(block.data()), std::streamsize(block.size() * 8));
    }
    out.close();
    if (!out) throw std::runtime_error(std::string("cannot write ") + p.string());
    path = p.string();
    std::atexit([] { std::filesystem::remove(cached_file_path()); });
  }
  return path;
}

// read() of [0, size) of `path` into `dst`, the whole range asked for at once.
void read_whole(const std::string& path, char* dst, uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("cannot open ") + path);
  uint64_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(fd, dst + got, size - got);
    if (r <= 0) break;
    got += uint64_t(r);
  }
  ::close(fd);
  if (got != size) throw std::runtime_error(std::string("short read of ") + path);
}

// The file-load benchmarks' destinations, made once per process (once per benchmark run on
// a real GPU) and warmed outside every timed region: a fresh 1 GiB destination costs far more
// to fault in than to fill (on the 2-vCPU VM of docs/performance.md, seconds for the memset
// and seconds more for the first read() into the memset pages, against 0.1-0.3 s for a read
// into warm pages), so a benchmark that allocates its destination measures page faults, not
// the copy. The warm-up therefore reads into the destination once; a memset is not enough.
struct LoadTarget {
  std::unique_ptr<Device> dev;
  Buffer dst;
};
std::map<std::string, LoadTarget>& load_targets() {
  static std::map<std::string, LoadTarget> targets;
  return targets;
}
void release_load_targets() { load_targets().clear(); }

char* warm_host_destination() {
  static std::vector<char> dst;
  if (dst.empty()) {
    dst.assign(kFileBytes, 0);
    read_whole(page_cached_file(), dst.data(), kFileBytes);
  }
  return dst.data();
}

io::LoadOptions page_cache_options() {
  io::LoadOptions o;
  o.direct = false;  // from the page cache, as read() is
  return o;
}
io::LoadOptions buffered_load_options(benchmark::State& state) {
  io::LoadOptions o = page_cache_options();
  if (state.range(0)) o.slot_bytes = uint64_t(state.range(0)) << 10;
  if (state.range(1)) o.slots = uint32_t(state.range(1));
  return o;
}

// Loading the page-cached file into a device with `io::load_file` (buffered reads). The
// device, its 1 GiB destination and the staging slots (the device's allocation cache keeps
// them between loads) are warmed by one load before the first timed one.
void loads_file(benchmark::State& state, const std::string& device, const io::LoadOptions& o) {
  const std::string& path = page_cached_file();
  LoadTarget& t = load_targets()[device];
  if (!t.dev) {
    t.dev = Device::open(device);
    t.dst = t.dev->allocate(kFileBytes);
    io::load_file(*t.dev, t.dst, 0, path, 0, kFileBytes, o);
  }
  const io::LoadResult used = io::load_file(*t.dev, t.dst, 0, path, 0, kFileBytes, o);  // warm
  for (auto _ : state) io::load_file(*t.dev, t.dst, 0, path, 0, kFileBytes, o);
  state.SetBytesProcessed(int64_t(state.iterations() * kFileBytes));
  state.counters["slot_kib"] = double(used.slot_bytes >> 10);  // the slots the load used
  state.counters["slots"] = double(used.slots);
  // A real GPU is not kept open (nor 1 GiB of its memory held) while other benchmarks use it.
  if (device.rfind("emu:", 0) != 0) load_targets().erase(device);
}
// The default options; BM_LoadFileSlots/slot_kib:../slots:.. the same with other staging.
void BM_LoadFile(benchmark::State& state) {
  loads_file(state, "emu:gfx1100", page_cache_options());
}
BENCHMARK(BM_LoadFile)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_LoadFileSlots(benchmark::State& state) {
  loads_file(state, "emu:gfx1100", buffered_load_options(state));
}
BENCHMARK(BM_LoadFileSlots)
    ->ArgsProduct({{256, 1024, 4096, 16384}, {4, 8}})->ArgNames({"slot_kib", "slots"})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// The reference, the page-cache limit: one thread's read() of the same file into a warm
// 1 GiB host buffer (faulted in and read into once, outside the timed region).
void BM_ReadFile(benchmark::State& state) {
  const std::string& path = page_cached_file();
  char* dst = warm_host_destination();
  for (auto _ : state) {
    read_whole(path, dst, kFileBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kFileBytes));
}
BENCHMARK(BM_ReadFile)->UseRealTime()->Unit(benchmark::kMillisecond);

// Mapping 1 GiB of VRAM into the AM driver's page tables (issue 17): 262144 4 KiB PTEs in 512
// PTBs, or 512 2 MiB PDB0 entries (the argument: the largest page allowed), written into a host
// array standing in for VRAM. The unmap that empties the tables again is not timed.
void BM_AmMap1GiB(benchmark::State& state) {
  constexpr uint64_t kGiB = 1ull << 30, kTableVram = 4ull << 20;
  amd::am::HostVram vram(0, kTableVram);
  amd::am::VramAllocator allocator(0, kTableVram);
  amd::am::PageTables tables(vram, allocator);
  amd::am::MapFlags flags;
  flags.largest_page = uint64_t(state.range(0));
  size_t table_pages = 0;
  for (auto _ : state) {
    tables.map(kGiB, 4 * kGiB, kGiB, flags);
    state.PauseTiming();
    table_pages = tables.table_pages();
    tables.unmap(kGiB, kGiB);
    tables.take_invalidations();
    state.ResumeTiming();
  }
  state.counters["table_pages"] = double(table_pages);
}
BENCHMARK(BM_AmMap1GiB)->Arg(4 << 10)->Arg(2 << 20)->Unit(benchmark::kMicrosecond);

// Booting the emulated gfx1100 (emu:gfx1100_am) cold: a fresh emulated system each time (not
// timed), then the am: driver's open, with each boot phase's milliseconds as a counter (the
// mean over the iterations). The PSP's 20 ms handshake waits (psp_v13_0.c) are real sleeps.
void BM_AmBootEmulated(benchmark::State& state) {
  std::map<std::string, double> phase_ms;
  for (auto _ : state) {
    state.PauseTiming();
    std::shared_ptr<amd::emu::AmEmulatedSystem> sys = amd::emu::make_am_emulated_system();
    std::shared_ptr<os::Kernel> kernel(sys, sys->kernel().get());
    state.ResumeTiming();
    auto drv = std::make_unique<amd::am::AmDriver>(kernel, amd::emu::AmEmulatedSystem::kAddress,
                                                   sys->firmware_dir(), "emu:gfx1100_am",
                                                   amd::am::AmDriverOptions{});
    state.PauseTiming();
    for (auto& p : drv->boot_report().phases) phase_ms[p.name] += p.ms;
    drv.reset();  // the shutdown is not timed
    state.ResumeTiming();
  }
  for (auto& [name, ms] : phase_ms)
    state.counters[name + "_ms"] = ms / double(state.iterations());
}
BENCHMARK(BM_AmBootEmulated)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(10);

// Many empty launches back to back, then one wait: the launch rate the queue sustains.
void empty_launch_throughput(benchmark::State& state, const std::string& device) {
  kernels::register_cpu_implementations();
  auto dev = Device::open(device);
  auto image = kernels::code_object(dev->properties().arch);
  if (image.empty()) return state.SkipWithError("no code object was built for this device");
  Program empty(*dev, image, "empty");
  constexpr int kLaunches = 1000;
  for (auto _ : state) {
    for (int i = 0; i < kLaunches; i++) empty.launch(KernelArgs(), {1, 1, 1}, {1, 1, 1});
    dev->synchronize();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kLaunches);
}

}  // namespace

namespace hcq::bench {
void register_batch_benchmarks(const std::string& device);
}

// The device benchmarks again on every real device named in HCQ_BENCH_DEVICES (nv:0,amd:0),
// each under its own name: BM_EmptyLaunchRoundTrip/nv:0.
int main(int argc, char** argv) {
  for (const std::string& d : hcq::testing_support::devices_from_env("HCQ_BENCH_DEVICES")) {
    benchmark::RegisterBenchmark(("BM_EmptyLaunchRoundTrip/" + d).c_str(),
                                 [d](benchmark::State& s) { empty_launch_round_trips(s, false, d); })
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_EmptyLaunchThroughput/" + d).c_str(),
                                 [d](benchmark::State& s) { empty_launch_throughput(s, d); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_StagedCopyIn/" + d).c_str(),
                                 [d](benchmark::State& s) { staged_copies_in(s, d); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_LoadFile/" + d).c_str(),
                                 [d](benchmark::State& s) {
                                   loads_file(s, d, page_cache_options());
                                 })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    hcq::bench::register_batch_benchmarks(d);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  release_load_targets();  // the devices close before the statics they use go
  benchmark::Shutdown();
  return 0;
}
