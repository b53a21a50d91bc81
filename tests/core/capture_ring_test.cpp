// The live capture ring (lib/core/capture_ring): wraparound, whole-record drops, a writer and a
// follower on two threads, and between processes made with fork() a writer or a follower
// killed at any point (children end with _exit or SIGKILL, as a crashed process would).
#include "core/capture_ring.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "core/hcq.hpp"
#include "os/shm.hpp"

namespace hcq::capture {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;
using testing_support::spawn;
using testing_support::wait_for;

std::string unique_name(const char* what) {
  return std::string("hcq-test-ring-") + what + "-" + std::to_string(::getpid());
}

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// No test here may hang: a follower that never ends is killed by the alarm, and fails.
struct Alarm {
  explicit Alarm(unsigned s) { ::alarm(s); }
  ~Alarm() { ::alarm(0); }
};

// A test record of the ring's own framing (read raw, not through capture::Reader): sequence
// number, length, then `len` bytes that follow from both, so a torn or shifted record shows.
std::vector<uint8_t> test_record(uint32_t seq, uint32_t len) {
  std::vector<uint8_t> r(8 + len);
  std::memcpy(r.data(), &seq, 4);
  std::memcpy(r.data() + 4, &len, 4);
  for (uint32_t i = 0; i < len; i++) r[8 + i] = uint8_t(seq * 31 + i);
  return r;
}

// Reads one test record from `src` (after its 16-byte file header was read); false at the end.
bool read_test_record(RingSource& src, uint32_t& seq, std::vector<uint8_t>& body) {
  uint32_t head[2];
  const size_t got = src.read_some(head, 8);
  if (got == 0) return false;
  EXPECT_EQ(got, 8u);
  seq = head[0];
  body.resize(head[1]);
  EXPECT_EQ(src.read_some(body.data(), body.size()), body.size());
  src.commit();
  return true;
}

bool body_ok(uint32_t seq, const std::vector<uint8_t>& body) {
  for (size_t i = 0; i < body.size(); i++)
    if (body[i] != uint8_t(seq * 31 + i)) return false;
  return true;
}

void skip_file_header(RingSource& src) {
  uint8_t h[16];
  ASSERT_EQ(src.read_some(h, 16), 16u);
  EXPECT_EQ(std::memcmp(h, kMagic, 8), 0);
  uint32_t v;
  std::memcpy(&v, h + 8, 4);
  EXPECT_EQ(v, kVersion);
}

// Appends `r` when it fits (as the capture's RingSink does); false when it was dropped.
bool append(RingWriter& w, const std::vector<uint8_t>& r) {
  if (!w.fits(r.size())) {
    w.count_dropped(1);
    return false;
  }
  w.put(r.data(), r.size());
  w.publish();
  return true;
}

TEST(CaptureRing, SpecsNameAFileARingOrBothAndBadOnesSayWhy) {
  std::string path;
  Options o = parse_spec("run.cap;shm:live,size=2", path);
  EXPECT_EQ(path, "run.cap");
  EXPECT_EQ(o.ring, "live");
  EXPECT_EQ(o.ring_bytes, 2u << 20);
  o = parse_spec("shm:live,full,zlib", path);
  EXPECT_EQ(path, "");
  EXPECT_EQ(o.ring, "live");
  EXPECT_EQ(o.ring_bytes, kDefaultRingBytes);
  EXPECT_TRUE(o.full && o.compress);
  o = parse_spec("a.cap,zlib;shm:x,zlib", path);
  EXPECT_EQ(path, "a.cap");
  EXPECT_TRUE(o.compress && !o.full);
  auto err = [](const std::string& spec) {
    return error_of([&] {
      std::string p;
      parse_spec(spec, p);
    });
  };
  EXPECT_EQ(err("shm:x,size=0"), "HCQ_CAPTURE: size takes 1 to 4096 (MiB), not '0'");
  EXPECT_EQ(err("shm:x,size=4097"), "HCQ_CAPTURE: size takes 1 to 4096 (MiB), not '4097'");
  EXPECT_EQ(err("shm:x,size="), "HCQ_CAPTURE: size takes 1 to 4096 (MiB), not ''");
  EXPECT_EQ(err("a.cap,size=2"), "HCQ_CAPTURE: unknown option 'size=2' (path[,full][,zlib])");
  EXPECT_EQ(err("shm:x,fast"),
            "HCQ_CAPTURE: unknown option 'fast' (shm:NAME[,size=MiB][,full][,zlib])");
  EXPECT_EQ(err("shm:"), "HCQ_CAPTURE: no ring name in 'shm:'");
  EXPECT_EQ(err("shm:a;shm:b"), "HCQ_CAPTURE: more than one shm: ring in 'shm:a;shm:b'");
  EXPECT_EQ(err("a;b"), "HCQ_CAPTURE: more than one file in 'a;b'");
  EXPECT_EQ(err("a.cap;"), "HCQ_CAPTURE: no file name in 'a.cap;'");
  EXPECT_EQ(err("a.cap,full;shm:x"),
            "HCQ_CAPTURE: 'a.cap,full' and 'shm:x' differ in full or zlib (both targets get the "
            "same records)");
  EXPECT_EQ(error_of([] { start("", Options{}); }), "capture: no file and no ring to write");
  const std::string bad = "shared segment 'a/b': a name is letters, digits, '.', '_' and '-' (1 to 200)";
  EXPECT_EQ(error_of([] { RingSource f("a/b", 10000ms); }), bad);  // at once, not after 10 s
  EXPECT_EQ(error_of([] { RingWriter w("a/b", 4096); }), bad);
}

TEST(CaptureRing, RecordsWrapAroundInOrderBetweenAWriterAndAFollowerThread) {
  Alarm alarm(60);
  const std::string name = unique_name("threads");
  constexpr uint64_t kCapacity = 64 << 10;  // far less than what goes through: it wraps
  constexpr uint32_t kRecords = 4000;       // about 6 MB
  auto writer = std::make_unique<RingWriter>(name, kCapacity);
  RingSource follower(name, 1000ms);
  std::thread w([&] {
    // This writer waits for room (the capture's drops), so that every record must arrive.
    for (uint32_t seq = 0; seq < kRecords; seq++) {
      const auto r = test_record(seq, (seq * 7919) % 3000);
      while (!writer->fits(r.size())) std::this_thread::yield();
      writer->put(r.data(), r.size());
      writer->publish();
    }
    writer.reset();  // closed: the follower ends after the last record
  });
  skip_file_header(follower);
  uint32_t seq = 0, expected = 0;
  std::vector<uint8_t> body;
  while (read_test_record(follower, seq, body)) {
    ASSERT_EQ(seq, expected);
    ASSERT_EQ(body.size(), (seq * 7919) % 3000);
    ASSERT_TRUE(body_ok(seq, body)) << seq;
    expected++;
  }
  w.join();
  EXPECT_EQ(expected, kRecords);
  EXPECT_TRUE(follower.closed_cleanly());
  EXPECT_EQ(follower.dropped(), 0u);
}

TEST(CaptureRing, AFullRingDropsWholeRecordsCountsThemAndSaysWhereTheyWere) {
  Alarm alarm(60);
  const std::string name = unique_name("full");
  auto dev = Device::open("emu:gfx1100");
  Options o;
  o.ring = name;
  o.ring_bytes = 1 << 20;
  start("", o);
  // 240,076 bytes a submission record: four and the device record fit in 1 MiB, a fifth not.
  std::vector<Segment> segs(1);
  segs[0].words.assign(60000, 0xffff1000u);  // type-3 NOPs
  auto submit = [&] { return submission(*dev, QueueKind::Compute, 0, segs); };
  for (int i = 0; i < 6; i++) EXPECT_EQ(submit(), uint64_t(i));  // 4 and 5 dropped
  auto source = std::make_unique<RingSource>(name, 1000ms);
  RingSource& ring = *source;
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(error_of([&] { RingSource second(name, 1000ms); }),
            "dump: shm:" + name + ": another follower is reading it");
  Reader r(std::move(source), "shm:" + name);
  auto rec = r.next();
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->type, RecordType::Device);
  EXPECT_EQ(rec->device.name, "emu:gfx1100");
  for (uint64_t i = 0; i < 4; i++) {  // what fitted, whole (the follower frees it as it reads)
    rec = r.next();
    ASSERT_TRUE(rec);
    ASSERT_EQ(rec->type, RecordType::Submission);
    EXPECT_EQ(rec->submission.sequence, i);
    ASSERT_EQ(rec->submission.segments.size(), 1u);
    EXPECT_EQ(rec->submission.segments[0].words, segs[0].words);
  }
  EXPECT_EQ(submit(), 6u);  // room again: the drop is announced where it was, then 6
  stop();
  rec = r.next();
  ASSERT_TRUE(rec);
  ASSERT_EQ(rec->type, RecordType::Dropped);
  EXPECT_EQ(rec->dropped, 2u);
  rec = r.next();
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->submission.sequence, 6u);
  EXPECT_FALSE(r.next());  // the writer closed the ring and all of it was read
  EXPECT_TRUE(ring.closed_cleanly());
  EXPECT_EQ(ring.dropped(), 2u);
}

