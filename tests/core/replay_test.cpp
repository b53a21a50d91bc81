// hcq replay (core/replay.hpp): full captures replayed on the emulated targets, compared,
// bisected, and the exact errors for captures replay cannot use.
#include "core/replay.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "common/error_of.hpp"
#include "common/replay_device.hpp"
#include "core/capture.hpp"
#include "core/hcq.hpp"
#include "kernels.hpp"

namespace hcq {
namespace {

using testing_support::error_of;
using testing_support::open_for_capture;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/hcq_replay_" + name + "_" + std::to_string(::getpid());
}

// The demo's shape, small: copy in, c = a + b, c = 2c + 1, a copy of c into d, d += 1, copy
// out, and an empty launch waited for; the device closed at the end (its last contents).
// Returns the buffer d's address.
uint64_t capture_demo(const std::string& device, const std::string& path, uint32_t slot = 0) {
  kernels::register_cpu_implementations();
  auto dev = open_for_capture(device, slot);
  auto image = kernels::code_object(dev->properties().arch);
  if (image.empty()) return 0;
  capture::start(path, {.full = true});
  auto loaded = std::shared_ptr<const ProgramImage>(load_program(*dev, image));
  Program vector_add(*dev, loaded, "vector_add"), scale_add(*dev, loaded, "scale_add");
  const uint32_t n = 1024, block = 256;
  std::vector<float> a(n), b(n), out(n);
  for (uint32_t i = 0; i < n; i++) a[i] = float(i), b[i] = float(i % 7);
  Buffer A = dev->allocate(n * 4), B = dev->allocate(n * 4), C = dev->allocate(n * 4),
         D = dev->allocate(n * 4);
  dev->copy_in(A, 0, a.data(), n * 4);
  dev->copy_in(B, 0, b.data(), n * 4);
  vector_add.launch(KernelArgs().buffer(A).buffer(B).buffer(C).value(n).value(block),
                    {n / block, 1, 1}, {block, 1, 1});
  scale_add.launch(KernelArgs().buffer(C).value(2.0f).value(1.0f).value(n).value(block),
                   {n / block, 1, 1}, {block, 1, 1});
  dev->copy(D, 0, C, 0, n * 4);
  scale_add.launch(KernelArgs().buffer(D).value(1.0f).value(1.0f).value(n).value(block),
                   {n / block, 1, 1}, {block, 1, 1}, true);
  dev->copy_out(out.data(), D, 0, n * 4);
  for (uint32_t i = 0; i < n; i++) EXPECT_EQ(out[i], 2 * (a[i] + b[i]) + 2) << i;
  const uint64_t d = D.va();
  dev.reset();  // its buffers' last contents go into the capture
  capture::stop();
  return d;
}

// A capture file written back from records, as docs/capture-format.md lays them out (version
// 3, uncompressed): the tests alter a capture this way.
class CaptureWriter {
 public:
  explicit CaptureWriter(uint32_t version = capture::kVersion) : version_(version) {
    out_.append(capture::kMagic, 8);
    put(version);
    put(uint32_t(0));
  }
  void add(const capture::Reader::Record& r) {
    std::string p;
    auto put_to = [&](const void* v, size_t n) { p.append(static_cast<const char*>(v), n); };
    auto str = [&](const std::string& s) {
      const uint16_t n = uint16_t(s.size());
      put_to(&n, 2);
      p += s;
    };
    auto u = [&](auto v) { put_to(&v, sizeof v); };
    switch (r.type) {
      case capture::RecordType::Device:
        u(r.device.id);
        str(r.device.name);
        str(r.device.vendor);
        str(r.device.arch);
        if (version_ >= 3) {
          u(r.device.va_base);
          u(r.device.va_size);
          u(r.device.timeline_va);
          u(r.device.compute_queues);
          u(r.device.copy_queues);
        }
        break;
      case capture::RecordType::Submission: {
        const auto& s = r.submission;
        u(s.device);
        u(uint8_t(s.queue));
        u(uint8_t(s.queue_index));
        u(uint16_t(s.grouped ? capture::kSubmissionGrouped : 0));
        u(s.sequence);
        u(s.host_ns);
        u(uint32_t(s.segments.size()));
        for (const auto& seg : s.segments) {
          u(uint8_t(seg.indirect));
          u(uint8_t(0));
          u(uint16_t(0));
          u(uint32_t(seg.words.size()));
          u(seg.address);
          put_to(seg.words.data(), seg.words.size() * 4);
        }
        break;
      }
      case capture::RecordType::Memory:
        u(r.memory.device);
        u(version_ >= 3 ? r.memory.flags | uint32_t(r.memory.kind) << 8 : 0u);
        if (version_ >= 3) u(r.memory.timeline);
        u(r.memory.address);
        u(uint64_t(r.memory.bytes.size()));
        put_to(r.memory.bytes.data(), r.memory.bytes.size());
        break;
      case capture::RecordType::DeviceEnd:
        u(r.end.device);
        u(uint32_t(0));
        u(r.end.timeline);
        break;
      case capture::RecordType::Dropped:
        u(r.dropped);
        break;
      default:  // a type this test does not write back
        return;
    }
    put(uint32_t(r.type));
    put(uint32_t(0));
    put(uint64_t(p.size()));
    out_ += p;
  }
  void write(const std::string& path) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << out_;
    ASSERT_TRUE(f.good());
  }

