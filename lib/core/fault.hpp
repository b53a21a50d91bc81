// The first GPU fault a device driver reports, kept: the device cannot be used after it. The
// calls under way when it came hear of it as it is; every call after says that the device is
// unusable since that fault, and how to go on. Shared by every driver.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "os/kernel.hpp"

namespace hcq {

// Thread safety: every member may be called from several threads at once.
class StickyFault {
 public:
  // Records message() the first time (built once, under the lock) and throws it; after that,
  // what check() throws.
  template <class Fn>
  [[noreturn]] void raise(Fn&& message) {
    std::lock_guard lk(mu_);
    if (set_.load(std::memory_order_relaxed)) throw GpuFaultError(earlier(what_));
    what_ = message();
    set_.store(true, std::memory_order_release);
    throw GpuFaultError(what_);
  }
  bool set() const { return set_.load(std::memory_order_acquire); }
  // For a call that begins: throws, if a fault was recorded, that the device is unusable since
  // it ("unusable since an earlier GPU fault; close the device and open it again to go on. The
  // fault:\n" and its text).
  void check() const {
    if (!set()) return;
    std::lock_guard lk(mu_);
    throw GpuFaultError(earlier(what_));
  }
  // For a wait under way since before the fault came: throws the recorded fault as it is.
  void check_in_flight() const {
    if (!set()) return;
    std::lock_guard lk(mu_);
    throw GpuFaultError(what_);
  }
  // What check() says of fault text `what`.
  static std::string earlier(const std::string& what) {
    return "unusable since an earlier GPU fault; close the device and open it again to go on. "
           "The fault:\n" +
           what;
  }

 private:
  mutable std::mutex mu_;
  std::string what_;
  std::atomic<bool> set_{false};
};

// "<device>: <what>", then the emulated GPU's own words where the kernel is an emulated one
// (os::EmulatorReport::FaultLog; a real kernel has none), then the hang report.
inline std::string fault_message(os::Kernel& kernel, const std::string& device,
                                 const std::string& what, const std::string& report) {
  std::string out = device + ": " + what;
  auto detail = kernel.emulator_report(os::EmulatorReport::FaultLog);
  if (detail) {
    while (!detail->empty() && detail->back() == '\n') detail->pop_back();
    if (!detail->empty()) out += "\nemulated GPU: " + *detail;
  }
  if (!report.empty()) out += "\n" + report;
  return out;
}

}  // namespace hcq
