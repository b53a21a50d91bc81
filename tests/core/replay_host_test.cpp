// Replay of a batch run's host steps (capture record 6): a run on a device without a copy
// engine copies on a host thread between its GPU commands; the capture records those steps
// and the replay takes them again, else the replayed GPU would wait forever for the host.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <array>
#include <map>
#include <thread>

#include "batch/batch.hpp"
#include "common/error_of.hpp"
#include "common/replay_device.hpp"
#include "core/capture.hpp"
#include "core/error.hpp"
#include "core/replay.hpp"
#include "core/replay_host.hpp"
#include "kernels.hpp"

namespace hcq {
namespace {

using capture::HostStep;
using capture::HostStepKind;
using testing_support::error_of;

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/hcq_replay_host_" + name + "_" + std::to_string(::getpid());
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(f.good());
}

// Each record of a capture file: its type and the offset of its payload (uncompressed files).
std::vector<std::pair<uint32_t, size_t>> records(const std::vector<uint8_t>& f) {
  std::vector<std::pair<uint32_t, size_t>> out;
  for (size_t at = 16; at + 16 <= f.size();) {
    uint32_t type;
    uint64_t len;
    std::memcpy(&type, f.data() + at, 4);
    std::memcpy(&len, f.data() + at + 8, 8);
    out.push_back({type, at + 16});
    at += 16 + len;
  }
  return out;
}

// Two kernels with a copy between them on an Adreno (no copy engine: the copy is a host op),
// captured in full to `path`; the device is closed when it returns. emu:a660_msm: its
// signals are device memory (msm cannot map the process's memory), so a replay in this
// process can have their address again; on emu:a660 they are the heap's, still taken here
// (`hcq replay` in a process of its own replays those: tests/tools).
// `after`, when given, is called once the run is done, before the device closes.
void capture_host_copy(const std::string& path,
                       const std::function<void(Device&)>& after = {}) {
  kernels::register_cpu_implementations();
  capture::start(path, {.full = true});
  {
    auto dev = testing_support::open_for_capture("emu:a660_msm");
    auto image = kernels::code_object(dev->properties().arch);
    ASSERT_FALSE(image.empty());
    Program scale(*dev, std::shared_ptr<const ProgramImage>(load_program(*dev, image)),
                  "scale_add");
    const uint32_t n = 256, block = 64;
    Buffer x = dev->allocate(n * 4), y = dev->allocate(n * 4);
    std::vector<float> v(n);
    for (uint32_t i = 0; i < n; i++) v[i] = float(i);
    dev->copy_in(x, 0, v.data(), n * 4);
    batch::Schedule s(*dev);
    auto args = [&](const Buffer& b) {
      return std::vector<batch::Arg>{batch::Arg::buffer(batch::Mem::of(b)), batch::Arg::value(2.0f),
                                     batch::Arg::value(1.0f), batch::Arg::value(n),
                                     batch::Arg::value(block)};
    };
    s.launch(scale, {n / block, 1, 1}, {block, 1, 1}, args(x));
    s.copy(batch::Mem::of(y), 0, batch::Mem::of(x), 0, n * 4);
    s.launch(scale, {n / block, 1, 1}, {block, 1, 1}, args(y));
    batch::Executable exe = s.compile();
    ASSERT_EQ(dev->queue_count(QueueKind::Copy), 0u);  // the copy is the host's
    dev->timeline().wait(exe.run(batch::Bindings()), std::chrono::seconds(5));
    std::vector<float> out(n);
    dev->copy_out(out.data(), y, 0, n * 4);
    for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out[i], 2.0f * (2.0f * v[i] + 1.0f) + 1.0f) << i;
    if (after) after(*dev);
  }
  capture::stop();
}

