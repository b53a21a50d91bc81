// NVIDIA push buffers, GPFIFO entries and QMDs: the descriptions in classes.def and qmd.def
// as constants for encoders, and decoders for the dump tool and hang reports.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bitfield.hpp"
#include "core/command_stream.hpp"
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
  uint16_t method;  // the method's byte offset in its class
  uint8_t lo, width;
  constexpr desc::Bits bits() const { return {lo, width}; }
  constexpr uint32_t mask() const { return bits().mask(); }
  constexpr uint32_t operator()(uint64_t v) const { return bits()(v); }
  constexpr uint32_t get(uint32_t word) const { return bits().get(word); }
};

struct MethodInfo {
  const char* name;
  Group group;
  uint16_t offset;  // byte offset in the class
  std::span<const MethodField> fields;
};

// Method offsets (nv::COMPUTE_SEND_PCAS_A), fields (nv::HOST_SEM_EXECUTE_OPERATION_ALL) and
// named values (nv::HOST_SEM_EXECUTE_OPERATION_RELEASE).
#define NV_METHOD(g, m, off) inline constexpr uint16_t g##_##m = off;
#define NV_FIELD(g, m, f, gens, lo, w) \
  inline constexpr MethodField g##_##m##_##f##_##gens{#f, gens, g##_##m, lo, w};
#define NV_VALUE(g, m, f, value, name) inline constexpr uint32_t g##_##m##_##f##_##name = value;
#include "nv/classes.def"
#undef NV_METHOD
#undef NV_FIELD
#undef NV_VALUE

const MethodInfo* find_method(Group g, uint16_t offset);

// A field of one of the push buffer's own words: a method header or a GPFIFO entry dword
// (push_format.def). `dword` is the field's dword in a GPFIFO entry (0 for a header).
struct WordField {
  const char* name;
  uint8_t dword, lo, width;
  constexpr desc::Bits bits() const { return {lo, width}; }
};
#define NV_HEADER_FIELD(f, lo, w) inline constexpr WordField HEADER_##f{#f, 0, lo, w};
#define NV_GPFIFO_FIELD(f, dw, lo, w) inline constexpr WordField GP_ENTRY_##f{#f, dw, lo, w};
#define NV_SEC_OP(name, cxx, v)
#include "nv/push_format.def"
#undef NV_HEADER_FIELD
#undef NV_GPFIFO_FIELD
#undef NV_SEC_OP

// Method headers: SEC_OP says how the data dwords that follow go to methods.
enum class SecOp : uint8_t {
#define NV_HEADER_FIELD(...)
#define NV_GPFIFO_FIELD(...)
#define NV_SEC_OP(name, cxx, v) cxx = v,
#include "nv/push_format.def"
#undef NV_HEADER_FIELD
#undef NV_GPFIFO_FIELD
#undef NV_SEC_OP
};
constexpr uint32_t method_header(SecOp op, uint32_t subchannel, uint16_t method, uint32_t count) {
  return HEADER_SEC_OP.bits()(uint32_t(op)) | HEADER_METHOD_COUNT.bits()(count) |
         HEADER_METHOD_SUBCHANNEL.bits()(subchannel) | HEADER_METHOD_ADDRESS.bits()(method / 4u);
}
// Incrementing methods starting at `method`, `count` data dwords follow.
constexpr uint32_t inc(uint32_t subchannel, uint16_t method, uint32_t count) {
  return method_header(SecOp::IncMethod, subchannel, method, count);
}
// `count` data dwords all to `method` (a data port such as LOAD_INLINE_DATA).
constexpr uint32_t non_inc(uint32_t subchannel, uint16_t method, uint32_t count) {
  return method_header(SecOp::NonIncMethod, subchannel, method, count);
}

