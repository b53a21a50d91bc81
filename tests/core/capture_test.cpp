#include "core/capture.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "amd/decode.hpp"
#include "common/file_size_limit.hpp"
#include "core/error.hpp"
#include "core/hcq.hpp"

namespace hcq {
namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/hcq_" + name + "_" + std::to_string(::getpid());
}

TEST(Capture, RecordsEverySubmissionWithItsDeviceAndCommands) {
  std::string path = temp_path("capture");
  {
    auto dev = Device::open("emu:gfx1201");
    capture::start(path);
    Buffer b = dev->allocate(4096);
    std::vector<char> data(4096, 1);
    dev->copy_in(b, 0, data.data(), data.size());  // one copy-queue submission
    Signal s = dev->new_signal();
    CopyQueue q(*dev);
    q.copy(b.va(), b.va() + 2048, 16).signal(s, 1);
    q.bind();
    q.submit();  // bound: the command buffer is captured as an indirect segment
    s.wait(1);
    capture::stop();
  }
  capture::Reader r(path);
  auto dev = r.next();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->type, capture::RecordType::Device);
  EXPECT_EQ(dev->device.name, "emu:gfx1201");
  EXPECT_EQ(dev->device.vendor, "AMD");
  EXPECT_EQ(dev->device.arch, "gfx1201");
  auto first = r.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->submission.sequence, 0u);
  EXPECT_EQ(first->submission.queue, QueueKind::Copy);
  ASSERT_EQ(first->submission.segments.size(), 1u);
  auto ps = amd::decode_sdma(first->submission.segments[0].words, amd::Gen::Gfx12);
  bool copy = false;
  for (auto& p : ps) copy |= p.name == "COPY_LINEAR";
  EXPECT_TRUE(copy);
  auto second = r.next();
  ASSERT_TRUE(second);
  ASSERT_EQ(second->submission.segments.size(), 1u);
  EXPECT_TRUE(second->submission.segments[0].indirect);
  EXPECT_NE(second->submission.segments[0].address, 0u);
  EXPECT_FALSE(r.next());
  std::remove(path.c_str());
}

// docs/capture-format.md: a capture starts its file afresh (each process that captures, each
// capture::start), never appending to what an earlier one left there.
TEST(Capture, ASecondCaptureToTheSamePathReplacesTheFirst) {
  std::string path = temp_path("again");
  auto dev = Device::open("emu:gfx1100");
  Buffer b = dev->allocate(4096);
  std::vector<char> data(4096, 1);
  capture::start(path);
  for (int i = 0; i < 3; i++) dev->copy_in(b, 0, data.data(), data.size());
  capture::stop();
  const auto first_size = std::filesystem::file_size(path);
  capture::start(path);
  dev->copy_in(b, 0, data.data(), data.size());
  capture::stop();
  EXPECT_LT(std::filesystem::file_size(path), first_size);
  capture::Reader r(path);
  auto device = r.next();
  ASSERT_TRUE(device);
  EXPECT_EQ(device->type, capture::RecordType::Device);
  auto only = r.next();
  ASSERT_TRUE(only);
  EXPECT_EQ(only->type, capture::RecordType::Submission);
  EXPECT_EQ(only->submission.sequence, 0u);
  EXPECT_FALSE(r.next());
  std::remove(path.c_str());
}

TEST(Capture, TheReaderRejectsBadFilesWithTheOffset) {
  std::string path = temp_path("bad");
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  write("NOTACAPTUREFILE!");
  try {
    capture::Reader r(path);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not an hcq capture (bad magic at offset 0)");
  }
  std::string header(capture::kMagic, 8);
  header += std::string("\x04\0\0\0\0\0\0\0", 8);
  write(header);
  try {
    capture::Reader r(path);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": capture format version 4, this hcq reads versions 1 to 3");
  }
  header[8] = 1;
  write(header + std::string("\x02\0\0\0\0\0\0\0\x40\0\0\0\0\0\0\0", 16) + "short");
  capture::Reader r(path);
  try {
    r.next();
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": record at offset 16 claims 64 bytes, 5 are left in the file");
  }
  std::remove(path.c_str());
}

// All the records of a capture, for comparing two.
std::vector<capture::Reader::Record> records(const std::string& path) {
  capture::Reader r(path);
  std::vector<capture::Reader::Record> out;
  while (auto rec = r.next()) out.push_back(*rec);
  return out;
}

