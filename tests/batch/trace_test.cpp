// The batch profiler's Chrome / Perfetto trace (docs/trace.md), parsed and checked for the
// structure the viewers need: flows that bind to their slices, tracks only for queues with
// calls, host CLOCK_MONOTONIC times, and each call's kernel, dimensions, operands and capture
// submission. On emulated AMD, NVIDIA and Adreno targets, one device and two.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "batch/batch.hpp"
#include "common/hardware_devices.hpp"
#include "core/capture.hpp"
#include "core/error.hpp"
#include "kernels.hpp"

namespace hcq::batch {
namespace {

using nlohmann::json;
using testing_support::device_name;

int64_t monotonic_ns() {
  timespec t{};
  EXPECT_EQ(::clock_gettime(CLOCK_MONOTONIC, &t), 0);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// A trace time (microseconds) as whole nanoseconds: the writer's values are exact in them
// while a double holds host times to the nanosecond; past ~2^50 ns of uptime (13 days) the
// microseconds' double rounds by up to slack_ns(t).
int64_t ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }
int64_t slack_ns(int64_t t) { return int64_t(double(t) * 0x1p-50); }

struct Track {
  int pid, tid;
  auto operator<=>(const Track&) const = default;
  friend std::ostream& operator<<(std::ostream& o, const Track& t) {
    return o << "pid " << t.pid << " tid " << t.tid;
  }
};
Track track_of(const json& ev) { return {ev.at("pid").get<int>(), ev.at("tid").get<int>()}; }

// What check_structure() found, for the tests' own checks.
struct Parsed {
  std::vector<json> slices;                  // the "X" events, in file order
  std::map<Track, std::string> thread_names;
  std::map<int, std::string> process_names;
  size_t flows = 0;
};

// Checks what every trace must satisfy and gives its pieces in `p`. `calls`: the profile the
// trace was written from; [before_ns, after_ns]: host CLOCK_MONOTONIC around the run.
void check_structure(const std::string& text, const std::vector<Executable::CallTime>& calls,
                     int64_t before_ns, int64_t after_ns, Parsed& p) {
  json trace = json::parse(text);  // throws, failing the test, on invalid JSON
  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
  EXPECT_EQ(trace.at("otherData").at("clock"),
            "host CLOCK_MONOTONIC (std::chrono::steady_clock), microseconds");
  std::map<Track, int64_t> tolerance_ns;  // per track: the clock sync's error bound
  // A flow event and the index of the slice it must bind to: the last slice before it in
  // the file on its track (what Perfetto's importer takes for a tie in time).
  struct Flow {
    json ev;
    size_t slice;
  };
  std::map<uint64_t, std::vector<Flow>> flows;  // by id
  std::map<Track, size_t> last_slice;
  std::set<Track> sort_indexed;
  std::set<int> process_sorted;
  for (const json& ev : trace.at("traceEvents")) {
    const std::string ph = ev.at("ph");
    if (ph == "M") {
      const std::string name = ev.at("name");
      EXPECT_FALSE(ev.contains("ts")) << ev;
      if (name == "process_name") {
        EXPECT_TRUE(p.process_names
                        .emplace(ev.at("pid").get<int>(), ev.at("args").at("name").get<std::string>())
                        .second)
            << ev;
      } else if (name == "process_sort_index") {
        EXPECT_TRUE(process_sorted.insert(ev.at("pid").get<int>()).second) << ev;
      } else if (name == "thread_name") {
        const Track t = track_of(ev);
        EXPECT_TRUE(p.thread_names.emplace(t, ev.at("args").at("name").get<std::string>()).second)
            << ev;
        const json& a = ev.at("args");
        // Half the sync's round trip, a tick of the slowest timestamp clock (Adreno's
        // 19.2 MHz: 53 ns) and the rounding of the offset.
        tolerance_ns[t] = a.at("clock_sync_window_ns").get<int64_t>() / 2 + 60;
      } else if (name == "thread_sort_index") {
        EXPECT_TRUE(sort_indexed.insert(track_of(ev)).second) << ev;
      } else {
        ADD_FAILURE() << "unexpected metadata " << ev;
      }
      continue;
    }
    EXPECT_NE(ns(ev.at("ts")), 0) << "an event at time 0: " << ev;
    if (ph == "X") {
      last_slice[track_of(ev)] = p.slices.size();
      p.slices.push_back(ev);
      continue;
    }
    ASSERT_TRUE(ph == "s" || ph == "f") << "unexpected event " << ev;
    const auto at = last_slice.find(track_of(ev));
    ASSERT_NE(at, last_slice.end()) << "a flow before any slice on its track: " << ev;
    flows[ev.at("id").get<uint64_t>()].push_back({ev, at->second});
  }
  // Tracks: exactly the queues with slices, each named and sorted, in named processes.
  std::set<Track> with_slices;
  for (const json& s : p.slices) with_slices.insert(track_of(s));
  std::set<Track> named;
  for (auto& [t, name] : p.thread_names) named.insert(t);
  EXPECT_EQ(named, with_slices);
  EXPECT_EQ(sort_indexed, with_slices);
  std::set<int> pids;
  for (const Track& t : with_slices) pids.insert(t.pid);
  std::set<int> named_pids;
  for (auto& [pid, name] : p.process_names) named_pids.insert(pid);
  EXPECT_EQ(named_pids, pids);
  EXPECT_EQ(process_sorted, pids);
  // Slices: one per profiled call, at the profile's times, which are host clock times
  // within the run (give or take the clock sync's error).
  EXPECT_EQ(p.slices.size(), calls.size());
  for (size_t i = 0; i < p.slices.size() && i < calls.size(); i++) {
    const json& s = p.slices[i];
    // Serialized as the writer does: invalid UTF-8 in a name becomes U+FFFD.
    EXPECT_EQ(s.at("name").dump(),
              json(calls[i].name).dump(-1, ' ', false, json::error_handler_t::replace));
    EXPECT_EQ(s.at("cat"), "call");
    EXPECT_EQ(s.at("args").at("op"), i);
    EXPECT_EQ(s.at("args").at("call"), calls[i].call);
    EXPECT_LE(std::abs(ns(s.at("ts")) - calls[i].start_ns), slack_ns(calls[i].start_ns)) << s;
    EXPECT_EQ(ns(s.at("dur")), calls[i].end_ns - calls[i].start_ns) << s;
    const int64_t tol = tolerance_ns[track_of(s)];
    EXPECT_GE(calls[i].start_ns, before_ns - tol) << s;
    EXPECT_LE(calls[i].end_ns, after_ns + tol) << s;
    EXPECT_LE(calls[i].start_ns, calls[i].end_ns) << s;
  }
  // Flows: a start and an end per id, same name and cat, each inside the slice it binds to
  // (strictly, when the slice lasts 2 ns or more), from an earlier op on another track.
  for (auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << "flow " << id;
    const json& s = pair[0].ev.at("ph") == "s" ? pair[0].ev : pair[1].ev;
    const json& f = pair[0].ev.at("ph") == "s" ? pair[1].ev : pair[0].ev;
    ASSERT_EQ(s.at("ph"), "s") << s;
    ASSERT_EQ(f.at("ph"), "f") << f;
    EXPECT_EQ(s.at("cat"), f.at("cat"));
    EXPECT_EQ(s.at("name"), f.at("name"));
    EXPECT_EQ(f.at("bp"), "e");
    EXPECT_FALSE(s.contains("bp"));
    const json& from = p.slices[pair[0].ev.at("ph") == "s" ? pair[0].slice : pair[1].slice];
    const json& to = p.slices[pair[0].ev.at("ph") == "s" ? pair[1].slice : pair[0].slice];
    for (auto [flow, slice] : {std::pair{&s, &from}, std::pair{&f, &to}}) {
      const int64_t t = ns(flow->at("ts")), start = ns(slice->at("ts")),
                    end = start + ns(slice->at("dur"));
      const int64_t slack = slack_ns(t);
      if (end - start >= 2) {
        EXPECT_GT(t + slack, start) << *flow << " in " << *slice;
        EXPECT_LT(t - slack, end) << *flow << " in " << *slice;
      } else {
        EXPECT_LE(std::abs(t - start), slack) << *flow << " in " << *slice;
      }
    }
    EXPECT_NE(track_of(from), track_of(to)) << s;
    EXPECT_LT(from.at("args").at("op"), to.at("args").at("op")) << s;
  }
  p.flows = flows.size();
}

class Trace : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::register_cpu_implementations();
    dev_ = Device::open(device_name(GetParam()));
    auto image = kernels::code_object(dev_->properties().arch);
    if (image.empty()) GTEST_SKIP() << "no code object built for " << GetParam();
    img_ = load_program(*dev_, image);
  }
  std::string temp(const std::string& what) {
    return ::testing::TempDir() + "/hcq_trace_" + what + "_" + std::to_string(::getpid());
  }
  std::unique_ptr<Device> dev_;
  std::shared_ptr<const ProgramImage> img_;
};

