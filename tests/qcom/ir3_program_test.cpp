// The ir3 container (docs/ir3-container.md): write -> parse round trips; the containers
// kernels/make_ir3.py writes for a660 and a740 hold the five demo kernels with the argument
// layout of kernels.cl (the offsets kernels/cpu_kernels.cpp reads) and the ir3 `end`
// instruction as code; malformed files (built by mutating a small valid one at offsets worked
// out from the format's tables) are rejected with exact messages; every truncation and random
// byte flips are rejected with hcq::InvalidInput, never a crash.
#include "qcom/ir3_program.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.hpp"
#include "kernels.hpp"

namespace hcq::qcom {
namespace {

using Bytes = std::vector<std::byte>;
using Kind = KernelArg::Kind;
using Access = KernelArg::Access;

void put32(Bytes& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(off + i) = static_cast<std::byte>(v >> (8 * i));
}
uint32_t get32(const Bytes& b, size_t off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<uint32_t>(b.at(off + i)) << (8 * i);
  return v;
}

std::string message_of(std::span<const std::byte> b) {
  try {
    parse_ir3(b);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(parsed)";
}

// The message for `good` with the dword at `off` set to `v`.
std::string message_with(const Bytes& good, size_t off, uint32_t v) {
  Bytes c = good;
  put32(c, off, v);
  return message_of(c);
}

void expect_same(const Ir3Kernel& a, const Ir3Kernel& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.instructions, b.instructions);
  EXPECT_EQ(a.full_regs, b.full_regs);
  EXPECT_EQ(a.half_regs, b.half_regs);
  EXPECT_EQ(a.branch_stack, b.branch_stack);
  EXPECT_EQ(a.threadsize, b.threadsize);
  for (int d = 0; d < 3; ++d) EXPECT_EQ(a.local_size[d], b.local_size[d]) << d;
  EXPECT_EQ(a.const_dwords, b.const_dwords);
  EXPECT_EQ(a.args_offset, b.args_offset);
  EXPECT_EQ(a.args_bytes, b.args_bytes);
  EXPECT_EQ(a.uav_count, b.uav_count);
  EXPECT_EQ(a.local_memory_bytes, b.local_memory_bytes);
  EXPECT_EQ(a.private_memory_bytes, b.private_memory_bytes);
  EXPECT_EQ(a.immediates, b.immediates);
  EXPECT_EQ(a.immediates_offset, b.immediates_offset);
  EXPECT_EQ(a.workgroup_id_regid, b.workgroup_id_regid);
  EXPECT_EQ(a.local_id_regid, b.local_id_regid);
  EXPECT_EQ(a.early_preamble, b.early_preamble);
  ASSERT_EQ(a.args.size(), b.args.size());
  for (size_t i = 0; i < a.args.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.args[i].name, b.args[i].name);
    EXPECT_EQ(a.args[i].offset, b.args[i].offset);
    EXPECT_EQ(a.args[i].size, b.args[i].size);
    EXPECT_EQ(a.args[i].kind, b.args[i].kind);
    EXPECT_EQ(a.args[i].access, b.args[i].access);
  }
  ASSERT_EQ(a.uavs.size(), b.uavs.size());
  for (size_t i = 0; i < a.uavs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.uavs[i].arg, b.uavs[i].arg);
    EXPECT_EQ(a.uavs[i].format, b.uavs[i].format);
  }
}

void expect_same(const Ir3Module& a, const Ir3Module& b) {
  EXPECT_EQ(a.family, b.family);
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) expect_same(a.kernels[i], b.kernels[i]);
}

// The ir3 `end` instruction, 0x0300000000000000 (Mesa src/freedreno/isa/ir3-cat0.xml: cat0,
// OPC 0110 in bits 58..55; src/freedreno/ir3/tests/disasm.c: "03000000_00000000" is "end"),
// low dword first.
const std::vector<uint32_t> kEnd = {0x00000000, 0x03000000};