TEST(CaptureRing, ASecondWriterIsRefusedAndTheRingGoesWithTheLastOneOut) {
  const std::string name = unique_name("second");
  {
    RingWriter w(name, 4096);
    EXPECT_EQ(error_of([&] { RingWriter again(name, 4096); }),
              "capture: shm:" + name + ": another process (pid " + std::to_string(::getpid()) +
                  ") is writing to it");
    EXPECT_TRUE(exists(name));
  }
  EXPECT_FALSE(exists(name));  // a clean exit leaves nothing in /dev/shm
}

TEST(CaptureRing, AFollowerWaitsForAWriterThatStartsLater) {
  Alarm alarm(30);
  const std::string name = unique_name("later");
  std::thread w([&] {
    std::this_thread::sleep_for(50ms);
    RingWriter writer(name, 4096);
    append(writer, test_record(7, 100));
    // Open until the follower has read it (a ring closed before any follower came is gone).
    for (int i = 0; i < 5000 && !writer.fits(4096); i++) std::this_thread::sleep_for(1ms);
  });
  RingSource follower(name, 5000ms);
  skip_file_header(follower);
  uint32_t seq = 0;
  std::vector<uint8_t> body;
  ASSERT_TRUE(read_test_record(follower, seq, body));
  EXPECT_EQ(seq, 7u);
  EXPECT_TRUE(body_ok(seq, body));
  EXPECT_FALSE(read_test_record(follower, seq, body));
  w.join();
  EXPECT_TRUE(follower.closed_cleanly());
}

