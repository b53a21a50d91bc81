#include "core/capture.hpp"

#include <gtest/gtest.h>

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
  header += std::string("\x02\0\0\0\0\0\0\0", 8);
  write(header);
  EXPECT_THROW(capture::Reader r(path), InvalidInput);  // version 2
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

}  // namespace
}  // namespace hcq
