// NVIDIA cubins: the ELF64 container read with the shared reader (common/elf.hpp, as the AMD
// code object loader does), which checks every offset and size before it is used; the
// .nv.info attribute records; and the R_CUDA relocations.
//
// Facts used (all public; checked against the cubins CUDA 13.0's nvcc writes for sm_80, sm_89,
// sm_90 and sm_100):
// * ELF64 layout and the standard SHT_/SHF_/STT_ values: the System V gABI (<elf.h>).
// * EM_CUDA = 190; EI_ABIVERSION 7 (ELFABIVERSION_CUDA_V1: the sm number in e_flags bits 7:0,
//   EF_CUDA_SM) and 8 (ELFABIVERSION_CUDA_V2: bits 15:8, EF_CUDA_SM_MASK / EF_CUDA_SM_OFFSET):
//   LLVM llvm/include/llvm/BinaryFormat/ELF.h and ELFObjectFile.cpp (getNVPTXCPUName). CUDA 13
//   writes version 8 for every target, sm_80 included (e_flags 0x06005004).
// * st_other bit 0x10 = STO_CUDA_ENTRY marks a __global__ function: NVIDIA's cuda-gdb
//   (gdb/cuda, "STO_CUDA_ENTRY 0x10 /* CUDA - break_on_launch */").
// * .text.<kernel>: sh_info bits 31:24 = register count (SHI_REGISTERS), sh_flags bits 23:20 =
//   barrier count (SHF_BARRIERS, at most 15): cloudcores/CuAssembler CuAsm/CuAsmParser.py
//   (CuAsmSection.updateResourceInfo); the same register field is read by tinygrad
//   (tinygrad/runtime/ops_nv.py, sh_info >> 24) and gdev. CUDA 13 leaves both 0 on sm_90+.
// * .nv.info records (section type SHT_CUDA_INFO = 0x70000000): u8 format, u8 attribute, then
//   for EIFMT_NVAL (1) / EIFMT_BVAL (2) / EIFMT_HVAL (3) a u16 value, for EIFMT_SVAL (4) a u16
//   byte count and that many bytes: CuAssembler CuAsm/CuNVInfo.py (decode) and
//   VivekPanyam/cudaparsers src/cubin.rs. Attribute numbers: the EIATTR list in
//   redplait/denvdis (ei_attrs.txt, as reproduced in its disassembler sources) and
//   cudaparsers, consistent with CuNVInfo.EIATTR. The ones read here:
//     0x05 EIATTR_MAX_THREADS      SVAL u32 x, y, z                   (per kernel)
//     0x0a EIATTR_PARAM_CBANK      SVAL u32 symbol of .nv.constant0.<k>, u16 offset, u16 size
//                                  (CuNVInfo.py testCase2: 0x00180160 = offset 0x160, size 0x18)
//     0x11 EIATTR_FRAME_SIZE       SVAL u32 function symbol, u32 bytes (module .nv.info)
//     0x12 EIATTR_MIN_STACK_SIZE   SVAL u32 function symbol, u32 bytes (module .nv.info)
//     0x17 EIATTR_KPARAM_INFO      SVAL u32 index, u16 ordinal, u16 offset, u32 packed:
//                                  log2 alignment 7:0, space 11:8, cbank 16:12, 17 = 0 for a
//                                  constant-bank parameter, size in bytes 31:18
//                                  (cudaparsers KParamInfoValue)
//     0x19 EIATTR_CBANK_PARAM_SIZE HVAL bytes of parameters               (per kernel)
//     0x23 EIATTR_MAX_STACK_SIZE   SVAL u32 function symbol, u32 bytes (module .nv.info)
//     0x2f EIATTR_REGCOUNT         SVAL u32 function symbol, u32 registers (module .nv.info;
//                                  CuNVInfo.setRegCount)
//     0x4c EIATTR_NUM_BARRIERS     BVAL count                              (per kernel)
//   Other attributes are skipped after their length is checked.
// * R_CUDA relocation numbers: CuAssembler CuAsmParser.py (CuAsmRelocation.REL_TYPES) and the
//   full R_CUDA name table in redplait/denvdis; the field each one patches (bits a..b of the
//   64-bit word at r_offset; LO = value bits 31:0, HI = value bits 63:32) from the ptxas
//   relocation action table as documented alongside it. tinygrad's ops_nv.py applies R_CUDA_64
//   (type 2) as a u64 and R_CUDA_ABS32_LO_32 / _HI_32 (0x38 / 0x39) to bytes 4..7 of the
//   instruction, which is bits 63:32 as here.
// * Parameter offsets in bank 0 (0x160 / 0x210 / 0x380) are read from each kernel's
//   EIATTR_PARAM_CBANK; the sizes of .nv.constant0.<kernel> (base + parameter bytes) agree.
#include "nv/cubin.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>