// The same work on a fresh device, captured with `options`: two submissions, a host buffer
// changed between them and one that is not.
void capture_workload(const std::string& path, const capture::Options& options,
                      uint64_t* changed_va = nullptr, uint64_t* fixed_va = nullptr) {
  auto dev = Device::open("emu:gfx1100");
  Buffer changed = dev->allocate(8192, MemoryKind::Host), fixed = dev->allocate(4096, MemoryKind::Host);
  std::memset(changed.host(), 1, 4096);
  std::memset(static_cast<char*>(changed.host()) + 4096, 0, 4096);
  std::memset(fixed.host(), 7, 4096);
  if (changed_va) *changed_va = changed.va();
  if (fixed_va) *fixed_va = fixed.va();
  capture::start(path, options);
  Signal s = dev->new_signal();
  CopyQueue q(*dev);
  q.copy(changed.va() + 4096, changed.va(), 64).signal(s, 1);
  q.submit();
  s.wait(1);
  std::memset(changed.host(), 2, 64);
  CopyQueue q2(*dev);
  q2.copy(changed.va() + 4096, changed.va(), 64).signal(s, 2);
  q2.submit();
  s.wait(2);
  capture::stop();
}

TEST(Capture, FullModeRecordsEachChangedBufferBeforeTheSubmission) {
  const std::string path = temp_path("full");
  uint64_t changed = 0, fixed = 0;
  capture_workload(path, {.full = true}, &changed, &fixed);
  std::vector<std::vector<uint8_t>> changed_seen, fixed_seen;
  std::vector<int> changed_before;     // how many submissions came before each record of it
  std::vector<uint32_t> changed_flags;
  int submissions = 0;
  for (auto& r : records(path)) {
    if (r.type == capture::RecordType::Submission) submissions++;
    if (r.type != capture::RecordType::Memory) continue;
    if (r.memory.address == changed) {
      changed_seen.push_back(r.memory.bytes);
      changed_before.push_back(submissions);
      changed_flags.push_back(r.memory.flags);
      EXPECT_EQ(r.memory.kind, MemoryKind::Host);
    }
    if (r.memory.address == fixed) {
      fixed_seen.push_back(r.memory.bytes);
      EXPECT_EQ(submissions, 0);  // recorded before the first submission, and only then
    }
  }
  EXPECT_EQ(submissions, 2);
  ASSERT_EQ(fixed_seen.size(), 1u);
  EXPECT_EQ(fixed_seen[0], std::vector<uint8_t>(4096, 7));
  // As each submission found it, and as each wait left it (before the CPU wrote over it).
  ASSERT_EQ(changed_seen.size(), 4u);
  EXPECT_EQ(changed_before, (std::vector<int>{0, 1, 1, 2}));
  EXPECT_EQ(changed_seen[0][0], 1);
  EXPECT_EQ(changed_seen[0][4096], 0);  // the first copy had not run yet
  EXPECT_EQ(changed_seen[1][0], 1);
  EXPECT_EQ(changed_seen[1][4096], 1);  // s.wait(1): the first copy's result
  EXPECT_EQ(changed_seen[2][0], 2);     // the CPU's write, before the second submission
  EXPECT_EQ(changed_seen[2][4096], 1);
  EXPECT_EQ(changed_seen[3][4096], 2);  // s.wait(2)
  // Each was read with the device's work before it done (the copies signal s, not the
  // timeline, which no submission here moves).
  for (uint32_t f : changed_flags) EXPECT_EQ(f, capture::kMemorySettled);
  std::remove(path.c_str());
}

TEST(Capture, CompressedCapturesHoldTheSameRecords) {
  const std::string plain = temp_path("plain"), packed = temp_path("zlib");
  capture_workload(plain, {.full = true});
  capture_workload(packed, {.full = true, .compress = true});
  auto a = records(plain), b = records(packed);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) {
    ASSERT_EQ(a[i].type, b[i].type);
    EXPECT_EQ(a[i].memory.bytes, b[i].memory.bytes);
    ASSERT_EQ(a[i].submission.segments.size(), b[i].submission.segments.size());
    for (size_t k = 0; k < a[i].submission.segments.size(); k++)
      EXPECT_EQ(a[i].submission.segments[k].words.size(), b[i].submission.segments[k].words.size());
  }
  std::ifstream p(plain, std::ios::ate | std::ios::binary), z(packed, std::ios::ate | std::ios::binary);
  EXPECT_LT(z.tellg() * 4, p.tellg());  // buffers of repeated bytes compress well
  std::remove(plain.c_str());
  std::remove(packed.c_str());
}

