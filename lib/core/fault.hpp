// The first GPU fault a device driver reports, kept: every later check throws it again, so a
// device that faulted says so to each caller with the same words. Shared by every driver.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "os/kernel.hpp"

namespace hcq {

class StickyFault {
 public:
  // Records message() the first time (built once, under the lock) and throws what was
  // recorded first.
  template <class Fn>
  [[noreturn]] void raise(Fn&& message) {
    std::lock_guard lk(mu_);
    if (!set_.load(std::memory_order_relaxed)) {
      what_ = message();
      set_.store(true, std::memory_order_release);
    }
    throw GpuFaultError(what_);
  }
  bool set() const { return set_.load(std::memory_order_acquire); }
  // Throws the recorded fault, if any.
  void check() const {
    if (!set()) return;
    std::lock_guard lk(mu_);
    throw GpuFaultError(what_);
  }

 private:
  mutable std::mutex mu_;
  std::string what_;
  std::atomic<bool> set_{false};
};

// "<device>: <what>", then the emulated GPU's own words where the kernel has the emulator's
// debugfs-style `emulator_log` file (a real kernel does not), then the hang report.
inline std::string fault_message(os::Kernel& kernel, const char* emulator_log,
                                 const std::string& device, const std::string& what,
                                 const std::string& report) {
  std::string out = device + ": " + what;
  auto detail = kernel.read_file(emulator_log);
  if (detail) {
    while (!detail->empty() && detail->back() == '\n') detail->pop_back();
    if (!detail->empty()) out += "\nemulated GPU: " + *detail;
  }
  if (!report.empty()) out += "\n" + report;
  return out;
}

}  // namespace hcq
