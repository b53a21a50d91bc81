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
  // PatchFormat::Field only, packed so a site stays 16 bytes (launches append many):
  // bits 4:0 the field's low bit, 9:5 its width - 1, 15:10 the right shift of the value.
  uint16_t field = 0;
  uint64_t add = 0;  // added to the value before writing (a copy chunk's offset, a hi word)
  constexpr uint32_t lo() const { return field & 31u; }
  constexpr uint32_t width() const { return ((field >> 5) & 31u) + 1; }
  constexpr uint32_t shift() const { return field >> 10; }
};
static_assert(sizeof(PatchSite) == 16);

// A site whose value gets `add` first (a copy chunk's offset, the second word of a pair).
constexpr PatchSite offset_site(uint32_t dword, PatchFormat format, PatchRole role,
                                uint64_t add) {
  return {dword, format, role, 0, add};
}

// A PatchFormat::Field site: (value >> shift) into bits [lo, lo+width) of `dword`.
constexpr PatchSite field_site(uint32_t dword, PatchRole role, uint8_t lo, uint8_t width,
                               uint8_t shift = 0) {
  return {dword, PatchFormat::Field, role,
          uint16_t((lo & 31u) | ((width - 1u) & 31u) << 5 | (shift & 63u) << 10), 0};
}

// The bytes a site's value occupies in the stream (from its first dword).
constexpr uint32_t site_bytes(const PatchSite& site) {
  return site.format == PatchFormat::LoHi64 || site.format == PatchFormat::HiLo64 ? 8 : 4;
}

// Write `value` (plus the site's `add`) into `words` as `site` says. Relaxed atomic stores:
// a bound copy may be read by the device (never while it runs that copy, but the host may
// patch a recording while another thread reads it for a report).
inline void write_site(uint32_t* words, const PatchSite& site, uint64_t value) {
  const uint64_t v = value + site.add;
  auto set = [&](uint32_t at, uint32_t x) { __atomic_store_n(&words[at], x, __ATOMIC_RELAXED); };
  switch (site.format) {
    case PatchFormat::Lo32: set(site.dword, uint32_t(v)); break;
    case PatchFormat::Hi32: set(site.dword, uint32_t(v >> 32)); break;
    case PatchFormat::LoHi64:
      set(site.dword, uint32_t(v));
      set(site.dword + 1, uint32_t(v >> 32));
      break;
    case PatchFormat::HiLo64:
      set(site.dword, uint32_t(v >> 32));
      set(site.dword + 1, uint32_t(v));
      break;
    case PatchFormat::Field: {
      const uint32_t w = site.width(), lo = site.lo();
      const uint32_t mask = w >= 32 ? 0xffffffffu : ((1u << w) - 1) << lo;
      const uint32_t old = __atomic_load_n(&words[site.dword], __ATOMIC_RELAXED);
      set(site.dword, (old & ~mask) | (uint32_t(v >> site.shift()) << lo & mask));
      break;
    }
  }
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
  // Drop the last dwords (an encoder rewriting what it just wrote); n <= size().
  void truncate(size_t n) { size_ = n < size_ ? n : size_; }

  void patch(const PatchSite& site, uint64_t value) {
    write_site(data_, site, value);
    if (bound_) write_site(bound_, site, value);
  }
  // Mirror every patch into a device-resident copy of the stream (nothing to copy or mirror
  // when the stream was encoded in place there).
  void bind(uint32_t* device_copy) {
    if (device_copy == data_) return;
    bound_ = device_copy;
    if (size_) std::memcpy(bound_, data_, size_ * 4);
  }
  uint32_t* bound() const { return bound_; }

 private:
  std::unique_ptr<uint32_t[]> owned_;
  uint32_t* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
  uint32_t* bound_ = nullptr;
};

}  // namespace hcq
