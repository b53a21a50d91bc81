// The MessagePack reader (drivers/common/msgpack.hpp) on hand-written bytes: every type it
// reads, with values at the edges of each width, and the exact error for truncated input,
// nesting past the limit, lengths and counts larger than the input, unused type bytes and
// trailing bytes. Type bytes and layouts: github.com/msgpack/msgpack/blob/master/spec.md.
#include "common/msgpack.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hcq::msgpack {
namespace {

using Bytes = std::vector<std::byte>;
using Type = Value::Type;

Bytes bytes(std::initializer_list<int> list) {
  Bytes b;
  for (int v : list) b.push_back(static_cast<std::byte>(v));
  return b;
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes repeat(int byte, size_t n) { return Bytes(n, static_cast<std::byte>(byte)); }

std::string error_of(const Bytes& b) {
  try {
    parse(b);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(parsed)";
}

uint64_t uint_of(const Bytes& b) {
  const Value v = parse(b);
  EXPECT_EQ(v.type, Type::UInt);
  return v.u;
}
int64_t int_of(const Bytes& b) {
  const Value v = parse(b);
  EXPECT_EQ(v.type, Type::Int);
  return v.i;
}
std::string str_of(const Bytes& b) {
  const Value v = parse(b);
  EXPECT_EQ(v.type, Type::Str);
  return v.s;
}

TEST(Msgpack, NilAndBooleans) {
  EXPECT_EQ(parse(bytes({0xc0})).type, Type::Nil);
  const Value f = parse(bytes({0xc2})), t = parse(bytes({0xc3}));
  EXPECT_EQ(f.type, Type::Bool);
  EXPECT_FALSE(f.b);
  EXPECT_EQ(t.type, Type::Bool);
  EXPECT_TRUE(t.b);
}

TEST(Msgpack, UnsignedIntegersOfEveryWidth) {
  EXPECT_EQ(uint_of(bytes({0x00})), 0u);     // positive fixint
  EXPECT_EQ(uint_of(bytes({0x7f})), 127u);
  EXPECT_EQ(uint_of(bytes({0xcc, 0xff})), 0xffu);  // uint 8
  EXPECT_EQ(uint_of(bytes({0xcd, 0x12, 0x34})), 0x1234u);  // uint 16, big-endian
  EXPECT_EQ(uint_of(bytes({0xce, 0x89, 0xab, 0xcd, 0xef})), 0x89abcdefu);  // uint 32
  EXPECT_EQ(uint_of(bytes({0xcf, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88})),
            0xffeeddccbbaa9988u);  // uint 64
}

TEST(Msgpack, SignedIntegersOfEveryWidth) {
  EXPECT_EQ(int_of(bytes({0xe0})), -32);  // negative fixint
  EXPECT_EQ(int_of(bytes({0xff})), -1);
  EXPECT_EQ(int_of(bytes({0xd0, 0x80})), -128);  // int 8
  EXPECT_EQ(int_of(bytes({0xd0, 0x7f})), 127);
  EXPECT_EQ(int_of(bytes({0xd1, 0x80, 0x00})), -32768);  // int 16
  EXPECT_EQ(int_of(bytes({0xd2, 0x80, 0x00, 0x00, 0x00})), INT32_MIN);  // int 32
  EXPECT_EQ(int_of(bytes({0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0})), INT64_MIN);  // int 64
  EXPECT_EQ(int_of(bytes({0xd3, 0, 0, 0, 0, 0, 0, 0, 5})), 5);
}

TEST(Msgpack, Floats) {
  const Value f32 = parse(bytes({0xca, 0x3f, 0xc0, 0x00, 0x00}));  // 1.5f
  EXPECT_EQ(f32.type, Type::Float);
  EXPECT_EQ(f32.f, 1.5);
  const Value f64 = parse(bytes({0xcb, 0xc0, 0x04, 0, 0, 0, 0, 0, 0}));  // -2.5
  EXPECT_EQ(f64.type, Type::Float);
  EXPECT_EQ(f64.f, -2.5);
}

TEST(Msgpack, StringsOfEveryWidth) {
  EXPECT_EQ(str_of(bytes({0xa0})), "");  // fixstr
  EXPECT_EQ(str_of(bytes({0xa3, 'a', 'b', 'c'})), "abc");
  EXPECT_EQ(str_of(cat(bytes({0xbf}), repeat('x', 31))), std::string(31, 'x'));
  EXPECT_EQ(str_of(bytes({0xd9, 2, 'h', 'i'})), "hi");  // str 8
  EXPECT_EQ(str_of(cat(bytes({0xda, 0x01, 0x00}), repeat('y', 256))), std::string(256, 'y'));
  EXPECT_EQ(str_of(bytes({0xdb, 0, 0, 0, 1, 'z'})), "z");  // str 32
}

TEST(Msgpack, BinaryIsSkipped) {
  EXPECT_EQ(parse(bytes({0xc4, 2, 1, 2})).type, Type::Bin);
  EXPECT_EQ(parse(bytes({0xc5, 0, 1, 9})).type, Type::Bin);
  EXPECT_EQ(parse(bytes({0xc6, 0, 0, 0, 0})).type, Type::Bin);
  // Skipped, not dropped: what follows inside an array is still read.
  const Value a = parse(bytes({0x92, 0xc4, 1, 0xaa, 0x07}));
  ASSERT_EQ(a.arr.size(), 2u);
  EXPECT_EQ(a.arr[1].u, 7u);
}

TEST(Msgpack, ArraysAndMapsOfEveryWidth) {
  const Value fa = parse(bytes({0x93, 0x01, 0xc0, 0xa1, 'q'}));
  ASSERT_EQ(fa.type, Type::Array);
  ASSERT_EQ(fa.arr.size(), 3u);
  EXPECT_EQ(fa.arr[0].u, 1u);
  EXPECT_EQ(fa.arr[1].type, Type::Nil);
  EXPECT_EQ(fa.arr[2].s, "q");
  EXPECT_EQ(parse(bytes({0x90})).arr.size(), 0u);
  EXPECT_EQ(parse(bytes({0xdc, 0x00, 0x02, 0x01, 0x02})).arr.size(), 2u);  // array 16
  EXPECT_EQ(parse(bytes({0xdd, 0, 0, 0, 1, 0x05})).arr.size(), 1u);  // array 32

  // fixmap {"a": 1, 2: "b", "c": {"d": true}}: get() finds string keys only.
  const Value m = parse(bytes({0x83, 0xa1, 'a', 0x01, 0x02, 0xa1, 'b', 0xa1, 'c', 0x81, 0xa1,
                               'd', 0xc3}));
  ASSERT_EQ(m.type, Type::Map);
  EXPECT_EQ(m.arr.size(), 6u);
  ASSERT_NE(m.get("a"), nullptr);
  EXPECT_EQ(m.get("a")->u, 1u);
  EXPECT_EQ(m.get("b"), nullptr);
  ASSERT_NE(m.get("c"), nullptr);
  ASSERT_NE(m.get("c")->get("d"), nullptr);
  EXPECT_TRUE(m.get("c")->get("d")->b);
  EXPECT_EQ(fa.get("a"), nullptr);  // not a map

  const Value m16 = parse(bytes({0xde, 0x00, 0x01, 0xa1, 'k', 0x09}));  // map 16
  ASSERT_NE(m16.get("k"), nullptr);
  EXPECT_EQ(m16.get("k")->u, 9u);
  const Value m32 = parse(bytes({0xdf, 0, 0, 0, 1, 0xa1, 'k', 0x0a}));  // map 32
  ASSERT_NE(m32.get("k"), nullptr);
  EXPECT_EQ(m32.get("k")->u, 10u);
}

TEST(Msgpack, TruncatedInputNamesTheOffsetAndTheBytesMissing) {
  EXPECT_EQ(error_of({}), "msgpack: truncated at offset 0 (need 1 bytes, 0 left)");
  EXPECT_EQ(error_of(bytes({0xcd, 0x12})), "msgpack: truncated at offset 1 (need 2 bytes, 1 left)");
  EXPECT_EQ(error_of(bytes({0xcf, 1, 2, 3, 4, 5, 6, 7})),
            "msgpack: truncated at offset 1 (need 8 bytes, 7 left)");
  EXPECT_EQ(error_of(bytes({0xca, 0, 0})), "msgpack: truncated at offset 1 (need 4 bytes, 2 left)");
  EXPECT_EQ(error_of(bytes({0xa3, 'a', 'b'})),
            "msgpack: truncated at offset 1 (need 3 bytes, 2 left)");
  EXPECT_EQ(error_of(bytes({0xdb, 0, 0})), "msgpack: truncated at offset 1 (need 4 bytes, 2 left)");
  EXPECT_EQ(error_of(bytes({0xc5, 0, 3, 1})),
            "msgpack: truncated at offset 3 (need 3 bytes, 1 left)");
  // A map's last value missing.
  EXPECT_EQ(error_of(bytes({0x81, 0xa1, 'k'})),
            "msgpack: truncated at offset 3 (need 1 bytes, 0 left)");
}

TEST(Msgpack, HugeLengthsAndCountsAreRejectedBeforeAnyAllocation) {
  // str 32 / bin 32 of 4 GiB - 1 bytes in a 9-byte input.
  EXPECT_EQ(error_of(bytes({0xdb, 0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd'})),
            "msgpack: truncated at offset 5 (need 4294967295 bytes, 4 left)");
  EXPECT_EQ(error_of(bytes({0xc6, 0xff, 0xff, 0xff, 0xff, 0})),
            "msgpack: truncated at offset 5 (need 4294967295 bytes, 1 left)");
  // array 32 / map 32 claiming 4G elements: each element takes at least one byte (a map
  // entry two).
  EXPECT_EQ(error_of(bytes({0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0})),
            "msgpack: container at offset 5 claims 4294967295 elements but only 2 bytes remain");
  EXPECT_EQ(error_of(bytes({0xdf, 0xff, 0xff, 0xff, 0xff, 0, 0})),
            "msgpack: container at offset 5 claims 4294967295 elements but only 2 bytes remain");
  // At the edge: a map of 2 entries needs 4 bytes; 3 are not enough, 4 are.
  EXPECT_EQ(error_of(bytes({0x82, 1, 2, 3})),
            "msgpack: container at offset 1 claims 2 elements but only 3 bytes remain");
  EXPECT_EQ(parse(bytes({0x82, 1, 2, 3, 4})).arr.size(), 4u);
  EXPECT_EQ(error_of(bytes({0x93, 1, 2})),
            "msgpack: container at offset 1 claims 3 elements but only 2 bytes remain");
}

TEST(Msgpack, NestingIsLimitedToTheMaximumDepth) {
  // kMaxDepth nested arrays around a value at depth kMaxDepth parse ...
  const Bytes deepest = cat(repeat(0x91, kMaxDepth), bytes({0x01}));
  const Value v = parse(deepest);
  const Value* p = &v;
  for (int d = 0; d < kMaxDepth; ++d) {
    ASSERT_EQ(p->type, Type::Array);
    p = &p->arr[0];
  }
  EXPECT_EQ(p->u, 1u);
  // ... one more level does not, whatever the container.
  EXPECT_EQ(error_of(cat(repeat(0x91, kMaxDepth + 1), bytes({0x01}))),
            "msgpack: nesting deeper than 32");
  Bytes maps;
  for (int d = 0; d <= kMaxDepth; ++d) maps = cat(maps, bytes({0x81, 0xa0}));
  EXPECT_EQ(error_of(cat(maps, bytes({0xc0}))), "msgpack: nesting deeper than 32");
  // An endless nesting in a large input stops at the limit, not at the end of the input.
  EXPECT_EQ(error_of(repeat(0x91, 100000)), "msgpack: nesting deeper than 32");
}

TEST(Msgpack, UnusedAndExtensionTypeBytesAreRejected) {
  EXPECT_EQ(error_of(bytes({0xc1})), "msgpack: unsupported type byte 0xc1 at offset 0");
  for (int tag : {0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8}) {
    SCOPED_TRACE(tag);
    EXPECT_EQ(error_of(bytes({0x92, 0x00, tag, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
              "msgpack: unsupported type byte " + hex(static_cast<uint64_t>(tag)) +
                  " at offset 2");
  }
}

TEST(Msgpack, TrailingBytesAfterTheValueAreRejected) {
  EXPECT_EQ(error_of(bytes({0xc0, 0xc0})),
            "msgpack: trailing bytes after the top-level value at offset 1");
  EXPECT_EQ(error_of(bytes({0x91, 0x01, 0x00, 0x00})),
            "msgpack: trailing bytes after the top-level value at offset 2");
}

}  // namespace
}  // namespace hcq::msgpack
