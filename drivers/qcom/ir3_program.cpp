// The ir3 container (docs/ir3-container.md): a bounds-checked reader and its writer.
//
// The format is hcq's own. The limits checked come from the hardware fields the metadata ends
// up in (drivers/qcom/regs.def: SP_CS_CTRL_REG0's HALFREGFOOTPRINT, FULLREGFOOTPRINT and
// BRANCHSTACK are 6 bits wide, the SP_CS_CNTL_0 register ids 8 bits) and from Mesa's ir3
// compiler (src/freedreno/ir3/ir3_compiler.c: max_const_compute is 256 vec4s on a6xx and 512
// on a7xx; workgroups hold at most 1024 invocations).
#include "qcom/ir3_program.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "qcom/packets.hpp"

namespace hcq::qcom {
namespace {

constexpr char kMagic[8] = {'H', 'C', 'Q', 'I', 'R', '3', '\0', '\0'};
constexpr uint32_t kVersion1 = 1, kVersion2 = 2;
constexpr uint64_t kHeaderBytes = 24;
constexpr uint64_t kFixedBytes = 88;    // a kernel record's fixed part
constexpr uint64_t kArgFixedBytes = 12;  // an argument's fixed part
constexpr uint64_t kUavBytes = 8;        // a version-2 UAV entry
// The register fields the kernel's numbers go into (regs.def; the same widths on a6xx and a7xx).
constexpr uint32_t kMaxUavs = SP_CS_CONFIG_NIBO.mask(Gen::A6xx);  // 127
constexpr uint32_t kMaxName = 255;
constexpr uint32_t kMaxField6 = SP_CS_CTRL_REG0_FULLREGFOOTPRINT.mask(Gen::A6xx);  // 63
constexpr uint32_t kMaxRegid = HLSQ_CS_CNTL_0_WGIDCONSTID.mask(Gen::A6xx);         // 0xff
static_assert(kMaxField6 == SP_CS_CTRL_REG0_HALFREGFOOTPRINT.mask(Gen::A7xx) &&
                  kMaxField6 == SP_CS_CTRL_REG0_BRANCHSTACK.mask(Gen::A7xx) &&
                  kMaxRegid == SP_CS_CNTL_0_LOCALIDREGID.mask(Gen::A7xx) &&
                  kMaxUavs == SP_CS_CONFIG_NIBO.mask(Gen::A7xx),
              "regs.def: a field ir3_program checks against differs between generations");
constexpr uint64_t kMaxWorkgroup = 1024;
constexpr uint32_t kFlagEarlyPreamble = 1u << 0;
constexpr uint8_t kArgBuffer = 0, kArgValue = 1;
constexpr uint8_t kAccessReadWrite = 0, kAccessReadOnly = 1, kAccessWriteOnly = 2;

// Header fields.
constexpr uint64_t kHdrVersion = 8, kHdrFamily = 12, kHdrCount = 16, kHdrLength = 20;
// Kernel record fields (offsets in the record).
constexpr uint64_t kRecBytes = 0, kRecNameBytes = 4, kRecInstrDwords = 8, kRecImmDwords = 12,
                   kRecArgCount = 16, kRecFullRegs = 20, kRecHalfRegs = 24,
                   kRecBranchStack = 28, kRecThreadsize = 32, kRecLocalSize = 36,
                   kRecConstDwords = 48, kRecArgsOffset = 52, kRecArgsBytes = 56,
                   kRecImmOffset = 60, kRecUavCount = 64, kRecLocalMem = 68,
                   kRecPrivateMem = 72, kRecWgidRegid = 76, kRecLocalIdRegid = 80,
                   kRecFlags = 84;

[[noreturn]] void fail(const std::string& what) { throw InvalidInput("ir3 container: " + what); }

std::string str(uint64_t v) { return std::to_string(v); }
uint64_t pad4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

// Clean UTF-8: well-formed (no overlong forms, surrogates or code points past U+10FFFF) and no
// control characters (U+0000..U+001F, U+007F..U+009F).
bool clean_utf8(std::span<const std::byte> s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t b0 = std::to_integer<uint32_t>(s[i]);
    uint32_t cp = 0;
    size_t n = 0;
    if (b0 < 0x80) {
      cp = b0;
      n = 1;
    } else if (b0 >= 0xc2 && b0 <= 0xdf) {
      cp = b0 & 0x1f;
      n = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      cp = b0 & 0x0f;
      n = 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      cp = b0 & 0x07;
      n = 4;
    } else {
      return false;
    }
    if (s.size() - i < n) return false;
    for (size_t k = 1; k < n; ++k) {
      const uint32_t b = std::to_integer<uint32_t>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return false;
    if (cp >= 0xd800 && cp <= 0xdfff) return false;
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return false;
    i += n;
  }
  return true;
}

class Parser {
 public:
  explicit Parser(std::span<const std::byte> f) : f_(f) {}