// The capture's submission records by sequence number, with their device's name.
struct CapturedSubmission {
  std::string device;
  QueueKind queue;
  uint32_t queue_index;
  size_t dwords;
};
std::map<uint64_t, CapturedSubmission> read_capture(const std::string& path) {
  std::map<uint64_t, CapturedSubmission> out;
  std::map<uint32_t, std::string> devices;
  capture::Reader r(path);
  while (auto rec = r.next()) {
    if (rec->type == capture::RecordType::Device) devices[rec->device.id] = rec->device.name;
    if (rec->type != capture::RecordType::Submission) continue;
    const auto& s = rec->submission;
    EXPECT_EQ(s.segments.size(), 1u);
    out[s.sequence] = {devices.at(s.device), s.queue, s.queue_index,
                       s.segments.empty() ? 0 : s.segments[0].words.size()};
  }
  return out;
}

// Launches and copies depending on each other across the compute and copy queues, captured:
// every slice names its kernel and grid or its copy's operands, and the capture submission
// and dwords its commands went out in; a second run without a capture says null.
TEST_P(Trace, SlicesFlowsTracksAndCaptureSubmissionsHaveTheirStructure) {
  Program scale(*dev_, img_, "scale_add");
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
  std::vector<float> zeros(n, 0.0f);
  dev_->copy_in(a, 0, zeros.data(), n * 4);
  const std::string cap = temp("capture");
  capture::start(cap);
  const int64_t before = monotonic_ns();
  exe.run(Bindings());
  exe.wait();
  const int64_t after = monotonic_ns();
  capture::stop();
  const auto calls = exe.profile();
  std::stringstream text;
  exe.write_trace(text);
  Parsed p;
  ASSERT_NO_FATAL_FAILURE(check_structure(text.str(), calls, before, after, p));
  EXPECT_EQ(p.flows, exe.stats(QueueKind::Copy).waits + exe.stats(QueueKind::Compute).waits);
  EXPECT_EQ(p.flows, 5u);  // each copy waits for its launch, each later launch for the copy
  EXPECT_EQ(p.process_names, (std::map<int, std::string>{{1, dev_->name()}}));
  // Without a copy engine the copies run on the host: a host copy queue of its own.
  const bool copy_engine = dev_->queue_count(QueueKind::Copy) > 0;
  std::set<std::string> names;
  for (auto& [t, name] : p.thread_names) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"compute queue 0", copy_engine
                                                                 ? "copy queue 0"
                                                                 : "copy queue 0 (host)"}));
  const auto captured = read_capture(cap);
  std::remove(cap.c_str());
  std::map<uint64_t, uint64_t> dword_end;  // per submission: the last op's end so far
  for (size_t i = 0; i < p.slices.size(); i++) {
    const json& args = p.slices[i].at("args");
    const bool launch = i % 2 == 0;
    if (launch) {
      EXPECT_EQ(args.at("kernel"), "scale_add");
      EXPECT_EQ(args.at("grid"), json({2, 1, 1}));
      EXPECT_EQ(args.at("block"), json({n / 2, 1, 1}));
      EXPECT_FALSE(args.contains("bytes"));
    } else {
      EXPECT_FALSE(args.contains("kernel"));
      EXPECT_EQ(args.at("bytes"), n * 4);
      EXPECT_EQ(args.at("src_address"), a.va());
      EXPECT_EQ(args.at("dst_address"), b.va());
    }
    if (!launch && !copy_engine) {
      EXPECT_TRUE(args.at("capture").is_null()) << args;  // the host copied: no submission
      continue;
    }
    const json& c = args.at("capture");
    ASSERT_TRUE(c.is_object()) << args;
    const auto sub = captured.find(c.at("submission").get<uint64_t>());
    ASSERT_NE(sub, captured.end()) << args;
    EXPECT_EQ(sub->second.device, dev_->name());
    EXPECT_EQ(sub->second.queue, launch ? QueueKind::Compute : QueueKind::Copy);
    EXPECT_EQ(sub->second.queue_index, 0u);
    const uint64_t begin = c.at("dwords").at(0), end = c.at("dwords").at(1);
    EXPECT_LT(begin, end);
    EXPECT_LE(end, sub->second.dwords);
    EXPECT_GE(begin, dword_end[sub->first]);  // ops on a queue in order, not overlapping
    dword_end[sub->first] = end;
  }
  // Run again with no capture on: no submission to name.
  exe.run(Bindings());
  exe.wait();
  text.str("");
  exe.write_trace(text);
  const json again = json::parse(text.str());  // kept: a range-for would not keep it alive
  for (const json& ev : again.at("traceEvents"))
    if (ev.at("ph") == "X") {
      EXPECT_TRUE(ev.at("args").at("capture").is_null()) << ev;
    }
}

