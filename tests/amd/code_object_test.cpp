// AMDHSA code object parsing, loading and find_kernel_at, on the code objects kernels/ builds,
// plus corrupt-input tests (every malformed input must throw hcq::InvalidInput, never crash),
// and the CPU implementations of the same kernels.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "amd/code_object.hpp"
#include "core/error.hpp"
#include "emu/kernels.hpp"
#include "kernels.hpp"

namespace hcq::amd {
namespace {

using Bytes = std::vector<std::byte>;
using Kind = KernelArg::Kind;

Bytes object_for(const std::string& target) {
  auto s = kernels::code_object(target);
  return Bytes(s.begin(), s.end());
}

// Some built code object, for the corrupt-input tests; empty when none was built.
Bytes any_object() {
  for (auto& t : kernels::built_targets()) {
    auto b = object_for(t);
    if (!b.empty()) return b;
  }
  return {};
}

#define REQUIRE_ANY_OBJECT(var)                                                   \
  Bytes var = any_object();                                                       \
  if (var.empty()) GTEST_SKIP() << "no code object was built (no AMDGPU clang)"

// Throws InvalidInput whose message contains `what`.
void expect_invalid(const Bytes& b, const std::string& what) {
  try {
    CodeObject::parse(b);
    ADD_FAILURE() << "parse succeeded; expected InvalidInput containing '" << what << "'";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << what;
  }
}

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

// File offset and size of the NT_AMDGPU_METADATA descriptor (msgpack), via PT_NOTE.
std::pair<size_t, size_t> metadata_desc(const Bytes& b) {
  auto eh = get<Elf64_Ehdr>(b, 0);
  for (int i = 0; i < eh.e_phnum; ++i) {
    auto ph = get<Elf64_Phdr>(b, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type != PT_NOTE) continue;
    auto nh = get<Elf64_Nhdr>(b, ph.p_offset);
    // name "AMDGPU\0" (7 bytes) padded to 8
    return {ph.p_offset + sizeof(Elf64_Nhdr) + 8, nh.n_descsz};
  }
  return {0, 0};
}

// File offset of the .dynsym entry named `name`.
size_t dynsym_entry(const Bytes& b, const std::string& name) {
  auto eh = get<Elf64_Ehdr>(b, 0);
  for (int i = 0; i < eh.e_shnum; ++i) {
    auto sh = get<Elf64_Shdr>(b, eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (sh.sh_type != SHT_DYNSYM) continue;
    auto str = get<Elf64_Shdr>(b, eh.e_shoff + sh.sh_link * sizeof(Elf64_Shdr));
    for (size_t off = sh.sh_offset; off < sh.sh_offset + sh.sh_size; off += sizeof(Elf64_Sym)) {
      auto s = get<Elf64_Sym>(b, off);
      if (name == reinterpret_cast<const char*>(b.data() + str.sh_offset + s.st_name)) return off;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------

struct ExpectedArg {
  const char* name;
  uint32_t offset, size;
  Kind kind;
};
struct ExpectedKernel {
  uint32_t kernarg_size;
  std::vector<ExpectedArg> args;
};
// kernels/kernels.cl with OpenCL's kernarg layout; cpu_kernels.cpp reads the same offsets.
const std::map<std::string, ExpectedKernel>& expected_kernels() {
  static const std::map<std::string, ExpectedKernel> k = {
      {"empty", {0, {}}},
      {"fill_u32",
       {20,
        {{"dst", 0, 8, Kind::Buffer},
         {"value", 8, 4, Kind::Value},
         {"n", 12, 4, Kind::Value},
         {"block", 16, 4, Kind::Value}}}},
      {"vector_add",
       {32,
        {{"a", 0, 8, Kind::Buffer},
         {"b", 8, 8, Kind::Buffer},
         {"c", 16, 8, Kind::Buffer},
         {"n", 24, 4, Kind::Value},
         {"block", 28, 4, Kind::Value}}}},
      {"scale_add",
       {24,
        {{"x", 0, 8, Kind::Buffer},
         {"a", 8, 4, Kind::Value},
         {"b", 12, 4, Kind::Value},
         {"n", 16, 4, Kind::Value},
         {"block", 20, 4, Kind::Value}}}},
      {"spin_until", {8, {{"flag", 0, 8, Kind::Buffer}}}},
      {"copy_bytes",
       {24,
        {{"dst", 0, 8, Kind::Buffer},
         {"src", 8, 8, Kind::Buffer},
         {"n", 16, 4, Kind::Value},
         {"block", 20, 4, Kind::Value}}}},
  };
  return k;
}

class BuiltObject : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    bytes_ = object_for(GetParam());
    if (bytes_.empty())
      GTEST_SKIP() << "no code object built for " << GetParam()
                   << " (no clang that accepts -mcpu=" << GetParam() << ")";
  }
  Bytes bytes_;
};

TEST_P(BuiltObject, HeaderAndTarget) {
  const auto co = CodeObject::parse(bytes_);
  EXPECT_EQ(co.target(), GetParam());
  EXPECT_EQ(co.mach(), mach_of_target(GetParam()));
  EXPECT_EQ(target_of_mach(co.mach()), GetParam());
  EXPECT_GT(co.image_bytes(), 0u);
  EXPECT_EQ(co.image_bytes() % 4096, 0u);
}

TEST_P(BuiltObject, KernelsAndArguments) {
  const auto co = CodeObject::parse(bytes_);
  std::set<std::string> names;
  for (auto& k : co.kernels()) names.insert(k.name);
  EXPECT_EQ(names, (std::set<std::string>{"empty", "fill_u32", "vector_add", "scale_add",
                                          "spin_until", "copy_bytes"}));
  for (auto& k : co.kernels()) {
    SCOPED_TRACE(k.name);
    auto it = expected_kernels().find(k.name);
    ASSERT_NE(it, expected_kernels().end());
    const ExpectedKernel& want = it->second;
    EXPECT_EQ(k.kernarg_size, want.kernarg_size);
    EXPECT_EQ(k.kd.kernarg_size, want.kernarg_size);  // descriptor agrees with the metadata
    ASSERT_EQ(k.args.size(), want.args.size());
    for (size_t i = 0; i < want.args.size(); ++i) {
      SCOPED_TRACE(want.args[i].name);
      EXPECT_EQ(k.args[i].name, want.args[i].name);  // built with -cl-kernel-arg-info
      EXPECT_EQ(k.args[i].offset, want.args[i].offset);
      EXPECT_EQ(k.args[i].size, want.args[i].size);
      EXPECT_EQ(k.args[i].kind, want.args[i].kind);
    }
    if (k.name == "vector_add") {  // `const` pointers are read-only in the metadata
      EXPECT_EQ(k.args[0].access, KernelArg::Access::ReadOnly);
      EXPECT_EQ(k.args[1].access, KernelArg::Access::ReadOnly);
      EXPECT_EQ(k.args[2].access, KernelArg::Access::ReadWrite);
    }
    EXPECT_GE(k.kernarg_align, 4u);
    EXPECT_EQ(k.kernarg_align & (k.kernarg_align - 1), 0u);
    EXPECT_EQ(k.lds_bytes, 0u);
    EXPECT_EQ(k.scratch_bytes, 0u);
  }
}

TEST_P(BuiltObject, DescriptorsAreSane) {
  const auto co = CodeObject::parse(bytes_);
  const bool gfx9 = GetParam().rfind("gfx9", 0) == 0;
  for (auto& k : co.kernels()) {
    SCOPED_TRACE(k.name);
    const KernelDescriptor& kd = k.kd;
    EXPECT_EQ(k.descriptor_offset % 64, 0u);
    const uint64_t entry = k.descriptor_offset + kd.kernel_code_entry_byte_offset;
    EXPECT_EQ(entry % 256, 0u);
    EXPECT_LT(entry, co.image_bytes());
    EXPECT_NE(kd.compute_pgm_rsrc1, 0u);
    // -O2 kernels need no dispatch ptr, queue ptr or dispatch id (a PM4 dispatch has none).
    EXPECT_EQ(kd.kernel_code_properties & 0x16, 0) << std::hex << kd.kernel_code_properties;
    // Wave size: gfx9 is wave64; gfx10+ OpenCL defaults to wave32.
    EXPECT_EQ(k.wave_size, gfx9 ? 64u : 32u);
    EXPECT_EQ(kd.wave32(), !gfx9);
    // Workgroup id X is enabled in every kernel that reads it.
    if (k.name != "empty") {
      EXPECT_TRUE(kd.compute_pgm_rsrc2 & (1u << 7));
    }

    if (k.kernarg_size == 0) continue;
    // The kernarg pointer's first user SGPR. gfx90a (like every gfx9 before gfx940) and gfx1030
    // have no architected flat scratch, so LLVM always enables the 4-SGPR private segment
    // buffer in s[0:3] and the kernarg pointer lands in s[4:5]. gfx942 has architected flat
    // scratch and gfx11/gfx12 have no private segment buffer SGPRs: s[0:1].
    EXPECT_EQ(kd.kernarg_sgpr(), GetParam() == "gfx90a" || GetParam() == "gfx1030" ? 4 : 0);
    EXPECT_GE(kd.user_sgpr_count(), static_cast<uint32_t>(kd.kernarg_sgpr()) + 2);
    if (GetParam() == "gfx1100") {  // LLVM's gfx11 workaround pads user+system SGPRs to 16
      EXPECT_EQ(kd.user_sgpr_count(), 15u);
    }
  }
}

TEST_P(BuiltObject, LoadAndFindKernelAt) {
  const auto co = CodeObject::parse(bytes_);
  Bytes image(co.image_bytes(), std::byte{0xcd});
  const uint64_t base = 0x7f1234560000ull;
  co.load(image.data(), base);
  EXPECT_EQ(std::memcmp(image.data(), bytes_.data(), 16), 0);  // ELF header at the base

  std::set<uint64_t> entries;
  for (auto& k : co.kernels()) {
    SCOPED_TRACE(k.name);
    const uint64_t entry = k.descriptor_offset + k.kd.kernel_code_entry_byte_offset;
    entries.insert(entry);
    std::string name;
    KernelDescriptor kd;
    ASSERT_TRUE(find_kernel_at(image.data(), image.size(), entry, name, kd));
    EXPECT_EQ(name, k.name);
    EXPECT_EQ(kd.kernel_code_entry_byte_offset, k.kd.kernel_code_entry_byte_offset);
    EXPECT_EQ(kd.compute_pgm_rsrc1, k.kd.compute_pgm_rsrc1);
    EXPECT_EQ(kd.compute_pgm_rsrc2, k.kd.compute_pgm_rsrc2);
    EXPECT_EQ(kd.kernel_code_properties, k.kd.kernel_code_properties);
    // Not at a wrong address, and never reading past a too-small image.
    EXPECT_FALSE(find_kernel_at(image.data(), image.size(), entry + 4, name, kd));
    EXPECT_FALSE(find_kernel_at(image.data(), image.size(), entry + base, name, kd));
    EXPECT_FALSE(find_kernel_at(image.data(), 64, entry, name, kd));
  }
  std::string name;
  KernelDescriptor kd;
  EXPECT_FALSE(find_kernel_at(image.data(), image.size(), 0, name, kd));
  EXPECT_FALSE(find_kernel_at(image.data(), image.size(), co.image_bytes(), name, kd));
  EXPECT_FALSE(find_kernel_at(nullptr, 0, *entries.begin(), name, kd));
  // Every size of a truncated image: false or a hit, never a read past the end (ASan checks).
  for (uint64_t n = 0; n < image.size(); n += 7) {
    Bytes cut(image.begin(), image.begin() + n);
    find_kernel_at(cut.data(), cut.size(), *entries.begin(), name, kd);
  }
}

// find_kernel_at counts the dynamic symbols from DT_HASH, or from DT_GNU_HASH when DT_HASH is
// absent (lld writes both by default); each alone must do.
TEST_P(BuiltObject, FindKernelAtWithEitherHashTable) {
  const auto co = CodeObject::parse(bytes_);
  Bytes loaded(co.image_bytes());
  co.load(loaded.data(), 0);
  auto eh = get<Elf64_Ehdr>(loaded, 0);
  size_t dyn = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    auto ph = get<Elf64_Phdr>(loaded, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_DYNAMIC) dyn = ph.p_vaddr;
  }
  ASSERT_NE(dyn, 0u);
  for (int64_t drop : {int64_t{DT_HASH}, int64_t{DT_GNU_HASH}}) {
    Bytes image = loaded;
    for (size_t off = dyn;; off += sizeof(Elf64_Dyn)) {
      auto d = get<Elf64_Dyn>(image, off);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == drop) put<int64_t>(image, off, DT_DEBUG);  // an entry the search ignores
    }
    for (auto& k : co.kernels()) {
      std::string name;
      KernelDescriptor kd;
      EXPECT_TRUE(find_kernel_at(image.data(), image.size(),
                                 k.descriptor_offset + k.kd.kernel_code_entry_byte_offset, name,
                                 kd))
          << k.name << " without dynamic tag " << drop;
      EXPECT_EQ(name, k.name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, BuiltObject,
                         ::testing::Values("gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201"),
                         [](const auto& info) { return info.param; });

TEST(CodeObject, BuiltTargetsHaveObjects) {
  for (auto& t : kernels::built_targets()) {
    EXPECT_FALSE(kernels::code_object(t).empty()) << t;
    EXPECT_NE(mach_of_target(t), 0u) << t;
  }
  EXPECT_TRUE(kernels::code_object("gfx0").empty());
}

TEST(CodeObject, MachNames) {
  // LLVM BinaryFormat/ELF.h EF_AMDGPU_MACH values.
  EXPECT_EQ(mach_of_target("gfx90a"), 0x3fu);
  EXPECT_EQ(mach_of_target("gfx940"), 0x40u);
  EXPECT_EQ(mach_of_target("gfx941"), 0x4bu);
  EXPECT_EQ(mach_of_target("gfx942"), 0x4cu);
  EXPECT_EQ(mach_of_target("gfx1030"), 0x36u);
  EXPECT_EQ(mach_of_target("gfx1100"), 0x41u);
  EXPECT_EQ(mach_of_target("gfx1101"), 0x46u);
  EXPECT_EQ(mach_of_target("gfx1102"), 0x47u);
  EXPECT_EQ(mach_of_target("gfx1200"), 0x48u);
  EXPECT_EQ(mach_of_target("gfx1201"), 0x4eu);
  EXPECT_EQ(mach_of_target("gfx90a:sramecc+:xnack-"), 0x3fu);
  EXPECT_EQ(mach_of_target("amdgcn-amd-amdhsa--gfx1100"), 0x41u);
  EXPECT_EQ(mach_of_target("gfx9999"), 0u);
  EXPECT_EQ(target_of_mach(0x4c), "gfx942");
  EXPECT_EQ(target_of_mach(0xff), "");
}

TEST(KernelDescriptor, DecodeAndKernargSgpr) {
  std::byte raw[64] = {};
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(raw + off, &v, 4); };
  put32(0, 256);
  put32(4, 16);
  put32(8, 28);
  int64_t entry = 0x1080;
  std::memcpy(raw + 16, &entry, 8);
  put32(44, 1);
  put32(48, 0x00af0040);
  put32(52, 0x8c);
  uint16_t kcp = 0x0009, preload = 0x0083;
  std::memcpy(raw + 56, &kcp, 2);
  std::memcpy(raw + 58, &preload, 2);
  auto kd = KernelDescriptor::decode(raw);
  EXPECT_EQ(kd.group_segment_fixed_size, 256u);
  EXPECT_EQ(kd.private_segment_fixed_size, 16u);
  EXPECT_EQ(kd.kernarg_size, 28u);
  EXPECT_EQ(kd.kernel_code_entry_byte_offset, 0x1080);
  EXPECT_EQ(kd.compute_pgm_rsrc3, 1u);
  EXPECT_EQ(kd.compute_pgm_rsrc1, 0x00af0040u);
  EXPECT_EQ(kd.compute_pgm_rsrc2, 0x8cu);
  EXPECT_EQ(kd.kernarg_preload, 0x83);
  EXPECT_EQ(kd.user_sgpr_count(), 6u);  // gfx90a vadd: s[0:3] scratch, s[4:5] kernarg
  EXPECT_EQ(kd.kernarg_sgpr(), 4);
  EXPECT_FALSE(kd.wave32());

  kd.kernel_code_properties = 0x000b;  // + dispatch ptr
  EXPECT_EQ(kd.kernarg_sgpr(), 6);
  kd.kernel_code_properties = 0x000f;  // + queue ptr
  EXPECT_EQ(kd.kernarg_sgpr(), 8);
  kd.kernel_code_properties = 0x0078;  // kernarg first; later SGPRs do not move it
  EXPECT_EQ(kd.kernarg_sgpr(), 0);
  kd.kernel_code_properties = 0x0007;  // no kernarg pointer
  EXPECT_EQ(kd.kernarg_sgpr(), -1);
  // gfx11: kernarg in s[0:1] although USER_SGPR_COUNT is padded to 15.
  kd.kernel_code_properties = 0x0408;
  kd.compute_pgm_rsrc2 = 0x9e;
  EXPECT_EQ(kd.user_sgpr_count(), 15u);
  EXPECT_EQ(kd.kernarg_sgpr(), 0);
  EXPECT_TRUE(kd.wave32());
}

// ---------------------------------------------------------------------------------------------
// Corrupt input.

TEST(CodeObjectCorrupt, Empty) {
  expect_invalid({}, "not an ELF file");
  expect_invalid(Bytes(3, std::byte{0x7f}), "not an ELF file");
}

// Every built code object (the corrupt-input tests below use the first one).
std::vector<std::pair<std::string, Bytes>> all_objects() {
  std::vector<std::pair<std::string, Bytes>> out;
  for (auto& t : kernels::built_targets()) out.emplace_back(t, object_for(t));
  return out;
}

TEST(CodeObjectCorrupt, EveryTruncation) {
  const auto objects = all_objects();
  if (objects.empty()) GTEST_SKIP() << "no code object was built (no AMDGPU clang)";
  for (auto& [target, b] : objects) {
    SCOPED_TRACE(target);
    // All prefix lengths of a real object (a few thousand parses each).
    for (size_t n = 0; n < b.size(); ++n) {
      Bytes cut(b.begin(), b.begin() + n);
      try {
        CodeObject::parse(cut);
        ADD_FAILURE() << "a " << n << "-byte prefix of a " << b.size() << "-byte object parsed";
      } catch (const InvalidInput& e) {
        ASSERT_NE(std::string(e.what()).find("AMDGPU code object: "), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST(CodeObjectCorrupt, FlippedBytes) {
  const auto objects = all_objects();
  if (objects.empty()) GTEST_SKIP() << "no code object was built (no AMDGPU clang)";
  std::mt19937_64 rng(20240601);  // fixed seed: the same inputs every run
  for (auto& [target, b] : objects) {
    SCOPED_TRACE(target);
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 2000; ++iter) {
      Bytes c = b;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f)
        c[rng() % c.size()] ^= static_cast<std::byte>(1 + rng() % 255);
      try {
        const auto co = CodeObject::parse(c);
        ++parsed;
        // Whatever parses must load and be searchable without touching memory out of bounds.
        if (co.image_bytes() > (64u << 20)) continue;
        Bytes image(co.image_bytes());
        co.load(image.data(), 0x100000000ull);
        for (auto& k : co.kernels()) {
          std::string name;
          KernelDescriptor kd;
          find_kernel_at(image.data(), image.size(),
                         k.descriptor_offset + k.kd.kernel_code_entry_byte_offset, name, kd);
        }
      } catch (const InvalidInput&) {
        ++rejected;
      }
    }
    EXPECT_EQ(parsed + rejected, 2000);
    EXPECT_GT(parsed, 0);  // most flips land in code, padding or unused metadata
    EXPECT_GT(rejected, 0);
  }
}

TEST(CodeObjectCorrupt, HeaderFields) {
  REQUIRE_ANY_OBJECT(b);
  {
    Bytes c = b;
    c[EI_CLASS] = std::byte{ELFCLASS32};
    expect_invalid(c, "ELF class 1 (ELFCLASS32), expected ELFCLASS64 (2)");
  }
  {
    Bytes c = b;
    c[EI_DATA] = std::byte{ELFDATA2MSB};
    expect_invalid(c, "ELF data encoding 2, expected little-endian (ELFDATA2LSB, 1)");
  }
  {
    Bytes c = b;
    c[EI_OSABI] = std::byte{0};
    expect_invalid(c, "ELF OS ABI 0, expected 64 (AMDGPU HSA)");
  }
  {
    Bytes c = b;
    c[EI_ABIVERSION] = std::byte{1};  // code object v3
    expect_invalid(c, "ELF ABI version 1 is not a supported code object version");
    c[EI_ABIVERSION] = std::byte{5};
    expect_invalid(c, "ELF ABI version 5 is not a supported code object version");
  }
  {
    Bytes c = b;
    put<uint16_t>(c, offsetof(Elf64_Ehdr, e_machine), EM_X86_64);
    expect_invalid(c, "e_machine 62, expected 224 (EM_AMDGPU)");
  }
  {
    Bytes c = b;
    put<uint16_t>(c, offsetof(Elf64_Ehdr, e_type), ET_REL);
    expect_invalid(c, "e_type 1, expected 3 (ET_DYN");
  }
  {
    Bytes c = b;
    auto flags = get<uint32_t>(c, offsetof(Elf64_Ehdr, e_flags));
    put<uint32_t>(c, offsetof(Elf64_Ehdr, e_flags), (flags & ~0xffu) | 0xfe);
    expect_invalid(c, "unknown EF_AMDGPU_MACH 0xfe");
  }
  {
    Bytes c = b;
    put<uint64_t>(c, offsetof(Elf64_Ehdr, e_shoff), c.size() - 64);
    expect_invalid(c, "section header table at " + hex(c.size() - 64));
  }
  {
    Bytes c = b;
    put<uint64_t>(c, offsetof(Elf64_Ehdr, e_phoff), c.size() - 8);
    expect_invalid(c, "program header table at " + hex(c.size() - 8));
  }
}

TEST(CodeObjectCorrupt, Segments) {
  REQUIRE_ANY_OBJECT(b);
  auto eh = get<Elf64_Ehdr>(b, 0);
  size_t load = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    size_t off = eh.e_phoff + i * sizeof(Elf64_Phdr);
    if (get<Elf64_Phdr>(b, off).p_type == PT_LOAD) {
      load = off;
      break;
    }
  }
  ASSERT_NE(load, 0u);
  {
    Bytes c = b;
    put<uint64_t>(c, load + offsetof(Elf64_Phdr, p_offset), c.size());
    expect_invalid(c, "segment at file offset " + hex(c.size()) + ", " +
                          hex(get<uint64_t>(c, load + offsetof(Elf64_Phdr, p_filesz))) +
                          " bytes, runs past the end of the file (" + hex(c.size()) + " bytes)");
  }
  {
    Bytes c = b;
    put<uint64_t>(c, load + offsetof(Elf64_Phdr, p_memsz), 1);
    expect_invalid(c, "PT_LOAD p_filesz " +
                          hex(get<uint64_t>(c, load + offsetof(Elf64_Phdr, p_filesz))) +
                          " is larger than p_memsz 0x1");
  }
  {
    Bytes c = b;
    put<uint64_t>(c, load + offsetof(Elf64_Phdr, p_vaddr), ~uint64_t{0} - 4);
    expect_invalid(c, "beyond the 1 GiB image limit");
  }
}

TEST(CodeObjectCorrupt, Descriptors) {
  REQUIRE_ANY_OBJECT(b);
  const size_t sym = dynsym_entry(b, "vector_add.kd");
  ASSERT_NE(sym, 0u);
  {
    Bytes c = b;
    put<uint64_t>(c, sym + offsetof(Elf64_Sym, st_value), 0x40000000);
    expect_invalid(c, "kernel descriptor 'vector_add.kd' at 0x40000000 is outside the file");
  }
  {
    Bytes c = b;
    put<uint64_t>(c, sym + offsetof(Elf64_Sym, st_size), 32);
    expect_invalid(c, "'vector_add.kd' has size 32, expected 64");
  }
  {
    // The code entry offset inside the descriptor points outside the image.
    Bytes c = b;
    const auto co = CodeObject::parse(b);
    for (auto& k : co.kernels())
      if (k.name == "vector_add") {
        // descriptor vaddr == file offset in the first PT_LOAD (lld's layout)
        put<int64_t>(c, k.descriptor_offset + 16, int64_t{1} << 40);
      }
    expect_invalid(c, "kernel 'vector_add' code entry");
  }
  {
    // No kernels at all: rename every ".kd" in .dynstr.
    Bytes c = b;
    std::string s(reinterpret_cast<const char*>(c.data()), c.size());
    for (size_t p = s.find(".kd"); p != std::string::npos; p = s.find(".kd", p + 1))
      c[p + 1] = std::byte{'x'};
    expect_invalid(c, "no kernels");
  }
}

TEST(CodeObjectCorrupt, MetadataNote) {
  REQUIRE_ANY_OBJECT(b);
  auto [desc, size] = metadata_desc(b);
  ASSERT_GT(size, 16u);
  ASSERT_EQ(std::to_integer<int>(b[desc]) & 0xf0, 0x80);  // a fixmap
  {
    Bytes c = b;
    c[desc] = std::byte{0xc1};  // never used in msgpack
    expect_invalid(c, "malformed NT_AMDGPU_METADATA msgpack: unsupported type byte 0xc1");
  }
  {
    Bytes c = b;
    c[desc] = std::byte{0xdf};  // map32 claiming 4G entries
    put<uint32_t>(c, desc + 1, 0xffffffffu);
    expect_invalid(c, "claims");
  }
  {
    Bytes c = b;
    for (size_t i = 0; i < size; ++i) c[desc + i] = std::byte{0x91};  // [[[[...
    expect_invalid(c, "nesting deeper than");
  }
  {
    Bytes c = b;
    c[desc] = std::byte{0xc0};  // nil, then trailing bytes
    expect_invalid(c, "trailing bytes");
  }
  {
    Bytes c = b;
    for (size_t i = 0; i < size; ++i) c[desc + i] = std::byte{0xda};  // str16 of 0xdada bytes
    expect_invalid(c, "truncated");
  }
  {
    // A descriptor size past the note section: caught by the ELF reader (common/elf.hpp).
    Bytes c = b;
    put<uint32_t>(c, desc - 8 - sizeof(Elf64_Nhdr) + offsetof(Elf64_Nhdr, n_descsz), 0xfffffff0u);
    expect_invalid(c, ": note at +0x0: descriptor of 4294967280 bytes runs past the section");
  }
  {
    // Well-formed msgpack of the wrong shape: an array of nils.
    Bytes c = b;
    c[desc] = std::byte{0xdc};  // array16, big-endian count
    c[desc + 1] = static_cast<std::byte>((size - 3) >> 8);
    c[desc + 2] = static_cast<std::byte>((size - 3) & 0xff);
    for (size_t i = 3; i < size; ++i) c[desc + i] = std::byte{0xc0};
    expect_invalid(c, "metadata note is not a msgpack map");
  }
  {
    // .value_kind global_buffer -> an unsupported kind of the same length.
    Bytes c = b;
    std::string s(reinterpret_cast<const char*>(c.data() + desc), size);
    auto p = s.find("global_buffer");
    ASSERT_NE(p, std::string::npos);
    std::memcpy(c.data() + desc + p, "images_buffer", 13);
    expect_invalid(c, "unsupported .value_kind 'images_buffer'");
  }
  {
    // An argument's .offset value of the wrong type: the fixint after the key -> true.
    Bytes c = b;
    std::string s(reinterpret_cast<const char*>(c.data() + desc), size);
    auto p = s.find("\xa7.offset");
    ASSERT_NE(p, std::string::npos);
    c[desc + p + 8] = std::byte{0xc3};
    expect_invalid(c, "argument #0 .offset is not an unsigned integer");
  }
}

// The built kernels need no relocations, so this test turns the (unallocated) .comment section
// into an allocated SHT_RELA section linked to .dynsym and writes relocations into it.
class Relocations : public ::testing::Test {
 protected:
  void SetUp() override {
    b_ = any_object();
    if (b_.empty()) GTEST_SKIP() << "no code object was built (no AMDGPU clang)";
    auto eh = get<Elf64_Ehdr>(b_, 0);
    auto shstr = get<Elf64_Shdr>(b_, eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr));
    for (int i = 0; i < eh.e_shnum; ++i) {
      size_t off = eh.e_shoff + i * sizeof(Elf64_Shdr);
      auto sh = get<Elf64_Shdr>(b_, off);
      std::string name = reinterpret_cast<const char*>(b_.data() + shstr.sh_offset + sh.sh_name);
      if (name == ".comment") comment_ = off;
      if (sh.sh_type == SHT_DYNSYM) dynsym_ = i;
    }
    ASSERT_NE(comment_, 0u);
    ASSERT_GE(get<Elf64_Shdr>(b_, comment_).sh_size, 48u);
    // A zero-filled, 8-byte aligned place in the last PT_LOAD (.dynamic's relro padding).
    for (int i = 0; i < eh.e_phnum; ++i) {
      auto ph = get<Elf64_Phdr>(b_, eh.e_phoff + i * sizeof(Elf64_Phdr));
      if (ph.p_type == PT_LOAD && ph.p_memsz >= ph.p_filesz + 32)
        target_ = (ph.p_vaddr + ph.p_filesz + 7) & ~uint64_t{7};
    }
    ASSERT_NE(target_, 0u);
    kd_sym_ = (dynsym_entry(b_, "vector_add.kd") -
               get<Elf64_Shdr>(b_, eh.e_shoff + dynsym_ * sizeof(Elf64_Shdr)).sh_offset) /
              sizeof(Elf64_Sym);
    kd_value_ = get<Elf64_Sym>(b_, dynsym_entry(b_, "vector_add.kd")).st_value;
  }
  Bytes with(std::vector<Elf64_Rela> relas) {
    Bytes c = b_;
    auto sh = get<Elf64_Shdr>(c, comment_);
    sh.sh_type = SHT_RELA;
    sh.sh_flags = SHF_ALLOC;
    sh.sh_entsize = sizeof(Elf64_Rela);
    sh.sh_size = relas.size() * sizeof(Elf64_Rela);
    sh.sh_link = dynsym_;
    put(c, comment_, sh);
    for (size_t i = 0; i < relas.size(); ++i)
      put(c, sh.sh_offset + i * sizeof(Elf64_Rela), relas[i]);
    return c;
  }
  Bytes b_;
  size_t comment_ = 0;
  uint32_t dynsym_ = 0;
  uint64_t target_ = 0, kd_sym_ = 0, kd_value_ = 0;
};

TEST_F(Relocations, Relative64Abs64AndNoneAreApplied) {
  // R_AMDGPU_RELATIVE64 (13): B + A. R_AMDGPU_ABS64 (3): S + A. R_AMDGPU_NONE (0): nothing.
  const auto co = CodeObject::parse(with({{target_, ELF64_R_INFO(0, 13), 0x704},
                                          {target_ + 8, ELF64_R_INFO(kd_sym_, 3), 16},
                                          {target_ + 16, ELF64_R_INFO(0, 0), 99}}));
  Bytes image(co.image_bytes());
  const uint64_t base = 0x7f0000100000ull;
  co.load(image.data(), base);
  EXPECT_EQ(get<uint64_t>(image, target_), base + 0x704);
  EXPECT_EQ(get<uint64_t>(image, target_ + 8), base + kd_value_ + 16);
  EXPECT_EQ(get<uint64_t>(image, target_ + 16), 0u);
}

TEST_F(Relocations, BadRelocationsAreRejected) {
  expect_invalid(with({{target_, ELF64_R_INFO(0, 1), 0}}),
                 "unsupported relocation type 1 at");  // R_AMDGPU_ABS32_LO
  expect_invalid(with({{target_, ELF64_R_INFO(0, 5), 0}}),
                 "unsupported relocation type 5 at");  // R_AMDGPU_REL64
  expect_invalid(with({{target_, ELF64_R_INFO(0, 3), 0}}),
                 "names symbol #0, which does not exist");
  expect_invalid(with({{target_, ELF64_R_INFO(100000, 3), 0}}), "names symbol #100000");
  expect_invalid(with({{uint64_t{1} << 40, ELF64_R_INFO(0, 13), 0}}),
                 "relocation at 0x10000000000 is outside the loaded segments");
}

// ---------------------------------------------------------------------------------------------
// CPU implementations (kernels/cpu_kernels.cpp).

// One flat mapping [base, base + size).
class FlatMemory : public emu::AddressSpace {
 public:
  FlatMemory(uint64_t base, size_t size) : base_(base), mem_(size) {}
  void* translate(uint64_t va, uint64_t size) const override {
    if (va < base_ || va - base_ > mem_.size() || size > mem_.size() - (va - base_))
      throw emu::Fault("unmapped", va);
    return const_cast<std::byte*>(mem_.data()) + (va - base_);
  }
  template <class T>
  T* at(uint64_t va) {
    return reinterpret_cast<T*>(mem_.data() + (va - base_));
  }
  uint64_t base() const { return base_; }

 private:
  uint64_t base_;
  std::vector<std::byte> mem_;
};

struct Args {
  std::vector<std::byte> bytes;
  template <class T>
  Args& at(uint32_t off, T v) {
    if (bytes.size() < off + sizeof v) bytes.resize(off + sizeof v);
    std::memcpy(bytes.data() + off, &v, sizeof v);
    return *this;
  }
};

void run(const std::string& name, const FlatMemory& mem, const Args& a, uint32_t grid,
         uint32_t block) {
  kernels::register_cpu_implementations();
  const emu::KernelFn* fn = emu::find_kernel(name);
  ASSERT_NE(fn, nullptr) << name;
  emu::Dispatch d;
  d.grid = {grid, 1, 1};
  d.block = {block, 1, 1};
  d.kernargs = a.bytes.data();
  d.kernarg_size = static_cast<uint32_t>(a.bytes.size());
  d.memory = &mem;
  (*fn)(d);
}

TEST(CpuKernels, VectorAddAndScaleAdd) {
  FlatMemory mem(0x10000, 3 * 4096);
  const uint64_t a = 0x10000, b = 0x11000, c = 0x12000;
  for (int i = 0; i < 1000; ++i) {
    mem.at<float>(a)[i] = static_cast<float>(i);
    mem.at<float>(b)[i] = 0.5f * static_cast<float>(i);
    mem.at<float>(c)[i] = -1;
  }
  // n = 1000 elements, blocks of 64: 16 workgroups, the last one partly idle.
  run("vector_add", mem, Args{}.at(0, a).at(8, b).at(16, c).at(24, 1000u).at(28, 64u), 16, 64);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(mem.at<float>(c)[i], 1.5f * i) << i;
  EXPECT_EQ(mem.at<float>(c)[1000], 0.0f);  // untouched past n

  run("scale_add", mem, Args{}.at(0, c).at(8, 2.0f).at(12, 1.0f).at(16, 1000u).at(20, 64u), 16,
      64);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(mem.at<float>(c)[i], std::fma(2.0f, 1.5f * i, 1.0f));
}

TEST(CpuKernels, FillAndFaults) {
  FlatMemory mem(0x10000, 4096);
  run("fill_u32", mem, Args{}.at(0, mem.base()).at(8, 0xabcdu).at(12, 1024u).at(16, 256u), 4, 256);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(mem.at<uint32_t>(mem.base())[i], 0xabcdu);
  // One element past the mapping faults, as the GPU would.
  EXPECT_THROW(
      run("fill_u32", mem, Args{}.at(0, mem.base()).at(8, 1u).at(12, 1025u).at(16, 256u), 5, 256),
      emu::Fault);
  // A short kernarg segment faults too.
  EXPECT_THROW(run("fill_u32", mem, Args{}.at(0, mem.base()), 1, 1), emu::Fault);
  run("empty", mem, Args{}, 1, 1);
}

TEST(CpuKernels, SpinUntilWaitsForTheFlag) {
  FlatMemory mem(0x10000, 4096);
  uint32_t* flag = mem.at<uint32_t>(mem.base());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  });
  run("spin_until", mem, Args{}.at(0, mem.base()), 4, 64);
  releaser.join();
  EXPECT_EQ(*flag, 1u);
}

}  // namespace
}  // namespace hcq::amd
