// Files into device memory on every emulated GPU: sizes from 0 B up at unaligned file and
// buffer offsets, with O_DIRECT and buffered reads, verified byte for byte; every error case
// with its exact message, and the device still working afterwards.
#include "io/file_load.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/hardware_devices.hpp"
#include "core/hcq.hpp"

namespace hcq::io {
namespace {

namespace fs = std::filesystem;
using testing_support::device_name;

class FileLoad : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dev_ = Device::open(device_name(GetParam()));
    dir_ = fs::temp_directory_path() / ("hcq_file_load_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A file of `size` pseudo-random bytes (seeded by size), returned and written.
  std::vector<uint8_t> make_file(const std::string& name, uint64_t size) {
    std::vector<uint8_t> v(size);
    std::mt19937_64 rng(size);
    for (auto& b : v) b = uint8_t(rng() >> 56);
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(v.data()),
                                                        std::streamsize(v.size()));
    return v;
  }
  std::vector<uint8_t> read(const Buffer& b, uint64_t off, uint64_t n) {
    std::vector<uint8_t> v(n);
    dev_->copy_out(v.data(), b, off, n);
    return v;
  }
  std::unique_ptr<Device> dev_;
  fs::path dir_;
};

TEST_P(FileLoad, RangesOfEverySizeArriveByteForByte) {
  const uint64_t sizes[] = {0, 1, 4095, 4097, (1 << 20) + 3, (9 << 20) + 1};
  for (bool direct : {true, false})
    for (uint64_t size : sizes) {
      SCOPED_TRACE(std::to_string(size) + (direct ? " O_DIRECT" : " buffered"));
      const auto file = make_file("f" + std::to_string(size), size + 777);
      Buffer b = dev_->allocate(size + 100);
      LoadOptions o;
      o.direct = direct;
      o.slot_bytes = 1 << 20;  // several slots in flight for the larger sizes
      const LoadResult r = load_file(*dev_, b, 13, (dir_ / ("f" + std::to_string(size))).string(),
                                     777, size, o);
      EXPECT_EQ(r.staged, !dev_->properties().caps.uma);
      // No O_DIRECT into device memory (staging of a device that cannot reach host memory).
      EXPECT_EQ(r.direct, direct && r.staged && dev_->properties().caps.host_reachable);
      EXPECT_LE(r.done, dev_->timeline().last());
      if (size == 0) continue;
      auto got = read(b, 13, size);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), file.begin() + 777));
    }
}

TEST_P(FileLoad, ErrorsAreClearAndTheDeviceGoesOn) {
  const auto file = make_file("small", 10000);
  const std::string path = (dir_ / "small").string();
  Buffer b = dev_->allocate(8192);
  const std::string who = device_name(GetParam()) + ": load_file ";
  try {
    load_file(*dev_, b, 0, (dir_ / "missing").string(), 0, 10);
    FAIL();
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_NE(std::string(e.what()).find(who + (dir_ / "missing").string() + ": open"),
              std::string::npos)
        << e.what();
  }
  try {
    load_file(*dev_, b, 0, path, 9000, 1001);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), who + path + ": bytes [9000, 10001) are past the end of "
                                                  "the file (10000 bytes)");
  }
  try {
    load_file(*dev_, b, 8000, path, 0, 200);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              who + path + ": [8000, 8200) is past the end of the 8192-byte buffer");
  }
  try {  // reading a directory fails in the read itself (EISDIR)
    load_file(*dev_, b, 0, dir_.string(), 0, 100);
    FAIL();
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), EISDIR);
  }
  {  // a file that ends early (a FIFO whose writer closes after 100 bytes): a short read
    const std::string fifo = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] {
      std::ofstream(fifo, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), 100);
    });
    try {
      load_file(*dev_, b, 0, fifo, 0, 1000);
      FAIL();
    } catch (const OsError& e) {
      FAIL() << e.what();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), who + fifo + ": short read at 0: 100 of 1000 bytes (did the "
                                                    "file shrink?)");
    }
    writer.join();
  }
  LoadOptions bad;
  bad.slot_bytes = 1000;
  EXPECT_THROW(load_file(*dev_, b, 0, path, 0, 10, bad), InvalidInput);
  // Still usable: a load and a copy after the errors.
  load_file(*dev_, b, 0, path, 5, 8000);
  auto got = read(b, 0, 8000);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), file.begin() + 5));
}

// A file that ends early in a load of several slots (a FIFO whose writer closes after 100
// bytes): the load stops with the short read once the reads in flight are back, instead of
// waiting for reads it never issued.
// The default slots (0 in LoadOptions) follow where the staging lives: 16 MiB x 8 in host
// memory, 4 MiB x 4 in a device's own visible memory or in this process's memory (a device
// whose memory the CPU cannot map: each chunk goes in through copy_in); never a slot larger
// than the load.
TEST_P(FileLoad, DefaultSlotsFollowWhereTheStagingLives) {
  const uint64_t size = (20 << 20) + 5;
  const auto file = make_file("big", size);
  const std::string path = (dir_ / "big").string();
  Buffer b = dev_->allocate(size);
  const LoadResult r = load_file(*dev_, b, 0, path, 0, size);
  const auto got = read(b, 0, size);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), file.begin()));
  if (!r.staged) {
    EXPECT_EQ(r.slots, 0u);
  } else if (dev_->properties().caps.host_reachable && dev_->properties().caps.cpu_maps_memory) {
    EXPECT_EQ(r.slot_bytes, 16u << 20);
    EXPECT_EQ(r.slots, 2u);  // two 16 MiB chunks
  } else {
    EXPECT_EQ(r.slot_bytes, 4u << 20);
    EXPECT_EQ(r.slots, 4u);
  }
  const LoadResult small = load_file(*dev_, b, 0, path, 0, 10000);
  if (small.staged) {
    EXPECT_EQ(small.slot_bytes, 12288u);  // 10000 bytes in whole 4 KiB pages
    EXPECT_EQ(small.slots, 1u);
  }
  const auto head = read(b, 0, 10000);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), file.begin()));
}