// A module with every field set to something other than its default.
Ir3Module rich_module() {
  Ir3Module m;
  m.family = 7;
  Ir3Kernel k;
  k.name = "saxpy_\xc3\xa9t\xc3\xa9";  // "saxpy_été": UTF-8 names are allowed
  k.instructions = {0x11111111, 0x22222222, 0x00000000, 0x03000000};
  k.full_regs = 5;
  k.half_regs = 3;
  k.branch_stack = 2;
  k.threadsize = 128;
  k.local_size[0] = 64;
  k.local_size[1] = 2;
  k.local_size[2] = 1;
  k.const_dwords = 24;
  k.args_offset = 16;
  k.args_bytes = 32;
  k.uav_count = 1;
  k.local_memory_bytes = 4096;
  k.private_memory_bytes = 64;
  k.immediates = {0x3f800000, 7, 9};
  k.immediates_offset = 64;
  k.workgroup_id_regid = 0xc0;  // r48.x
  k.local_id_regid = 0x00;      // r0.x
  k.early_preamble = true;
  k.args = {{"x", 0, 8, Kind::Buffer, Access::ReadOnly},
            {"y", 8, 8, Kind::Buffer, Access::WriteOnly},
            {"a", 16, 4, Kind::Value, Access::ReadWrite},
            {"", 20, 12, Kind::Value, Access::ReadWrite}};  // unnamed arguments are allowed
  m.kernels.push_back(k);
  Ir3Kernel e;
  e.name = "e";
  e.instructions = kEnd;
  m.kernels.push_back(e);
  return m;
}

TEST(Ir3Program, RoundTrip) {
  const Ir3Module m = rich_module();
  const Bytes b = write_ir3(m);
  const Ir3Module p = parse_ir3(b);
  expect_same(m, p);
  EXPECT_EQ(write_ir3(p), b);
  ASSERT_NE(p.find("e"), nullptr);
  EXPECT_EQ(p.find("e"), &p.kernels[1]);
  EXPECT_EQ(p.find("nope"), nullptr);

  // Sizes from the format's tables: 24-byte header; kernel 0: 88 fixed + name 11 -> 12 +
  // 4 instruction dwords 16 + 3 immediates 12 + arguments (12 + 4) * 3 + 12 = 60 -> 188;
  // kernel 1: 88 + 4 + 8 = 100.
  EXPECT_EQ(b.size(), 24u + 188u + 100u);
  EXPECT_EQ(get32(b, 24), 188u);
  EXPECT_EQ(get32(b, 24 + 188), 100u);

  const Ir3Module empty = parse_ir3(write_ir3(Ir3Module{}));
  EXPECT_EQ(empty.family, 0u);
  EXPECT_TRUE(empty.kernels.empty());
}

// A newer compatible writer may append fields to a kernel record and grow the header; this
// reader skips them.
TEST(Ir3Program, SkipsAppendedFields) {
  const Ir3Module m = rich_module();
  const Bytes b = write_ir3(m);
  const size_t rec0 = 24, len0 = get32(b, rec0);
  Bytes c(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(rec0 + len0));
  for (int i = 0; i < 8; ++i) c.push_back(std::byte{0xab});  // two unknown dwords
  c.insert(c.end(), b.begin() + static_cast<std::ptrdiff_t>(rec0 + len0), b.end());
  put32(c, rec0, static_cast<uint32_t>(len0 + 8));
  expect_same(m, parse_ir3(c));

  Bytes h(b.begin(), b.begin() + 24);
  for (int i = 0; i < 16; ++i) h.push_back(std::byte{0xcd});  // a 40-byte header
  h.insert(h.end(), b.begin() + 24, b.end());
  put32(h, 20, 40);
  expect_same(m, parse_ir3(h));
}

struct DemoArg {
  const char* name;
  uint32_t offset, size;
  Kind kind;
  Access access;
};
struct DemoKernel {
  const char* name;
  uint32_t args_bytes;  // the kernarg size rounded up to 16
  std::vector<DemoArg> args;
  std::vector<uint32_t> uav_args = {};  // version 2: UAV i views argument uav_args[i] (32-bit)
};

