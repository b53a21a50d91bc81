// AMDHSA code objects: parse with libelf, decode kernel descriptors and the metadata note,
// lay the image out with relocations applied, and find a kernel in a loaded image.
//
// Facts used (all public):
// * ELF identification, EM_AMDGPU = 224, ELFOSABI_AMDGPU_HSA = 64, ELFABIVERSION_AMDGPU_HSA_V4..V6
//   = 2..4, EF_AMDGPU_MACH mask 0xff and the MACH values, NT_AMDGPU_METADATA = 32, the relocation
//   numbers: LLVM llvm/include/llvm/BinaryFormat/ELF.h and ELFRelocs/AMDGPU.def. MACH values
//   above 0x47 were checked against the e_flags clang-19 writes.
// * Relocation calculations (ABS64 = S + A, RELATIVE64 = B + A): LLVM docs/AMDGPUUsage.rst.
// * Kernel descriptor layout and kernel_code_properties bits, and the order user SGPRs are
//   initialised in: LLVM llvm/include/llvm/Support/AMDHSAKernelDescriptor.h and AMDGPUUsage.rst
//   ("Initial Kernel Execution State").
// * The metadata note is MessagePack (msgpack spec, github.com/msgpack/msgpack/blob/master/spec.md);
//   its keys are documented in AMDGPUUsage.rst ("Code Object V4 Metadata").
// * ELF hash tables (DT_HASH: System V gABI; DT_GNU_HASH: the GNU hash section format).
#include "amd/code_object.hpp"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "core/error.hpp"

namespace hcq::amd {
namespace {

constexpr uint16_t kEmAmdgpu = 224;          // EM_AMDGPU
constexpr uint8_t kOsAbiAmdgpuHsa = 64;      // ELFOSABI_AMDGPU_HSA
constexpr uint8_t kAbiV4 = 2, kAbiV6 = 4;    // ELFABIVERSION_AMDGPU_HSA_V4 .. _V6
constexpr uint32_t kMachMask = 0xff;         // EF_AMDGPU_MACH
constexpr uint32_t kNtAmdgpuMetadata = 32;   // NT_AMDGPU_METADATA
constexpr uint32_t kRelocNone = 0;           // R_AMDGPU_NONE
constexpr uint32_t kRelocAbs64 = 3;          // R_AMDGPU_ABS64
constexpr uint32_t kRelocRelative64 = 13;    // R_AMDGPU_RELATIVE64
constexpr uint64_t kMaxImageBytes = uint64_t{1} << 30;  // our own sanity limit
constexpr uint64_t kPage = 4096;

[[noreturn]] void fail(const std::string& what) {
  throw InvalidInput("AMDGPU code object: " + what);
}


// a + b without wrapping; false on overflow.
bool add_ok(uint64_t a, uint64_t b, uint64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// [off, off + len) lies inside [0, size).
bool in_bounds(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

template <class T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // hosts are little-endian, like the code objects
  return v;
}

struct MachName {
  uint32_t mach;
  const char* name;
};
// EF_AMDGPU_MACH values (LLVM BinaryFormat/ELF.h).
constexpr MachName kMachs[] = {
    {0x020, "gfx600"},  {0x021, "gfx601"},  {0x022, "gfx700"},  {0x023, "gfx701"},
    {0x024, "gfx702"},  {0x025, "gfx703"},  {0x026, "gfx704"},  {0x028, "gfx801"},
    {0x029, "gfx802"},  {0x02a, "gfx803"},  {0x02b, "gfx810"},  {0x02c, "gfx900"},
    {0x02d, "gfx902"},  {0x02e, "gfx904"},  {0x02f, "gfx906"},  {0x030, "gfx908"},
    {0x031, "gfx909"},  {0x032, "gfx90c"},  {0x033, "gfx1010"}, {0x034, "gfx1011"},
    {0x035, "gfx1012"}, {0x036, "gfx1030"}, {0x037, "gfx1031"}, {0x038, "gfx1032"},
    {0x039, "gfx1033"}, {0x03a, "gfx602"},  {0x03b, "gfx705"},  {0x03c, "gfx805"},
    {0x03d, "gfx1035"}, {0x03e, "gfx1034"}, {0x03f, "gfx90a"},  {0x040, "gfx940"},
    {0x041, "gfx1100"}, {0x042, "gfx1013"}, {0x043, "gfx1150"}, {0x044, "gfx1103"},
    {0x045, "gfx1036"}, {0x046, "gfx1101"}, {0x047, "gfx1102"}, {0x048, "gfx1200"},
    {0x04a, "gfx1151"}, {0x04b, "gfx941"},  {0x04c, "gfx942"},  {0x04e, "gfx1201"},
    {0x051, "gfx9-generic"},    {0x052, "gfx10-1-generic"}, {0x053, "gfx10-3-generic"},
    {0x054, "gfx11-generic"},   {0x055, "gfx1152"},         {0x059, "gfx12-generic"},
};

// ---------------------------------------------------------------------------------------------
// A small MessagePack reader: parses the whole note into a tree. Every read is bounds-checked,
// nesting is limited, and a container may not claim more elements than bytes remain (each
// element takes at least one byte), so memory stays proportional to the input.

struct MpValue {
  enum class Type : uint8_t { Nil, Bool, UInt, Int, Float, Str, Bin, Array, Map };
  Type type = Type::Nil;
  bool b = false;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<MpValue> arr;  // Array: the elements; Map: key, value, key, value ...

  const MpValue* get(std::string_view key) const {
    if (type != Type::Map) return nullptr;
    for (size_t j = 0; j + 1 < arr.size(); j += 2)
      if (arr[j].type == Type::Str && arr[j].s == key) return &arr[j + 1];
    return nullptr;
  }
};

class MsgpackReader {
 public:
  static constexpr int kMaxDepth = 32;
  MsgpackReader(const std::byte* p, size_t n) : p_(p), n_(n) {}

  MpValue parse_all() {
    MpValue v = value(0);
    if (pos_ != n_)
      bad("trailing bytes after the top-level value at offset " + std::to_string(pos_));
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail("malformed NT_AMDGPU_METADATA msgpack: " + what);
  }
  void need(size_t k) const {
    if (k > n_ - pos_)
      bad("truncated at offset " + std::to_string(pos_) + " (need " + std::to_string(k) +
          " bytes, " + std::to_string(n_ - pos_) + " left)");
  }
  uint64_t be(size_t k) {  // big-endian unsigned of k bytes
    need(k);
    uint64_t v = 0;
    for (size_t j = 0; j < k; ++j) v = (v << 8) | std::to_integer<uint8_t>(p_[pos_ + j]);
    pos_ += k;
    return v;
  }
  std::string bytes(size_t k) {
    need(k);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), k);
    pos_ += k;
    return s;
  }
  void check_count(uint64_t count, uint64_t per) const {
    // Each element needs at least `per` bytes.
    if (count > (n_ - pos_) / per)
      bad("container at offset " + std::to_string(pos_) + " claims " + std::to_string(count) +
          " elements but only " + std::to_string(n_ - pos_) + " bytes remain");
  }
  MpValue array(uint64_t count, int depth) {
    check_count(count, 1);
    MpValue v;
    v.type = MpValue::Type::Array;
    v.arr.reserve(count);
    for (uint64_t j = 0; j < count; ++j) v.arr.push_back(value(depth + 1));
    return v;
  }
  MpValue map(uint64_t count, int depth) {
    check_count(count, 2);
    MpValue v;
    v.type = MpValue::Type::Map;
    v.arr.reserve(2 * count);
    for (uint64_t j = 0; j < 2 * count; ++j) v.arr.push_back(value(depth + 1));
    return v;
  }
  static MpValue uint_v(uint64_t u) {
    MpValue v;
    v.type = MpValue::Type::UInt;
    v.u = u;
    return v;
  }
  static MpValue int_v(int64_t i) {
    MpValue v;
    v.type = MpValue::Type::Int;
    v.i = i;
    return v;
  }
  MpValue str_v(size_t len) {
    MpValue v;
    v.type = MpValue::Type::Str;
    v.s = bytes(len);
    return v;
  }
  MpValue bin_v(size_t len) {  // skipped: nothing in the metadata we read is binary
    need(len);
    pos_ += len;
    MpValue v;
    v.type = MpValue::Type::Bin;
    return v;
  }

