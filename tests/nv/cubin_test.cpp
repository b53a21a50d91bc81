// The cubin loader: the cubins nvcc built from kernels/kernels.cu (every sm target embedded;
// skipped when there was no nvcc) must show the five kernels with the parameter layout the CPU
// twins in kernels/cpu_kernels.cpp use; a cubin built here byte by byte checks each .nv.info
// attribute, the relocations and the exact error messages; corrupt inputs must be rejected
// with hcq::InvalidInput, never crash.
#include "nv/cubin.hpp"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "core/error.hpp"
#include "kernels.hpp"

namespace hcq::nv {
namespace {

using Bytes = std::vector<std::byte>;

template <class T>
T get(const Bytes& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void put(Bytes& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

std::string message_of(const Bytes& b) {
  try {
    parse_cubin(b);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(parsed)";
}

void expect_invalid(const Bytes& b, const std::string& what) {
  const std::string m = message_of(b);
  EXPECT_NE(m.find(what), std::string::npos)
      << "message: " << m << "\nexpected to contain: " << what;
  EXPECT_EQ(m.rfind("cubin: ", 0), 0u) << m;
}

// ---------------------------------------------------------------------------------------------
// The cubins built from kernels.cu.

struct Target {
  const char* name;
  uint32_t sm;
  uint32_t param_base;  // EIATTR_PARAM_CBANK offset CUDA 13's ptxas uses for the target
};
constexpr Target kTargets[] = {
    {"sm_80", 80, 0x160}, {"sm_89", 89, 0x160}, {"sm_90", 90, 0x210}, {"sm_100", 100, 0x380}};

std::vector<std::pair<Target, Bytes>> embedded() {
  std::vector<std::pair<Target, Bytes>> out;
  for (const auto& t : kTargets) {
    auto s = kernels::code_object(t.name);
    if (!s.empty()) out.emplace_back(t, Bytes(s.begin(), s.end()));
  }
  return out;
}

#define REQUIRE_EMBEDDED(var)                   \
  const auto var = embedded();                  \
  if (var.empty()) GTEST_SKIP() << "no cubin was built (no nvcc)"

// The section headers of a (valid) ELF64 file, for the tests that corrupt one.
struct Shdr {
  size_t at;  // file offset of the header
  Elf64_Shdr h;
  std::string name;
};
std::vector<Shdr> section_headers(const Bytes& b) {
  const auto eh = get<Elf64_Ehdr>(b, 0);
  std::vector<Shdr> out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const size_t at = eh.e_shoff + i * sizeof(Elf64_Shdr);
    out.push_back({at, get<Elf64_Shdr>(b, at), ""});
  }
  const auto& st = out[eh.e_shstrndx].h;
  for (auto& s : out) s.name = reinterpret_cast<const char*>(b.data() + st.sh_offset + s.h.sh_name);
  return out;
}
const Shdr& section_named(const std::vector<Shdr>& v, const std::string& name) {
  for (const auto& s : v)
    if (s.name == name) return s;
  throw std::runtime_error("no section " + name);
}

struct ExpectedParam {
  uint32_t offset, size;
};
const std::map<std::string, std::vector<ExpectedParam>> kParams = {
    {"empty", {}},
    {"fill_u32", {{0, 8}, {8, 4}, {12, 4}, {16, 4}}},
    {"vector_add", {{0, 8}, {8, 8}, {16, 8}, {24, 4}, {28, 4}}},
    {"scale_add", {{0, 8}, {8, 4}, {12, 4}, {16, 4}, {20, 4}}},
    {"spin_until", {{0, 8}}},
    {"copy_bytes", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}},
};

TEST(Cubin, BuiltTargetsListsAmdCodeObjectsOnly) {
  // The cubins are found by name; built_targets() stays the AMDHSA list its callers parse.
  for (const auto& t : kernels::built_targets()) EXPECT_NE(t.rfind("sm_", 0), 0u) << t;
}

TEST(Cubin, EmbeddedKernels) {
  REQUIRE_EMBEDDED(cubins);
  for (const auto& [t, b] : cubins) {
    SCOPED_TRACE(t.name);
    const Cubin c = parse_cubin(b);
    EXPECT_EQ(c.sm, t.sm);
    EXPECT_GE(c.image_bytes, b.size());
    EXPECT_EQ(c.base_alignment % 128, 0u);
    EXPECT_TRUE(c.relocs.empty());  // the kernels reference no global or constant data
    ASSERT_EQ(c.kernels.size(), kParams.size());
    for (const auto& [name, expected] : kParams) {
      SCOPED_TRACE(name);
      const CubinKernel* k = c.find(name);
      ASSERT_NE(k, nullptr);
      EXPECT_EQ(k->name, name);
      ASSERT_EQ(k->params.size(), expected.size());
      uint32_t end = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(k->params[i].ordinal, i);
        EXPECT_EQ(k->params[i].offset, expected[i].offset) << "parameter " << i;
        EXPECT_EQ(k->params[i].size, expected[i].size) << "parameter " << i;
        end = expected[i].offset + expected[i].size;
      }
      EXPECT_EQ(k->param_bytes, end);
      EXPECT_EQ(k->param_base, t.param_base);
      EXPECT_GT(k->registers, 0u);
      EXPECT_LE(k->registers, 255u);
      EXPECT_EQ(k->max_threads, 0u);  // no __launch_bounds__
      EXPECT_EQ(k->shared_bytes, 0u);
      EXPECT_EQ(k->local_bytes, 0u);
      EXPECT_EQ(k->barriers, 0u);
      EXPECT_TRUE(k->banks.empty());
      // The code: 128-byte aligned, whole 16-byte instructions, inside the file.
      EXPECT_EQ(k->code_offset % 128, 0u);
      EXPECT_GT(k->code_size, 0u);
      EXPECT_EQ(k->code_size % 16, 0u);
      EXPECT_LE(k->code_offset + k->code_size, b.size());
      for (uint64_t off : {k->code_offset, k->code_offset + k->code_size / 2,
                           k->code_offset + k->code_size - 1})
        EXPECT_EQ(c.kernel_at(off), k) << "offset " << off;
      EXPECT_NE(c.kernel_at(k->code_offset + k->code_size), k);
      EXPECT_NE(c.kernel_at(k->code_offset - 1), k);
    }
    EXPECT_EQ(c.kernel_at(0), nullptr);            // the ELF header
    EXPECT_EQ(c.kernel_at(b.size()), nullptr);
    EXPECT_EQ(c.find("nope"), nullptr);
    // Nothing to patch: the image stays the file.
    Bytes image = b;
    image.resize(c.image_bytes);
    apply_relocations(c, image, 0x7f0000000000ull);
    EXPECT_TRUE(std::equal(b.begin(), b.end(), image.begin()));
  }
}

TEST(Cubin, EmbeddedParamsMatchConstantBankZero) {
  // Each kernel's .nv.constant0.<kernel> is the driver's area followed by the parameters.
  REQUIRE_EMBEDDED(cubins);
  for (const auto& [t, b] : cubins) {
    SCOPED_TRACE(t.name);
    const Cubin c = parse_cubin(b);
    const auto secs = section_headers(b);
    uint64_t reserved = 0;  // 0x40 bytes on sm_100 with CUDA 13
    for (const auto& s : secs)
      if (s.name == ".nv.shared.reserved.0") reserved = s.h.sh_size;
    EXPECT_EQ(c.reserved_shared_bytes, reserved);
    for (const auto& k : c.kernels) {
      const auto& s = section_named(secs, ".nv.constant0." + k.name);
      EXPECT_EQ(s.h.sh_size, uint64_t{k.param_base} + k.param_bytes) << k.name;
      const auto& text = section_named(secs, ".text." + k.name);
      EXPECT_EQ(k.code_offset, text.h.sh_offset) << k.name;
      EXPECT_EQ(k.code_size, text.h.sh_size) << k.name;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A cubin built byte by byte: one kernel "k" with every attribute the parser reads, a helper
// function in its .text section, module constant bank 3 holding two relocated pointers,
// initialised and zero-initialised global data, and relocated instruction fields.

struct MiniSection {
  std::string name;
  uint32_t type = SHT_PROGBITS;
  uint64_t flags = 0;
  Bytes data{};
  uint32_t link = 0, info = 0;
  uint64_t align = 1, entsize = 0, nobits = 0;
};

void append(Bytes& b, const void* p, size_t n) {
  const auto* c = static_cast<const std::byte*>(p);
  b.insert(b.end(), c, c + n);
}
template <class T>
void append_value(Bytes& b, T v) {
  append(b, &v, sizeof v);
}

// .nv.info records.
void rec_sval(Bytes& b, uint8_t attr, std::initializer_list<uint32_t> words) {
  b.push_back(std::byte{4});
  b.push_back(std::byte{attr});
  append_value<uint16_t>(b, static_cast<uint16_t>(4 * words.size()));
  for (uint32_t w : words) append_value(b, w);
}
void rec_short(Bytes& b, uint8_t fmt, uint8_t attr, uint16_t v) {
  b.push_back(std::byte{fmt});
  b.push_back(std::byte{attr});
  append_value(b, v);
}

Elf64_Sym sym(uint32_t name, uint8_t bind, uint8_t type, uint8_t other, uint16_t shndx,
              uint64_t value, uint64_t size) {
  Elf64_Sym s{};
  s.st_name = name;
  s.st_info = static_cast<uint8_t>(ELF64_ST_INFO(bind, type));
  s.st_other = other;
  s.st_shndx = shndx;
  s.st_value = value;
  s.st_size = size;
  return s;
}
Elf64_Rela rela(uint64_t offset, uint32_t symbol, uint32_t type, int64_t addend) {
  Elf64_Rela r{};
  r.r_offset = offset;
  r.r_info = ELF64_R_INFO(symbol, type);
  r.r_addend = addend;
  return r;
}

// Section and symbol indices of the mini cubin.
enum : uint32_t {
  kShstrtab = 1, kStrtab, kSymtab, kInfo, kInfoK, kTextK, kConst0K, kConst3, kGlobalInit,
  kGlobal, kSharedK, kRelaConst3, kRelaTextK, kRelDebug, kDebugFrame, kSectionCount
};
enum : uint32_t { kSymConst0 = 1, kSymBss, kSymInit, kSymHelper, kSymK, kSymbolCount };
constexpr uint64_t kTextBytes = 256;
constexpr uint32_t kParamBase = 0x160, kParamBytes = 12;

struct Mini {
  Bytes bytes;
  std::vector<uint64_t> offset;  // file offset of each section's data
  uint64_t shoff = 0;
  size_t info_k_kparam = 0;      // offset in .nv.info.k of the first KPARAM_INFO record
  size_t shdr(uint32_t i) const { return shoff + i * sizeof(Elf64_Shdr); }
  size_t symbol(uint32_t i) const { return offset[kSymtab] + i * sizeof(Elf64_Sym); }
};

Mini build_mini() {
  std::vector<MiniSection> s(kSectionCount);
  s[kShstrtab] = {".shstrtab", SHT_STRTAB};
  s[kStrtab] = {".strtab", SHT_STRTAB};

  // Symbol names.
  Bytes strtab{std::byte{0}};
  auto add_name = [&](const char* n) {
    const uint32_t at = static_cast<uint32_t>(strtab.size());
    append(strtab, n, std::strlen(n) + 1);
    return at;
  };
  Bytes symtab;
  append_value(symtab, Elf64_Sym{});
  append_value(symtab, sym(0, STB_LOCAL, STT_SECTION, 0, kConst0K, 0, 0));
  append_value(symtab, sym(add_name("g_bss"), STB_LOCAL, STT_OBJECT, 0, kGlobal, 0, 8));
  append_value(symtab, sym(add_name("g_init"), STB_LOCAL, STT_OBJECT, 0, kGlobalInit, 0, 16));
  append_value(symtab, sym(add_name("helper"), STB_LOCAL, STT_FUNC, 0, kTextK, 0x80, 0x80));
  append_value(symtab, sym(add_name("k"), STB_GLOBAL, STT_FUNC, 0x10, kTextK, 0, kTextBytes));
  s[kStrtab].data = strtab;
  s[kSymtab] = {".symtab", SHT_SYMTAB, 0, symtab, kStrtab, kSymK, 8, sizeof(Elf64_Sym)};

  Bytes info;  // module: per-function registers and stack
  rec_sval(info, 0x2f, {kSymK, 24});   // EIATTR_REGCOUNT
  rec_sval(info, 0x11, {kSymK, 16});   // EIATTR_FRAME_SIZE
  rec_sval(info, 0x12, {kSymK, 32});   // EIATTR_MIN_STACK_SIZE
  rec_sval(info, 0x2f, {kSymHelper, 40});
  s[kInfo] = {".nv.info", 0x70000000, 0, info, kSymtab, 0, 4};

  Bytes infok;
  rec_sval(infok, 0x37, {0x82});                                  // EIATTR_CUDA_API_VERSION
  rec_sval(infok, 0x0a, {kSymConst0, kParamBytes << 16 | kParamBase});  // EIATTR_PARAM_CBANK
  rec_short(infok, 3, 0x19, kParamBytes);                         // EIATTR_CBANK_PARAM_SIZE
  const size_t kparam_at = infok.size();
  rec_sval(infok, 0x17, {0, 1u | 8u << 16, 4u << 18 | 0x1f << 12});  // KPARAM_INFO ordinal 1
  rec_sval(infok, 0x17, {0, 0u | 0u << 16, 8u << 18 | 0x1f << 12});  // KPARAM_INFO ordinal 0
  rec_sval(infok, 0x05, {64, 2, 1});                              // EIATTR_MAX_THREADS
  rec_short(infok, 2, 0x4c, 2);                                   // EIATTR_NUM_BARRIERS
  rec_short(infok, 1, 0x35, 0);                                   // an EIFMT_NVAL record
  s[kInfoK] = {".nv.info.k", 0x70000000, SHF_INFO_LINK, infok, kSymtab, kTextK, 4};

  // Code: 0xab bytes, so patched fields show which bits they changed. sh_info and sh_flags say
  // 10 registers and 3 barriers; the .nv.info records (24, 2) take precedence.
  s[kTextK] = {".text.k", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR | (uint64_t{3} << 20),
               Bytes(kTextBytes, std::byte{0xab}), kSymtab, 10u << 24 | kSymK, 128};
  s[kConst0K] = {".nv.constant0.k", SHT_PROGBITS, SHF_ALLOC | SHF_INFO_LINK,
                 Bytes(kParamBase + kParamBytes), 0, kTextK, 4};
  s[kConst3] = {".nv.constant3", SHT_PROGBITS, SHF_ALLOC, Bytes(16), 0, 0, 8};
  Bytes init;
  for (int i = 0; i < 16; ++i) init.push_back(std::byte(0x10 + i));
  s[kGlobalInit] = {".nv.global.init", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, init, 0, 0, 8};
  s[kGlobal] = {".nv.global", SHT_NOBITS, SHF_ALLOC | SHF_WRITE, {}, 0, 0, 64, 0, 8};
  s[kSharedK] = {".nv.shared.k", SHT_NOBITS, SHF_ALLOC | SHF_WRITE, {}, 0, kTextK, 16, 0, 0x180};

  Bytes r3;
  append_value(r3, rela(0, kSymBss, 2, 0));   // R_CUDA_64 -> g_bss
  append_value(r3, rela(8, kSymInit, 2, 4));  // R_CUDA_64 -> g_init + 4
  s[kRelaConst3] = {".rela.nv.constant3", SHT_RELA, SHF_INFO_LINK, r3, kSymtab, kConst3, 8,
                    sizeof(Elf64_Rela)};
  Bytes rt;
  append_value(rt, rela(0x20, kSymInit, 56, 8));  // R_CUDA_ABS32_LO_32 -> g_init + 8
  append_value(rt, rela(0x30, kSymInit, 57, 8));  // R_CUDA_ABS32_HI_32
  append_value(rt, rela(0x40, kSymInit, 43, 0));  // R_CUDA_ABS32_LO_20 -> g_init
  s[kRelaTextK] = {".rela.text.k", SHT_RELA, SHF_INFO_LINK, rt, kSymtab, kTextK, 8,
                   sizeof(Elf64_Rela)};
  // Debug information is not loaded: its relocations are skipped, whatever their type.
  Bytes rd;
  Elf64_Rel rel{};
  rel.r_offset = 0;
  rel.r_info = ELF64_R_INFO(kSymK, 99);
  append_value(rd, rel);
  s[kRelDebug] = {".rel.debug_frame", SHT_REL, SHF_INFO_LINK, rd, kSymtab, kDebugFrame, 8,
                  sizeof(Elf64_Rel)};
  s[kDebugFrame] = {".debug_frame", SHT_PROGBITS, 0, Bytes(16), 0, 0, 1};

  // Section names.
  Bytes shstrtab{std::byte{0}};
  std::vector<uint32_t> name_at(kSectionCount, 0);
  for (uint32_t i = 1; i < kSectionCount; ++i) {
    name_at[i] = static_cast<uint32_t>(shstrtab.size());
    append(shstrtab, s[i].name.data(), s[i].name.size() + 1);
  }
  s[kShstrtab].data = shstrtab;

  // Layout: header, section data in order, section headers.
  Mini m;
  m.bytes.resize(sizeof(Elf64_Ehdr));
  m.offset.assign(kSectionCount, 0);
  for (uint32_t i = 1; i < kSectionCount; ++i) {
    const uint64_t a = std::max<uint64_t>(s[i].align, 1);
    m.bytes.resize((m.bytes.size() + a - 1) / a * a);
    m.offset[i] = m.bytes.size();
    append(m.bytes, s[i].data.data(), s[i].data.size());
  }
  m.bytes.resize((m.bytes.size() + 7) / 8 * 8);
  m.shoff = m.bytes.size();
  append_value(m.bytes, Elf64_Shdr{});
  for (uint32_t i = 1; i < kSectionCount; ++i) {
    Elf64_Shdr h{};
    h.sh_name = name_at[i];
    h.sh_type = s[i].type;
    h.sh_flags = s[i].flags;
    h.sh_offset = m.offset[i];
    h.sh_size = s[i].type == SHT_NOBITS ? s[i].nobits : s[i].data.size();
    h.sh_link = s[i].link;
    h.sh_info = s[i].info;
    h.sh_addralign = s[i].align;
    h.sh_entsize = s[i].entsize;
    append_value(m.bytes, h);
  }
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = 0x41;
  eh.e_ident[EI_ABIVERSION] = 8;
  eh.e_type = ET_EXEC;
  eh.e_machine = 190;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = m.shoff;
  eh.e_flags = 0x06005a04;  // sm_90, as CUDA 13 writes it
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = kSectionCount;
  eh.e_shstrndx = kShstrtab;
  put(m.bytes, 0, eh);
  m.info_k_kparam = kparam_at;
  return m;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

TEST(Cubin, HandBuiltAttributes) {
  const Mini m = build_mini();
  const Cubin c = parse_cubin(m.bytes);
  EXPECT_EQ(c.sm, 90u);
  EXPECT_EQ(c.base_alignment, 128u);
  const uint64_t bss = align_up(m.bytes.size(), 64);
  EXPECT_EQ(c.image_bytes, bss + 8);
  EXPECT_EQ(c.reserved_shared_bytes, 0u);
  ASSERT_EQ(c.kernels.size(), 1u);  // "helper" has no STO_CUDA_ENTRY
  const CubinKernel& k = c.kernels[0];
  EXPECT_EQ(k.name, "k");
  EXPECT_EQ(k.symbol, kSymK);
  EXPECT_EQ(k.code_offset, m.offset[kTextK]);
  EXPECT_EQ(k.code_size, kTextBytes);
  EXPECT_EQ(k.registers, 24u);
  EXPECT_EQ(k.barriers, 2u);
  EXPECT_EQ(k.shared_bytes, 0x180u);
  EXPECT_EQ(k.local_bytes, 32u);
  EXPECT_EQ(k.param_base, kParamBase);
  EXPECT_EQ(k.param_bytes, kParamBytes);
  EXPECT_EQ(k.max_threads, 128u);
  ASSERT_EQ(k.params.size(), 2u);
  EXPECT_EQ(k.params[0].ordinal, 0u);
  EXPECT_EQ(k.params[0].offset, 0u);
  EXPECT_EQ(k.params[0].size, 8u);
  EXPECT_EQ(k.params[1].ordinal, 1u);
  EXPECT_EQ(k.params[1].offset, 8u);
  EXPECT_EQ(k.params[1].size, 4u);
  ASSERT_EQ(k.banks.size(), 1u);
  EXPECT_EQ(k.banks[0].bank, 3u);
  EXPECT_EQ(k.banks[0].offset, m.offset[kConst3]);
  EXPECT_EQ(k.banks[0].size, 16u);
  EXPECT_EQ(c.kernel_at(m.offset[kTextK] + 0x90), &k);  // the helper's code is k's too
  EXPECT_EQ(c.kernel_at(m.offset[kTextK] + kTextBytes), nullptr);

  // Without the .nv.info records: sh_info's registers and sh_flags' barriers.
  Mini m2 = build_mini();
  put<uint32_t>(m2.bytes, m2.shdr(kInfo) + offsetof(Elf64_Shdr, sh_type), SHT_PROGBITS);
  put<uint32_t>(m2.bytes, m2.shdr(kInfoK) + offsetof(Elf64_Shdr, sh_type), SHT_PROGBITS);
  const Cubin c2 = parse_cubin(m2.bytes);
  EXPECT_EQ(c2.kernels.at(0).registers, 10u);
  EXPECT_EQ(c2.kernels.at(0).barriers, 3u);
  EXPECT_EQ(c2.kernels.at(0).local_bytes, 0u);
  EXPECT_TRUE(c2.kernels.at(0).params.empty());
  // No EIATTR_PARAM_CBANK: the parameters would start where .nv.constant0.k ends.
  EXPECT_EQ(c2.kernels.at(0).param_base, kParamBase + kParamBytes);

  // ELFABIVERSION_CUDA_V1 keeps the sm number in e_flags bits 7:0.
  Mini m3 = build_mini();
  m3.bytes[EI_ABIVERSION] = std::byte{7};
  put<uint32_t>(m3.bytes, offsetof(Elf64_Ehdr, e_flags), 0x00500550);
  EXPECT_EQ(parse_cubin(m3.bytes).sm, 80u);
}

TEST(Cubin, HandBuiltRelocations) {
  const Mini m = build_mini();
  const Cubin c = parse_cubin(m.bytes);
  const uint64_t bss = align_up(m.bytes.size(), 64), init = m.offset[kGlobalInit];
  const uint64_t text = m.offset[kTextK], c3 = m.offset[kConst3];
  ASSERT_EQ(c.relocs.size(), 5u);  // .rel.debug_frame is skipped
  const std::vector<std::tuple<uint64_t, uint32_t, uint64_t>> expected = {
      {c3, 2, bss}, {c3 + 8, 2, init + 4}, {text + 0x20, 56, init + 8},
      {text + 0x30, 57, init + 8}, {text + 0x40, 43, init}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(c.relocs[i].offset, std::get<0>(expected[i])) << i;
    EXPECT_EQ(c.relocs[i].type, std::get<1>(expected[i])) << i;
    EXPECT_EQ(c.relocs[i].target, std::get<2>(expected[i])) << i;
  }
  EXPECT_STREQ(reloc_name(56), "R_CUDA_ABS32_LO_32");
  EXPECT_EQ(reloc_name(99), nullptr);

  const uint64_t base = 0x7f1234560000ull;
  Bytes image = m.bytes;
  image.resize(c.image_bytes);
  apply_relocations(c, image, base);
  EXPECT_EQ(get<uint64_t>(image, c3), base + bss);
  EXPECT_EQ(get<uint64_t>(image, c3 + 8), base + init + 4);
  const uint64_t v = base + init + 8;
  EXPECT_EQ(get<uint64_t>(image, text + 0x20), (v & 0xffffffffu) << 32 | 0xababababu);
  EXPECT_EQ(get<uint64_t>(image, text + 0x30), (v >> 32) << 32 | 0xababababu);
  const uint64_t lo20 = (base + init) & 0xffffffffu;
  const uint64_t keep = ~(uint64_t{0xffffffff} << 20);
  EXPECT_EQ(get<uint64_t>(image, text + 0x40), (0xababababababababull & keep) | lo20 << 20);
  // Everything else is the file as it was.
  size_t changed = 0;
  for (size_t i = 0; i < m.bytes.size(); ++i) changed += image[i] != m.bytes[i];
  EXPECT_LE(changed, 8u + 8 + 4 + 4 + 5);

  // Hand-made relocation lists: a 32-bit field takes a low address, rejects a high one, and a
  // field outside the image is an error.
  Cubin small;
  small.relocs = {{0, 1, 0x10}};  // R_CUDA_32
  Bytes word(8, std::byte{0xee});
  apply_relocations(small, word, 0x1000);
  EXPECT_EQ(get<uint32_t>(word, 0), 0x1010u);
  EXPECT_EQ(get<uint32_t>(word, 4), 0xeeeeeeeeu);
  try {
    apply_relocations(small, word, uint64_t{1} << 33);
    ADD_FAILURE() << "a 33-bit address fitted a 32-bit field";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "cubin: R_CUDA_32 at 0x0: 0x200000010 does not fit its 32-bit field");
  }
  small.relocs = {{4, 2, 0}};  // R_CUDA_64 at 4 in an 8-byte image
  EXPECT_THROW(apply_relocations(small, word, 0), InvalidInput);
}

TEST(Cubin, HandBuiltExactErrors) {
  const Mini base = build_mini();
  const std::string size = hex(base.bytes.size());
  EXPECT_EQ(message_of({}), "cubin: not an ELF file: the input is empty");
  EXPECT_EQ(message_of(Bytes(base.bytes.begin(), base.bytes.begin() + 20)),
            "cubin: truncated ELF header: the file is 20 bytes, an ELF64 header is 64");
  {
    Bytes b = base.bytes;
    b[EI_CLASS] = std::byte{ELFCLASS32};
    EXPECT_EQ(message_of(b), "cubin: ELF class 1 (ELFCLASS32), expected ELFCLASS64 (2)");
  }
  {
    Bytes b = base.bytes;
    put<uint16_t>(b, offsetof(Elf64_Ehdr, e_machine), 224);  // EM_AMDGPU
    EXPECT_EQ(message_of(b), "cubin: e_machine is 224, expected EM_CUDA (190)");
  }
  {
    Bytes b = base.bytes;
    b[EI_ABIVERSION] = std::byte{3};
    EXPECT_EQ(message_of(b),
              "cubin: EI_ABIVERSION is 3, expected 7 or 8 (ELFABIVERSION_CUDA_V1/V2)");
  }
  {
    Bytes b = base.bytes;  // .nv.info.k's data starts past the end of the file
    put<uint64_t>(b, base.shdr(kInfoK) + offsetof(Elf64_Shdr, sh_offset), b.size() - 4);
    EXPECT_EQ(message_of(b), "cubin: section 5 (.nv.info.k) at file offset " +
                                 hex(b.size() - 4) + ", " +
                                 hex(get<uint64_t>(b, base.shdr(kInfoK) +
                                                          offsetof(Elf64_Shdr, sh_size))) +
                                 " bytes, runs past the end of the file (" + size + " bytes)");
  }
  {
    Bytes b = base.bytes;  // the first KPARAM_INFO record claims 200 value bytes
    const size_t rec = base.offset[kInfoK] + base.info_k_kparam;
    put<uint16_t>(b, rec + 2, 200);
    const uint64_t left = get<uint64_t>(b, base.shdr(kInfoK) + offsetof(Elf64_Shdr, sh_size)) -
                          base.info_k_kparam - 4;
    EXPECT_EQ(message_of(b), "cubin: section 5 (.nv.info.k): record at +" +
                                 hex(base.info_k_kparam) +
                                 " (EIATTR 0x17) claims 200 value bytes but only " +
                                 std::to_string(left) + " remain in the section");
  }
  {
    Bytes b = base.bytes;  // a KPARAM_INFO record of 8 bytes
    const size_t rec = base.offset[kInfoK] + base.info_k_kparam;
    put<uint16_t>(b, rec + 2, 8);
    expect_invalid(b, "EIATTR_KPARAM_INFO has 8 value bytes, expected 12");
  }
  {
    Bytes b = base.bytes;  // an unknown relocation type in a loaded section
    put<uint64_t>(b, base.offset[kRelaTextK] + offsetof(Elf64_Rela, r_info),
                  ELF64_R_INFO(kSymInit, 99));
    EXPECT_EQ(message_of(b),
              "cubin: section 13 (.rela.text.k): entry at +0x0: unknown relocation type 99");
  }
  {
    Bytes b = base.bytes;  // the kernel symbol in no section
    put<uint16_t>(b, base.symbol(kSymK) + offsetof(Elf64_Sym, st_shndx), SHN_UNDEF);
    EXPECT_EQ(message_of(b), "cubin: kernel 'k' (symbol 5) has no .text section (st_shndx 0x0)");
  }
  {
    Bytes b = base.bytes;  // the kernel symbol in a data section
    put<uint16_t>(b, base.symbol(kSymK) + offsetof(Elf64_Sym, st_shndx), kConst3);
    EXPECT_EQ(message_of(b),
              "cubin: kernel 'k' (symbol 5) has no .text section: section 8 (.nv.constant3) is "
              "not executable code");
  }
  {
    Bytes b = base.bytes;  // a relocation patching past its section
    put<uint64_t>(b, base.offset[kRelaConst3] + offsetof(Elf64_Rela, r_offset), 12);
    EXPECT_EQ(message_of(b),
              "cubin: section 12 (.rela.nv.constant3): entry at +0x0: R_CUDA_64 at 0xc (8 bytes) "
              "is outside section 8 (.nv.constant3) (0x10 bytes)");
  }
  {
    Bytes b = base.bytes;  // a symbol value past its section
    put<uint64_t>(b, base.symbol(kSymInit) + offsetof(Elf64_Sym, st_value), 0x100);
    expect_invalid(b, "symbol 3 ('g_init'): value 0x100 is outside section 9 (.nv.global.init)");
  }
  {
    Bytes b = base.bytes;  // the section header table past the end
    put<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), b.size() - 64);
    expect_invalid(b, "section header table at " + hex(b.size() - 64));
  }
  {
    Bytes b = base.bytes;  // two parameters with ordinal 0
    put<uint16_t>(b, base.offset[kInfoK] + base.info_k_kparam + 8, 0);
    expect_invalid(b, "EIATTR_KPARAM_INFO ordinals are not 0..1 each once");
  }
  {
    Bytes b = base.bytes;  // a parameter past the parameter block
    put<uint16_t>(b, base.offset[kInfoK] + base.info_k_kparam + 10, 12);
    expect_invalid(b, "parameter 1 at offset 0xc, 4 bytes, runs past the 0xc-byte parameter block");
  }
  {
    Bytes b = base.bytes;  // an unknown record format
    b[base.offset[kInfoK]] = std::byte{9};
    expect_invalid(b, "record at +0x0 (EIATTR 0x37) has unknown format 9");
  }
  {
    Bytes b = base.bytes;  // launch bounds whose product overflows
    const size_t rec = base.offset[kInfoK] + base.info_k_kparam + 2 * 16;
    ASSERT_EQ(std::to_integer<int>(b[rec + 1]), 0x05);
    put<uint32_t>(b, rec + 4, 0x10000);
    put<uint32_t>(b, rec + 8, 0x10000);
    expect_invalid(b, "EIATTR_MAX_THREADS 65536 x 65536 x 1 is too large");
  }
  expect_invalid(Bytes(3, std::byte{0x7f}), "not an ELF file");
}

// ---------------------------------------------------------------------------------------------
// Corrupt versions of real cubins.

std::vector<std::pair<std::string, Bytes>> corpus() {
  std::vector<std::pair<std::string, Bytes>> out;
  for (auto& [t, b] : embedded()) out.emplace_back(t.name, b);
  out.emplace_back("hand-built", build_mini().bytes);
  return out;
}

// Whatever parses must be usable: relocations applied to an image of the size it asks for,
// kernels found by address, without touching memory out of bounds (ASan checks that).
void exercise(const Cubin& c, const Bytes& b) {
  if (c.image_bytes > (64u << 20)) return;
  Bytes image = b;
  image.resize(c.image_bytes);
  try {
    apply_relocations(c, image, 0x7f0000000000ull);
  } catch (const InvalidInput&) {
  }
  for (const auto& k : c.kernels) {
    c.kernel_at(k.code_offset);
    c.find(k.name);
  }
}

TEST(Cubin, Truncated) {
  for (const auto& [name, b] : corpus()) {
    SCOPED_TRACE(name);
    std::set<size_t> lengths;
    for (size_t n = 0; n <= sizeof(Elf64_Ehdr); ++n) lengths.insert(n);
    for (size_t n = sizeof(Elf64_Ehdr); n < b.size(); n += 61) lengths.insert(n);
    for (const auto& s : section_headers(b))  // around every section's end and the tables
      for (size_t n : {s.h.sh_offset, s.h.sh_offset + s.h.sh_size, s.at, s.at + 1})
        for (size_t d : {size_t{0}, size_t{1}})
          if (n >= d && n - d < b.size()) lengths.insert(n - d);
    lengths.insert(b.size() - 1);
    for (size_t n : lengths) {
      const Bytes cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
      try {
        parse_cubin(cut);
        ADD_FAILURE() << "a " << n << "-byte prefix of " << b.size() << " bytes parsed";
      } catch (const InvalidInput& e) {
        ASSERT_EQ(std::string(e.what()).rfind("cubin: ", 0), 0u) << e.what();
      }
    }
  }
}

TEST(Cubin, CorruptHeadersAndSections) {
  REQUIRE_EMBEDDED(cubins);
  for (const auto& [t, b] : cubins) {
    SCOPED_TRACE(t.name);
    {
      Bytes c = b;
      c[EI_CLASS] = std::byte{ELFCLASS32};
      expect_invalid(c, "ELF class 1 (ELFCLASS32), expected ELFCLASS64 (2)");
    }
    {
      Bytes c = b;
      put<uint16_t>(c, offsetof(Elf64_Ehdr, e_machine), EM_X86_64);
      expect_invalid(c, "e_machine is 62, expected EM_CUDA (190)");
    }
    {
      Bytes c = b;
      c[0] = std::byte{0x7e};
      expect_invalid(c, "not an ELF file");
    }
    const auto secs = section_headers(b);
    {
      Bytes c = b;  // .nv.info.fill_u32's data past the end of the file
      const auto& s = section_named(secs, ".nv.info.fill_u32");
      put<uint64_t>(c, s.at + offsetof(Elf64_Shdr, sh_offset), c.size());
      expect_invalid(c, "(.nv.info.fill_u32) at file offset " + hex(c.size()));
      expect_invalid(c, "runs past the end of the file (" + hex(c.size()) + " bytes)");
    }
    {
      Bytes c = b;  // a section size that wraps around
      const auto& s = section_named(secs, ".text.vector_add");
      put<uint64_t>(c, s.at + offsetof(Elf64_Shdr, sh_size), ~uint64_t{0} - 8);
      expect_invalid(c, "(.text.vector_add) at file offset");
    }
    {
      Bytes c = b;  // the first record of .nv.info.fill_u32 runs past its section
      const auto& s = section_named(secs, ".nv.info.fill_u32");
      ASSERT_EQ(std::to_integer<int>(c[s.h.sh_offset]), 4);  // EIFMT_SVAL
      put<uint16_t>(c, s.h.sh_offset + 2, 0xfff0);
      expect_invalid(c, "(.nv.info.fill_u32): record at +0x0");
      expect_invalid(c, "claims 65520 value bytes but only");
    }
    {
      Bytes c = b;  // the section name table index out of range
      put<uint16_t>(c, offsetof(Elf64_Ehdr, e_shstrndx), static_cast<uint16_t>(secs.size()));
      expect_invalid(c, "e_shstrndx " + std::to_string(secs.size()) + " is out of range");
    }
  }
}

TEST(Cubin, RandomByteFlips) {
  std::mt19937_64 rng(20250607);  // fixed seed: the same inputs every run
  for (const auto& [name, b] : corpus()) {
    SCOPED_TRACE(name);
    int parsed = 0, rejected = 0;
    constexpr int kIterations = 2500;
    for (int iter = 0; iter < kIterations; ++iter) {
      Bytes c = b;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        // Half the flips hit the headers and metadata (the first and last parts of the file),
        // where they matter most; the rest anywhere.
        size_t at = rng() % c.size();
        if (rng() % 2) at = rng() % 2 ? rng() % std::min<size_t>(c.size(), 0xc00)
                                      : c.size() - 1 - rng() % std::min<size_t>(c.size(), 0x800);
        c[at] ^= static_cast<std::byte>(1 + rng() % 255);
      }
      try {
        exercise(parse_cubin(c), c);
        ++parsed;
      } catch (const InvalidInput& e) {
        ASSERT_EQ(std::string(e.what()).rfind("cubin: ", 0), 0u) << e.what();
        ++rejected;
      }
    }
    EXPECT_EQ(parsed + rejected, kIterations);
    EXPECT_GT(parsed, 0);  // flips in code or unread metadata are harmless
    EXPECT_GT(rejected, 0);
  }
}

}  // namespace
}  // namespace hcq::nv