// kernels.cl's OpenCL C layout, the offsets kernels/cpu_kernels.cpp reads.
const std::vector<DemoKernel> kDemo = {
    {"empty", 0, {}},
    {"fill_u32",  // 20 bytes -> 32
     32,
     {{"dst", 0, 8, Kind::Buffer, Access::ReadWrite},
      {"value", 8, 4, Kind::Value, Access::ReadWrite},
      {"n", 12, 4, Kind::Value, Access::ReadWrite},
      {"block", 16, 4, Kind::Value, Access::ReadWrite}}},
    {"vector_add",  // 32 bytes
     32,
     {{"a", 0, 8, Kind::Buffer, Access::ReadOnly},
      {"b", 8, 8, Kind::Buffer, Access::ReadOnly},
      {"c", 16, 8, Kind::Buffer, Access::ReadWrite},
      {"n", 24, 4, Kind::Value, Access::ReadWrite},
      {"block", 28, 4, Kind::Value, Access::ReadWrite}}},
    {"scale_add",  // 24 bytes -> 32
     32,
     {{"x", 0, 8, Kind::Buffer, Access::ReadWrite},
      {"a", 8, 4, Kind::Value, Access::ReadWrite},
      {"b", 12, 4, Kind::Value, Access::ReadWrite},
      {"n", 16, 4, Kind::Value, Access::ReadWrite},
      {"block", 20, 4, Kind::Value, Access::ReadWrite}}},
    {"spin_until",  // 8 bytes -> 16
     16,
     {{"flag", 0, 8, Kind::Buffer, Access::ReadWrite}}},
    {"vector_add_uav",  // vector_add's arguments, its buffers reached through UAVs 0, 1, 2
     32,
     {{"a", 0, 8, Kind::Buffer, Access::ReadOnly},
      {"b", 8, 8, Kind::Buffer, Access::ReadOnly},
      {"c", 16, 8, Kind::Buffer, Access::ReadWrite},
      {"n", 24, 4, Kind::Value, Access::ReadWrite},
      {"block", 28, 4, Kind::Value, Access::ReadWrite}},
     {0, 1, 2}},
};

TEST(Ir3Program, EmbeddedDemoKernels) {
  for (auto [target, family] : {std::pair{"a660", 6u}, std::pair{"a740", 7u}}) {
    SCOPED_TRACE(target);
    const auto file = kernels::code_object(target);
    ASSERT_FALSE(file.empty()) << "kernels/meson.build did not embed " << target << ".ir3";
    const Ir3Module m = parse_ir3(file);
    EXPECT_EQ(m.version, 2u);  // vector_add_uav binds UAVs
    EXPECT_EQ(m.family, family);
    ASSERT_EQ(m.kernels.size(), kDemo.size());
    for (size_t i = 0; i < kDemo.size(); ++i) {
      const DemoKernel& want = kDemo[i];
      const Ir3Kernel& k = m.kernels[i];
      SCOPED_TRACE(want.name);
      EXPECT_EQ(k.name, want.name);
      EXPECT_EQ(m.find(want.name), &k);
      EXPECT_EQ(k.instructions, kEnd);
      EXPECT_EQ(k.full_regs, 2u);
      EXPECT_EQ(k.half_regs, 0u);
      EXPECT_EQ(k.branch_stack, 0u);
      EXPECT_EQ(k.threadsize, 64u);
      EXPECT_EQ(k.local_size[0] | k.local_size[1] | k.local_size[2], 0u);
      EXPECT_EQ(k.args_offset, 0u);
      EXPECT_EQ(k.args_bytes, want.args_bytes);
      EXPECT_EQ(k.const_dwords, want.args_bytes / 4);  // already a multiple of 4 here
      EXPECT_EQ(k.uav_count, want.uav_args.size());
      ASSERT_EQ(k.uavs.size(), want.uav_args.size());
      for (size_t u = 0; u < k.uavs.size(); ++u) {
        EXPECT_EQ(k.uavs[u].arg, want.uav_args[u]) << u;
        EXPECT_EQ(k.uavs[u].format, Ir3UavFormat::U32) << u;
      }
      EXPECT_EQ(k.local_memory_bytes, 0u);
      EXPECT_EQ(k.private_memory_bytes, 0u);
      EXPECT_TRUE(k.immediates.empty());
      EXPECT_EQ(k.workgroup_id_regid, kIr3NoRegid);
      EXPECT_EQ(k.local_id_regid, kIr3NoRegid);
      EXPECT_FALSE(k.early_preamble);
      ASSERT_EQ(k.args.size(), want.args.size());
      for (size_t j = 0; j < want.args.size(); ++j) {
        SCOPED_TRACE(want.args[j].name);
        EXPECT_EQ(k.args[j].name, want.args[j].name);
        EXPECT_EQ(k.args[j].offset, want.args[j].offset);
        EXPECT_EQ(k.args[j].size, want.args[j].size);
        EXPECT_EQ(k.args[j].kind, want.args[j].kind);
        EXPECT_EQ(k.args[j].access, want.args[j].access);
      }
    }
    // make_ir3.py and write_ir3 agree byte for byte.
    EXPECT_EQ(write_ir3(m), Bytes(file.begin(), file.end()));
  }
  // built_targets() stays the AMDHSA list its callers parse.
  for (const auto& t : kernels::built_targets()) EXPECT_NE(t.rfind("a", 0), 0u) << t;
}