// The host-steps records of a capture, as the Reader gives them when asked.
std::vector<capture::HostStepsRecord> host_records(const std::string& path, bool ask = true) {
  capture::Reader r(path);
  r.read_host_steps(ask);
  std::vector<capture::HostStepsRecord> out;
  while (auto rec = r.next())
    if (rec->type == capture::RecordType::HostSteps) out.push_back(rec->host_steps);
  return out;
}

TEST(ReplayHost, ABatchRunsHostCopyIsCapturedAndReplaysClean) {
  const std::string path = temp_path("copy");
  capture_host_copy(path);
  const auto runs = host_records(path);
  ASSERT_EQ(runs.size(), 1u);
  // The timeline's previous value, the wait for the first kernel, the copy, its signal, the
  // host queue's end.
  const auto& st = runs[0].steps;
  ASSERT_EQ(st.size(), 5u);
  EXPECT_EQ(st[0].kind, HostStepKind::Wait);
  EXPECT_EQ(st[1].kind, HostStepKind::Wait);
  EXPECT_EQ(st[2].kind, HostStepKind::Copy);
  EXPECT_EQ(st[2].value, 1024u);
  EXPECT_EQ(st[3].kind, HostStepKind::Write64);
  EXPECT_EQ(st[4].kind, HostStepKind::Write64);
  EXPECT_TRUE(host_records(path, false).empty());  // skipped unless asked

  kernels::register_cpu_implementations();
  replay::Options o;
  o.compare = true;
  const replay::Result r = replay::run(path, o);
  EXPECT_TRUE(r.clean()) << (r.hang ? r.hang->report : "a difference at submission " +
                                                           std::to_string(r.difference->submission));
  EXPECT_GT(r.compared, 0u);
  ::unlink(path.c_str());
}

TEST(ReplayHost, AHostWaitNeverReachedIsAHangAtItsSubmission) {
  const std::string path = temp_path("hang");
  capture_host_copy(path);
  std::vector<uint8_t> f = slurp(path);
  uint64_t sequence = 0;
  bool found = false;
  for (auto [type, at] : records(f)) {
    if (type != uint32_t(capture::RecordType::HostSteps)) continue;
    std::memcpy(&sequence, f.data() + at, 8);
    // Step 1 (the wait for the first kernel's signal): a value it never reaches.
    const size_t value_at = at + 16 + 1 * capture::kHostStepBytes + 32;
    const uint64_t never = 1ull << 40;
    std::memcpy(f.data() + value_at, &never, 8);
    found = true;
  }
  ASSERT_TRUE(found);
  spit(path, f);
  kernels::register_cpu_implementations();
  replay::Options o;
  o.compare = true;
  o.timeout = std::chrono::milliseconds(800);  // room for a loaded (or sanitized) run
  const replay::Result r = replay::run(path, o);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.hang->submission, sequence);
  // The step it stopped at, waiting or given up (the replay's wait and the step's end together).
  const std::string step = "replay: host step 1 of submission " + std::to_string(sequence) +
                           "'s batch run wait";
  EXPECT_EQ(r.hang->report.substr(0, step.size()), step) << r.hang->report;
  EXPECT_NE(r.hang->report.find(" to reach 1099511627776; it holds "), std::string::npos)
      << r.hang->report;
  ::unlink(path.c_str());
}

// A capture of a plain run with the given steps recorded after it.
std::string capture_with_steps(const char* name, const std::vector<HostStep>& steps) {
  const std::string path = temp_path(name);
  capture_host_copy(path, [&](Device& dev) {
    const Device* devs[] = {&dev};
    capture::host_steps(devs, steps);
  });
  return path;
}