TEST(CaptureRing, AFollowerOfAWriterKilledMidRunEndsAndSaysItWasNotClosed) {
  Alarm alarm(30);
  const std::string name = unique_name("killw");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = spawn([&] {
    RingWriter w(name, 64 << 10);
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) return 1;
    for (uint32_t seq = 0;; seq++) {  // until killed
      append(w, test_record(seq, seq % 500));
      std::this_thread::sleep_for(100us);
    }
  });
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  RingSource follower(name, 5000ms);
  skip_file_header(follower);
  uint32_t seq = 0, expected = 0;
  std::vector<uint8_t> body;
  for (; expected < 50; expected++) {
    ASSERT_TRUE(read_test_record(follower, seq, body));
    ASSERT_TRUE(body_ok(seq, body));
  }
  ::kill(writer, SIGKILL);
  const int st = wait_for(writer);
  EXPECT_TRUE(WIFSIGNALED(st));
  // What it published before it died is read whole, then the follower ends.
  const auto t0 = std::chrono::steady_clock::now();
  while (read_test_record(follower, seq, body)) ASSERT_TRUE(body_ok(seq, body)) << seq;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_FALSE(follower.closed_cleanly());
  EXPECT_EQ(follower.writer_pid(), writer);
}

TEST(CaptureRing, AKilledFollowerNeverStopsTheWriterAndTheNextOneResumesAtARecord) {
  Alarm alarm(30);
  const std::string name = unique_name("killf");
  RingWriter w(name, 8192);
  // Four records of 2,008 bytes fill 8,032 of its 8,192.
  for (uint32_t seq = 0; seq < 4; seq++) ASSERT_TRUE(append(w, test_record(seq, 2000)));
  const pid_t follower = spawn([&] {
    RingSource src(name, 1000ms);
    skip_file_header(src);
    uint32_t seq;
    std::vector<uint8_t> body;
    if (!read_test_record(src, seq, body) || seq != 0) return 1;
    uint8_t half[500];  // half of record 1: never committed
    if (src.read_some(half, sizeof half) != sizeof half) return 2;
    ::kill(::getpid(), SIGKILL);
    return 3;
  });
  const int st = wait_for(follower);
  ASSERT_TRUE(WIFSIGNALED(st)) << "exit status " << WEXITSTATUS(st);
  // The writer goes on without blocking: what does not fit is dropped and counted.
  uint32_t kept = 0, seq = 4;
  for (; seq < 40; seq++) kept += append(w, test_record(seq, 2000));
  EXPECT_EQ(kept, 1u);  // the room record 0 freed
  EXPECT_EQ(w.dropped(), 35u);
  RingSource next(name, 1000ms);  // the dead follower's role went with it
  skip_file_header(next);
  std::vector<uint8_t> body;
  for (uint32_t want : {1u, 2u, 3u, 4u}) {
    ASSERT_TRUE(read_test_record(next, seq, body));
    EXPECT_EQ(seq, want);
    EXPECT_TRUE(body_ok(seq, body));
  }
}

