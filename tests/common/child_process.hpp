// Forked children for the multi-process tests: a child runs a function and ends with
// _exit(its result) (99 and a line on stderr when it throws), so no destructor of the parent's
// runs twice; the parent waits for it with a bound, never forever.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include <gtest/gtest.h>

namespace hcq::testing_support {

template <class F>
pid_t spawn(F child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 0;
    try {
      status = child();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      status = 99;
    }
    ::_exit(status);
  }
  return pid;
}

// The child's wait status within `limit`; past it the child is killed and the test fails.
inline int wait_for(pid_t pid, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      ADD_FAILURE() << "child " << pid << " did not end in " << limit.count() << " ms";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return st;
}

}  // namespace hcq::testing_support
