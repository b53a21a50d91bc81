// The checks of rdma/local_wire.hpp: what one process accepts of the messages its peer wrote.
#include "rdma/local_wire.hpp"

namespace hcq::rdma::wire {

namespace {

const char* op_name(Op op) {
  switch (op) {
    case Op::Write: return "WRITE";
    case Op::WriteImm: return "WRITE with immediate";
    case Op::Read: return "READ";
    case Op::ReadData: return "READ data";
  }
  return nullptr;
}

// The chunk's place, as the errors name it.
std::string chunk(const Message& m) {
  return "payload of " + std::to_string(m.payload) + " bytes at offset " + std::to_string(m.offset);
}

// The chunk's payload must be at most one chunk and published with its header.
std::string check_payload(const Message& m, uint64_t used) {
  if (m.payload > kChunkBytes)
    return chunk(m) + " is larger than a chunk (" + std::to_string(kChunkBytes) + " bytes)";
  if (m.payload > used - sizeof m)
    return chunk(m) + " runs past the " + std::to_string(used - sizeof m) +
           " bytes published after its header";
  return "";
}

}  // namespace

std::string check_ring(uint64_t used) {
  if (used > kRingBytes)
    return "its ring claims " + std::to_string(used) + " unread bytes; it holds " +
           std::to_string(kRingBytes);
  return "";
}

std::string check_request(const Message& m, uint64_t used) {
  const char* name = op_name(m.op);
  if (!name || m.op == Op::ReadData)
    return "request " + std::to_string(m.seq) + " has operation " +
           std::to_string(uint32_t(m.op)) + ", not WRITE, WRITE with immediate or READ";
  std::string what = std::string(name) + " " + std::to_string(m.seq) + " of " +
                     std::to_string(m.size) + " bytes: ";
  if (m.op == Op::Read) {
    if (m.offset != 0 || m.payload != 0) return what + chunk(m) + "; a READ request carries none";
    return "";
  }
  if (std::string why = check_payload(m, used); !why.empty()) return what + why;
  if (!inside(m.offset, m.payload, 0, m.size)) return what + chunk(m) + " is outside it";
  return "";
}

std::string check_read_data(const Message& m, uint64_t used, uint64_t size, uint64_t received) {
  std::string what = "READ data for " + std::to_string(m.seq) + " of " + std::to_string(size) +
                     " bytes: ";
  if (m.op != Op::ReadData)
    return "response " + std::to_string(m.seq) + " has operation " +
           std::to_string(uint32_t(m.op)) + ", not READ data";
  if (std::string why = check_payload(m, used); !why.empty()) return what + why;
  if (m.offset != received)
    return what + chunk(m) + " is not the next chunk (" + std::to_string(received) +
           " bytes arrived)";
  if (!inside(m.offset, m.payload, 0, size)) return what + chunk(m) + " is outside it";
  return "";
}

}  // namespace hcq::rdma::wire