  Ir3Module parse() {
    const uint64_t size = f_.size();
    if (size < kHeaderBytes)
      fail("truncated header: the file has " + str(size) + " bytes, the header needs " +
           str(kHeaderBytes));
    if (std::memcmp(f_.data(), kMagic, sizeof kMagic) != 0)
      fail("bad magic at offset 0x0: expected \"HCQIR3\\0\\0\"");
    Ir3Module m;
    m.version = u32(kHdrVersion);
    if (m.version != kVersion1 && m.version != kVersion2)
      fail("unsupported version " + str(m.version) + " at offset " + hex(kHdrVersion) +
           " (this reader knows versions 1 and 2)");
    version_ = m.version;
    m.family = u32(kHdrFamily);
    if (m.family != 0 && m.family != 6 && m.family != 7)
      fail("unsupported family " + str(m.family) + " at offset " + hex(kHdrFamily) +
           " (6 = a6xx, 7 = a7xx, 0 = any)");
    const uint64_t header = u32(kHdrLength);
    if (header < kHeaderBytes || header % 4 != 0 || header > size)
      fail("header length " + str(header) + " at offset " + hex(kHdrLength) +
           " is not a multiple of 4 from " + str(kHeaderBytes) + " to the file's " + str(size) +
           " bytes");
    const uint64_t count = u32(kHdrCount);
    if (count > (size - header) / kFixedBytes)
      fail("kernel count " + str(count) + " at offset " + hex(kHdrCount) + " needs at least " +
           str(count * kFixedBytes) + " bytes of kernel records, the file has " +
           str(size - header) + " after the header");
    family_ = m.family;
    m.kernels.reserve(count);
    std::set<std::string> names;
    uint64_t pos = header;
    for (uint64_t k = 0; k < count; ++k) {
      m.kernels.push_back(kernel(k, pos));
      if (!names.insert(m.kernels.back().name).second)
        fail("kernel " + str(k) + " at offset " + hex(pos) + ": duplicate kernel name '" +
             m.kernels.back().name + "'");
      pos += u32(pos + kRecBytes);
    }
    if (pos != size)
      fail("unexpected data after the last kernel record, from offset " + hex(pos) +
           " to the end of the file at " + hex(size));
    return m;
  }

 private:
  // Little-endian reads; callers have checked the bounds.
  uint32_t u32(uint64_t off) const {
    const auto b = [&](uint64_t i) { return std::to_integer<uint32_t>(f_[off + i]); };
    return b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24;
  }
  uint8_t u8(uint64_t off) const { return std::to_integer<uint8_t>(f_[off]); }

  // Claims `len` bytes at `cursor` for `what`, within the record ending at end_; advances.
  uint64_t take(uint64_t& cursor, uint64_t len, const std::string& what) {
    if (len > end_ - cursor)
      fail(ctx_ + ": " + what + " (" + str(len) + " bytes at offset " + hex(cursor) +
           ") runs past the end of the record at offset " + hex(end_));
    const uint64_t at = cursor;
    cursor += len;
    return at;
  }

