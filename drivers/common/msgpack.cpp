// The MessagePack reader. Type bytes and their layouts (big-endian lengths and numbers): the
// msgpack specification, github.com/msgpack/msgpack/blob/master/spec.md.
#include "common/msgpack.hpp"

#include <cstring>

#include "core/error.hpp"

namespace hcq::msgpack {

const Value* Value::get(std::string_view key) const {
  if (type != Type::Map) return nullptr;
  for (size_t j = 0; j + 1 < arr.size(); j += 2)
    if (arr[j].type == Type::Str && arr[j].s == key) return &arr[j + 1];
  return nullptr;
}

namespace {

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : p_(in.data()), n_(in.size()) {}

  Value parse_all() {
    Value v = value(0);
    if (pos_ != n_)
      bad("trailing bytes after the top-level value at offset " + std::to_string(pos_));
    return v;
  }

 private:
  [[noreturn]] static void bad(const std::string& what) { throw InvalidInput("msgpack: " + what); }

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
  // Each of `count` elements needs at least `per` bytes.
  void check_count(uint64_t count, uint64_t per) const {
    if (count > (n_ - pos_) / per)
      bad("container at offset " + std::to_string(pos_) + " claims " + std::to_string(count) +
          " elements but only " + std::to_string(n_ - pos_) + " bytes remain");
  }
  Value container(Value::Type type, uint64_t count, uint64_t per, int depth) {
    check_count(count, per);
    Value v;
    v.type = type;
    v.arr.reserve(count * per);
    for (uint64_t j = 0; j < count * per; ++j) v.arr.push_back(value(depth + 1));
    return v;
  }
  static Value uint_v(uint64_t u) {
    Value v;
    v.type = Value::Type::UInt;
    v.u = u;
    return v;
  }
  static Value int_v(int64_t i) {
    Value v;
    v.type = Value::Type::Int;
    v.i = i;
    return v;
  }
  Value str_v(uint64_t len) {
    need(len);
    Value v;
    v.type = Value::Type::Str;
    v.s.assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return v;
  }
  Value bin_v(uint64_t len) {  // skipped: nothing hcq reads is binary
    need(len);
    pos_ += len;
    Value v;
    v.type = Value::Type::Bin;
    return v;
  }
  Value float_v(double f) {
    Value v;
    v.type = Value::Type::Float;
    v.f = f;
    return v;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) bad("nesting deeper than " + std::to_string(kMaxDepth));
    need(1);
    const uint8_t tag = std::to_integer<uint8_t>(p_[pos_++]);
    if (tag <= 0x7f) return uint_v(tag);                                      // positive fixint
    if (tag >= 0xe0) return int_v(static_cast<int8_t>(tag));                  // negative fixint
    if ((tag & 0xf0) == 0x80) return container(Value::Type::Map, tag & 0x0f, 2, depth);  // fixmap
    if ((tag & 0xf0) == 0x90) return container(Value::Type::Array, tag & 0x0f, 1, depth);
    if ((tag & 0xe0) == 0xa0) return str_v(tag & 0x1f);                       // fixstr
    switch (tag) {
      case 0xc0: return Value{};  // nil
      case 0xc2:
      case 0xc3: {
        Value v;
        v.type = Value::Type::Bool;
        v.b = tag == 0xc3;
        return v;
      }
      case 0xc4: return bin_v(be(1));
      case 0xc5: return bin_v(be(2));
      case 0xc6: return bin_v(be(4));
      case 0xca: {
        const uint32_t bits = static_cast<uint32_t>(be(4));
        float f;
        std::memcpy(&f, &bits, 4);
        return float_v(f);
      }
      case 0xcb: {
        const uint64_t bits = be(8);
        double f;
        std::memcpy(&f, &bits, 8);
        return float_v(f);
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
      case 0xdc: return container(Value::Type::Array, be(2), 1, depth);
      case 0xdd: return container(Value::Type::Array, be(4), 1, depth);
      case 0xde: return container(Value::Type::Map, be(2), 2, depth);
      case 0xdf: return container(Value::Type::Map, be(4), 2, depth);
      default:
        // 0xc1 (never used), ext types 0xc7-0xc9 and 0xd4-0xd8.
        bad("unsupported type byte " + hex(tag) + " at offset " + std::to_string(pos_ - 1));
    }
  }

  const std::byte* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::span<const std::byte> bytes) { return Reader(bytes).parse_all(); }

}  // namespace hcq::msgpack