  MpValue value(int depth) {
    if (depth > kMaxDepth) bad("nesting deeper than " + std::to_string(kMaxDepth));
    need(1);
    const uint8_t tag = std::to_integer<uint8_t>(p_[pos_++]);
    if (tag <= 0x7f) return uint_v(tag);                          // positive fixint
    if (tag >= 0xe0) return int_v(static_cast<int8_t>(tag));       // negative fixint
    if ((tag & 0xf0) == 0x80) return map(tag & 0x0f, depth);       // fixmap
    if ((tag & 0xf0) == 0x90) return array(tag & 0x0f, depth);     // fixarray
    if ((tag & 0xe0) == 0xa0) return str_v(tag & 0x1f);            // fixstr
    MpValue v;
    switch (tag) {
      case 0xc0: return v;  // nil
      case 0xc2:
      case 0xc3:
        v.type = MpValue::Type::Bool;
        v.b = tag == 0xc3;
        return v;
      case 0xc4: return bin_v(be(1));
      case 0xc5: return bin_v(be(2));
      case 0xc6: return bin_v(be(4));
      case 0xca: {
        uint32_t bits = static_cast<uint32_t>(be(4));
        float f;
        std::memcpy(&f, &bits, 4);
        v.type = MpValue::Type::Float;
        v.f = f;
        return v;
      }
      case 0xcb: {
        uint64_t bits = be(8);
        std::memcpy(&v.f, &bits, 8);
        v.type = MpValue::Type::Float;
        return v;
      }
      case 0xcc: return uint_v(be(1));
      case 0xcd: return uint_v(be(2));
      case 0xce: return uint_v(be(4));
      case 0xcf: return uint_v(be(8));
      case 0xd0: return int_v(static_cast<int8_t>(be(1)));
      case 0xd1: return int_v(static_cast<int16_t>(be(2)));
      case 0xd2: return int_v(static_cast<int32_t>(be(4)));
      case 0xd3: return int_v(static_cast<int64_t>(be(8)));
      case 0xd9: return str_v(be(1));
      case 0xda: return str_v(be(2));
      case 0xdb: return str_v(be(4));
      case 0xdc: return array(be(2), depth);
      case 0xdd: return array(be(4), depth);
      case 0xde: return map(be(2), depth);
      case 0xdf: return map(be(4), depth);
      default:
        // 0xc1 (never used), ext types 0xc7-0xc9 and 0xd4-0xd8: not in AMDGPU metadata.
        bad("unsupported type byte " + hex(tag) + " at offset " + std::to_string(pos_ - 1));
    }
  }