  // A string of `n` bytes at `at`, then zero padding to a multiple of 4.
  std::string string_at(uint64_t at, uint64_t n, const std::string& what) {
    const auto bytes = f_.subspan(at, n);
    if (!clean_utf8(bytes))
      fail(ctx_ + ": " + what + " at offset " + hex(at) + " is not clean UTF-8");
    for (uint64_t i = at + n; i < at + pad4(n); ++i)
      if (u8(i) != 0) fail(ctx_ + ": nonzero padding byte at offset " + hex(i));
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

  // The record field at `rel` with its name, for messages.
  std::string field(uint64_t rel, const char* name) const {
    return std::string(name) + " " + str(u32(pos_ + rel)) + " at offset " + hex(pos_ + rel);
  }

  Ir3Kernel kernel(uint64_t index, uint64_t pos) {
    const uint64_t size = f_.size();
    pos_ = pos;
    ctx_ = "kernel " + str(index) + " at offset " + hex(pos);
    if (size - pos < 4)
      fail(ctx_ + ": truncated kernel record: " + str(size - pos) +
           " bytes left, its length field needs 4");
    const uint64_t rec = u32(pos + kRecBytes);
    if (rec < kFixedBytes)
      fail(ctx_ + ": record length " + str(rec) + " is shorter than the " + str(kFixedBytes) +
           "-byte fixed part");
    if (rec % 4 != 0) fail(ctx_ + ": record length " + str(rec) + " is not a multiple of 4");
    if (rec > size - pos)
      fail(ctx_ + ": record length " + str(rec) + " runs past the end of the file (" +
           str(size) + " bytes)");
    end_ = pos + rec;
    const auto at = [&](uint64_t rel) { return u32(pos + rel); };

    Ir3Kernel k;
    uint64_t cursor = pos + kFixedBytes;
    const uint32_t name_bytes = at(kRecNameBytes);
    if (name_bytes == 0 || name_bytes > kMaxName)
      fail(ctx_ + ": " + field(kRecNameBytes, "name length") + " is not 1 to " + str(kMaxName));
    const uint64_t name_at = take(cursor, pad4(name_bytes), "name");
    k.name = string_at(name_at, name_bytes, "name");
    ctx_ = "kernel " + str(index) + " (" + k.name + ") at offset " + hex(pos);

    const uint64_t instr_dwords = at(kRecInstrDwords);
    if (instr_dwords == 0) fail(ctx_ + ": no instructions");
    if (instr_dwords % 2 != 0)
      fail(ctx_ + ": " + field(kRecInstrDwords, "instruction dwords") +
           ": the instructions are not a whole number of 64-bit words");
    const uint64_t instr_at = take(cursor, instr_dwords * 4, "instructions");
    const uint64_t imm_dwords = at(kRecImmDwords);
    const uint64_t imm_at = take(cursor, imm_dwords * 4, "immediates");
    k.instructions.resize(instr_dwords);
    for (uint64_t i = 0; i < instr_dwords; ++i) k.instructions[i] = u32(instr_at + 4 * i);
    k.immediates.resize(imm_dwords);
    for (uint64_t i = 0; i < imm_dwords; ++i) k.immediates[i] = u32(imm_at + 4 * i);

    k.full_regs = at(kRecFullRegs);
    k.half_regs = at(kRecHalfRegs);
    k.branch_stack = at(kRecBranchStack);
    for (auto [rel, name] : {std::pair{kRecFullRegs, "full register footprint"},
                             std::pair{kRecHalfRegs, "half register footprint"},
                             std::pair{kRecBranchStack, "branch stack"}})
      if (at(rel) > kMaxField6)
        fail(ctx_ + ": " + field(rel, name) + " does not fit its 6-bit field (at most " +
             str(kMaxField6) + ")");
    k.threadsize = at(kRecThreadsize);
    if (k.threadsize != 64 && k.threadsize != 128)
      fail(ctx_ + ": " + field(kRecThreadsize, "threadsize") + " is not 64 or 128");
    uint64_t invocations = 1;
    int zeros = 0;
    for (int d = 0; d < 3; ++d) {
      k.local_size[d] = at(kRecLocalSize + 4 * d);
      invocations *= k.local_size[d];
      zeros += k.local_size[d] == 0;
    }
    if (zeros != 0 && zeros != 3)
      fail(ctx_ + ": local size " + str(k.local_size[0]) + "x" + str(k.local_size[1]) + "x" +
           str(k.local_size[2]) + " at offset " + hex(pos + kRecLocalSize) +
           " is partly zero (all zero means any)");
    if (invocations > kMaxWorkgroup)
      fail(ctx_ + ": local size " + str(k.local_size[0]) + "x" + str(k.local_size[1]) + "x" +
           str(k.local_size[2]) + " at offset " + hex(pos + kRecLocalSize) + " exceeds " +
           str(kMaxWorkgroup) + " invocations");

    k.const_dwords = at(kRecConstDwords);
    k.args_offset = at(kRecArgsOffset);
    k.args_bytes = at(kRecArgsBytes);
    k.immediates_offset = at(kRecImmOffset);
    const uint64_t const_limit = family_ == 7 ? 2048 : 1024;
    if (k.const_dwords % 4 != 0)
      fail(ctx_ + ": " + field(kRecConstDwords, "const dwords") + " is not a multiple of 4 (vec4s)");
    if (k.const_dwords > const_limit)
      fail(ctx_ + ": " + field(kRecConstDwords, "const dwords") + " exceeds the " +
           str(const_limit) + " dwords of the " + (family_ == 7 ? "a7xx" : "a6xx") +
           " compute constant file");
    if (k.args_offset % 16 != 0)
      fail(ctx_ + ": " + field(kRecArgsOffset, "args offset") + " is not 16-byte aligned");
    if (k.args_bytes % 4 != 0)
      fail(ctx_ + ": " + field(kRecArgsBytes, "args bytes") + " is not a multiple of 4");
    const uint64_t const_bytes = uint64_t{k.const_dwords} * 4;
    const uint64_t args_end = uint64_t{k.args_offset} + k.args_bytes;
    if (k.args_bytes != 0 && args_end > const_bytes)
      fail(ctx_ + ": const dwords " + str(k.const_dwords) + " at offset " +
           hex(pos + kRecConstDwords) + " do not cover the argument block [" +
           str(k.args_offset) + ", " + str(args_end) + ")");
    if (k.immediates_offset % 16 != 0)
      fail(ctx_ + ": " + field(kRecImmOffset, "immediates offset") + " is not 16-byte aligned");
    const uint64_t imm_end = uint64_t{k.immediates_offset} + imm_dwords * 4;
    if (imm_dwords != 0 && imm_end > const_bytes)
      fail(ctx_ + ": const dwords " + str(k.const_dwords) + " at offset " +
           hex(pos + kRecConstDwords) + " do not cover the immediates [" +
           str(k.immediates_offset) + ", " + str(imm_end) + ")");
    if (imm_dwords != 0 && k.args_bytes != 0 && k.immediates_offset < args_end &&
        k.args_offset < imm_end)
      fail(ctx_ + ": the immediates [" + str(k.immediates_offset) + ", " + str(imm_end) +
           ") overlap the argument block [" + str(k.args_offset) + ", " + str(args_end) + ")");

    k.uav_count = at(kRecUavCount);
    if (k.uav_count > kMaxUavs)
      fail(ctx_ + ": " + field(kRecUavCount, "uav count") + " does not fit SP_CS_CONFIG.NIBO (at most " +
           str(kMaxUavs) + ")");
    k.local_memory_bytes = at(kRecLocalMem);
    k.private_memory_bytes = at(kRecPrivateMem);
    k.workgroup_id_regid = at(kRecWgidRegid);
    k.local_id_regid = at(kRecLocalIdRegid);
    for (auto [rel, name] : {std::pair{kRecWgidRegid, "workgroup id regid"},
                             std::pair{kRecLocalIdRegid, "local id regid"}})
      if (at(rel) > kMaxRegid)
        fail(ctx_ + ": " + field(rel, name) + " does not fit its 8-bit field");
    const uint32_t flags = at(kRecFlags);
    if (flags & ~kFlagEarlyPreamble)
      fail(ctx_ + ": unknown flags " + hex(flags & ~kFlagEarlyPreamble) + " at offset " +
           hex(pos + kRecFlags));
    k.early_preamble = flags & kFlagEarlyPreamble;

    const uint64_t arg_count = at(kRecArgCount);
    if (arg_count > (end_ - cursor) / kArgFixedBytes)
      fail(ctx_ + ": " + field(kRecArgCount, "argument count") + " needs at least " +
           str(arg_count * kArgFixedBytes) + " bytes, the record has " + str(end_ - cursor) +
           " left");
    k.args.reserve(arg_count);
    for (uint64_t i = 0; i < arg_count; ++i) k.args.push_back(arg(i, cursor, k.args_bytes));
    check_overlaps(k.args);
    if (version_ >= kVersion2) {
      k.uavs.reserve(k.uav_count);
      for (uint32_t i = 0; i < k.uav_count; ++i) k.uavs.push_back(uav(i, cursor, k.args));
    }
    // Whatever lies between `cursor` and the end of the record is fields a later compatible
    // writer appended; this reader skips them.
    return k;
  }

  Ir3Arg arg(uint64_t i, uint64_t& cursor, uint32_t args_bytes) {
    const std::string what = "argument " + str(i);
    const uint64_t a = take(cursor, kArgFixedBytes, what);
    Ir3Arg r;
    r.offset = u32(a);
    r.size = u32(a + 4);
    const uint8_t kind = u8(a + 8), access = u8(a + 9), name_bytes = u8(a + 10);
    if (u8(a + 11) != 0)
      fail(ctx_ + ": " + what + ": nonzero reserved byte at offset " + hex(a + 11));
    const uint64_t name_at = take(cursor, pad4(name_bytes), what + " name");
    r.name = string_at(name_at, name_bytes, what + " name");
    const std::string who = what + " (" + r.name + ")";
    if (kind == kArgBuffer) {
      r.kind = KernelArg::Kind::Buffer;
    } else if (kind == kArgValue) {
      r.kind = KernelArg::Kind::Value;
    } else {
      fail(ctx_ + ": " + who + ": kind " + str(kind) + " at offset " + hex(a + 8) +
           " is not 0 (buffer) or 1 (value)");
    }
    if (access == kAccessReadWrite) {
      r.access = KernelArg::Access::ReadWrite;
    } else if (access == kAccessReadOnly) {
      r.access = KernelArg::Access::ReadOnly;
    } else if (access == kAccessWriteOnly) {
      r.access = KernelArg::Access::WriteOnly;
    } else {
      fail(ctx_ + ": " + who + ": access " + str(access) + " at offset " + hex(a + 9) +
           " is not 0 (read-write), 1 (read-only) or 2 (write-only)");
    }
    if (r.size == 0) fail(ctx_ + ": " + who + ": size 0 at offset " + hex(a + 4));
    if (r.kind == KernelArg::Kind::Buffer && r.size != 8)
      fail(ctx_ + ": " + who + ": a buffer argument is a 64-bit address, but its size is " +
           str(r.size));
    if (uint64_t{r.offset} + r.size > args_bytes)
      fail(ctx_ + ": " + who + " at [" + str(r.offset) + ", " + str(uint64_t{r.offset} + r.size) +
           ") lies outside the " + str(args_bytes) + "-byte argument block");
    return r;
  }

  // A version-2 UAV entry: u32 argument index, u8 format, three reserved zero bytes.
  Ir3Uav uav(uint32_t i, uint64_t& cursor, const std::vector<Ir3Arg>& args) {
    const std::string what = "uav " + str(i);
    const uint64_t a = take(cursor, kUavBytes, what);
    Ir3Uav r;
    r.arg = u32(a);
    if (r.arg >= args.size())
      fail(ctx_ + ": " + what + ": argument " + str(r.arg) + " at offset " + hex(a) +
           " is not one of the kernel's " + str(args.size()) + " arguments");
    if (args[r.arg].kind != KernelArg::Kind::Buffer)
      fail(ctx_ + ": " + what + ": argument " + str(r.arg) + " (" + args[r.arg].name +
           ") at offset " + hex(a) + " is a value, not a buffer");
    const uint8_t format = u8(a + 4);
    if (format > uint8_t(Ir3UavFormat::U8))
      fail(ctx_ + ": " + what + ": format " + str(format) + " at offset " + hex(a + 4) +
           " is not 0 (32-bit), 1 (16-bit) or 2 (8-bit elements)");
    r.format = Ir3UavFormat(format);
    for (uint64_t b = a + 5; b < a + kUavBytes; ++b)
      if (u8(b) != 0) fail(ctx_ + ": " + what + ": nonzero reserved byte at offset " + hex(b));
    return r;
  }

  void check_overlaps(const std::vector<Ir3Arg>& args) const {
    std::vector<size_t> order(args.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return args[a].offset < args[b].offset; });
    for (size_t j = 1; j < order.size(); ++j) {
      const Ir3Arg& p = args[order[j - 1]];
      const Ir3Arg& q = args[order[j]];
      if (uint64_t{p.offset} + p.size > q.offset)
        fail(ctx_ + ": argument " + str(order[j]) + " (" + q.name + ") at [" + str(q.offset) +
             ", " + str(uint64_t{q.offset} + q.size) + ") overlaps argument " + str(order[j - 1]) +
             " (" + p.name + ") at [" + str(p.offset) + ", " + str(uint64_t{p.offset} + p.size) +
             ")");
    }
  }

