// libFuzzer target: the checks the shared-memory transport makes of its peer's messages
// (rdma/local_wire.hpp), used as rdma/local.cpp uses them. Each 88-byte step of the input is a
// message, the ring's published bytes, and a region (base, length up to 64 KiB) or a READ in
// flight (size, bytes received). Whatever a check lets through is then copied as the transport
// would copy it, into memory of exactly the region's or the READ's size: AddressSanitizer
// reports any byte outside.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rdma/local_wire.hpp"

namespace w = hcq::rdma::wire;

namespace {
struct Step {
  w::Message m;
  uint64_t used, base, length, received;
};
static_assert(sizeof(Step) == 88);

// What the target does with an allowed request; what the initiator does with allowed data.
void apply_request(const Step& s, std::vector<std::byte>& region) {
  if (!w::inside(s.m.addr, s.m.size, s.base, s.length)) return;  // check_access refuses it
  std::byte* host = region.data() + (s.m.addr - s.base);
  if (s.m.op == w::Op::Read) {
    // push_read_data: the whole READ in chunks from its start.
    std::vector<std::byte> out(std::min<uint64_t>(w::kChunkBytes, s.m.size));
    for (uint64_t off = 0; off < s.m.size; off += w::kChunkBytes)
      std::memcpy(out.data(), host + off, std::min(w::kChunkBytes, s.m.size - off));
    return;
  }
  std::vector<std::byte> payload(s.m.payload, std::byte{0x5A});
  std::memcpy(host + s.m.offset, payload.data(), payload.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (size_t at = 0; at + sizeof(Step) <= size; at += sizeof(Step)) {
    Step s;
    std::memcpy(&s, data + at, sizeof s);
    s.length %= 64 << 10;
    s.used = std::max<uint64_t>(s.used, sizeof(w::Message));
    std::vector<std::byte> region(s.length);
    const bool ring_ok = w::check_ring(s.used).empty();
    std::string why = w::check_request(s.m, s.used);
    if (ring_ok && why.empty()) {
      if (s.m.op != w::Op::Write && s.m.op != w::Op::WriteImm && s.m.op != w::Op::Read)
        std::abort();
      apply_request(s, region);
    }
    // The initiator's side: a READ of `length` bytes with `received` of them in.
    const uint64_t read_size = s.length, received = s.received % (read_size + 1);
    why = w::check_read_data(s.m, s.used, read_size, received);
    if (ring_ok && why.empty()) {
      if (s.m.op != w::Op::ReadData || s.m.offset != received) std::abort();
      std::vector<std::byte> payload(s.m.payload, std::byte{0xA5});
      std::memcpy(region.data() + s.m.offset, payload.data(), payload.size());
    }
  }
  return 0;
}