  const std::byte* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Typed access to the metadata tree with messages that say which field is wrong.
std::optional<uint32_t> md_u32(const MpValue& m, std::string_view key, const std::string& where) {
  const MpValue* v = m.get(key);
  if (!v) return std::nullopt;
  uint64_t u;
  if (v->type == MpValue::Type::UInt)
    u = v->u;
  else if (v->type == MpValue::Type::Int && v->i >= 0)
    u = static_cast<uint64_t>(v->i);
  else
    fail("metadata " + where + " " + std::string(key) + " is not an unsigned integer");
  if (u > std::numeric_limits<uint32_t>::max())
    fail("metadata " + where + " " + std::string(key) + " = " + std::to_string(u) +
         " does not fit in 32 bits");
  return static_cast<uint32_t>(u);
}

const std::string* md_str(const MpValue& m, std::string_view key, const std::string& where) {
  const MpValue* v = m.get(key);
  if (!v) return nullptr;
  if (v->type != MpValue::Type::Str)
    fail("metadata " + where + " " + std::string(key) + " is not a string");
  return &v->s;
}

struct KernelMeta {
  std::string name, symbol;
  std::optional<uint32_t> kernarg_size, kernarg_align, wave_size, lds, scratch;
  std::vector<KernelArg> args;
};

KernelMeta read_kernel_meta(const MpValue& k, size_t index) {
  std::string where = "kernel #" + std::to_string(index);
  if (k.type != MpValue::Type::Map) fail("metadata " + where + " is not a map");
  KernelMeta km;
  if (auto* n = md_str(k, ".name", where)) km.name = *n;
  if (km.name.empty()) fail("metadata " + where + " has no .name");
  where = "kernel '" + km.name + "'";
  if (auto* s = md_str(k, ".symbol", where)) km.symbol = *s;
  if (km.symbol.empty()) km.symbol = km.name + ".kd";
  km.kernarg_size = md_u32(k, ".kernarg_segment_size", where);
  km.kernarg_align = md_u32(k, ".kernarg_segment_align", where);
  km.wave_size = md_u32(k, ".wavefront_size", where);
  km.lds = md_u32(k, ".group_segment_fixed_size", where);
  km.scratch = md_u32(k, ".private_segment_fixed_size", where);
  if (const MpValue* args = k.get(".args")) {
    if (args->type != MpValue::Type::Array) fail("metadata " + where + " .args is not an array");
    for (size_t j = 0; j < args->arr.size(); ++j) {
      const MpValue& a = args->arr[j];
      const std::string aw = where + " argument #" + std::to_string(j);
      if (a.type != MpValue::Type::Map) fail("metadata " + aw + " is not a map");
      KernelArg ka;
      auto off = md_u32(a, ".offset", aw);
      auto size = md_u32(a, ".size", aw);
      const std::string* kind = md_str(a, ".value_kind", aw);
      if (!off || !size || !kind)
        fail("metadata " + aw + " lacks .offset, .size or .value_kind");
      ka.offset = *off;
      ka.size = *size;
      if (auto* n = md_str(a, ".name", aw)) ka.name = *n;
      if (*kind == "global_buffer") {
        ka.kind = KernelArg::Kind::Buffer;
        // .actual_access (LLVM, from readonly/writeonly attributes) or .is_const (OpenCL
        // const pointers): AMDGPUUsage "Code Object V3+ Metadata".
        const MpValue* acc = a.get(".actual_access");
        const MpValue* is_const = a.get(".is_const");
        if (acc && acc->type == MpValue::Type::Str && acc->s == "read_only")
          ka.access = KernelArg::Access::ReadOnly;
        else if (acc && acc->type == MpValue::Type::Str && acc->s == "write_only")
          ka.access = KernelArg::Access::WriteOnly;
        else if (is_const && is_const->type == MpValue::Type::Bool && is_const->b)
          ka.access = KernelArg::Access::ReadOnly;
      }
      else if (*kind == "by_value")
        ka.kind = KernelArg::Kind::Value;
      else if (kind->rfind("hidden_", 0) == 0)
        ka.kind = KernelArg::Kind::Hidden;
      else
        // dynamic_shared_pointer, image, sampler, pipe, queue: hcq cannot fill these.
        fail("metadata " + aw + " has unsupported .value_kind '" + *kind + "'");
      km.args.push_back(std::move(ka));
    }
  }
  return km;
}

// The processor in "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string processor_of(const std::string& triple_target) {
  auto dd = triple_target.find("--");
  std::string p = dd == std::string::npos ? triple_target : triple_target.substr(dd + 2);
  return p.substr(0, p.find(':'));
}

struct ElfHandle {
  Elf* e = nullptr;
  ~ElfHandle() {
    if (e) elf_end(e);
  }
};

void init_libelf() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!ok) throw Error("libelf: elf_version failed: " + std::string(elf_errmsg(-1)));
}

