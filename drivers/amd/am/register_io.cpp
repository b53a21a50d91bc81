#include "amd/am/register_io.hpp"

#include <string>
#include <thread>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace {

// "100 ms" when whole milliseconds, otherwise "1500 us".
std::string duration_text(std::chrono::microseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " ms";
  return std::to_string(d.count()) + " us";
}

}  // namespace

const RegDesc& RegisterIo::describe(const Reg& r) { return am::describe(r); }

RegisterIo::RegisterIo(os::Mmio& mmio, IpSegmentBases bases)
    : mmio_(mmio), bases_(std::move(bases)) {
  bool moved = false;
  for (const auto& t : bases_.tables) moved |= !t.empty();
  if (!moved) return;
  const std::span<const RegDesc> all = registers();
  resolved_.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    try {
      resolved_[i] = int64_t(absolute_dword(all[i], bases_) * 4);
    } catch (const InvalidInput&) {
      resolved_[i] = -1;  // the access says why
    }
  }
}

uint64_t RegisterIo::byte_offset(const RegDesc& r) const {
  const std::span<const RegDesc> all = registers();
  if (!resolved_.empty() && &r >= all.data() && &r < all.data() + all.size()) {
    const int64_t at = resolved_[size_t(&r - all.data())];
    if (at >= 0) return uint64_t(at);
  }
  return absolute_dword(r, bases_) * 4;
}

uint32_t RegisterIo::read(const RegDesc& r) { return mmio_.read32(byte_offset(r)); }

void RegisterIo::write(const RegDesc& r, uint32_t value) { mmio_.write32(byte_offset(r), value); }

template <class Done>
uint32_t RegisterIo::poll(const RegDesc& r, std::chrono::microseconds timeout, Done done,
                          const std::string& waiting_for) {
  const uint64_t offset = byte_offset(r);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int polls = 0;; ++polls) {
    // Read after taking the time, so a value that arrives by the deadline still counts.
    const bool late = std::chrono::steady_clock::now() >= deadline;
    const uint32_t v = mmio_.read32(offset);
    if (done(v)) return v;
    if (late)
      throw TimeoutError(std::string(r.name) + ": waited " + duration_text(timeout) + " for " +
                         waiting_for + ", last read " + hex(v));
    // Spin briefly (a register that answers within microseconds), then back off to 1 us as
    // Linux's __smu_cmn_poll_stat does with udelay(1).
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(1));
  }
}

uint32_t RegisterIo::wait(const RegDesc& r, uint32_t mask, uint32_t value,
                          std::chrono::microseconds timeout) {
  return poll(
      r, timeout, [mask, value](uint32_t v) { return (v & mask) == value; },
      hex(value) + " (mask " + hex(mask) + ")");
}

uint32_t RegisterIo::wait_not(const RegDesc& r, uint32_t mask, uint32_t value,
                              std::chrono::microseconds timeout) {
  return poll(
      r, timeout, [mask, value](uint32_t v) { return (v & mask) != value; },
      "a value other than " + hex(value) + " (mask " + hex(mask) + ")");
}

}  // namespace hcq::amd::am