TEST(ReplayHost, TheRecordRoundTripsEveryField) {
  const std::vector<HostStep> steps = {
      {HostStepKind::Mirror, 0, 0, 0x1000, 0x2000, 7},
      {HostStepKind::Wait, 0, 0, 0x1008, 0, 0xfedcba9876543210ull},
      {HostStepKind::Copy, 0, 0, 0x3000, 0x4000, 4096},
      {HostStepKind::Write64, 0, 0, 0x1010, 0, 3},
      {HostStepKind::File, 0, 0, 0x5000, 0, 64},
      {HostStepKind::Remote, 0, 0, 0, 0, 0},
  };
  const std::string path = capture_with_steps("roundtrip", steps);
  uint32_t device = 0;
  uint64_t last = 0;
  {
    capture::Reader r(path);
    while (auto rec = r.next()) {
      if (rec->type == capture::RecordType::Device) device = rec->device.id;
      if (rec->type == capture::RecordType::Submission) last = rec->submission.sequence;
    }
  }
  const auto runs = host_records(path);
  ASSERT_EQ(runs.size(), 2u);  // the run's own, then the test's
  EXPECT_EQ(runs[1].sequence, last);
  std::vector<HostStep> want = steps;
  for (auto& s : want) s.device = s.src_device = device;
  EXPECT_EQ(runs[1].steps, want);
  // A step naming a device the call did not pass is refused, exactly, and the capture goes on.
  capture_host_copy(path, [&](Device& dev) {
    const Device* devs[] = {&dev};
    const HostStep bad[] = {{HostStepKind::Write64, 0, 1, 0x1000, 0, 1}};
    try {
      capture::host_steps(devs, bad);
      ADD_FAILURE() << "no error";
    } catch (const InvalidInput& e) {
      EXPECT_STREQ(e.what(), "capture: a host step names device 1 of 1");
    }
  });
  EXPECT_EQ(host_records(path).size(), 1u);
  ::unlink(path.c_str());
}