TEST(Capture, TheEnvironmentSpecNamesThePathAndOptions) {
  std::string path;
  capture::Options o = capture::parse_spec("/tmp/x.hcqcap,full,zlib", path);
  EXPECT_EQ(path, "/tmp/x.hcqcap");
  EXPECT_TRUE(o.full);
  EXPECT_TRUE(o.compress);
  o = capture::parse_spec("plain.cap", path);
  EXPECT_FALSE(o.full || o.compress);
  try {
    capture::parse_spec("x.cap,fast", path);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "HCQ_CAPTURE: unknown option 'fast' (path[,full][,zlib])");
  }
  EXPECT_THROW(capture::parse_spec(",full", path), InvalidInput);
}

TEST(Capture, ACorruptCompressedRecordIsAClearError) {
  const std::string path = temp_path("badzip");
  std::string file(capture::kMagic, 8);
  file += std::string("\x02\0\0\0\0\0\0\0", 8);
  // A device record flagged compressed: 100 bytes claimed, 4 bytes of garbage.
  file += std::string("\x01\0\0\0\x01\0\0\0\x0c\0\0\0\0\0\0\0", 16);
  file += std::string("\x64\0\0\0\0\0\0\0" "abcd", 12);
  std::ofstream(path, std::ios::binary) << file;
  capture::Reader r(path);
  try {
    r.next();
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": compressed record at offset 16 does not inflate to its 100 bytes (zlib: "
                     "incorrect header check)");
  }
  std::remove(path.c_str());
}


