// NVIDIA push buffers, GPFIFO entries and QMDs: the descriptions in classes.def and qmd.def
// as constants for encoders, and decoders for the dump tool and hang reports.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/decoded.hpp"

namespace hcq::nv {

// Generations whose class layouts differ (a field's `gens` is a mask of these).
enum class Gen : uint8_t { Ampere = 1, Ada = 2, Hopper = 4, Blackwell = 8 };
inline constexpr uint8_t AMPERE = 1, ADA = 2, HOPPER = 4, BLACKWELL = 8, AMPERE_ADA = 3,
                         HOPPER_BLACKWELL = 12, ALL = 15;

enum class Group : uint8_t { HOST, COMPUTE, COPY };
const char* to_string(Group g);

// A bit field of a method's data dword.
struct MethodField {
  const char* name;
  uint8_t gens;
  uint8_t lo, width;
  constexpr uint32_t mask() const { return width == 32 ? 0xffffffffu : ((1u << width) - 1); }
  constexpr uint32_t operator()(uint64_t v) const { return (uint32_t(v) & mask()) << lo; }
  constexpr uint32_t get(uint32_t word) const { return (word >> lo) & mask(); }
};

struct MethodInfo {
  const char* name;
  Group group;
  uint16_t offset;  // byte offset in the class
  std::span<const MethodField> fields;
};

// Method offsets (nv::COMPUTE_SEND_PCAS_A) and fields (nv::HOST_SEM_EXECUTE_OPERATION_ALL).
#define NV_METHOD(g, m, off) inline constexpr uint16_t g##_##m = off;
#define NV_FIELD(g, m, f, gens, lo, w) \
  inline constexpr MethodField g##_##m##_##f##_##gens{#f, gens, lo, w};
#include "nv/classes.def"
#undef NV_METHOD
#undef NV_FIELD

const MethodInfo* find_method(Group g, uint16_t offset);

// Method headers (open-gpu-doc clc56f.h "dma method formats"): sec_op 31:29, count 28:16,
// subchannel 15:13, method dword address 11:0.
enum class SecOp : uint8_t { IncMethod = 1, NonIncMethod = 3, ImmdDataMethod = 4, OneInc = 5,
                             EndPbSegment = 7 };
constexpr uint32_t method_header(SecOp op, uint32_t subchannel, uint16_t method, uint32_t count) {
  return uint32_t(op) << 29 | (count & 0x1fff) << 16 | (subchannel & 7) << 13 | (method >> 2);
}
// Incrementing methods starting at `method`, `count` data dwords follow.
constexpr uint32_t inc(uint32_t subchannel, uint16_t method, uint32_t count) {
  return method_header(SecOp::IncMethod, subchannel, method, count);
}
// `count` data dwords all to `method` (a data port such as LOAD_INLINE_DATA).
constexpr uint32_t non_inc(uint32_t subchannel, uint16_t method, uint32_t count) {
  return method_header(SecOp::NonIncMethod, subchannel, method, count);
}

// A method header taken apart; `count` is the immediate value for ImmdDataMethod.
struct MethodHeader {
  uint32_t op, subchannel, count;
  uint16_t method;  // byte offset of the first method
  // The method the i-th data dword goes to.
  constexpr uint16_t method_of(uint32_t i) const {
    return op == uint32_t(SecOp::IncMethod)    ? uint16_t(method + 4 * i)
           : op == uint32_t(SecOp::OneInc)     ? uint16_t(method + (i ? 4 : 0))
                                               : method;
  }
  constexpr bool has_data() const {
    return op == uint32_t(SecOp::IncMethod) || op == uint32_t(SecOp::NonIncMethod) ||
           op == uint32_t(SecOp::OneInc);
  }
};
constexpr MethodHeader parse_method_header(uint32_t h) {
  return {h >> 29, (h >> 13) & 7, (h >> 16) & 0x1fff, uint16_t((h & 0xfff) << 2)};
}

// A GPFIFO entry (clc56f.h "GPFIFO entry format"): a push buffer segment to fetch.
struct GpfifoEntry {
  uint64_t address = 0;  // 4-byte aligned, 40 bits
  uint32_t dwords = 0;   // 21 bits
  bool subroutine = false;
  bool sync = false;
};
uint64_t encode_gpfifo(const GpfifoEntry& e);
GpfifoEntry decode_gpfifo(uint64_t entry);

// Which class each subchannel is bound to (hcq's layout: 0 host, 1 compute, 4 copy).
using SubchannelMap = std::array<Group, 8>;
inline constexpr SubchannelMap kDefaultSubchannels = {Group::HOST, Group::COMPUTE, Group::HOST,
                                                      Group::HOST, Group::COPY, Group::HOST,
                                                      Group::HOST, Group::HOST};

// One packet per method header; its data dwords named by method in `registers`, described
// fields as "METHOD.FIELD". Unknown methods keep their byte offset as the name.
std::vector<DecodedPacket> decode_push(std::span<const uint32_t> words, Gen gen,
                                       const SubchannelMap& subchannels = kDefaultSubchannels);

// QMD layouts.
enum class QmdVersion : uint8_t { V03 = 3, V04 = 4, V05 = 5 };
struct QmdField {
  const char* name;
  QmdVersion version;
  uint16_t hi, lo;  // absolute bit positions; always within one dword
  constexpr uint32_t dword() const { return lo / 32; }
  constexpr uint32_t width() const { return hi - lo + 1; }
  constexpr uint32_t mask() const { return width() == 32 ? 0xffffffffu : ((1u << width()) - 1); }
  void put(uint32_t* qmd, uint64_t v) const {
    qmd[dword()] = (qmd[dword()] & ~(mask() << (lo % 32))) | ((uint32_t(v) & mask()) << (lo % 32));
  }
  uint32_t get(const uint32_t* qmd) const { return (qmd[dword()] >> (lo % 32)) & mask(); }
};
#define QMD_FIELD(v, f, hi, lo) inline constexpr QmdField QMD_##v##_##f{#f, QmdVersion::v, hi, lo};
#include "nv/qmd.def"
#undef QMD_FIELD

constexpr uint32_t qmd_bytes(QmdVersion v) { return v == QmdVersion::V03 ? 256 : 384; }
// Every described field of a QMD (`words` at least qmd_bytes / 4), as one packet.
DecodedPacket decode_qmd(std::span<const uint32_t> words, QmdVersion v);

// "ampere" / "ada" / "hopper" / "blackwell", or an sm_XX target; false when unknown.
bool parse_gen(const std::string& name, Gen& gen);

}  // namespace hcq::nv