// A small valid file: kernel "k" with two arguments. Layout (docs/ir3-container.md):
//   0x00 header (24 bytes)
//   0x18 kernel record: +0 length, +4 name bytes, +8 instruction dwords, +12 immediate
//        dwords, +16 argument count, +20 full regs, +24 half regs, +28 branch stack,
//        +32 threadsize, +36 local size, +48 const dwords, +52 args offset, +56 args bytes,
//        +60 immediates offset, +64 UAVs, +68 local memory, +72 private memory,
//        +76 workgroup id regid, +80 local id regid, +84 flags
//   0x70 name "k" + 3 padding bytes
//   0x74 instructions (2 dwords)
//   0x7c argument 0: offset, size, kind, access, name bytes, reserved, then "p" padded
//   0x8c argument 1, "v" -> record ends at 0x9c (length 0x84 = 132)
Ir3Module small_module() {
  Ir3Module m;
  m.family = 6;
  Ir3Kernel k;
  k.name = "k";
  k.instructions = kEnd;
  k.full_regs = 2;
  k.const_dwords = 4;
  k.args_bytes = 16;
  k.args = {{"p", 0, 8, Kind::Buffer, Access::ReadOnly}, {"v", 8, 4, Kind::Value, Access::ReadWrite}};
  m.kernels.push_back(k);
  return m;
}

TEST(Ir3Program, SmallFileLayout) {
  const Bytes b = write_ir3(small_module());
  ASSERT_EQ(b.size(), 0x9cu);
  EXPECT_EQ(get32(b, 0x18), 0x84u);
  EXPECT_EQ(get32(b, 0x18 + 32), 64u);             // threadsize
  EXPECT_EQ(get32(b, 0x74), 0x00000000u);           // `end`, low dword
  EXPECT_EQ(get32(b, 0x78), 0x03000000u);           // `end`, high dword
  EXPECT_EQ(get32(b, 0x8c), 8u);                    // argument 1's offset
  EXPECT_EQ(std::to_integer<char>(b[0x98]), 'v');  // argument 1's name
}