// How a header frames the words after it. The one framing rule of the push format: the
// decoder (decode_push, and through it the hang report) and the emulated GPU's front end
// both step through a segment with it.
enum class Framing : uint8_t {
  Nop,         // a zero word: nothing follows
  Immediate,   // one method whose data is the header's count field; nothing follows
  Methods,     // `count` data dwords follow (incrementing, non-incrementing, one-incrementing)
  EndSegment,  // END_PB_SEGMENT: the segment ends here
  Invalid,     // a SEC_OP hcq does not emit (the TERT_OP groups, RESERVED6)
};

// A method header taken apart; `count` is the immediate value for ImmdDataMethod.
struct MethodHeader {
  uint32_t op, subchannel, count;
  uint16_t method;  // byte offset of the first method
  Framing framing;
  // The method the i-th data dword goes to.
  constexpr uint16_t method_of(uint32_t i) const {
    return op == uint32_t(SecOp::IncMethod)    ? uint16_t(method + 4 * i)
           : op == uint32_t(SecOp::OneInc)     ? uint16_t(method + (i ? 4 : 0))
                                               : method;
  }
  constexpr bool has_data() const { return framing == Framing::Methods; }
  // The packet's dwords, header included: where the next header starts.
  constexpr uint32_t dwords() const { return has_data() ? 1 + count : 1; }
};
constexpr MethodHeader parse_method_header(uint32_t h) {
  const uint32_t op = HEADER_SEC_OP.bits().get(h);
  const Framing f = h == 0 ? Framing::Nop
                    : op == uint32_t(SecOp::ImmdDataMethod) ? Framing::Immediate
                    : op == uint32_t(SecOp::IncMethod) || op == uint32_t(SecOp::NonIncMethod) ||
                            op == uint32_t(SecOp::OneInc)
                        ? Framing::Methods
                    : op == uint32_t(SecOp::EndPbSegment) ? Framing::EndSegment
                                                          : Framing::Invalid;
  return {op, HEADER_METHOD_SUBCHANNEL.bits().get(h), HEADER_METHOD_COUNT.bits().get(h),
          uint16_t(HEADER_METHOD_ADDRESS.bits().get(h) * 4u), f};
}

// The data dword (from the run's header) of `method` in an incrementing run from `first`.
constexpr uint32_t run_data_dword(uint16_t first, uint16_t method) {
  return 1u + uint32_t(method - first) / 4u;
}

// An incrementing method run written through the descriptions: the header, then one data
// dword per method from `first`. Methods and their fields are set by name; a 64-bit value
// over a LO/HI or UPPER/LOWER method pair records its patch site where the run puts it.
class MethodRun {
 public:
  HCQ_DESC_INLINE MethodRun(CommandStream& cs, uint32_t subchannel, uint16_t first, uint32_t count,
            std::vector<PatchSite>* sites = nullptr)
      : first_(first), w_(cs, 1 + count, sites) {
    w_.words()[0] = inc(subchannel, first, count);
  }
  // The whole data dword of `method`.
  HCQ_DESC_INLINE MethodRun& set(uint16_t method, uint32_t v) {
    w_.set(slot(method), v);
    return *this;
  }
  // A described field of one of the run's methods.
  HCQ_DESC_INLINE MethodRun& set(const MethodField& f, uint64_t v) {
    w_.set(Slot{f.name, data_dword(f.method), f.lo, f.width}, v);
    return *this;
  }
  HCQ_DESC_INLINE MethodRun& set64(uint16_t lo_method, uint16_t hi_method, uint64_t v) {
    w_.set64(slot(lo_method), slot(hi_method), v);
    return *this;
  }
  HCQ_DESC_INLINE MethodRun& set64(uint16_t lo_method, uint16_t hi_method, uint64_t v, PatchRole role,
                   uint64_t add = 0) {
    w_.set64(slot(lo_method), slot(hi_method), v, role, add);
    return *this;
  }
  // The stream offset of `method`'s data dword.
  uint32_t at(uint16_t method) const { return w_.at() + data_dword(method); }