// Two devices: a process each, the copy between them staged (a copy out of one device and
// one into the other, and a host relay for a device that cannot reach host memory), flows
// between the processes.
TEST_P(Trace, TwoDevicesHaveAProcessEachAndFlowsBetweenThem) {
  auto other = Device::open("emu:gfx1100");
  Program fill(*dev_, img_, "fill_u32");
  const uint32_t n = 1000;
  Buffer a = dev_->allocate(n * 4), b = other->allocate(n * 4);
  Schedule s({dev_.get(), other.get()});
  s.launch(fill, {n / 100, 1, 1}, {100, 1, 1},
           {Arg::buffer(Mem::of(a)), Arg::value(7u), Arg::value(n), Arg::value(100u)});
  s.copy(Mem::of(b), 0, Mem::of(a), 0, n * 4);
  Executable exe = s.compile({.profile = true});
  const int64_t before = monotonic_ns();
  exe.run(Bindings());
  exe.wait();
  const int64_t after = monotonic_ns();
  std::stringstream text;
  exe.write_trace(text);
  Parsed p;
  ASSERT_NO_FATAL_FAILURE(check_structure(text.str(), exe.profile(), before, after, p));
  EXPECT_EQ(p.process_names, (std::map<int, std::string>{{1, dev_->name()}, {2, other->name()}}));
  // A device with a batch area of its own (it cannot reach host memory, or the CPU cannot map
  // its memory) has the host relay between the staging areas.
  const Capabilities& caps = dev_->properties().caps;
  const bool relay = !caps.host_reachable || !caps.cpu_maps_memory;
  EXPECT_EQ(p.slices.size(), relay ? 4u : 3u);  // the fill, the copy's two (three) halves
  EXPECT_EQ(p.flows, relay ? 3u : 2u);          // each half waits for the one before
  EXPECT_EQ(p.slices.back().at("args").at("dst_address"), b.va());
  EXPECT_EQ(p.slices.back().at("args").at("bytes"), n * 4);
  std::vector<uint32_t> got(n);
  other->copy_out(got.data(), b, 0, n * 4);
  EXPECT_EQ(got, std::vector<uint32_t>(n, 7u));
}