std::string elf_err() {
  const char* m = elf_errmsg(-1);
  return m ? m : "unknown libelf error";
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string target_of_mach(uint32_t mach) {
  for (auto& m : kMachs)
    if (m.mach == mach) return m.name;
  return {};
}

uint32_t mach_of_target(const std::string& target) {
  const std::string p = processor_of(target);
  for (auto& m : kMachs)
    if (p == m.name) return m.mach;
  return 0;
}

KernelDescriptor KernelDescriptor::decode(const std::byte* b) {
  // Offsets: AMDHSAKernelDescriptor.h (kernel_descriptor_t).
  KernelDescriptor kd;
  kd.group_segment_fixed_size = load_le<uint32_t>(b + 0);
  kd.private_segment_fixed_size = load_le<uint32_t>(b + 4);
  kd.kernarg_size = load_le<uint32_t>(b + 8);
  kd.kernel_code_entry_byte_offset = load_le<int64_t>(b + 16);
  kd.compute_pgm_rsrc3 = load_le<uint32_t>(b + 44);
  kd.compute_pgm_rsrc1 = load_le<uint32_t>(b + 48);
  kd.compute_pgm_rsrc2 = load_le<uint32_t>(b + 52);
  kd.kernel_code_properties = load_le<uint16_t>(b + 56);
  kd.kernarg_preload = load_le<uint16_t>(b + 58);
  return kd;
}

int KernelDescriptor::kernarg_sgpr() const {
  // kernel_code_properties bits and user SGPR order (AMDHSAKernelDescriptor.h, AMDGPUUsage.rst
  // "Initial Kernel Execution State"): private segment buffer (4), dispatch ptr (2), queue
  // ptr (2), kernarg segment ptr (2), ... Only the enabled ones are packed from s0. The index is
  // computed from the order, never from USER_SGPR_COUNT, which gfx11 pads up to 16.
  const uint32_t p = kernel_code_properties;
  if (!(p & (1u << 3))) return -1;
  int idx = 0;
  if (p & (1u << 0)) idx += 4;  // ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER
  if (p & (1u << 1)) idx += 2;  // ENABLE_SGPR_DISPATCH_PTR
  if (p & (1u << 2)) idx += 2;  // ENABLE_SGPR_QUEUE_PTR
  return idx;                   // ENABLE_SGPR_KERNARG_SEGMENT_PTR comes next
}

CodeObject CodeObject::parse(std::span<const std::byte> image) {
  CodeObject co;
  const uint64_t size = image.size();

  // Identification, checked by hand first so the messages can be specific.
  if (size < EI_NIDENT || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0)
    fail("not an ELF file (" + std::to_string(size) + " bytes, no \\x7fELF magic)");
  auto ident = [&](int i) { return std::to_integer<uint8_t>(image[i]); };
  if (ident(EI_CLASS) != ELFCLASS64)
    fail("ELF class " + std::to_string(ident(EI_CLASS)) + ", expected 2 (ELFCLASS64)");
  if (ident(EI_DATA) != ELFDATA2LSB)
    fail("ELF data encoding " + std::to_string(ident(EI_DATA)) +
         ", expected 1 (little-endian)");
  if (ident(EI_OSABI) != kOsAbiAmdgpuHsa)
    fail("ELF OS ABI " + std::to_string(ident(EI_OSABI)) + ", expected 64 (AMDGPU HSA)");
  const uint8_t abi = ident(EI_ABIVERSION);
  if (abi < kAbiV4 || abi > kAbiV6)
    fail("ELF ABI version " + std::to_string(abi) +
         " is not a supported code object version (expected 2, 3 or 4 for v4, v5, v6)");
  if (size < sizeof(Elf64_Ehdr))
    fail("truncated: " + std::to_string(size) + " bytes, the ELF header needs 64");

  // Our private copy: libelf reads it in place.
  co.bytes_.assign(image.begin(), image.end());
  init_libelf();
  ElfHandle h;
  h.e = elf_memory(reinterpret_cast<char*>(co.bytes_.data()), co.bytes_.size());
  if (!h.e || elf_kind(h.e) != ELF_K_ELF) fail("libelf cannot read it: " + elf_err());
  Elf* e = h.e;

  GElf_Ehdr eh;
  if (!gelf_getehdr(e, &eh)) fail("cannot read the ELF header: " + elf_err());
  if (eh.e_machine != kEmAmdgpu)
    fail("e_machine " + std::to_string(eh.e_machine) + ", expected 224 (EM_AMDGPU)");
  if (eh.e_type != ET_DYN)
    fail("e_type " + std::to_string(eh.e_type) +
         ", expected 3 (ET_DYN, a linked shared object; link the .o with ld.lld -shared)");
  co.mach_ = eh.e_flags & kMachMask;
  co.target_ = target_of_mach(co.mach_);
  if (co.target_.empty()) fail("unknown EF_AMDGPU_MACH " + hex(co.mach_) + " in e_flags " +
                               hex(eh.e_flags));

  // Header tables must lie inside the file.
  if (eh.e_phnum == PN_XNUM) fail("extended program header numbering (PN_XNUM) is not supported");
  if (eh.e_phnum && (eh.e_phentsize != sizeof(Elf64_Phdr) ||
                     !in_bounds(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), size)))
    fail("program header table (offset " + hex(eh.e_phoff) + ", " +
         std::to_string(eh.e_phnum) + " entries) is outside the " + std::to_string(size) +
         "-byte file (truncated?)");
  // Section count from the raw header (libelf reports 0 sections when the table is cut off);
  // e_shnum == 0 with a table present means the count is in section 0's sh_size.
  uint64_t shnum = eh.e_shnum;
  if (shnum == 0 && eh.e_shoff != 0) {
    if (!in_bounds(eh.e_shoff, sizeof(Elf64_Shdr), size))
      fail("section header table at " + hex(eh.e_shoff) + " is outside the " +
           std::to_string(size) + "-byte file (truncated?)");
    shnum = load_le<uint64_t>(co.bytes_.data() + eh.e_shoff + offsetof(Elf64_Shdr, sh_size));
  }
  if (shnum && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                shnum > size / sizeof(Elf64_Shdr) ||
                !in_bounds(eh.e_shoff, shnum * sizeof(Elf64_Shdr), size)))
    fail("section header table (offset " + hex(eh.e_shoff) + ", " + std::to_string(shnum) +
         " entries) is outside the " + std::to_string(size) + "-byte file (truncated?)");
  size_t libelf_shnum = 0;
  if (elf_getshdrnum(e, &libelf_shnum) != 0 || libelf_shnum != shnum)
    fail("cannot read the section header table: " + elf_err());
  if (shnum == 0) fail("no section headers (the symbol table is needed to find kernels)");

  // Segments.
  size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0 || phnum != eh.e_phnum)
    fail("cannot read the program header table: " + elf_err());
  uint64_t end = 0;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph)) fail("cannot read program header: " + elf_err());
    if (ph.p_type != PT_LOAD) continue;
    uint64_t seg_end;
    if (!in_bounds(ph.p_offset, ph.p_filesz, size))
      fail("PT_LOAD segment #" + std::to_string(i) + " file range " + hex(ph.p_offset) + "+" +
           hex(ph.p_filesz) + " is outside the " + std::to_string(size) + "-byte file");
    if (ph.p_filesz > ph.p_memsz)
      fail("PT_LOAD segment #" + std::to_string(i) + " has p_filesz " + hex(ph.p_filesz) +
           " > p_memsz " + hex(ph.p_memsz));
    if (!add_ok(ph.p_vaddr, ph.p_memsz, seg_end) || seg_end > kMaxImageBytes)
      fail("PT_LOAD segment #" + std::to_string(i) + " at " + hex(ph.p_vaddr) + "+" +
           hex(ph.p_memsz) + " ends beyond the 1 GiB image limit");
    end = std::max(end, seg_end);
    co.segments_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
  }
  if (co.segments_.empty()) fail("no PT_LOAD segments");
  co.image_bytes_ = (end + kPage - 1) / kPage * kPage;

  // File offset of the image range [va, va + len) if a segment's file bytes hold it.
  auto file_offset_of = [&](uint64_t va, uint64_t len) -> std::optional<uint64_t> {
    for (auto& s : co.segments_)
      if (va >= s.vaddr && in_bounds(va - s.vaddr, len, s.filesz)) return s.offset + (va - s.vaddr);
    return std::nullopt;
  };
  auto in_some_segment = [&](uint64_t va, uint64_t len) {
    for (auto& s : co.segments_)
      if (va >= s.vaddr && in_bounds(va - s.vaddr, len, s.memsz)) return true;
    return false;
  };

  // Sections: every one we read must lie inside the file.
  Elf_Scn* dynsym = nullptr;
  Elf_Scn* symtab = nullptr;
  std::vector<Elf_Scn*> notes, relas;
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) fail("cannot read a section header: " + elf_err());
    if (sh.sh_type != SHT_NOBITS && !in_bounds(sh.sh_offset, sh.sh_size, size))
      fail("section #" + std::to_string(elf_ndxscn(scn)) + " (type " +
           std::to_string(sh.sh_type) + ") at " + hex(sh.sh_offset) + "+" + hex(sh.sh_size) +
           " is outside the " + std::to_string(size) + "-byte file");
    switch (sh.sh_type) {
      case SHT_DYNSYM:
        if (!dynsym) dynsym = scn;
        break;
      case SHT_SYMTAB:
        if (!symtab) symtab = scn;
        break;
      case SHT_NOTE: notes.push_back(scn); break;
      case SHT_RELA:
        // Only allocated relocation sections (.rela.dyn) are for the loader; non-allocated
        // ones (ld --emit-relocs) describe link-time fixups that are already applied.
        if (sh.sh_flags & SHF_ALLOC) relas.push_back(scn);
        break;
      case SHT_REL:
        if (sh.sh_flags & SHF_ALLOC)
          fail("section #" + std::to_string(elf_ndxscn(scn)) +
               " holds SHT_REL relocations; AMDGPU uses SHT_RELA only");
        break;
      default: break;
    }
  }

  // A symbol table with its string table; validated entry count.
  struct SymTab {
    Elf_Data* data = nullptr;
    size_t strndx = 0;
    size_t count = 0;
  };
  auto open_symtab = [&](Elf_Scn* scn) {
    SymTab t;
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) fail("cannot read a section header: " + elf_err());
    if (sh.sh_entsize != sizeof(Elf64_Sym))
      fail("symbol table section #" + std::to_string(elf_ndxscn(scn)) + " has entry size " +
           std::to_string(sh.sh_entsize) + ", expected 24");
    if (sh.sh_link == 0 || sh.sh_link >= shnum)
      fail("symbol table section #" + std::to_string(elf_ndxscn(scn)) +
           " links to no string table (sh_link " + std::to_string(sh.sh_link) + ")");
    GElf_Shdr strsh;
    Elf_Scn* strscn = elf_getscn(e, sh.sh_link);
    if (!strscn || !gelf_getshdr(strscn, &strsh) || strsh.sh_type != SHT_STRTAB)
      fail("symbol table section #" + std::to_string(elf_ndxscn(scn)) +
           " links to section #" + std::to_string(sh.sh_link) + ", which is not a string table");
    t.data = elf_getdata(scn, nullptr);
    if (!t.data) fail("cannot read the symbol table: " + elf_err());
    t.strndx = sh.sh_link;
    t.count = t.data->d_size / sizeof(Elf64_Sym);
    return t;
  };
  auto sym_name = [&](const SymTab& t, const GElf_Sym& s) -> std::string {
    const char* n = elf_strptr(e, t.strndx, s.st_name);
    if (!n) fail("symbol name offset " + std::to_string(s.st_name) + " is outside the string table");
    return n;
  };

  // Kernels: "<name>.kd" STT_OBJECT symbols. Prefer .dynsym (what a loader sees; it survives
  // stripping); fall back to .symtab.
  Elf_Scn* kscn = dynsym ? dynsym : symtab;
  if (!kscn) fail("no symbol table (.dynsym or .symtab)");
  const SymTab ksyms = open_symtab(kscn);
  std::map<std::string, Kernel> by_symbol;
  for (size_t i = 1; i < ksyms.count; ++i) {
    GElf_Sym s;
    if (!gelf_getsym(ksyms.data, static_cast<int>(i), &s)) fail("cannot read symbol: " + elf_err());
    if (GELF_ST_TYPE(s.st_info) != STT_OBJECT) continue;
    std::string sym = sym_name(ksyms, s);
    if (sym.size() <= 3 || sym.compare(sym.size() - 3, 3, ".kd") != 0) continue;
    if (s.st_shndx == SHN_UNDEF) fail("kernel descriptor symbol '" + sym + "' is undefined");
    if (s.st_size != KernelDescriptor::kBytes)
      fail("kernel descriptor symbol '" + sym + "' has size " + std::to_string(s.st_size) +
           ", expected 64");
    auto off = file_offset_of(s.st_value, KernelDescriptor::kBytes);
    if (!off)
      fail("kernel descriptor '" + sym + "' at " + hex(s.st_value) +
           " is outside the file's loaded segments");
    Kernel k;
    k.name = sym.substr(0, sym.size() - 3);
    k.descriptor_offset = s.st_value;
    k.kd = KernelDescriptor::decode(co.bytes_.data() + *off);
    uint64_t entry = s.st_value + static_cast<uint64_t>(k.kd.kernel_code_entry_byte_offset);
    if (!in_some_segment(entry, 4))
      fail("kernel '" + k.name + "' code entry " + hex(entry) + " (descriptor " +
           hex(s.st_value) + " + " + std::to_string(k.kd.kernel_code_entry_byte_offset) +
           ") is outside the image");
    if (entry % 256)
      fail("kernel '" + k.name + "' code entry " + hex(entry) +
           " is not 256-byte aligned (COMPUTE_PGM_LO takes address >> 8)");
    k.kernarg_size = k.kd.kernarg_size;
    k.lds_bytes = k.kd.group_segment_fixed_size;
    k.scratch_bytes = k.kd.private_segment_fixed_size;
    k.wave_size = k.kd.wave32() ? 32 : 64;
    by_symbol.emplace(sym, std::move(k));
  }
  if (by_symbol.empty()) fail("no kernels (no '<name>.kd' descriptor symbols)");

  // Metadata note. Absent: keep what the descriptors say, with no argument list.
  for (Elf_Scn* scn : notes) {
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d) fail("cannot read a note section: " + elf_err());
    size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    bool found = false;
    while (off < d->d_size) {
      size_t next = gelf_getnote(d, off, &nh, &name_off, &desc_off);
      if (next == 0) fail("malformed note at offset " + std::to_string(off) + " of section #" +
                          std::to_string(elf_ndxscn(scn)));
      const char* base = static_cast<const char*>(d->d_buf);
      if (!in_bounds(name_off, nh.n_namesz, d->d_size) ||
          !in_bounds(desc_off, nh.n_descsz, d->d_size))
        fail("note at offset " + std::to_string(off) + " runs past its section");
      const bool amdgpu =
          nh.n_namesz == 7 && std::memcmp(base + name_off, "AMDGPU", 7) == 0;
      if (amdgpu && nh.n_type == kNtAmdgpuMetadata) {
        MsgpackReader rd(reinterpret_cast<const std::byte*>(base + desc_off), nh.n_descsz);
        MpValue root = rd.parse_all();
        if (root.type != MpValue::Type::Map) fail("metadata note is not a msgpack map");
        if (auto* t = md_str(root, "amdhsa.target", "")) {
          if (processor_of(*t) != co.target_)
            fail("metadata amdhsa.target '" + *t + "' does not match e_flags target " +
                 co.target_);
        }
        const MpValue* ks = root.get("amdhsa.kernels");
        if (!ks || ks->type != MpValue::Type::Array)
          fail("metadata has no amdhsa.kernels array");
        for (size_t i = 0; i < ks->arr.size(); ++i) {
          KernelMeta km = read_kernel_meta(ks->arr[i], i);
          auto it = by_symbol.find(km.symbol);
          if (it == by_symbol.end())
            fail("metadata describes kernel '" + km.name + "' but there is no descriptor symbol '" +
                 km.symbol + "'");
          Kernel& k = it->second;
          k.name = km.name;
          if (km.kernarg_size) k.kernarg_size = *km.kernarg_size;
          if (km.kernarg_align) k.kernarg_align = *km.kernarg_align;
          if (km.wave_size) k.wave_size = *km.wave_size;
          if (km.lds) k.lds_bytes = *km.lds;
          if (km.scratch) k.scratch_bytes = *km.scratch;
          if (k.kernarg_align == 0 || (k.kernarg_align & (k.kernarg_align - 1)))
            fail("kernel '" + k.name + "' .kernarg_segment_align " +
                 std::to_string(k.kernarg_align) + " is not a power of two");
          if (k.wave_size != 32 && k.wave_size != 64)
            fail("kernel '" + k.name + "' .wavefront_size " + std::to_string(k.wave_size) +
                 ", expected 32 or 64");
          for (auto& a : km.args)
            if (!in_bounds(a.offset, a.size, k.kernarg_size))
              fail("kernel '" + k.name + "' argument at offset " + std::to_string(a.offset) +
                   " size " + std::to_string(a.size) + " is outside its " +
                   std::to_string(k.kernarg_size) + "-byte kernarg segment");
          k.args = std::move(km.args);
        }
        found = true;
        break;
      }
      off = next;
    }
    if (found) break;
  }

  for (auto& [sym, k] : by_symbol) co.kernels_.push_back(std::move(k));
  std::sort(co.kernels_.begin(), co.kernels_.end(),
            [](const Kernel& a, const Kernel& b) { return a.descriptor_offset < b.descriptor_offset; });

  // Dynamic relocations.
  for (Elf_Scn* scn : relas) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) fail("cannot read a section header: " + elf_err());
    if (sh.sh_entsize != sizeof(Elf64_Rela))
      fail("relocation section #" + std::to_string(elf_ndxscn(scn)) + " has entry size " +
           std::to_string(sh.sh_entsize) + ", expected 24");
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d) fail("cannot read relocations: " + elf_err());
    std::optional<SymTab> rsyms;
    const size_t n = d->d_size / sizeof(Elf64_Rela);
    for (size_t i = 0; i < n; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(d, static_cast<int>(i), &r)) fail("cannot read relocation: " + elf_err());
      const uint32_t type = static_cast<uint32_t>(GELF_R_TYPE(r.r_info));
      const uint64_t symi = GELF_R_SYM(r.r_info);
      Reloc rel{r.r_offset, type, 0, r.r_addend};
      if (type == kRelocNone) continue;
      if (type != kRelocRelative64 && type != kRelocAbs64)
        fail("unsupported relocation type " + std::to_string(type) + " at " + hex(r.r_offset) +
             " (only R_AMDGPU_NONE, R_AMDGPU_ABS64 and R_AMDGPU_RELATIVE64 are loaded)");
      if (!in_some_segment(r.r_offset, 8))
        fail("relocation at " + hex(r.r_offset) + " is outside the loaded segments");
      if (type == kRelocAbs64) {
        if (!rsyms) {
          Elf_Scn* ss = elf_getscn(e, sh.sh_link);
          GElf_Shdr ssh;
          if (!ss || !gelf_getshdr(ss, &ssh) ||
              (ssh.sh_type != SHT_DYNSYM && ssh.sh_type != SHT_SYMTAB))
            fail("relocation section #" + std::to_string(elf_ndxscn(scn)) +
                 " does not link to a symbol table");
          rsyms = open_symtab(ss);
        }
        if (symi == 0 || symi >= rsyms->count)
          fail("R_AMDGPU_ABS64 at " + hex(r.r_offset) + " names symbol #" +
               std::to_string(symi) + ", which does not exist");
        GElf_Sym s;
        if (!gelf_getsym(rsyms->data, static_cast<int>(symi), &s))
          fail("cannot read symbol: " + elf_err());
        if (s.st_shndx == SHN_UNDEF)
          fail("R_AMDGPU_ABS64 at " + hex(r.r_offset) + " refers to undefined symbol '" +
               sym_name(*rsyms, s) + "' (link with --no-undefined)");
        rel.symbol_value = s.st_value;
      }
      co.relocs_.push_back(rel);
    }
  }
  return co;
}

