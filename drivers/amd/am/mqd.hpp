// The gfx11 compute MQD's layout (mqd_v11.def) as values: where each described dword sits and
// where an HQD register's image is.
//
// Thread safety: constants and pure functions; call from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "amd/am/regs.hpp"
#include "core/error.hpp"

namespace hcq::amd::am::mqd_v11 {

#define MQD_DWORDS(n) inline constexpr uint32_t kDwords = n;
#define MQD_FIELD(NAME, dword) inline constexpr uint32_t NAME = dword;
#define MQD_HQD_IMAGE(dword, REG)                   \
  inline constexpr uint32_t kHqdImageDword = dword; \
  inline constexpr Reg kHqdImageRegister = gc_11_0_0::REG;
#include "amd/am/mqd_v11.def"
#undef MQD_DWORDS
#undef MQD_FIELD
#undef MQD_HQD_IMAGE

inline constexpr uint64_t kBytes = uint64_t(kDwords) * 4;

// The dword of `hqd_register`'s image. InvalidInput "CP_HQD_FOO is not in the gfx11 MQD's HQD
// image (dwords 128..511)" for a register outside it.
inline uint32_t hqd_dword(const Reg& r) {
  const Reg& first = kHqdImageRegister;
  if (r.ip == first.ip && r.base_idx == first.base_idx && r.offset >= first.offset &&
      r.offset - first.offset < kDwords - kHqdImageDword)
    return kHqdImageDword + (r.offset - first.offset);
  throw InvalidInput(std::string(describe(r).name) + " is not in the gfx11 MQD's HQD image (dwords " +
                     std::to_string(kHqdImageDword) + ".." + std::to_string(kDwords - 1) + ")");
}

}  // namespace hcq::amd::am::mqd_v11
