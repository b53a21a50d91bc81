#include "core/capture.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "amd/decode.hpp"
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
  header += std::string("\x03\0\0\0\0\0\0\0", 8);
  write(header);
  try {
    capture::Reader r(path);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": capture format version 3, this hcq reads versions 1 to 2");
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
  int submissions = 0;
  for (auto& r : records(path)) {
    if (r.type == capture::RecordType::Submission) submissions++;
    if (r.type != capture::RecordType::Memory) continue;
    if (r.memory.address == changed) changed_seen.push_back(r.memory.bytes);
    if (r.memory.address == fixed) {
      fixed_seen.push_back(r.memory.bytes);
      EXPECT_EQ(submissions, 0);  // recorded before the first submission, and only then
    }
  }
  EXPECT_EQ(submissions, 2);
  ASSERT_EQ(fixed_seen.size(), 1u);
  EXPECT_EQ(fixed_seen[0], std::vector<uint8_t>(4096, 7));
  ASSERT_EQ(changed_seen.size(), 2u);  // as each submission found it
  EXPECT_EQ(changed_seen[0][0], 1);
  EXPECT_EQ(changed_seen[0][4096], 0);  // the first copy had not run yet
  EXPECT_EQ(changed_seen[1][0], 2);
  EXPECT_EQ(changed_seen[1][4096], 1);  // the first copy's result
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
              path + ": compressed record at offset 16 does not inflate to its 100 bytes");
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hcq
