// The vendor-neutral pieces every packet description builds on: a bit field inside one dword
// (`Bits`), the exact error for a value that does not fit one, and `PacketWriter`, which lays a
// described packet into a command stream and records its patch sites as fields are written.
//
// The *.def files of each vendor say where every field lives; encoders, decoders and emulators
// read and write fields only through these types, never through hand-written shifts.
//
// Threads: everything here is a value type or works on the caller's stream; no shared state.
#pragma once

#include "core/command_stream.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace hcq::desc {

// Encoders write packets through these on every launch: inlined always, so a packet costs its
// stores (GCC -O2 otherwise calls set64 through the PLT of libhcq).
#define HCQ_DESC_INLINE [[gnu::always_inline]] inline

constexpr uint32_t low_mask(uint32_t width) {
  return width >= 32 ? 0xffffffffu : (1u << width) - 1;
}

// Bits [lo, lo + width) of a dword.
struct Bits {
  uint8_t lo;
  uint8_t width;
  constexpr uint32_t mask() const { return low_mask(width); }
  constexpr bool fits(uint64_t v) const { return v <= mask(); }
  // The field's bits for `v`, unchecked: for values already checked where they entered
  // (recording, program load, API input) or constants of the description.
  constexpr uint32_t operator()(uint64_t v) const { return (uint32_t(v) & mask()) << lo; }
  constexpr uint32_t get(uint32_t word) const { return (word >> lo) & mask(); }
  constexpr uint32_t replace(uint32_t word, uint64_t v) const {
    return (word & ~(mask() << lo)) | (*this)(v);
  }
};

// Throws InvalidInput "<what>.<field>: <v> does not fit in <width> bits (at most <max>)".
[[noreturn]] void throw_does_not_fit(std::string_view what, std::string_view field, uint64_t v,
                                     unsigned width);

// `f`'s bits for `v`, or the exact error naming `what` (a packet, register or method) and the
// field when `v` does not fit. F is any description field with `name`, `lo`, `width`.
template <class F>
uint32_t checked(const F& f, uint64_t v, std::string_view what) {
  const Bits b{uint8_t(f.lo), uint8_t(f.width)};
  if (!b.fits(v)) throw_does_not_fit(what, f.name, v, b.width);
  return b(v);
}

// Lays one packet of `dwords` dwords (zeroed) at the end of a stream. Fields are ORed into the
// dword their description names; 64-bit values split over a LO/HI field pair record a patch
// site at the LO dword, as the description places it. F: a field with `dword`, `lo`, `width`.
class PacketWriter {
 public:
  HCQ_DESC_INLINE PacketWriter(CommandStream& cs, uint32_t dwords,
                               std::vector<PatchSite>* sites = nullptr)
      : at_(uint32_t(cs.size())), p_(cs.grow(dwords)), n_(dwords), sites_(sites) {
    for (uint32_t i = 0; i < dwords; ++i) p_[i] = 0;
  }
  // Writing into a caller's buffer (a template being prepared, a ring slot).
  HCQ_DESC_INLINE PacketWriter(uint32_t* words, uint32_t dwords, uint32_t at = 0,
                               std::vector<PatchSite>* sites = nullptr)
      : at_(at), p_(words), n_(dwords), sites_(sites) {
    for (uint32_t i = 0; i < dwords; ++i) p_[i] = 0;
  }

  uint32_t* words() const { return p_; }
  uint32_t size() const { return n_; }
  // The stream offset of the packet's dword 0.
  uint32_t at() const { return at_; }

  template <class F>
  HCQ_DESC_INLINE PacketWriter& set(const F& f, uint64_t v) {
    p_[f.dword] |= Bits{uint8_t(f.lo), uint8_t(f.width)}(v);
    return *this;
  }
  // A 64-bit value over two whole-dword fields; with a role, a patch site for it.
  template <class F>
  HCQ_DESC_INLINE PacketWriter& set64(const F& lo, const F& hi, uint64_t v) {
    p_[lo.dword] = uint32_t(v);
    p_[hi.dword] = uint32_t(v >> 32);
    return *this;
  }
  template <class F>
  HCQ_DESC_INLINE PacketWriter& set64(const F& lo, const F& hi, uint64_t v, PatchRole role,
                                      uint64_t add = 0) {
    set64(lo, hi, v);
    site(lo, hi, role, add);
    return *this;
  }
  // A 32-bit site at field `f`: the low or the high half of the value it is patched with.
  template <class F>
  HCQ_DESC_INLINE PacketWriter& site32(const F& f, PatchFormat half, PatchRole role,
                                       uint64_t add = 0) {
    if (sites_) sites_->push_back(offset_site(at_ + f.dword, half, role, add));
    return *this;
  }

 private:
  template <class F>
  HCQ_DESC_INLINE void site(const F& lo, const F& hi, PatchRole role, uint64_t add) {
    if (!sites_) return;
    // LO then HI in consecutive dwords (PM4, SDMA, CP) or HI then LO (NVIDIA's UPPER/LOWER).
    const bool lo_first = hi.dword == lo.dword + 1u;
    sites_->push_back(offset_site(at_ + (lo_first ? lo.dword : hi.dword),
                                  lo_first ? PatchFormat::LoHi64 : PatchFormat::HiLo64, role,
                                  add));
  }

  uint32_t at_;
  uint32_t* p_;
  uint32_t n_;
  std::vector<PatchSite>* sites_;
};

}  // namespace hcq::desc
