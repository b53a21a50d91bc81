// A recorded command stream: the dwords a driver's encoder wrote, plus the places (patch
// sites) where a later value can be written without re-encoding. When bound into device
// memory, patches land in the bound copy too, so a resubmission copies nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <memory>

namespace hcq {

// How a value is laid into the stream at a patch site.
enum class PatchFormat : uint8_t {
  Lo32,    // low 32 bits into one dword
  Hi32,    // high 32 bits into one dword
  LoHi64,  // two dwords, low first (PM4, SDMA)
  HiLo64,  // two dwords, high first (methods with UPPER before LOWER)
  Field,   // (value >> shift) into bits [lo, lo+width) of one dword, the other bits kept
           // (descriptor fields that share a dword: NVIDIA QMDs, shifted addresses)
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
  uint8_t shift = 0, lo = 0, width = 0;  // PatchFormat::Field only
};

// A PatchFormat::Field site.
constexpr PatchSite field_site(uint32_t dword, PatchRole role, uint8_t lo, uint8_t width,
                               uint8_t shift = 0) {
  return {dword, PatchFormat::Field, role, 0, shift, lo, width};
}

class CommandStream {
 public:
  CommandStream() = default;
  CommandStream(CommandStream&& o) noexcept { *this = std::move(o); }
  CommandStream& operator=(CommandStream&& o) noexcept {
    owned_ = std::move(o.owned_);
    data_ = o.data_;
    size_ = o.size_;
    cap_ = o.cap_;
    bound_ = o.bound_;
    o.data_ = o.bound_ = nullptr;
    o.size_ = o.cap_ = 0;
    return *this;
  }

  // Room for n more dwords; the encoder fills them all. Not zeroed: encoding a dispatch
  // must cost tens of nanoseconds.
  uint32_t* grow(size_t n) {
    if (size_ + n > cap_) reserve(std::max(cap_ * 2, size_ + n));
    uint32_t* p = data_ + size_;
    size_ += n;
    return p;
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    std::unique_ptr<uint32_t[]> w(new uint32_t[n]);
    if (size_) std::memcpy(w.get(), data_, size_ * 4);
    owned_ = std::move(w);
    data_ = owned_.get();
    cap_ = n;
  }
  // Encode straight into `storage` (capacity `cap` dwords), typically device memory the
  // stream will be bound to; past the capacity the stream moves to host memory.
  void use_storage(uint32_t* storage, size_t cap) {
    if (size_) std::memcpy(storage, data_, size_ * 4);
    owned_.reset();
    data_ = storage;
    cap_ = cap;
  }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  const uint32_t* data() const { return data_; }
  uint32_t* data() { return data_; }
  void clear() { size_ = 0; }

  void patch(const PatchSite& site, uint64_t value) {
    if (site.format == PatchFormat::Field)
      put_field(site, value + site.add);
    else
      put(site.dword, value + site.add, site.format);
  }
  // Mirror every patch into a device-resident copy of the stream (nothing to copy or mirror
  // when the stream was encoded in place there).
  void bind(uint32_t* device_copy) {
    if (device_copy == data_) return;
    bound_ = device_copy;
    if (size_) std::memcpy(bound_, data_, size_ * 4);
  }
  uint32_t* bound() const { return bound_; }

  void put(uint32_t dword, uint64_t v, PatchFormat f) {
    switch (f) {
      case PatchFormat::Lo32: set(dword, uint32_t(v)); break;
      case PatchFormat::Hi32: set(dword, uint32_t(v >> 32)); break;
      case PatchFormat::LoHi64: set(dword, uint32_t(v)); set(dword + 1, uint32_t(v >> 32)); break;
      case PatchFormat::HiLo64: set(dword, uint32_t(v >> 32)); set(dword + 1, uint32_t(v)); break;
      case PatchFormat::Field: break;  // needs the site's bit range: put_field
    }
  }
  void put_field(const PatchSite& s, uint64_t v) {
    const uint32_t mask = s.width >= 32 ? 0xffffffffu : ((1u << s.width) - 1) << s.lo;
    const uint32_t old = data_[s.dword];
    set(s.dword, (old & ~mask) | (uint32_t(v >> s.shift) << s.lo & mask));
  }

 private:
  void set(uint32_t dword, uint32_t v) {
    __atomic_store_n(&data_[dword], v, __ATOMIC_RELAXED);
    if (bound_) __atomic_store_n(&bound_[dword], v, __ATOMIC_RELAXED);
  }
  std::unique_ptr<uint32_t[]> owned_;
  uint32_t* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
  uint32_t* bound_ = nullptr;
};

}  // namespace hcq