#include "common/elf.hpp"
#include "core/error.hpp"

namespace hcq::nv {
namespace {

constexpr uint16_t kEmCuda = 190;          // EM_CUDA
constexpr uint8_t kAbiCudaV1 = 7;          // ELFABIVERSION_CUDA_V1: sm in e_flags 7:0
constexpr uint8_t kAbiCudaV2 = 8;          // ELFABIVERSION_CUDA_V2: sm in e_flags 15:8
constexpr uint32_t kShtCudaInfo = 0x70000000;  // SHT_CUDA_INFO (.nv.info*)
constexpr uint8_t kStoCudaEntry = 0x10;    // st_other: a __global__ function
constexpr uint64_t kMaxImageBytes = uint64_t{1} << 32;  // our own sanity limit

// EIFMT_* record formats and the EIATTR_* attributes read.
constexpr uint8_t kFmtNval = 1, kFmtBval = 2, kFmtHval = 3, kFmtSval = 4;
constexpr uint8_t kAttrMaxThreads = 0x05, kAttrParamCbank = 0x0a, kAttrFrameSize = 0x11,
                  kAttrMinStackSize = 0x12, kAttrKparamInfo = 0x17, kAttrCbankParamSize = 0x19,
                  kAttrMaxStackSize = 0x23, kAttrRegcount = 0x2f, kAttrNumBarriers = 0x4c;

[[noreturn]] void fail(const std::string& what) { throw InvalidInput("cubin: " + what); }

using elf::add_ok;
using elf::in_bounds;

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // hosts are little-endian, like cubins
  return v;
}

std::string quoted(std::string_view s) {
  std::string q;  // appended, not "literal" + string: GCC 12 -O3 warns (-Wrestrict) on that
  q.reserve(s.size() + 2);
  q += '\'';
  q += s;
  q += '\'';
  return q;
}

// ---------------------------------------------------------------------------------------------
// Relocations: which bits of the 64-bit little-endian word at r_offset each type writes.

enum class Part : uint8_t { Full, Lo, Hi };
struct RelocKind {
  uint32_t type;
  const char* name;
  uint8_t pos, width;  // bits [pos, pos + width) of the word at r_offset
  Part part;           // Full: the value must fit; Lo: value bits 31:0; Hi: value bits 63:32
  uint32_t bytes() const { return pos + width <= 32 ? 4 : 8; }
};

constexpr RelocKind kRelocs[] = {
    {1, "R_CUDA_32", 0, 32, Part::Full},
    {2, "R_CUDA_64", 0, 64, Part::Full},
    // G32/G64: the symbol's address in the global window. The whole image is device global
    // memory here, so that is base + target as for R_CUDA_32/64 (nvcc uses G64 for pointers
    // initialised in .nv.global.init).
    {3, "R_CUDA_G32", 0, 32, Part::Full},
    {4, "R_CUDA_G64", 0, 64, Part::Full},
    {5, "R_CUDA_ABS32_26", 26, 32, Part::Full},
    {10, "R_CUDA_ABS32_LO_26", 26, 32, Part::Lo},
    {11, "R_CUDA_ABS32_HI_26", 26, 32, Part::Hi},
    {12, "R_CUDA_ABS32_23", 23, 32, Part::Full},
    {13, "R_CUDA_ABS32_LO_23", 23, 32, Part::Lo},
    {14, "R_CUDA_ABS32_HI_23", 23, 32, Part::Hi},
    {15, "R_CUDA_ABS24_26", 26, 24, Part::Full},
    {16, "R_CUDA_ABS24_23", 23, 24, Part::Full},
    {17, "R_CUDA_ABS16_26", 26, 16, Part::Full},
    {18, "R_CUDA_ABS16_23", 23, 16, Part::Full},
    {42, "R_CUDA_ABS32_20", 20, 32, Part::Full},
    {43, "R_CUDA_ABS32_LO_20", 20, 32, Part::Lo},
    {44, "R_CUDA_ABS32_HI_20", 20, 32, Part::Hi},
    {45, "R_CUDA_ABS24_20", 20, 24, Part::Full},
    {46, "R_CUDA_ABS16_20", 20, 16, Part::Full},
    {55, "R_CUDA_ABS32_32", 32, 32, Part::Full},
    {56, "R_CUDA_ABS32_LO_32", 32, 32, Part::Lo},
    {57, "R_CUDA_ABS32_HI_32", 32, 32, Part::Hi},
    {59, "R_CUDA_ABS16_32", 32, 16, Part::Full},
    {60, "R_CUDA_ABS24_32", 32, 24, Part::Full},
    {70, "R_CUDA_32_LO", 0, 32, Part::Lo},
    {71, "R_CUDA_32_HI", 0, 32, Part::Hi},
    {74, "R_CUDA_ABS24_40", 40, 24, Part::Full},
    {100, "R_CUDA_ABS20_44", 44, 20, Part::Full},
};
constexpr uint32_t kRelocNone = 0;  // R_CUDA_NONE: nothing to do

const RelocKind* reloc_kind(uint32_t type) {
  for (const auto& k : kRelocs)
    if (k.type == type) return &k;
  return nullptr;
}

uint64_t field_mask(uint32_t width) {
  return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}

uint64_t read_word(const std::byte* p, uint32_t bytes) {
  return bytes == 4 ? uint64_t{load<uint32_t>(p)} : load<uint64_t>(p);
}

void write_word(std::byte* p, uint32_t bytes, uint64_t v) {
  if (bytes == 4) {
    const uint32_t w = static_cast<uint32_t>(v);
    std::memcpy(p, &w, 4);
  } else {
    std::memcpy(p, &v, 8);
  }
}

// ---------------------------------------------------------------------------------------------

struct KernelInfo {  // what the per-kernel .nv.info section says
  bool param_cbank = false, cbank_param_size = false, num_barriers = false;
  uint32_t param_offset = 0, param_size = 0, cbank_param_bytes = 0, barriers = 0;
  uint32_t max_threads = 0;
  std::vector<CubinParam> params;
};

struct FunctionInfo {  // what the module .nv.info says about one function symbol
  bool regcount = false;
  uint32_t registers = 0, frame = 0, min_stack = 0, max_stack = 0;
};

class Parser {
 public:
  explicit Parser(std::span<const std::byte> f)
      : file_(f, "cubin: "), f_(file_.bytes()), secs_(file_.sections()) {}

