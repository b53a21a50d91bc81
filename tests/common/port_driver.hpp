// A real (emulated) driver seen as a device whose memory the CPU cannot map, as a GPU behind
// a USB bridge is (Capabilities::cpu_maps_memory false): no Allocation it hands out has a host
// pointer, Host allocations come from a window (kWindowBytes; with a window of 0 the device
// reaches no host memory at all), and lib/core reaches memory
// only through write_memory / read_memory, which this implements with memcpy on the wrapped
// driver's mappings and counts. Lets lib/core's port paths run against a real queue and GPU.
// Thread-safe as a DeviceDriver must be.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"

namespace hcq::testing_support {

class PortOnlyDriver final : public DeviceDriver {
 public:
  static constexpr uint64_t kWindowBytes = 0x80000;  // the ASM2464's SRAM window

  // The wrapped device is `name` ("emu:gfx1100"); this one is named `name` + "+port".
  static std::unique_ptr<PortOnlyDriver> open(const std::string& name,
                                              uint64_t window = kWindowBytes) {
    for (auto& f : builtin_drivers())
      if (auto drv = f.open(name)) return std::make_unique<PortOnlyDriver>(std::move(drv), window);
    throw InvalidInput("no device " + name);
  }

  PortOnlyDriver(std::unique_ptr<DeviceDriver> real, uint64_t window)
      : real_(std::move(real)), window_(window) {
    props_ = real_->properties();
    props_.name += "+port";
    props_.caps.cpu_maps_memory = false;
    props_.caps.host_window_bytes = window;
    props_.caps.host_reachable = window > 0;
    props_.caps.map_host = false;
    props_.caps.uma = false;
  }

  struct Counts {
    uint64_t writes = 0, write_bytes = 0, reads = 0, read_bytes = 0;
  };
  Counts counts() const {
    std::lock_guard lk(mu_);
    return counts_;
  }
  uint64_t host_bytes() const {
    std::lock_guard lk(mu_);
    return host_bytes_;
  }

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return real_->va_base(); }
  uint64_t va_size() const override { return real_->va_size(); }

  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override {
    std::lock_guard lk(mu_);
    if (kind == MemoryKind::Host && size > window_ - host_bytes_)
      throw Error(props_.name + ": out of host window: " + std::to_string(size) +
                  " bytes asked, " + std::to_string(window_ - host_bytes_) + " free");
    Allocation a = real_->allocate(va, size, kind, executable);
    if (!a.host) {
      real_->free(a);
      throw Error(props_.name + ": the wrapped device did not map " + hex(va));
    }
    real_allocs_[a.va] = a;
    if (kind == MemoryKind::Host) host_bytes_ += a.size;
    a.host = nullptr;
    return a;
  }
  void free(const Allocation& a) override {
    Allocation real;
    {
      std::lock_guard lk(mu_);
      auto it = real_allocs_.find(a.va);
      if (it == real_allocs_.end()) throw InvalidInput(props_.name + ": free of " + hex(a.va));
      real = it->second;
      real_allocs_.erase(it);
      if (real.kind == MemoryKind::Host) host_bytes_ -= real.size;
    }
    real_->free(real);
  }
  Allocation map_user(void*, uint64_t) override {
    throw InvalidInput(props_.name + ": cannot map host memory");
  }

  void write_memory(uint64_t va, std::span<const std::byte> data) override {
    std::lock_guard lk(mu_);
    std::memcpy(locate(va, data.size(), "write"), data.data(), data.size());
    counts_.writes++;
    counts_.write_bytes += data.size();
  }
  void read_memory(uint64_t va, std::span<std::byte> out) override {
    std::lock_guard lk(mu_);
    std::memcpy(out.data(), locate(va, out.size(), "read"), out.size());
    counts_.reads++;
    counts_.read_bytes += out.size();
  }

  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override {
    return real_->create_queue(kind);
  }
  std::unique_ptr<Encoder> encoder(QueueKind kind) override { return real_->encoder(kind); }
  void submit_indirect(std::span<const IndirectRun> runs) override {
    real_->submit_indirect(runs);
  }
  ProgramLayout program_layout(std::span<const std::byte> image) override {
    return real_->program_layout(image);
  }
  void wait_interrupt(std::chrono::milliseconds timeout) override {
    if (!waits_end_only_on_wake) return real_->wait_interrupt(timeout);
    std::unique_lock lk(wake_mu_);
    ++waits;
    wake_cv_.wait_for(lk, std::chrono::seconds(30), [&] { return woken_; });
    woken_ = false;  // one wake ends one wait, as KFD's auto-reset signal event does
  }
  void check_faults() override { real_->check_faults(); }
  bool can_wake_waiters() const override {
    return waits_end_only_on_wake || real_->can_wake_waiters();
  }
  void wake_waiters() override {
    ++wakes;
    if (!waits_end_only_on_wake) return real_->wake_waiters();
    std::lock_guard lk(wake_mu_);
    woken_ = true;
    wake_cv_.notify_all();
  }
  std::string hang_report() override {
    if (on_hang_report) on_hang_report();
    return real_->hang_report();
  }
  // Called as a hang report is put together (set before any wait uses the device): lets a test
  // end the awaited work just then, as a GPU may while a slow report decodes its packets.
  std::function<void()> on_hang_report;
  // Set before any wait: wait_interrupt then ends only at wake_waiters() (or after 30 s),
  // whatever its timeout, as if no interrupt ever came: a wait that misses a host set() shows.
  bool waits_end_only_on_wake = false;
  std::atomic<uint64_t> waits{0}, wakes{0};

 private:
  // The CPU address of [va, va + size), inside one allocation; InvalidInput otherwise.
  std::byte* locate(uint64_t va, uint64_t size, const char* what) const {
    auto it = real_allocs_.upper_bound(va);
    if (it != real_allocs_.begin()) {
      const Allocation& a = std::prev(it)->second;
      if (va - a.va < a.size && size <= a.size - (va - a.va))
        return static_cast<std::byte*>(a.host) + (va - a.va);
    }
    throw InvalidInput(props_.name + ": " + what + " of " + std::to_string(size) + " bytes at " +
                       hex(va) + " is not inside one allocation");
  }

  std::unique_ptr<DeviceDriver> real_;
  const uint64_t window_;
  DeviceProperties props_;
  mutable std::mutex mu_;
  std::map<uint64_t, Allocation> real_allocs_;  // by address, with the real host pointers
  uint64_t host_bytes_ = 0;
  Counts counts_;
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
};

}  // namespace hcq::testing_support