TEST(Ir3Program, ErrorMessages) {
  const Bytes good = write_ir3(small_module());
  ASSERT_EQ(message_of(good), "(parsed)");
  constexpr size_t K = 0x18;  // the kernel record
  const auto mutated = [&](size_t off, uint32_t v) { return message_with(good, off, v); };
  const auto written = [](auto&& edit) {
    Ir3Module m = small_module();
    edit(m.kernels[0]);
    return message_of(write_ir3(m));
  };

  {
    Bytes c = good;
    c[3] = std::byte{'X'};
    EXPECT_EQ(message_of(c), "ir3 container: bad magic at offset 0x0: expected \"HCQIR3\\0\\0\"");
  }
  EXPECT_EQ(message_of(std::span(good).first(10)),
            "ir3 container: truncated header: the file has 10 bytes, the header needs 24");
  EXPECT_EQ(mutated(8, 3),
            "ir3 container: unsupported version 3 at offset 0x8 (this reader knows versions 1 "
            "and 2)");
  EXPECT_EQ(mutated(12, 5),
            "ir3 container: unsupported family 5 at offset 0xc (6 = a6xx, 7 = a7xx, 0 = any)");
  // 2 kernels need 2 * 88 bytes; the file has 0x9c - 24 = 132 after the header.
  EXPECT_EQ(mutated(16, 2),
            "ir3 container: kernel count 2 at offset 0x10 needs at least 176 bytes of kernel "
            "records, the file has 132 after the header");
  EXPECT_EQ(mutated(20, 22),
            "ir3 container: header length 22 at offset 0x14 is not a multiple of 4 from 24 to "
            "the file's 156 bytes");
  EXPECT_EQ(mutated(K, 0x88),
            "ir3 container: kernel 0 at offset 0x18: record length 136 runs past the end of the "
            "file (156 bytes)");
  EXPECT_EQ(mutated(K, 84),
            "ir3 container: kernel 0 at offset 0x18: record length 84 is shorter than the "
            "88-byte fixed part");
  EXPECT_EQ(mutated(K + 4, 256),
            "ir3 container: kernel 0 at offset 0x18: name length 256 at offset 0x1c is not 1 to "
            "255");
  {
    Bytes c = good;
    c[0x70] = std::byte{0xc3};  // a lone lead byte
    EXPECT_EQ(message_of(c),
              "ir3 container: kernel 0 at offset 0x18: name at offset 0x70 is not clean UTF-8");
    c[0x70] = std::byte{'\n'};
    EXPECT_EQ(message_of(c),
              "ir3 container: kernel 0 at offset 0x18: name at offset 0x70 is not clean UTF-8");
  }
  EXPECT_EQ(mutated(K + 8, 3),
            "ir3 container: kernel 0 (k) at offset 0x18: instruction dwords 3 at offset 0x20: the "
            "instructions are not a whole number of 64-bit words");
  // 0x1000 instruction dwords from 0x74 would end far past the record's end at 0x9c.
  EXPECT_EQ(mutated(K + 8, 0x1000),
            "ir3 container: kernel 0 (k) at offset 0x18: instructions (16384 bytes at offset "
            "0x74) runs past the end of the record at offset 0x9c");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.threadsize = 96; }),
            "ir3 container: kernel 0 (k) at offset 0x18: threadsize 96 at offset 0x38 is not 64 "
            "or 128");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.args_offset = 8; }),
            "ir3 container: kernel 0 (k) at offset 0x18: args offset 8 at offset 0x4c is not "
            "16-byte aligned");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.args_offset = 16; }),
            "ir3 container: kernel 0 (k) at offset 0x18: const dwords 4 at offset 0x48 do not "
            "cover the argument block [16, 32)");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.const_dwords = 6; }),
            "ir3 container: kernel 0 (k) at offset 0x18: const dwords 6 at offset 0x48 is not a "
            "multiple of 4 (vec4s)");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.const_dwords = 1028; k.args_bytes = 16; }),
            "ir3 container: kernel 0 (k) at offset 0x18: const dwords 1028 at offset 0x48 exceeds "
            "the 1024 dwords of the a6xx compute constant file");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.args[1].offset = 14; }),
            "ir3 container: kernel 0 (k) at offset 0x18: argument 1 (v) at [14, 18) lies outside "
            "the 16-byte argument block");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.args[1].offset = 4; }),
            "ir3 container: kernel 0 (k) at offset 0x18: argument 1 (v) at [4, 8) overlaps "
            "argument 0 (p) at [0, 8)");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.args[0].size = 4; }),
            "ir3 container: kernel 0 (k) at offset 0x18: argument 0 (p): a buffer argument is a "
            "64-bit address, but its size is 4");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.full_regs = 64; }),
            "ir3 container: kernel 0 (k) at offset 0x18: full register footprint 64 at offset 0x2c "
            "does not fit its 6-bit field (at most 63)");
  EXPECT_EQ(written([](Ir3Kernel& k) { k.local_size[0] = 64; }),
            "ir3 container: kernel 0 (k) at offset 0x18: local size 64x0x0 at offset 0x3c is "
            "partly zero (all zero means any)");
  EXPECT_EQ(written([](Ir3Kernel& k) {
              k.immediates = {1, 2};
              k.immediates_offset = 0;
              k.const_dwords = 8;
            }),
            "ir3 container: kernel 0 (k) at offset 0x18: the immediates [0, 8) overlap the "
            "argument block [0, 16)");
  EXPECT_EQ(mutated(K + 84, 6),
            "ir3 container: kernel 0 (k) at offset 0x18: unknown flags 0x6 at offset 0x6c");
  {
    Bytes c = good;
    c[0x7c + 8] = std::byte{2};  // argument 0's kind byte
    EXPECT_EQ(message_of(c),
              "ir3 container: kernel 0 (k) at offset 0x18: argument 0 (p): kind 2 at offset 0x84 "
              "is not 0 (buffer) or 1 (value)");
  }
  {
    Bytes c = good;
    c.push_back(std::byte{0});
    EXPECT_EQ(message_of(c),
              "ir3 container: unexpected data after the last kernel record, from offset 0x9c "
              "to the end of the file at 0x9d");
  }
  {
    Ir3Module m = small_module();
    m.kernels.push_back(m.kernels[0]);
    EXPECT_EQ(message_of(write_ir3(m)),
              "ir3 container: kernel 1 at offset 0x9c: duplicate kernel name 'k'");
  }
}