// A capture file's header (version 2), then `records`.
std::string capture_file(const std::string& records) {
  return std::string(capture::kMagic, 8) + std::string("\x02\0\0\0\0\0\0\0", 8) + records;
}
// A record header: type, flags, payload length.
std::string record_header(uint32_t type, uint32_t flags, uint64_t len) {
  std::string h(16, '\0');
  std::memcpy(h.data(), &type, 4);
  std::memcpy(h.data() + 4, &flags, 4);
  std::memcpy(h.data() + 8, &len, 8);
  return h;
}
std::string reader_error(const std::string& path) {
  try {
    capture::Reader r(path);
    while (r.next()) {
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Capture, TwentyThousandEmptyRecordsOfAnUnknownTypeAreSkippedWithoutRecursion) {
  const std::string path = temp_path("unknown");
  std::string records;
  for (int i = 0; i < 50000; i++) records += record_header(99, 0, 0);
  std::ofstream(path, std::ios::binary) << capture_file(records);
  capture::Reader r(path);
  EXPECT_FALSE(r.next());  // crashed with a stack overflow when each skip was a recursive call
  std::remove(path.c_str());
}

TEST(Capture, APipeClaimingAHugeRecordFailsAtTheLimitWithoutAllocatingIt) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string input = capture_file(record_header(2, 0, 1536ull << 20));  // 32 bytes
  ASSERT_EQ(::write(fds[1], input.data(), input.size()), ssize_t(input.size()));
  ::close(fds[1]);
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_EQ(reader_error(path), path + ": record at offset 16 claims 1610612736 bytes, more than "
                                       "the 268435456 (256 MiB) a record may hold");
  ::close(fds[0]);
  // Within the limit, a pipe is read as its bytes arrive: a claim it does not back is a
  // truncation, found without allocating the claim.
  ASSERT_EQ(::pipe(fds), 0);
  const std::string short_input = capture_file(record_header(2, 0, 200ull << 20) + "abc");
  ASSERT_EQ(::write(fds[1], short_input.data(), short_input.size()), ssize_t(short_input.size()));
  ::close(fds[1]);
  const std::string path2 = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_EQ(reader_error(path2), path2 + ": truncated: the record at offset 16 claims 209715200 "
                                         "bytes, the input ends after 3 of them");
  ::close(fds[0]);
}

// A zlib stream (RFC 1950) of one stored block holding `data`: no compressor needed.
std::string stored_zlib(const std::string& data) {
  std::string z = "\x78\x01\x01";
  const uint16_t len = uint16_t(data.size()), nlen = uint16_t(~len);
  z.append(reinterpret_cast<const char*>(&len), 2);
  z.append(reinterpret_cast<const char*>(&nlen), 2);
  z += data;
  uint32_t a = 1, b = 0;
  for (unsigned char c : data) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  const uint32_t adler = (b << 16) | a;
  for (int i = 3; i >= 0; i--) z += char(adler >> (8 * i));
  return z;
}

TEST(Capture, AZlibRecordIsInflatedNoFurtherThanItsStatedLength) {
  const std::string path = temp_path("zbomb");
  auto compressed = [](uint64_t raw, const std::string& stream) {
    std::string p(8, '\0');
    std::memcpy(p.data(), &raw, 8);
    return record_header(1, capture::kRecordCompressed, 8 + stream.size()) + p + stream;
  };
  // States 100 bytes, holds 4,000.
  std::ofstream(path, std::ios::binary) << capture_file(compressed(100, stored_zlib(std::string(4000, 'x'))));
  EXPECT_EQ(reader_error(path),
            path + ": compressed record at offset 16 inflates to more than its stated 100 bytes");
  // States more than any record may hold: refused before inflating.
  std::ofstream(path, std::ios::binary) << capture_file(compressed(1ull << 30, stored_zlib("x")));
  EXPECT_EQ(reader_error(path), path + ": compressed record at offset 16 claims 1073741824 bytes "
                                       "inflated, more than the 268435456 (256 MiB) a record may hold");
  // States more than it holds.
  std::ofstream(path, std::ios::binary) << capture_file(compressed(10, stored_zlib("abc")));
  EXPECT_EQ(reader_error(path),
            path + ": compressed record at offset 16 inflates to 3 bytes, its header says 10");
  std::remove(path.c_str());
}

size_t open_descriptors() {
  auto d = std::filesystem::directory_iterator("/proc/self/fd");
  return size_t(std::distance(begin(d), end(d)));
}

TEST(Capture, AFileRejectedAtTheHeaderLeavesNoDescriptorOpen) {
  const std::string path = temp_path("leak");
  std::ofstream(path, std::ios::binary) << "NOTACAPTUREFILE!";
  const size_t before = open_descriptors();
  for (int i = 0; i < 100; i++) EXPECT_THROW(capture::Reader{path}, InvalidInput);
  EXPECT_EQ(open_descriptors(), before);
  std::remove(path.c_str());
}

TEST(Capture, AnEmptySegmentReadsAsNoWords) {
  const std::string path = temp_path("empty_segment");
  std::string dev = std::string(4, '\0') + std::string("\x03\0emu", 5) + std::string("\x03\0" "AMD", 5) +
                    std::string("\x07\0gfx1100", 9);
  std::string sub = std::string(4, '\0') + std::string("\0\0\0\0", 4) + std::string(16, '\0') +
                    std::string("\x01\0\0\0", 4) + std::string(16, '\0');  // one segment, 0 dwords
  std::ofstream(path, std::ios::binary)
      << capture_file(record_header(1, 0, dev.size()) + dev + record_header(2, 0, sub.size()) + sub);
  capture::Reader r(path);
  ASSERT_TRUE(r.next());
  auto s = r.next();  // copied 0 bytes from a null pointer before (UBSan: nonnull-attribute)
  ASSERT_TRUE(s);
  ASSERT_EQ(s->submission.segments.size(), 1u);
  EXPECT_TRUE(s->submission.segments[0].words.empty());
  EXPECT_FALSE(r.next());
  std::remove(path.c_str());
}

TEST(Capture, ADirectoryIsReportedAsOne) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(reader_error(dir), dir + " is a directory, not a capture file");
}

// One submission on `dev`'s copy queue.
void submit_copy(Device& dev, Buffer& b) {
  CopyQueue q(dev);
  q.copy(b.va(), b.va() + 2048, 16);
  q.submit();
}

TEST(Capture, AFullDeviceFailsTheStartWithTheErrno) {
  try {
    capture::start("/dev/full");
    FAIL() << "a capture to /dev/full started";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOSPC);
    EXPECT_STREQ(e.what(), "write to /dev/full failed after 0 bytes: No space left on device (errno 28)");
  }
  EXPECT_FALSE(capture::enabled());
}