  Cubin run() {
    header();
    file_.read_tables();
    sections();
    symbols();
    place_nobits();
    for (uint32_t i = 0; i < syms_.size(); ++i) kernel_symbol(i);
    info_sections();
    for (auto& k : out_.kernels) resources(k);
    relocations();
    return std::move(out_);
  }

 private:
  elf::File file_;
  std::span<const std::byte> f_;  // the file
  const std::vector<elf::Section>& secs_;
  Cubin out_;
  std::vector<elf::Symbol> syms_;
  uint32_t symtab_ = 0;
  std::map<uint32_t, uint64_t> nobits_at_;        // section index -> image offset
  std::map<uint32_t, KernelInfo> kinfo_;          // kernel symbol -> its .nv.info.<k> records
  std::map<uint32_t, FunctionInfo> finfo_;        // function symbol -> module .nv.info records

  std::string sec_label(uint32_t i) const { return file_.section_label(i); }
  const std::byte* at(uint64_t off) const { return f_.data() + off; }

  // What a cubin's header fixes; the identification and the tables are the shared reader's.
  void header() {
    const Elf64_Ehdr& eh = file_.header();
    if (eh.e_machine != kEmCuda)
      fail("e_machine is " + std::to_string(eh.e_machine) + ", expected EM_CUDA (190)");
    const auto abi = eh.e_ident[EI_ABIVERSION];
    if (abi == kAbiCudaV1)
      out_.sm = eh.e_flags & 0xff;
    else if (abi == kAbiCudaV2)
      out_.sm = (eh.e_flags >> 8) & 0xff;
    else
      fail("EI_ABIVERSION is " + std::to_string(abi) +
           ", expected 7 or 8 (ELFABIVERSION_CUDA_V1/V2)");
    if (out_.sm == 0) fail("e_flags " + hex(eh.e_flags) + " names no sm version");
  }