 private:
  template <class T>
  void put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  uint32_t version_;
  std::string out_;
};

std::vector<capture::Reader::Record> read_all(const std::string& path) {
  capture::Reader r(path);
  std::vector<capture::Reader::Record> out;
  while (auto rec = r.next()) out.push_back(std::move(*rec));
  return out;
}

void write_all(const std::string& path, const std::vector<capture::Reader::Record>& records,
               uint32_t version = capture::kVersion) {
  CaptureWriter w(version);
  for (const auto& r : records) w.add(r);
  w.write(path);
}

// The records written back unchanged replay as the original does: the writer above is the
// format the other tests alter.
TEST(Replay, ACaptureWrittenBackFromItsRecordsReadsTheSame) {
  const std::string path = temp_path("roundtrip");
  ASSERT_NE(capture_demo("emu:gfx1100", path), 0u);
  const auto before = read_all(path);
  write_all(path, before);
  const auto after = read_all(path);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); i++) {
    ASSERT_EQ(after[i].type, before[i].type) << i;
    EXPECT_EQ(after[i].memory.bytes, before[i].memory.bytes) << i;
    EXPECT_EQ(after[i].memory.flags, before[i].memory.flags) << i;
    EXPECT_EQ(after[i].memory.timeline, before[i].memory.timeline) << i;
    EXPECT_EQ(after[i].submission.grouped, before[i].submission.grouped) << i;
    EXPECT_EQ(after[i].device.va_base, before[i].device.va_base) << i;
  }
  std::filesystem::remove(path);
}

// One byte of a recorded result altered: --compare names the submission before that record,
// the byte, and both values.
TEST(Replay, AnAlteredByteOfARecordedResultIsTheDifferenceReported) {
  const std::string path = temp_path("altered");
  const uint64_t d = capture_demo("emu:gfx1100", path);
  ASSERT_NE(d, 0u);
  auto records = read_all(path);
  // The last settled record of d that differs from the one before it, after a submission.
  std::optional<size_t> chosen, previous;
  uint64_t submissions = 0, before_chosen = 0, index = 0;
  std::optional<size_t> last_of_d;
  for (size_t i = 0; i < records.size(); i++) {
    if (records[i].type == capture::RecordType::Submission) submissions++;
    if (records[i].type != capture::RecordType::Memory || records[i].memory.address != d) continue;
    if (last_of_d && submissions && (records[i].memory.flags & capture::kMemorySettled) &&
        records[i].memory.bytes != records[*last_of_d].memory.bytes) {
      chosen = i;
      previous = last_of_d;
      before_chosen = submissions - 1;
    }
    last_of_d = i;
  }
  ASSERT_TRUE(chosen);
  auto& bytes = records[*chosen].memory.bytes;
  const auto& old = records[*previous].memory.bytes;
  while (bytes[index] == old[index]) index++;
  const uint8_t original = bytes[index];
  bytes[index] ^= 0x5a;
  write_all(path, records);

  replay::Options o;
  o.compare = true;
  const replay::Result r = replay::run(path, o);
  ASSERT_TRUE(r.difference);
  EXPECT_FALSE(r.hang);
  EXPECT_EQ(r.difference->submission, before_chosen);
  EXPECT_EQ(r.difference->device, "emu:gfx1100");
  EXPECT_EQ(r.difference->address, d + index);
  EXPECT_EQ(r.difference->length, 1u);
  EXPECT_EQ(r.difference->captured, std::vector<uint8_t>{uint8_t(original ^ 0x5a)});
  EXPECT_EQ(r.difference->replayed, std::vector<uint8_t>{original});
  // Without --compare the replay takes the capture's bytes and goes on to the end.
  const replay::Result plain = replay::run(path, {});
  EXPECT_TRUE(plain.clean());
  std::filesystem::remove(path);
}

