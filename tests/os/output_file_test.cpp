// OutputFile: no symlink followed, no foreign file truncated, every write and the close checked.
#include "os/output_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace fs = std::filesystem;
using hcq::os::OutputFile;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/hcq_output_file_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(OutputFile, CreatesTruncatesAndWritesOwnFile) {
  TempDir d;
  auto p = d.path / "out.bin";
  std::ofstream(p) << "old contents that are longer";
  auto f = OutputFile::create(p.string());
  f.write("new");
  f.close();
  EXPECT_EQ(slurp(p), "new");
  EXPECT_EQ(f.bytes_written(), 3u);
}

TEST(OutputFile, RefusesASymlinkAndLeavesItsTargetAlone) {
  TempDir d;
  auto target = d.path / "precious";
  std::ofstream(target) << "keep me";
  fs::create_symlink(target, d.path / "link");
  try {
    OutputFile::create((d.path / "link").string());
    FAIL() << "a symlink was followed";
  } catch (const hcq::OsError& e) {
    EXPECT_EQ(e.err(), ELOOP);
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(target), "keep me");
}

// Captures, traces and buffer dumps hold memory contents (issue 33): made 0600 whatever the
// umask allows, and an existing file they overwrite loses the bits the rules lack.
TEST(OutputFile, MakesAndNarrowsTheModeTheRulesGive) {
  TempDir d;
  const mode_t mask = ::umask(0);
  auto p = d.path / "capture.hcqcap";
  OutputFile::create(p.string(), {.mode = 0600}).close();
  EXPECT_EQ(fs::status(p).permissions(), fs::perms(0600));
  auto old = d.path / "old.hcqcap";
  std::ofstream(old) << "old";
  fs::permissions(old, fs::perms(0644));
  OutputFile::create(old.string(), {.mode = 0600}).close();
  EXPECT_EQ(fs::status(old).permissions(), fs::perms(0600));
  auto plain = d.path / "plain.txt";
  OutputFile::create(plain.string()).close();
  EXPECT_EQ(fs::status(plain).permissions(), fs::perms(0644));
  ::umask(mask);
}

// An output that is one of the command's inputs, by its name or another link, is refused
// before it is truncated (issue 33: hcq dump --buffer A --output CAP CAP emptied CAP).
TEST(OutputFile, RefusesAnInputOfTheCommandAndLeavesItWhole) {
  TempDir d;
  auto in = d.path / "in.hcqcap";
  std::ofstream(in) << "recorded";
  fs::create_hard_link(in, d.path / "alias");
  for (const fs::path& out : {in, d.path / "alias"}) {
    try {
      OutputFile::create(out.string(), {.inputs = {"/nonexistent/other", in.string()}});
      FAIL() << out << " was opened";
    } catch (const hcq::InvalidInput& e) {
      EXPECT_EQ(std::string(e.what()), out.string() + ": is the input " + in.string() +
                                           " (the command reads it; choose another output)");
    }
  }
  EXPECT_EQ(slurp(in), "recorded");
  auto other = d.path / "other.bin";
  auto f = OutputFile::create(other.string(), {.inputs = {in.string()}});
  f.write("x");
  f.close();
  EXPECT_EQ(slurp(other), "x");
}

TEST(OutputFile, RefusesAFileWithSeveralLinks) {
  TempDir d;
  auto target = d.path / "precious";
  std::ofstream(target) << "keep me";
  fs::create_hard_link(target, d.path / "hard");
  EXPECT_THROW(OutputFile::create((d.path / "hard").string()), hcq::OsError);
  EXPECT_EQ(slurp(target), "keep me");
}

TEST(OutputFile, RefusesAnotherUsersFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  TempDir d;
  auto target = d.path / "theirs";
  std::ofstream(target) << "keep me";
  ASSERT_EQ(::chown(target.c_str(), 65534, 65534), 0);
  try {
    OutputFile::create(target.string());
    FAIL() << "another user's file was truncated";
  } catch (const hcq::OsError& e) {
    EXPECT_NE(std::string(e.what()).find("owned by uid 65534"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(target), "keep me");
}

TEST(OutputFile, RefusesADirectoryAndAMissingDirectory) {
  TempDir d;
  EXPECT_THROW(OutputFile::create(d.path.string()), hcq::OsError);
  EXPECT_THROW(OutputFile::create((d.path / "missing" / "x").string()), hcq::OsError);
  EXPECT_THROW(OutputFile::create(""), hcq::InvalidInput);
}

TEST(OutputFile, AFullDeviceIsAnErrorNamingThePath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  auto f = OutputFile::create("/dev/full");
  try {
    f.write("x");
    FAIL() << "a write to /dev/full succeeded";
  } catch (const hcq::OsError& e) {
    EXPECT_EQ(e.err(), ENOSPC);
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
}

TEST(OutputFile, WriteAfterCloseIsAnError) {
  TempDir d;
  auto f = OutputFile::create((d.path / "x").string());
  f.close();
  EXPECT_THROW(f.write("x"), hcq::Error);
}

}  // namespace
