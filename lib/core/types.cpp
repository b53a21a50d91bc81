#include "core/types.hpp"

#include "core/driver.hpp"

namespace hcq {

const char* to_string(QueueKind k) { return k == QueueKind::Compute ? "compute" : "copy"; }
const char* to_string(MemoryKind k) { return k == MemoryKind::Device ? "device" : "host"; }

// A driver whose memory the CPU maps has no port: lib/core reaches its memory directly.
void DeviceDriver::write_memory(uint64_t va, std::span<const std::byte> data) {
  throw InvalidInput(properties().name + ": no device-memory port (its memory is mapped for the "
                     "CPU), asked to write " + std::to_string(data.size()) + " bytes at " + hex(va));
}

void DeviceDriver::read_memory(uint64_t va, std::span<std::byte> out) {
  throw InvalidInput(properties().name + ": no device-memory port (its memory is mapped for the "
                     "CPU), asked to read " + std::to_string(out.size()) + " bytes at " + hex(va));
}

}  // namespace hcq