void CodeObject::load(void* dst, uint64_t base_va) const {
  auto* out = static_cast<std::byte*>(dst);
  std::memset(out, 0, image_bytes_);
  for (auto& s : segments_) {
    // Checked in parse(); kept as a guard since this writes device memory.
    if (!in_bounds(s.vaddr, s.memsz, image_bytes_) || !in_bounds(s.offset, s.filesz, bytes_.size()))
      fail("segment at " + hex(s.vaddr) + " does not fit the image");
    std::memcpy(out + s.vaddr, bytes_.data() + s.offset, s.filesz);
  }
  for (auto& r : relocs_) {
    if (!in_bounds(r.offset, 8, image_bytes_))
      fail("relocation at " + hex(r.offset) + " does not fit the image");
    uint64_t v = base_va + static_cast<uint64_t>(r.addend);  // RELATIVE64: B + A
    if (r.type == kRelocAbs64) v += r.symbol_value;         // ABS64: S + A, S = B + st_value
    std::memcpy(out + r.offset, &v, 8);
  }
}

// ---------------------------------------------------------------------------------------------
// find_kernel_at: only plain, bounds-checked struct reads of the loaded image.

namespace {

class ImageReader {
 public:
  ImageReader(const std::byte* p, uint64_t n) : p_(p), n_(n) {}
  template <class T>
  bool read(uint64_t off, T& out) const {
    if (!in_bounds(off, sizeof(T), n_)) return false;
    std::memcpy(&out, p_ + off, sizeof(T));
    return true;
  }
  // A NUL-terminated string starting at `off` and ending before `limit`.
  bool str(uint64_t off, uint64_t limit, std::string& out) const {
    limit = std::min(limit, n_);
    if (off >= limit) return false;
    const void* z = std::memchr(p_ + off, 0, limit - off);
    if (!z) return false;
    out.assign(reinterpret_cast<const char*>(p_ + off), static_cast<const std::byte*>(z) - (p_ + off));
    return true;
  }
  uint64_t size() const { return n_; }
  const std::byte* data() const { return p_; }