// A wait that can never end put in front of submission N: the replay hangs there, names it
// with the driver's report, and --bisect finds N by replaying prefixes.
TEST(Replay, AHangInjectedAtASubmissionIsWhereBisectStops) {
  const std::string path = temp_path("hang");
  ASSERT_NE(capture_demo("emu:gfx1100", path), 0u);
  auto records = read_all(path);
  std::vector<size_t> subs;
  for (size_t i = 0; i < records.size(); i++)
    if (records[i].type == capture::RecordType::Submission) subs.push_back(i);
  ASSERT_GT(subs.size(), 4u);
  auto& victim = records[subs[subs.size() / 2]].submission;
  const uint64_t n = victim.sequence;
  ASSERT_FALSE(victim.segments.front().indirect);
  {
    auto dev = Device::open("emu:gfx1100");
    CommandStream cs;
    std::vector<PatchSite> sites;
    dev->encoder(victim.queue).wait(cs, records[0].device.timeline_va, 1ull << 40, sites);
    auto& words = victim.segments.front().words;
    words.insert(words.begin(), cs.data(), cs.data() + cs.size());
  }
  write_all(path, records);
  replay::Options o;
  o.compare = true;
  o.timeout = std::chrono::milliseconds(300);
  const replay::Result r = replay::run(path, o);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.hang->submission, n);
  EXPECT_EQ(r.hang->device, "emu:gfx1100");
  EXPECT_NE(r.hang->report.find("HERE >"), std::string::npos) << r.hang->report;
  const replay::Bisection b = replay::bisect(path, o);
  ASSERT_TRUE(b.first_failing);
  EXPECT_EQ(*b.first_failing, n);
  ASSERT_TRUE(b.failure.hang);
  EXPECT_EQ(b.failure.hang->submission, n);
  EXPECT_GT(b.replays, 1u);
  // The prefix before it replays clean.
  o.until = n - 1;
  EXPECT_TRUE(replay::run(path, o).clean());
  std::filesystem::remove(path);
}

TEST(Replay, CapturesReplayCannotUseAreExactErrors) {
  const std::string path = temp_path("errors");
  ASSERT_NE(capture_demo("emu:gfx1100", path), 0u);
  const auto records = read_all(path);
  const auto& device = records[0].device;
  replay::Options o;
  // Another architecture.
  o.device = "emu:sm_90";
  EXPECT_EQ(error_of([&] { replay::run(path, o); }),
            "replay: " + path + "'s device 0 is AMD gfx1100 (emu:gfx1100); emu:sm_90 is NVIDIA "
            "sm_90: replay needs the same architecture");
  o.device.clear();
  // The captured addresses taken in this process.
  {
    Device::Options at;
    at.va_base = device.va_base;
    auto holder = Device::open("emu:gfx1100", at);
    EXPECT_EQ(holder->heap_base(), device.va_base);
    EXPECT_EQ(error_of([&] { replay::run(path, o); }),
              "emu:gfx1100: cannot place its GPU addresses at " + hex(device.va_base) + ": [" +
                  hex(device.va_base - (4ull << 30)) + ", " +
                  hex(device.va_base + device.va_size) + ") is taken in this process");
  }
  // An older format.
  const std::string old = temp_path("v2");
  write_all(old, records, 2);
  EXPECT_EQ(error_of([&] { replay::run(old, o); }),
            "replay: " + old + " is capture format version 2; replay needs version 3 (a full "
            "capture by this hcq: HCQ_CAPTURE=path,full)");
  // No buffer contents.
  std::vector<capture::Reader::Record> packets_only;
  for (const auto& r : records)
    if (r.type != capture::RecordType::Memory) packets_only.push_back(r);
  write_all(old, packets_only);
  EXPECT_EQ(error_of([&] { replay::run(old, o); }),
            "replay: " + old + " is not a full capture (no buffer contents: "
            "HCQ_CAPTURE=path,full)");
  // A submission naming a device no record declared.
  std::vector<capture::Reader::Record> orphan(records.begin() + 1, records.end());
  write_all(old, orphan);
  EXPECT_EQ(error_of([&] { replay::run(old, o); }).rfind("replay: " + old + ": a memory record names device 0, which no record declared", 0), 0u);
  std::filesystem::remove(old);
  std::filesystem::remove(path);
}