  void sections() {
    for (uint32_t i = 0; i < secs_.size(); ++i) {
      const auto& s = secs_[i];
      if ((s.h.sh_flags & SHF_ALLOC) && s.h.sh_addralign > out_.base_alignment)
        out_.base_alignment = s.h.sh_addralign;
      if (s.name == ".nv.shared.reserved.0") {
        if (s.h.sh_size > std::numeric_limits<uint32_t>::max())
          fail(sec_label(i) + ": " + hex(s.h.sh_size) + " bytes of reserved shared memory");
        out_.reserved_shared_bytes = static_cast<uint32_t>(s.h.sh_size);
      }
    }
    if (out_.base_alignment > (uint64_t{1} << 20))
      fail("a loaded section asks for " + hex(out_.base_alignment) +
           "-byte alignment (more than 1 MiB)");
  }

  void symbols() {
    bool found = false;
    for (uint32_t i = 0; i < secs_.size(); ++i)
      if (secs_[i].h.sh_type == SHT_SYMTAB) {
        symtab_ = i;
        found = true;
        break;
      }
    if (!found) fail("no symbol table (no SHT_SYMTAB section)");
    syms_ = file_.symbols(symtab_);
  }

  // SHT_NOBITS global data (.nv.global*) has no bytes in the file; it goes after the file.
  void place_nobits() {
    uint64_t end = f_.size();
    for (uint32_t i = 0; i < secs_.size(); ++i) {
      const auto& s = secs_[i];
      if (s.h.sh_type != SHT_NOBITS || !(s.h.sh_flags & SHF_ALLOC) ||
          !s.name.starts_with(".nv.global"))
        continue;
      const uint64_t a = std::max<uint64_t>(s.h.sh_addralign, 1);
      uint64_t off = 0, next = 0;
      if (!add_ok(end, a - 1, off) || !add_ok(off & ~(a - 1), s.h.sh_size, next) ||
          next > kMaxImageBytes)
        fail(sec_label(i) + ": " + hex(s.h.sh_size) +
             " bytes of zero-initialised data make the image larger than 4 GiB");
      nobits_at_[i] = off & ~(a - 1);
      end = next;
    }
    out_.image_bytes = end;
  }

  void kernel_symbol(uint32_t i) {
    const auto& sym = syms_[i];
    if (ELF64_ST_TYPE(sym.s.st_info) != STT_FUNC || !(sym.s.st_other & kStoCudaEntry)) return;
    const std::string& name = sym.name;
    const std::string label = "kernel " + quoted(name) + " (symbol " + std::to_string(i) + ")";
    if (name.empty()) fail("symbol " + std::to_string(i) + " is a kernel with no name");
    if (out_.find(name)) fail(label + " is defined twice");
    const uint16_t shndx = sym.s.st_shndx;
    if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
      fail(label + " has no .text section (st_shndx " + hex(shndx) + ")");
    if (shndx >= secs_.size())
      fail(label + ": st_shndx " + std::to_string(shndx) + " is out of range (" +
           std::to_string(secs_.size()) + " sections)");
    const auto& t = secs_[shndx];
    if (t.h.sh_type != SHT_PROGBITS || !(t.h.sh_flags & SHF_EXECINSTR))
      fail(label + " has no .text section: " + sec_label(shndx) + " is not executable code");
    if (sym.s.st_value >= t.h.sh_size)
      fail(label + ": entry " + hex(sym.s.st_value) + " is outside " + sec_label(shndx) +
           " (" + hex(t.h.sh_size) + " bytes)");
    CubinKernel k;
    k.name = name;
    k.symbol = i;
    k.code_offset = t.h.sh_offset + sym.s.st_value;
    k.code_size = t.h.sh_size - sym.s.st_value;
    out_.kernels.push_back(std::move(k));
  }

  // ---- .nv.info ----