 private:
  struct Slot {
    const char* name;
    uint32_t dword;
    uint8_t lo, width;
  };
  constexpr uint32_t data_dword(uint16_t method) const { return run_data_dword(first_, method); }
  constexpr Slot slot(uint16_t method) const { return {"", data_dword(method), 0, 32}; }
  uint16_t first_;
  desc::PacketWriter w_;
};

// A GPFIFO entry (clc56f.h "GPFIFO entry format"): a push buffer segment to fetch.
struct GpfifoEntry {
  uint64_t address = 0;  // 4-byte aligned, 40 bits
  uint32_t dwords = 0;   // 21 bits (GP_ENTRY_LENGTH): check_gpfifo_length where it enters
  bool subroutine = false;
  bool sync = false;
};
uint64_t encode_gpfifo(const GpfifoEntry& e);
GpfifoEntry decode_gpfifo(uint64_t entry);
// `dwords` as a GPFIFO entry's LENGTH, or the exact error: "<what>.LENGTH: <n> does not fit
// in 21 bits (at most 2097151)".
void check_gpfifo_length(uint64_t dwords, std::string_view what);

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
  uint8_t dword;      // the QMD dword it lives in (a field never crosses one)
  uint8_t lo, width;  // its bits in that dword
  constexpr desc::Bits bits() const { return {lo, width}; }
  constexpr uint32_t mask() const { return bits().mask(); }
  void put(uint32_t* qmd, uint64_t v) const { qmd[dword] = bits().replace(qmd[dword], v); }
  uint32_t get(const uint32_t* qmd) const { return bits().get(qmd[dword]); }
};
// qmd.def gives absolute bit positions hi:lo, as NVIDIA's QMD headers do.
#define QMD_FIELD(v, f, hi, lo) \
  inline constexpr QmdField QMD_##v##_##f{#f, QmdVersion::v, (lo) / 32, (lo) % 32, (hi) - (lo) + 1};
#define QMD_VALUE(v, f, value, name) inline constexpr uint32_t QMD_##v##_##f##_##name = value;
#include "nv/qmd.def"
#undef QMD_FIELD
#undef QMD_VALUE