// replay::run from several threads at once, for different captures (replay.hpp): each opens
// its own device at its own captured addresses.
TEST(Replay, TwoCapturesReplayAtOnceFromTwoThreads) {
  const std::string a = temp_path("thread_a"), b = temp_path("thread_b");
  ASSERT_NE(capture_demo("emu:gfx1100", a, 1), 0u);
  ASSERT_NE(capture_demo("emu:gfx1100", b, 2), 0u);
  replay::Result ra, rb;
  std::string ea, eb;  // an exception in a thread, as its message
  replay::Options o;
  o.compare = true;
  auto replay_into = [&](const std::string& path, replay::Result& r, std::string& e) {
    try {
      r = replay::run(path, o);
    } catch (const std::exception& x) {
      e = x.what();
    }
  };
  std::thread ta(replay_into, std::cref(a), std::ref(ra), std::ref(ea));
  std::thread tb(replay_into, std::cref(b), std::ref(rb), std::ref(eb));
  ta.join();
  tb.join();
  EXPECT_EQ(ea, "");
  EXPECT_EQ(eb, "");
  EXPECT_TRUE(ra.clean());
  EXPECT_TRUE(rb.clean());
  EXPECT_GT(ra.compared, 0u);
  EXPECT_EQ(ra.submissions, rb.submissions);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Replay, UntilStopsAfterThatSubmission) {
  const std::string path = temp_path("until");
  ASSERT_NE(capture_demo("emu:sm_90", path), 0u);
  replay::Options o;
  o.compare = true;
  std::vector<uint64_t> seen;
  o.on_submission = [&](uint64_t s) { seen.push_back(s); };
  o.until = 2;
  const replay::Result r = replay::run(path, o);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.submissions, 3u);
  EXPECT_EQ(seen, (std::vector<uint64_t>{0, 1, 2}));
  std::filesystem::remove(path);
}

// Device::Options::va_base puts the heap where asked (a replay's addresses), or fails exactly;
// Device::allocate_at hands out exactly the range asked.
TEST(ReplayAddresses, AHeapPlacedWhereAskedAndBuffersAtExactAddresses) {
  uint64_t base = 0;
  {
    auto first = Device::open("emu:gfx1100");
    base = first->heap_base();
  }
  Device::Options o;
  o.va_base = base;
  auto dev = Device::open("emu:gfx1100", o);
  EXPECT_EQ(dev->heap_base(), base);
  const uint64_t va = base + dev->heap_size() - (1ull << 20);
  Buffer b = dev->allocate_at(va, 8192, MemoryKind::Host, false);
  EXPECT_EQ(b.va(), va);
  ASSERT_NE(b.host(), nullptr);
  std::memset(b.host(), 0x11, 8192);  // mapped for the CPU
  EXPECT_EQ(error_of([&] { dev->allocate_at(va + 4096, 8192, MemoryKind::Host, false); }),
            "emu:gfx1100: cannot reserve [" + hex(va + 4096) + ", " + hex(va + 4096 + 8192) +
                "): " + hex(va + 4096) + " is in use");
  EXPECT_EQ(error_of([&] { dev->allocate_at(va + 100, 4096, MemoryKind::Host, false); }),
            "emu:gfx1100: allocate_at needs a page-aligned address and size, got " +
                hex(va + 100) + " and 4096 bytes");
  EXPECT_EQ(error_of([&] { dev->allocate_at(base - 4096, 4096, MemoryKind::Host, false); }),
            "emu:gfx1100: cannot reserve [" + hex(base - 4096) + ", " + hex(base) +
                "): outside the heap [" + hex(base) + ", " + hex(base + dev->heap_size()) + ")");
  b.reset();
  Buffer again = dev->allocate_at(va, 8192, MemoryKind::Device, false);  // freed: free again
  EXPECT_EQ(again.va(), va);
}

class ReplayTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(ReplayTarget, AFullCaptureReplaysWithNoDifference) {
  const std::string path = temp_path(GetParam().substr(4));
  if (!capture_demo(GetParam(), path)) GTEST_SKIP() << "no code object for " << GetParam();
  replay::Options o;
  o.compare = true;
  const replay::Result r = replay::run(path, o);
  EXPECT_FALSE(r.difference) << r.difference->submission << " " << hex(r.difference->address)
                             << " " << r.difference->length << " bytes "
                             << int(r.difference->captured[0]) << " vs "
                             << int(r.difference->replayed[0]);
  EXPECT_FALSE(r.hang) << r.hang->report;
  EXPECT_GE(r.submissions, 3u);
  EXPECT_GT(r.compared, 0u);
  EXPECT_EQ(r.devices, std::vector<std::string>{GetParam()});
  if (r.clean()) std::filesystem::remove(path);  // kept for `hcq dump` when it fails
}

std::vector<std::string> emulated_targets() {
  std::vector<std::string> out;
  for (const auto& l : Device::list())
    if (l.emulated) out.push_back(l.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, ReplayTarget, ::testing::ValuesIn(emulated_targets()),
                         [](const auto& info) { return info.param.substr(4); });

}  // namespace
}  // namespace hcq