// A ring whose header another process damaged or forged (issue 33): a capacity of 0 (the
// follower divided by it), one larger than the segment, a segment larger than any ring. The
// follower says why and stops; it never faults.
TEST(CaptureRing, AHostileRingHeaderIsAnExactErrorNotAFault) {
  Alarm alarm(30);
  const std::string name = unique_name("hostile");
  const uint64_t data = 4096;
  auto forge = [&](uint64_t capacity) {
    return std::make_unique<os::SharedSegment>(
        name, kRingLayout, sizeof(RingHeader) + data, [&](std::byte* p) {
          auto* h = reinterpret_cast<RingHeader*>(p);
          std::memcpy(h->magic, kMagic, 8);
          h->version = kVersion;
          h->state = RingHeader::kOpen;
          h->capacity = capacity;
          h->head = 1 << 20;  // far past anything written
        });
  };
  for (const uint64_t capacity : {uint64_t(0), data + 1, uint64_t(1) << 62}) {
    auto writer = forge(capacity);
    ASSERT_TRUE(writer->hold_role(kWriterRole));
    EXPECT_EQ(error_of([&] { RingSource f(name, 2000ms); }),
              "dump: shm:" + name + ": its header gives a capacity of " +
                  std::to_string(capacity) + " bytes where the segment holds 4096: not a ring "
                  "hcq made")
        << capacity;
  }
  EXPECT_FALSE(exists(name));
  {
    // A head further than a ring's capacity past the tail: read as records it never ended
    // (the follower wrapped around the ring for ever); it is a damaged ring.
    auto writer = forge(data);
    ASSERT_TRUE(writer->hold_role(kWriterRole));
    EXPECT_EQ(error_of([&] {
                RingSource f(name, 2000ms);
                char b[64];
                f.read_some(b, sizeof b);
              }),
              "dump: shm:" + name + ": its head (1048576) is not within 4096 bytes after what "
              "was read (0): a damaged ring");
  }
  // A segment header giving more than a ring holds (written by hand: making one would
  // reserve that much of /dev/shm) is refused before anything is mapped.
  os::SegmentHeader sh;
  sh.magic = os::SegmentHeader::kMagic;
  sh.layout_version = kRingLayout;
  sh.header_bytes = sizeof sh;
  sh.payload_bytes = sizeof(RingHeader) + (kMaxRingMiB << 20) + 1;
  const std::string path = "/dev/shm/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, &sh, sizeof sh), ssize_t(sizeof sh));
  ::close(fd);
  EXPECT_EQ(error_of([&] { RingSource f(name, 2000ms); }),
            "dump: shm:" + name + ": its segment header gives " +
                std::to_string(sh.payload_bytes) +
                " bytes, more than a ring holds (4096 MiB): not a ring hcq made");
  ::unlink(path.c_str());
}

TEST(CaptureRing, AnOlderLayoutInUseIsRefusedAndAStaleRingIsReclaimed) {
  Alarm alarm(30);
  const std::string name = unique_name("layout");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // A process of an older build holds the name with its layout (version 0, 64 bytes).
  const pid_t old = spawn([&] {
    os::SharedSegment s(name, 0, 64);
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) return 1;
    ::pause();
    return 0;
  });
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  Options o;
  o.ring = name;
  o.ring_bytes = 1 << 20;
  EXPECT_EQ(error_of([&] { start("", o); }),
            "shared segment " + name + ": layout version 0 (64 bytes), created by pid " +
                std::to_string(old) +
                ", is in use by other processes; this build uses layout version 1 (1048768 bytes)");
  EXPECT_FALSE(enabled());
  ::kill(old, SIGKILL);  // it crashes: its segment is left behind, held by nobody
  EXPECT_TRUE(WIFSIGNALED(wait_for(old)));
  ASSERT_TRUE(exists(name));
  // A follower finds no writer there (a stale ring is not one): it waits, then gives up.
  EXPECT_EQ(error_of<TimeoutError>([&] { RingSource f(name, 100ms); }),
            "dump: shm:" + name + ": no capture writer appeared in 100 ms");
  EXPECT_FALSE(exists(name));  // its look made the stale one afresh and let it go
  // A writer killed mid-run leaves its ring: the next writer makes it afresh.
  const pid_t crashed = spawn([&] {
    new RingWriter(name, 4096);  // never destroyed: as if the process crashed
    ::kill(::getpid(), SIGKILL);
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(wait_for(crashed)));
  ASSERT_TRUE(exists(name));
  start("", o);
  EXPECT_TRUE(enabled());
  stop();
  EXPECT_FALSE(exists(name));  // nothing left after a clean stop
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace hcq::capture