constexpr uint32_t qmd_bytes(QmdVersion v) { return v == QmdVersion::V03 ? 256 : 384; }
// The fields a launch varies and the emulated GPU reads, per version: the one place that
// says which of qmd.def's fields hold the grid, the CTA, the program and constant bank 0.
struct QmdLayout {
  const QmdField* grid[3];
  const QmdField* block[3];
  const QmdField* program_lo;
  const QmdField* program_hi;
  uint8_t program_shift;  // the program address is stored >> this
  const QmdField* cbuf_lo;
  const QmdField* cbuf_hi;
  uint8_t cbuf_shift;     // the constant buffer address is stored >> this
  const QmdField* cbuf_size_shifted4;
  const QmdField* cbuf_valid;
  const QmdField* major_version;
  const QmdField* register_count;
  const QmdField* barrier_count;
  // The dependent QMD a completed launch schedules (V03 only; null for V04, V05).
  const QmdField* dependent_pointer;
  const QmdField* dependent_enable;
  const QmdField* dependent_action;
  const QmdField* dependent_prefetch;
};
constexpr QmdLayout qmd_layout(QmdVersion v) {
  if (v == QmdVersion::V03)
    return {{&QMD_V03_CTA_RASTER_WIDTH, &QMD_V03_CTA_RASTER_HEIGHT, &QMD_V03_CTA_RASTER_DEPTH},
            {&QMD_V03_CTA_THREAD_DIMENSION0, &QMD_V03_CTA_THREAD_DIMENSION1,
             &QMD_V03_CTA_THREAD_DIMENSION2},
            &QMD_V03_PROGRAM_ADDRESS_LOWER, &QMD_V03_PROGRAM_ADDRESS_UPPER, 0,
            &QMD_V03_CONSTANT_BUFFER_ADDR_LOWER0, &QMD_V03_CONSTANT_BUFFER_ADDR_UPPER0, 0,
            &QMD_V03_CONSTANT_BUFFER_SIZE_SHIFTED4_0, &QMD_V03_CONSTANT_BUFFER_VALID0,
            &QMD_V03_QMD_MAJOR_VERSION, &QMD_V03_REGISTER_COUNT_V, &QMD_V03_BARRIER_COUNT,
            &QMD_V03_DEPENDENT_QMD0_POINTER, &QMD_V03_DEPENDENT_QMD0_ENABLE,
            &QMD_V03_DEPENDENT_QMD0_ACTION, &QMD_V03_DEPENDENT_QMD0_PREFETCH};
  if (v == QmdVersion::V04)
    return {{&QMD_V04_GRID_WIDTH, &QMD_V04_GRID_HEIGHT, &QMD_V04_GRID_DEPTH},
            {&QMD_V04_CTA_THREAD_DIMENSION0, &QMD_V04_CTA_THREAD_DIMENSION1,
             &QMD_V04_CTA_THREAD_DIMENSION2},
            &QMD_V04_PROGRAM_ADDRESS_LOWER, &QMD_V04_PROGRAM_ADDRESS_UPPER, 0,
            &QMD_V04_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0,
            &QMD_V04_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0, 6,
            &QMD_V04_CONSTANT_BUFFER_SIZE_SHIFTED4_0, &QMD_V04_CONSTANT_BUFFER_VALID0,
            &QMD_V04_QMD_MAJOR_VERSION, &QMD_V04_REGISTER_COUNT, &QMD_V04_BARRIER_COUNT,
            nullptr, nullptr, nullptr, nullptr};
  return {{&QMD_V05_GRID_WIDTH, &QMD_V05_GRID_HEIGHT, &QMD_V05_GRID_DEPTH},
          {&QMD_V05_CTA_THREAD_DIMENSION0, &QMD_V05_CTA_THREAD_DIMENSION1,
           &QMD_V05_CTA_THREAD_DIMENSION2},
          &QMD_V05_PROGRAM_ADDRESS_LOWER_SHIFTED4, &QMD_V05_PROGRAM_ADDRESS_UPPER_SHIFTED4, 4,
          &QMD_V05_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0,
          &QMD_V05_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0, 6,
          &QMD_V05_CONSTANT_BUFFER_SIZE_SHIFTED4_0, &QMD_V05_CONSTANT_BUFFER_VALID0,
          &QMD_V05_QMD_MAJOR_VERSION, &QMD_V05_REGISTER_COUNT, &QMD_V05_BARRIER_COUNT,
          nullptr, nullptr, nullptr, nullptr};
}
// SEND_PCAS_A and DEPENDENT_QMD0_POINTER take a QMD's address >> 8 (clc6c0.h, clc9c0qmd.h):
// a QMD is 256-byte aligned.
inline constexpr uint8_t kQmdAddressShift = 8;
// CONSTANT_BUFFER_SIZE_SHIFTED4: the size in 16-byte units.
inline constexpr uint8_t kCbufSizeShift = 4;
// A 64-bit address over a LOWER/UPPER field pair stored >> `shift`.
inline uint64_t get_address(const uint32_t* qmd, const QmdField& lo, const QmdField& hi,
                            uint8_t shift) {
  return (uint64_t(hi.get(qmd)) << 32 | lo.get(qmd)) << shift;
}

// Every described field of a QMD (`words` at least qmd_bytes / 4), as one packet.
DecodedPacket decode_qmd(std::span<const uint32_t> words, QmdVersion v);

// "ampere" / "ada" / "hopper" / "blackwell", or an sm_XX target; false when unknown.
bool parse_gen(const std::string& name, Gen& gen);

}  // namespace hcq::nv
