// A small MessagePack reader (the format: github.com/msgpack/msgpack/blob/master/spec.md) for
// metadata in files hcq loads, such as the AMDGPU NT_AMDGPU_METADATA note. It parses the whole
// input into a tree. The input may be hostile: every read is bounds-checked, nesting is limited
// to kMaxDepth, and a container may not claim more elements than bytes remain (each element
// takes at least one byte), so memory stays proportional to the input.
//
// Read: nil, false/true, positive and negative fixint, uint 8/16/32/64, int 8/16/32/64,
// float 32/64, fixstr and str 8/16/32, bin 8/16/32 (skipped: kept as an empty Bin), fixarray and
// array 16/32, fixmap and map 16/32. Rejected: 0xc1 (never used) and the ext types
// (0xc7-0xc9, 0xd4-0xd8), which no metadata hcq reads uses.
//
// Not msgpack-cxx (Debian's libmsgpack-cxx-dev): its unpack() throws errors with no offset
// ("insufficient bytes", "parse error"); the exact errors, the depth limit and the
// count-against-bytes-left bound here would need its visitor interface (parse_error and
// insufficient_bytes callbacks, msgpack/v2/parse.hpp) and about as much code as this reader.
//
// Threads: parse() keeps no state between calls; a Value is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hcq::msgpack {

struct Value {
  enum class Type : uint8_t { Nil, Bool, UInt, Int, Float, Str, Bin, Array, Map };
  Type type = Type::Nil;
  bool b = false;
  uint64_t u = 0;  // UInt
  int64_t i = 0;   // Int: the negative ones and those stored as int 8..64
  double f = 0;
  std::string s;
  std::vector<Value> arr;  // Array: the elements; Map: key, value, key, value ...

  // A map's value for the first string key equal to `key`; null when absent or not a map.
  const Value* get(std::string_view key) const;
};

// Containers nest at most this deep: the top-level value is at depth 0.
constexpr int kMaxDepth = 32;

// Parses `bytes` as exactly one value. Throws hcq::InvalidInput "msgpack: <what>", where what
// names the offset: "truncated at offset 5 (need 4 bytes, 2 left)", "container at offset 3
// claims 4294967295 elements but only 6 bytes remain", "nesting deeper than 32",
// "unsupported type byte 0xc1 at offset 0", "trailing bytes after the top-level value at
// offset 1".
Value parse(std::span<const std::byte> bytes);

}  // namespace hcq::msgpack