  void info_sections() {
    for (uint32_t i = 0; i < secs_.size(); ++i) {
      const auto& s = secs_[i];
      if (s.h.sh_type != kShtCudaInfo) continue;
      if (s.name == ".nv.info") {
        records(i, nullptr);
      } else if (s.name.starts_with(".nv.info.")) {
        // .nv.info.<kernel>; its sh_info (SHF_INFO_LINK) is the index of the kernel's .text
        // section. Sections for anything else are still checked, then ignored.
        const CubinKernel* k = out_.find(s.name.substr(9));
        if (!k)
          for (const auto& kk : out_.kernels)
            if (syms_[kk.symbol].s.st_shndx == s.h.sh_info) k = &kk;
        KernelInfo scratch;
        records(i, k ? &kinfo_[k->symbol] : &scratch);
      }
    }
  }

  void records(uint32_t sec, KernelInfo* k) {
    const auto data = file_.section_data(sec);
    const std::byte* base = data.data();
    const uint64_t size = data.size();
    uint64_t pos = 0;
    while (pos < size) {
      const std::string where = sec_label(sec) + ": record at +" + hex(pos);
      if (size - pos < 4)
        fail(where + " is truncated (" + std::to_string(size - pos) +
             " bytes left, a record header is 4)");
      const uint8_t fmt = std::to_integer<uint8_t>(base[pos]);
      const uint8_t attr = std::to_integer<uint8_t>(base[pos + 1]);
      const uint16_t v16 = load<uint16_t>(base + pos + 2);
      const std::string rec = where + " (EIATTR " + hex(attr) + ")";
      if (fmt < kFmtNval || fmt > kFmtSval)
        fail(rec + " has unknown format " + std::to_string(fmt) + " (EIFMT 1..4 expected)");
      std::span<const std::byte> val;
      if (fmt == kFmtSval) {
        if (v16 > size - pos - 4)
          fail(rec + " claims " + std::to_string(v16) + " value bytes but only " +
               std::to_string(size - pos - 4) + " remain in the section");
        val = {base + pos + 4, v16};
        pos += 4 + uint64_t{v16};
      } else {
        pos += 4;
      }
      attribute(rec, fmt, attr, v16, val, k);
    }
  }

  static void expect_sval(const std::string& rec, uint8_t fmt, std::span<const std::byte> v,
                          size_t bytes, const char* attr_name) {
    if (fmt != kFmtSval)
      fail(rec + ": " + attr_name + " has format " + std::to_string(fmt) +
           ", expected EIFMT_SVAL (4)");
    if (v.size() != bytes)
      fail(rec + ": " + attr_name + " has " + std::to_string(v.size()) + " value bytes, expected " +
           std::to_string(bytes));
  }
  static void expect_fmt(const std::string& rec, uint8_t fmt, uint8_t want, const char* attr_name) {
    if (fmt != want)
      fail(rec + ": " + attr_name + " has format " + std::to_string(fmt) + ", expected " +
           std::to_string(want));
  }