TEST_P(FileLoad, AShortReadInALoadOfSeveralSlotsEndsTheLoad) {
  const auto file = make_file("small", 10000);
  Buffer b = dev_->allocate(3 * 4096);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream(fifo, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), 100);
  });
  LoadOptions o;
  o.slot_bytes = 4096;  // three slots' worth
  try {
    load_file(*dev_, b, 0, fifo, 0, 3 * 4096, o);
    ADD_FAILURE() << "no error";
  } catch (const OsError& e) {
    ADD_FAILURE() << e.what();
  } catch (const Error& e) {
    // Which read the pipe's 100 bytes go to depends on the order the reads in flight run in.
    const std::string what = e.what();
    const std::string who = device_name(GetParam()) + ": load_file " + fifo + ": short read at ";
    EXPECT_EQ(what.substr(0, who.size()), who) << what;
    EXPECT_NE(what.find(" of 4096 bytes (did the file shrink?)"), std::string::npos) << what;
  }
  writer.join();
  // Still usable.
  load_file(*dev_, b, 0, (dir_ / "small").string(), 5, 8000);
  auto got = read(b, 0, 8000);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), file.begin() + 5));
}

INSTANTIATE_TEST_SUITE_P(Targets, FileLoad,
                         ::testing::Values("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201",
                                           "gfx1100_usb", "gfx1100_am", "sm_80", "sm_90", "sm_100", "a660",
                                           "a740", "a660_msm", "a740_msm"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Hardware, FileLoad,
                         ::testing::ValuesIn(testing_support::devices_from_env("HCQ_TEST_DEVICES")),
                         [](const auto& info) { return testing_support::test_name(info.param); });

// The largest size the issue names, once: 256 MiB through 4 MiB slots.
TEST(FileLoadLarge, A256MiBFileArrives) {
  auto dev = Device::open("emu:gfx1100");
  const fs::path path = fs::temp_directory_path() / ("hcq_256m_" + std::to_string(::getpid()));
  const uint64_t size = 256ull << 20;
  std::vector<uint8_t> v(size);
  for (uint64_t i = 0; i < size; i++) v[i] = uint8_t(i * 2654435761u >> 24);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()),
                                              std::streamsize(size));
  Buffer b = dev->allocate(size);
  load_file(*dev, b, 0, path.string(), 0, size);
  fs::remove(path);
  std::vector<uint8_t> got(size);
  dev->copy_out(got.data(), b, 0, size);
  EXPECT_TRUE(got == v);
}

// read_range, the host-memory reader batch loads use: many small reads in flight at an
// unaligned offset, a range past the end, a missing file, and a pipe that delivers its bytes
// in pieces (short reads read on) and then ends early.
TEST(ReadRange, ReadsInPiecesAndSaysWhereTheFileEnds) {
  const fs::path path = fs::temp_directory_path() / ("hcq_range_" + std::to_string(::getpid()));
  std::vector<uint8_t> v(50000);
  for (size_t i = 0; i < v.size(); i++) v[i] = uint8_t(i * 7 + 3);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), 50000);
  std::vector<uint8_t> got(40001);
  read_range(path.string(), 7, got.data(), got.size(), "who", 4096, 3);  // 10 reads, 3 at a time
  EXPECT_TRUE(std::equal(got.begin(), got.end(), v.begin() + 7));
  try {
    read_range(path.string(), 49000, got.data(), 2000, "who", 512, 2);
    FAIL();
  } catch (const OsError& e) {
    FAIL() << e.what();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "who: bytes [49000, 51000) wanted, the file ends at 50000");
  }
  fs::remove(path);
  try {
    read_range(path.string(), 0, got.data(), 10, "who");
    FAIL();
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_EQ(std::string(e.what()).rfind("who: ", 0), 0u) << e.what();
  }
  EXPECT_THROW(read_range(path.string(), 0, got.data(), 10, "who", 0), InvalidInput);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 3; i++) {  // 3 pieces of 1000 bytes, then the writer closes
      out.write(reinterpret_cast<const char*>(v.data()) + i * 1000, 1000);
      out.flush();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::fill(got.begin(), got.end(), 0);
  try {
    read_range(path.string(), 0, got.data(), 5000, "who", 4096, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "who: bytes [0, 5000) wanted, the file ends at 3000");
  }
  writer.join();
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 3000, v.begin()));  // read on after each piece
  fs::remove(path);
}

}  // namespace
}  // namespace hcq::io
