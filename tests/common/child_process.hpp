// Forked children for the multi-process tests: a child runs a function and ends with
// _exit(its result) (99 and a line on stderr when it throws), so no destructor of the parent's
// runs twice; the parent waits for it with a bound, never forever.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

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

// Several children at once, each running a function that returns what went wrong ("" when
// nothing did), which travels back through a pipe; join() waits for all of them at most a
// deadline, then kills the rest (SIGKILL) and says so. Not thread-safe: one test thread forks
// and joins.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (auto& c : kids_)
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);  // killed: it ends at once
      }
  }

  // Forks a child running `f`; returns its pid. An exception thrown by `f` is its failure.
  pid_t spawn(const std::string& name, std::function<std::string()> f) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string err;
      try {
        err = f();
      } catch (const std::exception& e) {
        err = std::string("threw: ") + e.what();
      }
      size_t done = 0;
      while (done < err.size()) {
        ssize_t n = ::write(p[1], err.data() + done, err.size() - done);
        if (n <= 0) ::_exit(3);
        done += size_t(n);
      }
      ::_exit(err.empty() ? 0 : 1);
    }
    ::close(p[1]);
    kids_.push_back({name, pid, p[0]});
    return pid;
  }

  // Waits for every child at most `timeout`; returns "" when all ended with exit 0, else one
  // line per child that failed (its message, how it ended) or was still running (killed).
  // A child the test killed on purpose is expected to end by `expect_signal` (0: none).
  std::string join(std::chrono::milliseconds timeout, pid_t killed = -1, int expect_signal = 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string out;
    for (auto& c : kids_) {
      int st = 0;
      pid_t r = 0;
      while ((r = ::waitpid(c.pid, &st, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (r == 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
        out += c.name + ": still running after " + std::to_string(timeout.count()) +
               " ms (killed)\n";
      } else {
        std::string msg;
        char buf[512];
        ssize_t n;
        while ((n = ::read(c.fd, buf, sizeof(buf))) > 0) msg.append(buf, size_t(n));
        if (c.pid == killed) {
          if (!WIFSIGNALED(st) || WTERMSIG(st) != expect_signal)
            out += c.name + ": did not end by signal " + std::to_string(expect_signal) + "\n";
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
          out += c.name + ": " + (msg.empty() ? "failed" : msg) +
                 (WIFSIGNALED(st) ? " (signal " + std::to_string(WTERMSIG(st)) + ")"
                                  : " (exit " + std::to_string(WEXITSTATUS(st)) + ")") +
                 "\n";
        }
      }
      ::close(c.fd);
      c.pid = -1;
    }
    kids_.clear();
    return out;
  }

 private:
  struct Kid {
    std::string name;
    pid_t pid;
    int fd;
  };
  std::vector<Kid> kids_;
};

}  // namespace hcq::testing_support
