// The AMDGPU metadata reader (drivers/amd/metadata.hpp) on MessagePack written here, so every
// key and every error is checked without an AMDGPU compiler: the keys hcq reads (LLVM
// docs/AMDGPUUsage.rst, "Code Object V3+ Metadata"), the argument kinds and access qualifiers,
// and the exact message for each wrong type, range, missing key and malformed encoding.
#include "amd/metadata.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace hcq::amd {
namespace {

using Bytes = std::vector<std::byte>;
using Kind = KernelArg::Kind;
using Access = KernelArg::Access;

// A small MessagePack writer (spec: github.com/msgpack/msgpack/blob/master/spec.md): enough
// for the shapes below, each value written with the shortest encoding.
struct Mp {
  Bytes b;
  Mp& byte(int v) {
    b.push_back(static_cast<std::byte>(v));
    return *this;
  }
  Mp& be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) byte(static_cast<int>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Mp& str(const std::string& s) {
    if (s.size() < 32)
      byte(0xa0 | static_cast<int>(s.size()));
    else
      byte(0xd9).byte(static_cast<int>(s.size()));
    for (char c : s) byte(c);
    return *this;
  }
  Mp& uint(uint64_t v) {
    if (v < 128) return byte(static_cast<int>(v));
    if (v <= 0xffff) return byte(0xcd).be(v, 2);
    if (v <= 0xffffffff) return byte(0xce).be(v, 4);
    return byte(0xcf).be(v, 8);
  }
  Mp& map(int n) { return byte(0x80 | n); }
  Mp& array(int n) { return byte(0x90 | n); }
  Mp& boolean(bool v) { return byte(v ? 0xc3 : 0xc2); }
  Mp& raw(const Bytes& more) {
    b.insert(b.end(), more.begin(), more.end());
    return *this;
  }
};

// {".offset": off, ".size": size, ".value_kind": kind, ".name": name} plus `extra` pairs.
Bytes arg(uint32_t off, uint32_t size, const std::string& kind, const std::string& name,
          const std::vector<std::pair<std::string, Bytes>>& extra = {}) {
  Mp m;
  m.map(4 + static_cast<int>(extra.size()));
  m.str(".offset").uint(off).str(".size").uint(size).str(".value_kind").str(kind);
  m.str(".name").str(name);
  for (auto& [k, v] : extra) m.str(k).raw(v);
  return m.b;
}
Bytes str_value(const std::string& s) { return Mp{}.str(s).b; }

// {"amdhsa.target": target, "amdhsa.kernels": [kernels...]}
Bytes root(const std::vector<Bytes>& kernels, const std::string& target = "") {
  Mp m;
  m.map(target.empty() ? 1 : 2);
  if (!target.empty()) m.str("amdhsa.target").str(target);
  m.str("amdhsa.kernels").array(static_cast<int>(kernels.size()));
  for (auto& k : kernels) m.raw(k);
  return m.b;
}

// One kernel map with `pairs` (already encoded key, value).
Bytes kernel(const std::vector<std::pair<std::string, Bytes>>& pairs) {
  Mp m;
  m.map(static_cast<int>(pairs.size()));
  for (auto& [k, v] : pairs) m.str(k).raw(v);
  return m.b;
}
Bytes u(uint64_t v) { return Mp{}.uint(v).b; }

std::string error_of(const Bytes& b) {
  try {
    parse_metadata(b);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(AmdMetadata, ReadsTheKeysHcqUses) {
  Mp args;
  args.array(4);
  args.raw(arg(0, 8, "global_buffer", "src", {{".actual_access", str_value("read_only")}}));
  args.raw(arg(8, 8, "global_buffer", "dst", {{".actual_access", str_value("write_only")}}));
  args.raw(arg(16, 4, "by_value", "n"));
  args.raw(arg(24, 8, "hidden_global_offset_x", ""));
  const Bytes k = kernel({{".name", str_value("copy")},
                          {".symbol", str_value("copy.kd")},
                          {".kernarg_segment_size", u(280)},
                          {".kernarg_segment_align", u(8)},
                          {".wavefront_size", u(32)},
                          {".group_segment_fixed_size", u(65536)},
                          {".private_segment_fixed_size", u(0x12345678)},
                          {".args", args.b}});
  const Metadata md = parse_metadata(root({k}, "amdgcn-amd-amdhsa--gfx1100"));
  EXPECT_EQ(md.target, "amdgcn-amd-amdhsa--gfx1100");
  ASSERT_EQ(md.kernels.size(), 1u);
  const KernelMetadata& km = md.kernels[0];
  EXPECT_EQ(km.name, "copy");
  EXPECT_EQ(km.symbol, "copy.kd");
  EXPECT_EQ(km.kernarg_size, 280u);
  EXPECT_EQ(km.kernarg_align, 8u);
  EXPECT_EQ(km.wave_size, 32u);
  EXPECT_EQ(km.lds, 65536u);
  EXPECT_EQ(km.scratch, 0x12345678u);
  ASSERT_EQ(km.args.size(), 4u);
  EXPECT_EQ(km.args[0].name, "src");
  EXPECT_EQ(km.args[0].kind, Kind::Buffer);
  EXPECT_EQ(km.args[0].access, Access::ReadOnly);
  EXPECT_EQ(km.args[1].access, Access::WriteOnly);
  EXPECT_EQ(km.args[2].kind, Kind::Value);
  EXPECT_EQ(km.args[2].offset, 16u);
  EXPECT_EQ(km.args[2].size, 4u);
  EXPECT_EQ(km.args[3].kind, Kind::Hidden);
}

TEST(AmdMetadata, AbsentKeysStayAbsent) {
  const Metadata md = parse_metadata(root({kernel({{".name", str_value("k")}})}));
  EXPECT_EQ(md.target, "");
  ASSERT_EQ(md.kernels.size(), 1u);
  EXPECT_EQ(md.kernels[0].symbol, "k.kd");  // the default descriptor symbol
  EXPECT_FALSE(md.kernels[0].kernarg_size);
  EXPECT_FALSE(md.kernels[0].wave_size);
  EXPECT_TRUE(md.kernels[0].args.empty());
}

TEST(AmdMetadata, ConstPointersAreReadOnly) {
  Mp args;
  args.array(2);
  args.raw(arg(0, 8, "global_buffer", "a", {{".is_const", Mp{}.boolean(true).b}}));
  args.raw(arg(8, 8, "global_buffer", "b", {{".is_const", Mp{}.boolean(false).b}}));
  const Metadata md =
      parse_metadata(root({kernel({{".name", str_value("k")}, {".args", args.b}})}));
  EXPECT_EQ(md.kernels[0].args[0].access, Access::ReadOnly);
  EXPECT_EQ(md.kernels[0].args[1].access, Access::ReadWrite);
}

TEST(AmdMetadata, ExactErrors) {
  const std::string p = "AMDGPU code object: ";
  EXPECT_EQ(error_of(Mp{}.array(0).b), p + "metadata note is not a msgpack map");
  EXPECT_EQ(error_of(Mp{}.map(0).b), p + "metadata has no amdhsa.kernels array");
  EXPECT_EQ(error_of(Mp{}.map(1).str("amdhsa.kernels").uint(1).b),
            p + "metadata has no amdhsa.kernels array");
  EXPECT_EQ(error_of(Mp{}.map(1).str("amdhsa.target").uint(1).b),
            p + "metadata  amdhsa.target is not a string");
  EXPECT_EQ(error_of(root({u(3)})), p + "metadata kernel #0 is not a map");
  EXPECT_EQ(error_of(root({kernel({})})), p + "metadata kernel #0 has no .name");
  EXPECT_EQ(error_of(root({kernel({{".name", u(5)}})})),
            p + "metadata kernel #0 .name is not a string");
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".wavefront_size", str_value("32")}})})),
            p + "metadata kernel 'k' .wavefront_size is not an unsigned integer");
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".kernarg_segment_size",
                                                                Mp{}.byte(0xff).b}})})),
            p + "metadata kernel 'k' .kernarg_segment_size is not an unsigned integer");  // -1
  // At the edge of 32 bits: 0xffffffff fits, 0x100000000 does not.
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")},
                                   {".group_segment_fixed_size", u(0xffffffffu)}})})),
            "(parsed)");
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")},
                                   {".group_segment_fixed_size", u(0x100000000u)}})})),
            p + "metadata kernel 'k' .group_segment_fixed_size = 4294967296 does not fit in 32 "
                "bits");
  // A non-negative int 8 is accepted as unsigned.
  const Metadata md = parse_metadata(root({kernel({{".name", str_value("k")},
                                                   {".wavefront_size", Mp{}.byte(0xd0).byte(64).b}})}));
  EXPECT_EQ(md.kernels[0].wave_size, 64u);
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".args", u(1)}})})),
            p + "metadata kernel 'k' .args is not an array");
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".args", Mp{}.array(1).uint(1).b}})})),
            p + "metadata kernel 'k' argument #0 is not a map");
  Mp no_kind;
  no_kind.array(1).map(2).str(".offset").uint(0).str(".size").uint(8);
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".args", no_kind.b}})})),
            p + "metadata kernel 'k' argument #0 lacks .offset, .size or .value_kind");
  Mp image;
  image.array(1).raw(arg(0, 8, "image", "img"));
  EXPECT_EQ(error_of(root({kernel({{".name", str_value("k")}, {".args", image.b}})})),
            p + "metadata kernel 'k' argument #0 has unsupported .value_kind 'image'");
  // Malformed MessagePack: the reader's message behind the note's name.
  EXPECT_EQ(error_of(Mp{}.map(1).str("amdhsa.kernels").byte(0xc1).b),
            p + "malformed NT_AMDGPU_METADATA msgpack: unsupported type byte 0xc1 at offset 16");
  EXPECT_EQ(error_of({}),
            p + "malformed NT_AMDGPU_METADATA msgpack: truncated at offset 0 (need 1 bytes, 0 left)");
}

}  // namespace
}  // namespace hcq::amd