  // k: the kernel a per-kernel section describes; null for the module .nv.info.
  void attribute(const std::string& rec, uint8_t fmt, uint8_t attr, uint16_t v16,
                 std::span<const std::byte> v, KernelInfo* k) {
    const auto u32 = [&](size_t off) { return load<uint32_t>(v.data() + off); };
    switch (attr) {
      case kAttrRegcount:
      case kAttrFrameSize:
      case kAttrMinStackSize:
      case kAttrMaxStackSize: {
        const char* n = attr == kAttrRegcount     ? "EIATTR_REGCOUNT"
                        : attr == kAttrFrameSize  ? "EIATTR_FRAME_SIZE"
                        : attr == kAttrMinStackSize ? "EIATTR_MIN_STACK_SIZE"
                                                    : "EIATTR_MAX_STACK_SIZE";
        expect_sval(rec, fmt, v, 8, n);
        const uint32_t sym = u32(0), value = u32(4);
        if (sym >= syms_.size())
          fail(rec + ": " + n + " names symbol " + std::to_string(sym) + ", beyond the " +
               std::to_string(syms_.size()) + " symbols");
        auto& fi = finfo_[sym];
        if (attr == kAttrRegcount) {
          if (value > 255)
            fail(rec + ": EIATTR_REGCOUNT of " + std::to_string(value) +
                 " registers (at most 255)");
          fi.regcount = true;
          fi.registers = value;
        } else if (attr == kAttrFrameSize) {
          fi.frame = value;
        } else if (attr == kAttrMinStackSize) {
          fi.min_stack = value;
        } else {
          fi.max_stack = value;
        }
        return;
      }
      default:
        break;
    }
    if (!k) return;  // the other attributes read are per kernel
    switch (attr) {
      case kAttrParamCbank: {
        expect_sval(rec, fmt, v, 8, "EIATTR_PARAM_CBANK");
        const uint32_t w = u32(4);
        k->param_cbank = true;
        k->param_offset = w & 0xffff;
        k->param_size = w >> 16;
        return;
      }
      case kAttrCbankParamSize:
        expect_fmt(rec, fmt, kFmtHval, "EIATTR_CBANK_PARAM_SIZE");
        k->cbank_param_size = true;
        k->cbank_param_bytes = v16;
        return;
      case kAttrKparamInfo: {
        expect_sval(rec, fmt, v, 12, "EIATTR_KPARAM_INFO");
        CubinParam p;
        p.ordinal = load<uint16_t>(v.data() + 4);
        p.offset = load<uint16_t>(v.data() + 6);
        p.size = u32(8) >> 18;
        k->params.push_back(p);
        return;
      }
      case kAttrMaxThreads: {
        expect_sval(rec, fmt, v, 12, "EIATTR_MAX_THREADS");
        uint32_t n = 0;
        if (__builtin_mul_overflow(u32(0), u32(4), &n) || __builtin_mul_overflow(n, u32(8), &n))
          fail(rec + ": EIATTR_MAX_THREADS " + std::to_string(u32(0)) + " x " +
               std::to_string(u32(4)) + " x " + std::to_string(u32(8)) + " is too large");
        k->max_threads = n;
        return;
      }
      case kAttrNumBarriers:
        expect_fmt(rec, fmt, kFmtBval, "EIATTR_NUM_BARRIERS");
        k->num_barriers = true;
        k->barriers = v16 & 0xff;
        return;
      default:
        return;
    }
  }

  // ---- per-kernel resources ----

  // ".nv.constant<N>" -> N, ".nv.constant<N>.<kernel>" -> N and kernel; false when the name
  // is not a constant bank's.
  static bool bank_name(std::string_view name, uint32_t& bank, std::string_view& kernel) {
    constexpr std::string_view prefix = ".nv.constant";
    if (!name.starts_with(prefix)) return false;
    name.remove_prefix(prefix.size());
    size_t digits = 0;
    uint32_t n = 0;
    while (digits < name.size() && digits < 3 && name[digits] >= '0' && name[digits] <= '9')
      n = n * 10 + static_cast<uint32_t>(name[digits++] - '0');
    if (digits == 0) return false;
    name.remove_prefix(digits);
    if (!name.empty() && name[0] != '.') return false;
    kernel = name.empty() ? std::string_view{} : name.substr(1);
    bank = n;
    return true;
  }