// Names are bytes: a load's file name with quotes, a backslash, control characters and an
// invalid UTF-8 byte still gives valid JSON, the byte replaced by U+FFFD.
TEST_P(Trace, AnyNameGivesValidJson) {
  const std::string odd = "q\"b\\n\nt\t\x01\x1f\xff";
  const std::string path = temp(odd);
  std::ofstream(path, std::ios::binary) << std::string(64, 'x');
  Buffer a = dev_->allocate(4096);
  Schedule s(*dev_);
  s.load(Mem::of(a), 0, path, 0, 64);
  Executable exe = s.compile({.profile = true});
  const int64_t before = monotonic_ns();
  exe.run(Bindings());
  exe.wait();
  const int64_t after = monotonic_ns();
  std::filesystem::remove(path);
  std::stringstream text;
  exe.write_trace(text);
  Parsed p;
  ASSERT_NO_FATAL_FAILURE(check_structure(text.str(), exe.profile(), before, after, p));
  ASSERT_EQ(p.slices.size(), 2u);  // the read into staging, the copy out of it
  std::string shown = path;
  shown.replace(shown.find('\xff'), 1, "\xef\xbf\xbd");
  EXPECT_EQ(p.slices[0].at("name"), std::string("read 64 bytes of ") + shown);
  EXPECT_EQ(p.slices[0].at("args").at("src_file"), shown);
  EXPECT_EQ(p.slices[0].at("args").at("src_file_offset"), 0);
}

TEST_P(Trace, AFailedWriteThrows) {
  Buffer a = dev_->allocate(64), b = dev_->allocate(64);
  Schedule s(*dev_);
  s.copy(Mem::of(b), 0, Mem::of(a), 0, 64);
  Executable exe = s.compile({.profile = true});
  exe.run(Bindings());
  exe.wait();
  std::stringstream out;
  out.setstate(std::ios::badbit);
  try {
    exe.write_trace(out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "batch: writing the trace failed");
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, Trace,
                         ::testing::Values("gfx1100", "gfx942", "gfx1100_usb", "sm_90", "a660",
                                           "a740_msm"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Hardware, Trace,
                         ::testing::ValuesIn(testing_support::devices_from_env("HCQ_TEST_DEVICES")),
                         [](const auto& info) { return testing_support::test_name(info.param); });

}  // namespace
}  // namespace hcq::batch