TEST(ReplayHost, MalformedRecordsGiveExactErrors) {
  const std::string path = capture_with_steps("malformed", {{HostStepKind::Wait, 0, 0, 8, 0, 1}});
  const std::vector<uint8_t> good = slurp(path);
  size_t at = 0;
  for (auto [type, payload] : records(good))
    if (type == uint32_t(capture::RecordType::HostSteps)) at = payload - 16;
  ASSERT_NE(at, 0u);
  const std::vector<uint8_t> before(good.begin(), good.begin() + long(at));
  auto with = [&](std::vector<uint8_t> payload) {
    std::vector<uint8_t> f = before;
    const uint32_t head[2] = {uint32_t(capture::RecordType::HostSteps), 0};
    const uint64_t len = payload.size();
    f.insert(f.end(), reinterpret_cast<const uint8_t*>(head),
             reinterpret_cast<const uint8_t*>(head) + 8);
    f.insert(f.end(), reinterpret_cast<const uint8_t*>(&len),
             reinterpret_cast<const uint8_t*>(&len) + 8);
    f.insert(f.end(), payload.begin(), payload.end());
    spit(path, f);
  };
  auto error = [&] {
    try {
      host_records(path);
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string where = path + ": malformed record at offset " + std::to_string(at);
  with(std::vector<uint8_t>(10));  // its sequence and count cut short
  EXPECT_EQ(error(), where + ": its fields run past its 10 bytes");
  std::vector<uint8_t> p(16 + 40);
  const uint32_t two = 2;
  std::memcpy(p.data() + 8, &two, 4);  // two steps, one step's bytes
  with(p);
  EXPECT_EQ(error(), where + ": 2 host steps of 40 bytes run past its 56 bytes");
  const uint32_t one = 1;
  std::memcpy(p.data() + 8, &one, 4);
  p[16] = 7;
  with(p);
  EXPECT_EQ(error(), where + ": host step 0 is of kind 7 (1 to 6)");
  p[16] = 0;
  with(p);
  EXPECT_EQ(error(), where + ": host step 0 is of kind 0 (1 to 6)");
  ::unlink(path.c_str());
}

TEST(ReplayHost, AFileOrRemoteStepIsRefusedExactly) {
  for (auto [kind, what] : {std::pair{HostStepKind::File, "reads a file"},
                            std::pair{HostStepKind::Remote, "moves memory to a remote peer"}}) {
    const std::string path = capture_with_steps("refused", {{kind, 0, 0, 0, 0, 8}});
    const auto runs = host_records(path);
    ASSERT_EQ(runs.size(), 2u);
    kernels::register_cpu_implementations();
    try {
      replay::run(path, {});
      ADD_FAILURE() << "no error";
    } catch (const InvalidInput& e) {
      EXPECT_EQ(std::string(e.what()), "replay: submission " + std::to_string(runs[1].sequence) +
                                           "'s batch run " + what +
                                           " on the host, which a capture cannot replay");
    }
    ::unlink(path.c_str());
  }
}

// Host steps whose ranges wrap past the top of the address space are refused before anything
// runs, and a copy of 2^62 bytes or 1 TiB outside every buffer is an exact error naming the
// step and the range (issue 33: std::bad_alloc, or SIGSEGV where the range wrapped).
TEST(ReplayHost, StepsPastTheAddressSpaceOrOutsideEveryBufferAreExactErrors) {
  kernels::register_cpu_implementations();
  const uint64_t top = ~uint64_t(0) - 3;  // 4 bytes below 2^64
  const struct {
    HostStep step;
    std::string error;
  } refused[] = {
      {{HostStepKind::Write64, 0, 0, top, 0, 1}, "(write) of submission S's batch run: its destination [0xfffffffffffffffc, +8)"},
      {{HostStepKind::Wait, 0, 0, top, 0, 1}, "(wait) of submission S's batch run: its destination [0xfffffffffffffffc, +8)"},
      {{HostStepKind::Mirror, 0, 0, 0x1000, top, 1}, "(mirror) of submission S's batch run: its source [0xfffffffffffffffc, +8)"},
      {{HostStepKind::Copy, 0, 0, 0x1000, 1ull << 63, 1ull << 63}, "(copy) of submission S's batch run: its source [0x8000000000000000, +9223372036854775808)"},
  };
  for (const auto& r : refused) {
    const std::string path = capture_with_steps("wrap", {r.step});
    const auto runs = host_records(path);
    ASSERT_EQ(runs.size(), 2u);
    std::string want = "replay: host step 0 " + r.error + " runs past the end of the 64-bit address space";
    want.replace(want.find("submission S"), 12, "submission " + std::to_string(runs[1].sequence));
    EXPECT_EQ(error_of([&] { replay::run(path, {}); }), want);
    ::unlink(path.c_str());
  }
  for (const uint64_t size : {uint64_t(1) << 62, uint64_t(1) << 40}) {
    const std::string path = capture_with_steps("huge", {{HostStepKind::Copy, 0, 0, 0x1000, 0x2000, size}});
    const auto runs = host_records(path);
    ASSERT_EQ(runs.size(), 2u);
    const replay::Result res = replay::run(path, {});
    ASSERT_TRUE(res.hang) << size;
    EXPECT_NE(res.hang->report.find("replay: host step 0 (copy) of submission " +
                                    std::to_string(runs[1].sequence) +
                                    "'s batch run: emu:a660_msm: [0x2000, 0x1002000) is in no "
                                    "buffer the capture recorded"),
              std::string::npos)
        << res.hang->report;
    ::unlink(path.c_str());
  }
}

// HostSteps alone, against a memory of words: the steps' order and meaning, a mirror relayed
// while a wait waits, a timeout's exact message; add() and done() from other threads while
// the steps run.
struct Words : replay::detail::HostSteps::Memory {
  std::mutex mu;
  std::map<uint64_t, uint64_t> w;  // (device << 48 | va) -> 8 bytes
  void read(uint32_t device, uint64_t va, void* out, uint64_t n) override {
    std::lock_guard lk(mu);
    for (uint64_t i = 0; i < n; i += 8) {
      const uint64_t v = w[uint64_t(device) << 48 | (va + i)];
      std::memcpy(static_cast<uint8_t*>(out) + i, &v, std::min<uint64_t>(8, n - i));
    }
  }
  void write(uint32_t device, uint64_t va, const void* in, uint64_t n) override {
    std::lock_guard lk(mu);
    for (uint64_t i = 0; i < n; i += 8) {
      uint64_t v = 0;
      std::memcpy(&v, static_cast<const uint8_t*>(in) + i, std::min<uint64_t>(8, n - i));
      w[uint64_t(device) << 48 | (va + i)] = v;
    }
  }
  uint64_t at(uint32_t device, uint64_t va) {
    uint64_t v;
    read(device, va, &v, 8);
    return v;
  }
};

TEST(ReplayHost, StepsWaitCopySignalAndRelayInOrder) {
  Words m;
  m.write(1, 0x100, std::array<uint64_t, 2>{11, 22}.data(), 16);
  replay::detail::HostSteps h(m, std::chrono::milliseconds(2000));
  EXPECT_TRUE(h.done());
  h.add({5,
         {{HostStepKind::Mirror, 0, 1, 0x900, 0x800, 3},  // device 1's 0x800 into device 0's 0x900
          {HostStepKind::Wait, 1, 1, 0x800, 0, 2},
          {HostStepKind::Copy, 0, 1, 0x200, 0x100, 16},
          {HostStepKind::Write64, 0, 0, 0x300, 0, 9}}});
  std::atomic<bool> polled{false};
  std::thread poller([&] {  // done()/pending() from another thread while the steps run
    uint64_t seen = 5;
    while (!h.done()) {  // the first run pending, then the second: never back
      const uint64_t p = h.pending().value_or(seen);
      EXPECT_TRUE(p == seen || (seen == 5 && p == 6)) << seen << " then " << p;
      seen = p;
      polled = true;
    }
  });
  // The poller has seen the run pending (it cannot end before the write below).
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
       !polled && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(polled);
  EXPECT_FALSE(h.done());
  EXPECT_EQ(m.at(0, 0x200), 0u);  // not copied before the wait is met
  m.write(1, 0x800, std::array<uint64_t, 1>{2}.data(), 8);
  std::thread adder([&] { h.add({6, {{HostStepKind::Write64, 0, 0, 0x400, 0, 1}}}); });
  adder.join();
  // Until the first run's last step (a loaded machine may take a while; no fixed sleep).
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
       m.at(0, 0x300) != 9 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(h.done());  // the mirror has not relayed its end value 3
  EXPECT_EQ(m.at(0, 0x900), 2u);
  EXPECT_EQ(m.at(0, 0x200), 11u);
  EXPECT_EQ(m.at(0, 0x208), 22u);
  EXPECT_EQ(m.at(0, 0x300), 9u);
  EXPECT_EQ(m.at(0, 0x400), 0u);  // the second run waits for the first
  m.write(1, 0x800, std::array<uint64_t, 1>{3}.data(), 8);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!h.done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  poller.join();
  EXPECT_TRUE(h.done());
  EXPECT_EQ(m.at(0, 0x900), 3u);
  EXPECT_EQ(m.at(0, 0x400), 1u);
  EXPECT_EQ(h.failure(), "");

  replay::detail::HostSteps t(m, std::chrono::milliseconds(50));
  t.add({8, {{HostStepKind::Wait, 0, 0, 0x300, 0, 10}}});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (t.failure().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(t.failure(), "replay: host step 0 of submission 8's batch run waited 50 ms for the "
                         "signal at 0x300 to reach 10; it holds 9");
  EXPECT_FALSE(t.done());
  EXPECT_EQ(t.pending(), 8u);
  try {
    t.add({9, {{HostStepKind::File, 0, 0, 0, 0, 1}}});
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "replay: submission 9's batch run reads a file on the host, which a "
                           "capture cannot replay");
  }
}

}  // namespace
}  // namespace hcq