 private:
  const std::byte* p_;
  uint64_t n_;
};

// Number of dynamic symbols from a GNU hash table at `gh`: one past the highest symbol index
// any bucket chain reaches (the chain's last entry has bit 0 set).
bool gnu_hash_count(const ImageReader& img, uint64_t gh, uint64_t& count) {
  uint32_t nbuckets, symoffset, bloom_size, bloom_shift;
  if (!img.read(gh, nbuckets) || !img.read(gh + 4, symoffset) || !img.read(gh + 8, bloom_size) ||
      !img.read(gh + 12, bloom_shift))
    return false;
  const uint64_t buckets = gh + 16 + uint64_t{bloom_size} * 8;
  if (!in_bounds(buckets, uint64_t{nbuckets} * 4, img.size())) return false;
  uint32_t max_idx = 0;
  for (uint32_t b = 0; b < nbuckets; ++b) {
    uint32_t v;
    if (!img.read(buckets + uint64_t{b} * 4, v)) return false;
    max_idx = std::max(max_idx, v);
  }
  if (max_idx < symoffset) {  // every bucket empty
    count = symoffset;
    return true;
  }
  const uint64_t chains = buckets + uint64_t{nbuckets} * 4;
  for (uint64_t i = max_idx;; ++i) {
    uint32_t h;
    if (!img.read(chains + (i - symoffset) * 4, h)) return false;
    if (h & 1) {
      count = i + 1;
      return true;
    }
  }
}

}  // namespace

