#pragma once
// A full disk as a test makes one: the process's file-size limit (RLIMIT_FSIZE) lowered to
// `bytes`, writes past it failing with EFBIG instead of raising SIGXFSZ; both restored when
// the guard goes. Process-wide: tests that use it run on one thread at a time.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdint>

namespace hcq::testing_support {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    ok_ = ::getrlimit(RLIMIT_FSIZE, &old_) == 0;
    EXPECT_TRUE(ok_) << "getrlimit(RLIMIT_FSIZE)";
    if (!ok_) return;
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old_;
    small.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0) << "setrlimit(RLIMIT_FSIZE)";
  }
  ~FileSizeLimit() { lift(); }
  // Back to the limits before (also done by the destructor).
  void lift() {
    if (!ok_) return;
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
    ok_ = false;
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = SIG_DFL;
  bool ok_ = false;
};

}  // namespace hcq::testing_support
