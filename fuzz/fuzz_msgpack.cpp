// libFuzzer target: the MessagePack reader on arbitrary bytes. It either throws InvalidInput
// or returns a tree; nesting never passes kMaxDepth.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "common/msgpack.hpp"
#include "core/error.hpp"

namespace {
int depth_of(const hcq::msgpack::Value& v) {
  int d = 0;
  for (const auto& e : v.arr) d = std::max(d, 1 + depth_of(e));
  return d;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto v = hcq::msgpack::parse({reinterpret_cast<const std::byte*>(data), size});
    if (depth_of(v) > hcq::msgpack::kMaxDepth) std::abort();
  } catch (const hcq::InvalidInput&) {
  }
  return 0;
}