  std::span<const std::byte> f_;
  uint32_t family_ = 0, version_ = 0;
  uint64_t pos_ = 0, end_ = 0;  // the current kernel record
  std::string ctx_;             // "kernel 1 (fill_u32) at offset 0x70"
};

class Writer {
 public:
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  void u8(uint8_t v) { out.push_back(static_cast<std::byte>(v)); }
  void string(const std::string& s) {
    for (char c : s) out.push_back(static_cast<std::byte>(c));
    while (out.size() % 4 != 0) out.push_back(std::byte{0});
  }
  void put32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[at + i] = static_cast<std::byte>(v >> (8 * i));
  }
  std::vector<std::byte> out;
};

void check_name(const std::string& name, const std::string& what) {
  if (name.size() > kMaxName)
    fail("cannot write " + what + ": its name is " + str(name.size()) + " bytes, at most " +
         str(kMaxName));
}

}  // namespace

const Ir3Kernel* Ir3Module::find(const std::string& name) const {
  for (const auto& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

Ir3Module parse_ir3(std::span<const std::byte> file) { return Parser(file).parse(); }

std::vector<std::byte> write_ir3(const Ir3Module& m) {
  if (m.kernels.size() > UINT32_MAX) fail("cannot write more than 2^32-1 kernels");
  bool binds = false;
  for (const auto& k : m.kernels) binds |= !k.uavs.empty();
  const uint32_t version = m.version ? m.version : binds ? kVersion2 : kVersion1;
  if (version == kVersion1 && binds)
    fail("cannot write UAV bindings in version 1 (they need version 2)");
  Writer w;
  w.out.insert(w.out.end(), reinterpret_cast<const std::byte*>(kMagic),
               reinterpret_cast<const std::byte*>(kMagic) + sizeof kMagic);
  w.u32(version);
  w.u32(m.family);
  w.u32(static_cast<uint32_t>(m.kernels.size()));
  w.u32(static_cast<uint32_t>(kHeaderBytes));
  for (const auto& k : m.kernels) {
    const std::string who = "kernel '" + k.name.substr(0, 64) + "'";
    check_name(k.name, who);
    if (k.instructions.size() > UINT32_MAX / 4 || k.immediates.size() > UINT32_MAX / 4 ||
        k.args.size() > UINT32_MAX / kArgFixedBytes || k.uavs.size() > UINT32_MAX / kUavBytes)
      fail("cannot write " + who + ": too large for a record");
    const size_t start = w.out.size();
    w.u32(0);  // record length, patched below
    w.u32(static_cast<uint32_t>(k.name.size()));
    w.u32(static_cast<uint32_t>(k.instructions.size()));
    w.u32(static_cast<uint32_t>(k.immediates.size()));
    w.u32(static_cast<uint32_t>(k.args.size()));
    w.u32(k.full_regs);
    w.u32(k.half_regs);
    w.u32(k.branch_stack);
    w.u32(k.threadsize);
    for (uint32_t d : k.local_size) w.u32(d);
    w.u32(k.const_dwords);
    w.u32(k.args_offset);
    w.u32(k.args_bytes);
    w.u32(k.immediates_offset);
    w.u32(k.uav_count);
    w.u32(k.local_memory_bytes);
    w.u32(k.private_memory_bytes);
    w.u32(k.workgroup_id_regid);
    w.u32(k.local_id_regid);
    w.u32(k.early_preamble ? kFlagEarlyPreamble : 0);
    w.string(k.name);
    for (uint32_t v : k.instructions) w.u32(v);
    for (uint32_t v : k.immediates) w.u32(v);
    for (const auto& a : k.args) {
      check_name(a.name, "argument '" + a.name.substr(0, 64) + "' of " + who);
      uint8_t kind = 0;
      if (a.kind == KernelArg::Kind::Buffer) {
        kind = kArgBuffer;
      } else if (a.kind == KernelArg::Kind::Value) {
        kind = kArgValue;
      } else {
        fail("cannot write argument '" + a.name + "' of " + who +
             ": only Buffer and Value arguments have a kind in the format");
      }
      uint8_t access = kAccessReadWrite;
      if (a.access == KernelArg::Access::ReadOnly) access = kAccessReadOnly;
      if (a.access == KernelArg::Access::WriteOnly) access = kAccessWriteOnly;
      w.u32(a.offset);
      w.u32(a.size);
      w.u8(kind);
      w.u8(access);
      w.u8(static_cast<uint8_t>(a.name.size()));
      w.u8(0);
      w.string(a.name);
    }
    for (const Ir3Uav& u : k.uavs) {
      w.u32(u.arg);
      w.u8(uint8_t(u.format));
      for (int i = 0; i < 3; ++i) w.u8(0);
    }
    const size_t bytes = w.out.size() - start;
    if (bytes > UINT32_MAX) fail("cannot write " + who + ": its record exceeds 4 GiB");
    w.put32(start, static_cast<uint32_t>(bytes));
  }
  return std::move(w.out);
}

}  // namespace hcq::qcom