// small_module() with UAV 0 viewing argument 0 (p) as 16-bit elements: a version-2 file, the
// same bytes up to 0x9c, then the UAV entry: 0x9c argument index, 0xa0 format, 0xa1..0xa3
// reserved; the record ends at 0xa4 (length 0x8c).
Ir3Module uav_module() {
  Ir3Module m = small_module();
  m.kernels[0].uav_count = 1;
  m.kernels[0].uavs = {{0, Ir3UavFormat::U16}};
  return m;
}

TEST(Ir3Program, Version2UavBindings) {
  const Bytes b = write_ir3(uav_module());
  ASSERT_EQ(b.size(), 0xa4u);
  EXPECT_EQ(get32(b, 8), 2u);      // version
  EXPECT_EQ(get32(b, 0x18), 0x8cu);  // record length
  EXPECT_EQ(get32(b, 0x18 + 64), 1u);  // uav count
  EXPECT_EQ(get32(b, 0x9c), 0u);   // argument 0
  EXPECT_EQ(get32(b, 0xa0), 1u);   // format 1 (16-bit), reserved bytes 0
  const Ir3Module p = parse_ir3(b);
  EXPECT_EQ(p.version, 2u);
  expect_same(uav_module(), p);
  EXPECT_EQ(write_ir3(p), b);
  for (auto f : {Ir3UavFormat::U32, Ir3UavFormat::U8}) {
    Ir3Module m = uav_module();
    m.kernels[0].uavs[0].format = f;
    EXPECT_EQ(parse_ir3(write_ir3(m)).kernels[0].uavs[0].format, f);
  }

  // A version-1 file may declare UAVs; it binds none (the driver refuses to launch those).
  Ir3Module v1 = small_module();
  v1.kernels[0].uav_count = 3;
  const Ir3Module p1 = parse_ir3(write_ir3(v1));
  EXPECT_EQ(p1.version, 1u);
  EXPECT_EQ(p1.kernels[0].uav_count, 3u);
  EXPECT_TRUE(p1.kernels[0].uavs.empty());
  // A version-2 file with no UAVs has an empty table.
  Ir3Module v2 = small_module();
  v2.version = 2;
  const Bytes b2 = write_ir3(v2);
  EXPECT_EQ(b2.size(), 0x9cu);
  EXPECT_EQ(parse_ir3(b2).version, 2u);

  Ir3Module bad = uav_module();
  bad.version = 1;
  try {
    write_ir3(bad);
    ADD_FAILURE() << "wrote UAV bindings into version 1";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "ir3 container: cannot write UAV bindings in version 1 (they need version 2)");
  }
}