TEST(Capture, AFailedWriteFailsThatSubmissionAndEveryLaterOne) {
  const std::string path = temp_path("fsize");
  auto dev = Device::open("emu:gfx1100");
  Buffer b = dev->allocate(4096);
  capture::start(path);
  // The file system "fills" at 64 bytes: the header (16) and the device record (47) fit, the
  // submission record does not.
  testing_support::FileSizeLimit limit(64);
  std::string first, second;
  int err1 = 0, err2 = 0;
  try {
    submit_copy(*dev, b);
  } catch (const OsError& e) {
    first = e.what();
    err1 = e.err();
  }
  try {
    submit_copy(*dev, b);
  } catch (const OsError& e) {
    second = e.what();
    err2 = e.err();
  }
  limit.lift();
  EXPECT_EQ(err1, EFBIG);
  EXPECT_EQ(first, "write to " + path + " failed after 64 bytes: File too large (errno 27)");
  EXPECT_EQ(err2, EFBIG);  // and no half record written after it
  EXPECT_EQ(second, first);
  EXPECT_NO_THROW(capture::stop());
  EXPECT_EQ(std::filesystem::file_size(path), 64u);
  std::remove(path.c_str());
}

TEST(Capture, ABufferLargerThanAPieceIsRecordedInPiecesUnderTheRecordLimit) {
  const std::string path = temp_path("pieces");
  uint64_t va = 0;
  {
    auto dev = Device::open("emu:gfx1100");
    Buffer big = dev->allocate(capture::kMemoryPieceBytes + 4096, MemoryKind::Host);
    std::memset(big.host(), 5, big.size());
    va = big.va();
    capture::start(path, {.full = true});
    submit_copy(*dev, big);
    capture::stop();
  }
  std::vector<std::pair<uint64_t, size_t>> pieces;
  for (auto& r : records(path))
    if (r.type == capture::RecordType::Memory && r.memory.address >= va &&
        r.memory.address < va + capture::kMemoryPieceBytes + 4096)
      pieces.push_back({r.memory.address, r.memory.bytes.size()});
  EXPECT_EQ(pieces, (std::vector<std::pair<uint64_t, size_t>>{
                        {va, capture::kMemoryPieceBytes}, {va + capture::kMemoryPieceBytes, 4096}}));
  std::remove(path.c_str());
}

TEST(Capture, ASymlinkWhereTheCaptureGoesIsRefusedAndItsTargetKept) {
  const std::string target = temp_path("precious"), link = temp_path("link");
  std::ofstream(target) << "keep me";
  std::filesystem::create_symlink(target, link);
  try {
    capture::start(link);
    FAIL() << "a symlink was followed";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ELOOP);
    EXPECT_EQ(std::string(e.what()), link + ": refusing to write through a symbolic link: Too "
                                            "many levels of symbolic links (errno 40)");
  }
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep me");
  std::remove(link.c_str());
  std::remove(target.c_str());
}

// A device opened after another was closed is another device in the capture, also where the
// allocator gives it the closed one's address (one of a few of the same driver usually gets
// it): its submissions must not be attributed to the closed device.
TEST(Capture, ADeviceOpenedAfterAnotherClosedIsRecordedAsItself) {
  std::string path = temp_path("reopen");
  capture::start(path);
  std::vector<char> data(4096, 1);
  std::vector<std::string> opened;
  std::set<const void*> addresses;
  for (int i = 0; i < 8; i++) {  // each opened where the one before was closed
    auto dev = Device::open(i % 2 ? "emu:sm_90" : "emu:gfx1100");
    opened.push_back(dev->name());
    addresses.insert(dev.get());
    Buffer b = dev->allocate(4096);
    dev->copy_in(b, 0, data.data(), data.size());
  }
  capture::stop();
  std::cerr << "(8 devices at " << addresses.size() << " addresses)\n";
  std::map<uint32_t, std::string> name_of;
  std::vector<std::string> submitted_by;
  for (auto& rec : records(path)) {
    if (rec.type == capture::RecordType::Device) name_of[rec.device.id] = rec.device.name;
    if (rec.type == capture::RecordType::Submission)
      submitted_by.push_back(name_of.at(rec.submission.device));
  }
  EXPECT_EQ(name_of.size(), 8u);
  EXPECT_EQ(submitted_by, opened);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hcq