bool find_kernel_at(const std::byte* image, uint64_t image_size, uint64_t entry_offset,
                    std::string& name, KernelDescriptor& kd) {
  if (!image) return false;
  const ImageReader img(image, image_size);
  Elf64_Ehdr eh;
  if (!img.read(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != kEmAmdgpu ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return false;

  // PT_DYNAMIC, read where it was loaded (p_vaddr). The program headers themselves are in the
  // first PT_LOAD, which lld maps at vaddr == file offset == 0.
  uint64_t dyn = 0, dyn_size = 0;
  bool have_dyn = false;
  for (uint32_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!img.read(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), ph)) return false;
    if (ph.p_type == PT_DYNAMIC) {
      dyn = ph.p_vaddr;
      dyn_size = ph.p_memsz;
      have_dyn = true;
      break;
    }
  }
  if (!have_dyn) return false;

  uint64_t symtab = 0, strtab = 0, strsz = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0;
  bool have_sym = false, have_str = false;
  for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn_size; off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    if (!img.read(dyn + off, d)) return false;
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_SYMTAB: symtab = d.d_un.d_ptr; have_sym = true; break;
      case DT_STRTAB: strtab = d.d_un.d_ptr; have_str = true; break;
      case DT_STRSZ: strsz = d.d_un.d_val; break;
      case DT_SYMENT: syment = d.d_un.d_val; break;
      case DT_HASH: hash = d.d_un.d_ptr; break;
      case DT_GNU_HASH: gnu_hash = d.d_un.d_ptr; break;
      default: break;
    }
  }
  if (!have_sym || !have_str || syment < sizeof(Elf64_Sym)) return false;

  // Symbol count: DT_HASH's nchain, else derived from DT_GNU_HASH.
  uint64_t count = 0;
  uint32_t nchain;
  if (hash && img.read(hash + 4, nchain))
    count = nchain;
  else if (!gnu_hash || !gnu_hash_count(img, gnu_hash, count))
    return false;
  if (count > image_size / syment) return false;  // cannot all be in the image

  uint64_t str_end;
  if (!add_ok(strtab, strsz, str_end)) return false;
  uint64_t sym_off;
  for (uint64_t i = 1; i < count; ++i) {
    Elf64_Sym s;
    if (!add_ok(symtab, i * syment, sym_off) || !img.read(sym_off, s)) return false;
    if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_size != KernelDescriptor::kBytes ||
        s.st_shndx == SHN_UNDEF || !in_bounds(s.st_value, KernelDescriptor::kBytes, image_size))
      continue;
    const KernelDescriptor d = KernelDescriptor::decode(image + s.st_value);
    if (s.st_value + static_cast<uint64_t>(d.kernel_code_entry_byte_offset) != entry_offset)
      continue;
    std::string n;
    uint64_t name_off;
    if (!add_ok(strtab, s.st_name, name_off) || !img.str(name_off, str_end, n)) continue;
    if (n.size() <= 3 || n.compare(n.size() - 3, 3, ".kd") != 0) continue;
    name = n.substr(0, n.size() - 3);
    kd = d;
    return true;
  }
  return false;
}

}  // namespace hcq::amd
