// VRAM held in host memory as the page-table builder (am::PageTables) writes it: the tests'
// stand-in for the driver's BAR0 access. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "amd/am/page_tables.hpp"

namespace hcq::testing_support {

class SpanVram final : public amd::am::VramAccess {
 public:
  explicit SpanVram(std::span<uint8_t> v) : v_(v) {}
  uint64_t read64(uint64_t pa) override {
    uint64_t x;
    std::memcpy(&x, v_.data() + pa, 8);
    return x;
  }
  void write64(uint64_t pa, uint64_t value) override { std::memcpy(v_.data() + pa, &value, 8); }

 private:
  std::span<uint8_t> v_;
};

}  // namespace hcq::testing_support