  void resources(CubinKernel& k) {
    const std::string label = "kernel " + quoted(k.name);
    const auto& text = secs_[syms_[k.symbol].s.st_shndx].h;

    const auto fi = finfo_.find(k.symbol);
    if (fi != finfo_.end() && fi->second.regcount)
      k.registers = fi->second.registers;
    else
      k.registers = text.sh_info >> 24;
    if (fi != finfo_.end())
      k.local_bytes = std::max({fi->second.frame, fi->second.min_stack, fi->second.max_stack});

    const auto ki_it = kinfo_.find(k.symbol);
    const KernelInfo ki = ki_it != kinfo_.end() ? ki_it->second : KernelInfo{};
    k.barriers = ki.num_barriers ? ki.barriers : static_cast<uint32_t>((text.sh_flags >> 20) & 0xf);
    k.max_threads = ki.max_threads;

    uint64_t constant0_size = 0;
    bool has_constant0 = false;
    for (uint32_t i = 0; i < secs_.size(); ++i) {
      const auto& s = secs_[i];
      uint32_t bank = 0;
      std::string_view owner;
      if (bank_name(s.name, bank, owner)) {
        if (!owner.empty() && owner != k.name) continue;
        if (!s.has_bytes())
          fail(sec_label(i) + ": a constant bank with no bytes in the file (type " +
               hex(s.h.sh_type) + ")");
        if (bank >= 32)
          fail(sec_label(i) + ": constant bank " + std::to_string(bank) + " (at most 31)");
        if (bank == 0) {
          if (!owner.empty()) {
            has_constant0 = true;
            constant0_size = s.h.sh_size;
          }
          continue;
        }
        k.banks.push_back({bank, s.h.sh_offset, s.h.sh_size});
      } else if (s.name == ".nv.shared." + k.name) {
        if (s.h.sh_size > std::numeric_limits<uint32_t>::max())
          fail(sec_label(i) + ": " + hex(s.h.sh_size) + " bytes of shared memory");
        k.shared_bytes = static_cast<uint32_t>(s.h.sh_size);
      }
    }
    std::stable_sort(k.banks.begin(), k.banks.end(),
                     [](const auto& a, const auto& b) { return a.bank < b.bank; });

    if (ki.param_cbank) {
      k.param_base = ki.param_offset;
      k.param_bytes = ki.cbank_param_size ? ki.cbank_param_bytes : ki.param_size;
      if (ki.cbank_param_size && ki.cbank_param_bytes != ki.param_size)
        fail(label + ": EIATTR_CBANK_PARAM_SIZE " + hex(ki.cbank_param_bytes) +
             " disagrees with EIATTR_PARAM_CBANK's size " + hex(ki.param_size));
    } else {
      k.param_bytes = ki.cbank_param_size ? ki.cbank_param_bytes : 0;
      if (has_constant0 && constant0_size <= std::numeric_limits<uint32_t>::max() &&
          constant0_size >= k.param_bytes)
        k.param_base = static_cast<uint32_t>(constant0_size - k.param_bytes);
    }
    if (has_constant0 && uint64_t{k.param_base} + k.param_bytes > constant0_size)
      fail(label + ": parameters at " + hex(k.param_base) + " + " + hex(k.param_bytes) +
           " bytes run past .nv.constant0." + k.name + " (" + hex(constant0_size) + " bytes)");

    // Parameters, by ordinal: each ordinal once, 0 .. n-1, inside the parameter block.
    std::vector<CubinParam> params = ki.params;
    std::sort(params.begin(), params.end(),
              [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
    for (size_t j = 0; j < params.size(); ++j) {
      const auto& p = params[j];
      if (p.ordinal != j)
        fail(label + ": EIATTR_KPARAM_INFO ordinals are not 0.." +
             std::to_string(params.size() - 1) + " each once (ordinal " +
             std::to_string(p.ordinal) + " at position " + std::to_string(j) + ")");
      if (uint64_t{p.offset} + p.size > k.param_bytes)
        fail(label + ": parameter " + std::to_string(p.ordinal) + " at offset " + hex(p.offset) +
             ", " + std::to_string(p.size) + " bytes, runs past the " + hex(k.param_bytes) +
             "-byte parameter block");
    }
    k.params = std::move(params);
  }

  // ---- relocations ----

  // The image offset of symbol `i`'s value (its section's image offset + st_value).
  uint64_t symbol_offset(uint64_t i, const std::string& where) const {
    if (i >= syms_.size())
      fail(where + ": symbol " + std::to_string(i) + " is beyond the " +
           std::to_string(syms_.size()) + " symbols");
    const auto& s = syms_[i];
    const std::string sym = "symbol " + std::to_string(i) + " (" + quoted(s.name) + ")";
    const uint16_t shndx = s.s.st_shndx;
    if (shndx == SHN_UNDEF) fail(where + ": " + sym + " is undefined");
    if (shndx >= SHN_LORESERVE)
      fail(where + ": " + sym + " is in special section " + hex(shndx) + ", not supported");
    if (shndx >= secs_.size())
      fail(where + ": " + sym + ": st_shndx " + std::to_string(shndx) + " is out of range");
    const auto& h = secs_[shndx].h;
    if (s.s.st_value > h.sh_size)
      fail(where + ": " + sym + ": value " + hex(s.s.st_value) + " is outside " +
           sec_label(shndx) + " (" + hex(h.sh_size) + " bytes)");
    if (secs_[shndx].has_bytes()) return h.sh_offset + s.s.st_value;
    const auto it = nobits_at_.find(shndx);
    if (it == nobits_at_.end())
      fail(where + ": " + sym + " is in " + sec_label(shndx) +
           ", which has no place in the loaded image");
    return it->second + s.s.st_value;
  }

  void relocations() {
    for (uint32_t i = 0; i < secs_.size(); ++i) {
      const auto& rs = secs_[i];
      const bool rela = rs.h.sh_type == SHT_RELA;
      if (!rela && rs.h.sh_type != SHT_REL) continue;
      const uint64_t entsize = rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
      if (rs.h.sh_info >= secs_.size())
        fail(sec_label(i) + ": sh_info " + std::to_string(rs.h.sh_info) +
             " (the section it patches) is out of range");
      const uint32_t ti = rs.h.sh_info;
      const auto& target = secs_[ti];
      // Only loaded sections are patched; relocations of .debug_frame and the like are not
      // a loader's business.
      if (!(target.h.sh_flags & SHF_ALLOC)) continue;
      if (rs.h.sh_link != symtab_)
        fail(sec_label(i) + ": sh_link " + std::to_string(rs.h.sh_link) +
             " is not the symbol table (section " + std::to_string(symtab_) + ")");
      const std::vector<Elf64_Rela> entries = file_.relocations(i);
      if (!target.has_bytes() && !entries.empty())
        fail(sec_label(i) + " patches " + sec_label(ti) + ", which has no bytes in the file");
      for (uint64_t j = 0; j < entries.size(); ++j) {
        const Elf64_Rela& r = entries[j];
        const std::string where = sec_label(i) + ": entry at +" + hex(j * entsize);
        const uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
        if (type == kRelocNone) continue;
        const RelocKind* kind = reloc_kind(type);
        if (!kind) fail(where + ": unknown relocation type " + std::to_string(type));
        if (!in_bounds(r.r_offset, kind->bytes(), target.h.sh_size))
          fail(where + ": " + kind->name + " at " + hex(r.r_offset) + " (" +
               std::to_string(kind->bytes()) + " bytes) is outside " + sec_label(ti) + " (" +
               hex(target.h.sh_size) + " bytes)");
        const uint64_t file_off = target.h.sh_offset + r.r_offset;
        uint64_t addend = 0;
        if (rela) {
          addend = static_cast<uint64_t>(r.r_addend);
        } else if (kind->part == Part::Full) {
          // SHT_REL: the addend is what the field holds (zero in what nvcc writes). A LO/HI
          // half cannot hold the whole addend, so those take 0.
          addend = (read_word(at(file_off), kind->bytes()) >> kind->pos) & field_mask(kind->width);
        }
        const uint64_t sym = symbol_offset(ELF64_R_SYM(r.r_info), where);
        out_.relocs.push_back({file_off, type, sym + addend});
      }
    }
  }
};

}  // namespace

const CubinKernel* Cubin::find(const std::string& name) const {
  for (const auto& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

const CubinKernel* Cubin::kernel_at(uint64_t offset) const {
  for (const auto& k : kernels)
    if (offset >= k.code_offset && offset - k.code_offset < k.code_size) return &k;
  return nullptr;
}

Cubin parse_cubin(std::span<const std::byte> file) { return Parser(file).run(); }

void apply_relocations(const Cubin& c, std::span<std::byte> image, uint64_t base) {
  for (const auto& r : c.relocs) {
    const RelocKind* kind = reloc_kind(r.type);
    if (!kind) fail("relocation type " + std::to_string(r.type) + " at " + hex(r.offset) +
                    " is not supported");
    const uint32_t bytes = kind->bytes();
    if (!in_bounds(r.offset, bytes, image.size()))
      fail(std::string(kind->name) + " at " + hex(r.offset) + " is outside the " +
           hex(image.size()) + "-byte image");
    const uint64_t value = base + r.target;
    uint64_t field = value;
    if (kind->part == Part::Lo) field = value & 0xffffffffu;
    if (kind->part == Part::Hi) field = value >> 32;
    const uint64_t mask = field_mask(kind->width);
    if (field & ~mask)
      fail(std::string(kind->name) + " at " + hex(r.offset) + ": " + hex(value) +
           " does not fit its " + std::to_string(kind->width) + "-bit field");
    std::byte* p = image.data() + r.offset;
    uint64_t w = read_word(p, bytes);
    w = (w & ~(mask << kind->pos)) | (field << kind->pos);
    write_word(p, bytes, w);
  }
}

const char* reloc_name(uint32_t type) {
  const RelocKind* k = reloc_kind(type);
  return k ? k->name : nullptr;
}

}  // namespace hcq::nv
