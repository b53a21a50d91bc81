// A recorded command stream: the dwords a driver's encoder wrote, plus the places (patch
// sites) where a later value can be written without re-encoding. When bound into device
// memory, patches land in the bound copy too, so a resubmission copies nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace hcq {

// How a value is laid into the stream at a patch site.
enum class PatchFormat : uint8_t {
  Lo32,    // low 32 bits into one dword
  Hi32,    // high 32 bits into one dword
  LoHi64,  // two dwords, low first (PM4, SDMA)
  HiLo64,  // two dwords, high first (methods with UPPER before LOWER)
};

// What a patch site holds; a command's sites are patched by role.
enum class PatchRole : uint8_t {
  WaitAddress, WaitValue, SignalAddress, SignalValue, TimestampAddress,
  KernargAddress, GridX, GridY, GridZ, BlockX, BlockY, BlockZ, CopyDst, CopySrc,
};

struct PatchSite {
  uint32_t dword;
  PatchFormat format;
  PatchRole role;
  uint64_t add = 0;  // added to the value before writing (a copy chunk's offset, a hi word)
};

class CommandStream {
 public:
  // Room for n more dwords; the encoder fills them all.
  uint32_t* grow(size_t n) {
    size_t at = words_.size();
    words_.resize(at + n);
    return words_.data() + at;
  }
  void reserve(size_t n) { words_.reserve(n); }
  size_t size() const { return words_.size(); }
  const uint32_t* data() const { return words_.data(); }
  uint32_t* data() { return words_.data(); }
  void clear() { words_.clear(); }

  void patch(const PatchSite& site, uint64_t value) {
    put(site.dword, value + site.add, site.format);
  }
  // Mirror every patch into a device-resident copy of the stream.
  void bind(uint32_t* device_copy) {
    bound_ = device_copy;
    std::memcpy(bound_, words_.data(), words_.size() * 4);
  }
  uint32_t* bound() const { return bound_; }

  void put(uint32_t dword, uint64_t v, PatchFormat f) {
    switch (f) {
      case PatchFormat::Lo32: set(dword, uint32_t(v)); break;
      case PatchFormat::Hi32: set(dword, uint32_t(v >> 32)); break;
      case PatchFormat::LoHi64: set(dword, uint32_t(v)); set(dword + 1, uint32_t(v >> 32)); break;
      case PatchFormat::HiLo64: set(dword, uint32_t(v >> 32)); set(dword + 1, uint32_t(v)); break;
    }
  }

 private:
  void set(uint32_t dword, uint32_t v) {
    words_[dword] = v;
    if (bound_) __atomic_store_n(&bound_[dword], v, __ATOMIC_RELAXED);
  }
  std::vector<uint32_t> words_;
  uint32_t* bound_ = nullptr;
};

}  // namespace hcq