TEST(Ir3Program, Version2ErrorMessages) {
  const Bytes good = write_ir3(uav_module());
  ASSERT_EQ(message_of(good), "(parsed)");
  const auto mutated = [&](size_t off, uint32_t v) { return message_with(good, off, v); };
  const auto byte = [&](size_t off, uint8_t v) {
    Bytes c = good;
    c.at(off) = std::byte{v};
    return message_of(c);
  };
  EXPECT_EQ(mutated(0x9c, 2),
            "ir3 container: kernel 0 (k) at offset 0x18: uav 0: argument 2 at offset 0x9c is not "
            "one of the kernel's 2 arguments");
  EXPECT_EQ(mutated(0x9c, 1),
            "ir3 container: kernel 0 (k) at offset 0x18: uav 0: argument 1 (v) at offset 0x9c is "
            "a value, not a buffer");
  EXPECT_EQ(byte(0xa0, 3),
            "ir3 container: kernel 0 (k) at offset 0x18: uav 0: format 3 at offset 0xa0 is not 0 "
            "(32-bit), 1 (16-bit) or 2 (8-bit elements)");
  for (size_t r : {0xa1, 0xa2, 0xa3})
    EXPECT_EQ(byte(r, 1), "ir3 container: kernel 0 (k) at offset 0x18: uav 0: nonzero reserved "
                          "byte at offset " + hex(r));
  // Two UAVs declared, one entry written: the second runs past the record.
  EXPECT_EQ(mutated(0x18 + 64, 2),
            "ir3 container: kernel 0 (k) at offset 0x18: uav 1 (8 bytes at offset 0xa4) runs "
            "past the end of the record at offset 0xa4");
  EXPECT_EQ(mutated(0x18 + 64, 128),
            "ir3 container: kernel 0 (k) at offset 0x18: uav count 128 at offset 0x58 does not "
            "fit SP_CS_CONFIG.NIBO (at most 127)");
  // A record too short for its table: the entry's last bytes cut off.
  {
    Bytes c = good;
    c.resize(0xa0);
    put32(c, 0x18, 0x88);
    EXPECT_EQ(message_of(c),
              "ir3 container: kernel 0 (k) at offset 0x18: uav 0 (8 bytes at offset 0x9c) runs "
              "past the end of the record at offset 0xa0");
  }
  // The same bytes as version 1: the entry is a later field a version-1 reader skips.
  {
    Bytes c = good;
    put32(c, 8, 1);
    const Ir3Module m = parse_ir3(c);
    EXPECT_EQ(m.version, 1u);
    EXPECT_EQ(m.kernels[0].uav_count, 1u);
    EXPECT_TRUE(m.kernels[0].uavs.empty());
  }
}

TEST(Ir3Program, WriterRejectsWhatTheFormatCannotHold) {
  Ir3Module m = small_module();
  m.kernels[0].name = std::string(256, 'n');
  EXPECT_THROW(write_ir3(m), InvalidInput);
  m = small_module();
  m.kernels[0].args[1].kind = Kind::Hidden;
  try {
    write_ir3(m);
    ADD_FAILURE() << "wrote a Hidden argument";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "ir3 container: cannot write argument 'v' of kernel 'k': only Buffer and Value "
                 "arguments have a kind in the format");
  }
}

TEST(Ir3Program, EveryTruncationIsRejected) {
  for (const Bytes& b : {write_ir3(small_module()), write_ir3(rich_module()), write_ir3(uav_module())}) {
    for (size_t n = 0; n < b.size(); ++n) {
      try {
        parse_ir3(std::span(b).first(n));
        ADD_FAILURE() << "a " << n << "-byte prefix of " << b.size() << " bytes parsed";
      } catch (const InvalidInput& e) {
        ASSERT_EQ(std::string(e.what()).rfind("ir3 container: ", 0), 0u) << e.what();
      }
    }
  }
}

TEST(Ir3Program, RandomByteFlips) {
  std::mt19937_64 rng(20250611);  // fixed seed: the same inputs every run
  const auto a740 = kernels::code_object("a740");
  std::vector<Bytes> corpus = {write_ir3(small_module()), write_ir3(rich_module()),
                               write_ir3(uav_module())};
  if (!a740.empty()) corpus.emplace_back(a740.begin(), a740.end());
  for (const Bytes& b : corpus) {
    int parsed = 0, rejected = 0;
    constexpr int kIterations = 3000;
    for (int iter = 0; iter < kIterations; ++iter) {
      Bytes c = b;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) c[rng() % c.size()] ^= static_cast<std::byte>(1 + rng() % 255);
      try {
        const Ir3Module m = parse_ir3(c);
        // Whatever parses writes back to something that parses to the same module.
        expect_same(m, parse_ir3(write_ir3(m)));
        ++parsed;
      } catch (const InvalidInput& e) {
        ASSERT_EQ(std::string(e.what()).rfind("ir3 container: ", 0), 0u) << e.what();
        ++rejected;
      }
    }
    EXPECT_EQ(parsed + rejected, kIterations);
    EXPECT_GT(parsed, 0);  // flips in instructions or unchecked fields are harmless
    EXPECT_GT(rejected, 0);
  }
}

}  // namespace
}  // namespace hcq::qcom
