#pragma once
// Memory the CPU fills and a kernel reads (kernel arguments, a flag a kernel spins on), on
// every device. ShadowMemory is allocate_visible's memory where the CPU maps the device's
// memory, and device memory written through the driver's port where it cannot (a GPU behind
// a USB bridge): these write and publish, which costs nothing in the first case.
#include <cstdint>

#include "core/device.hpp"

namespace hcq::testing_support {

// The CPU wrote the first `bytes` of host(): on the device now.
inline void publish_first(ShadowMemory& m, uint64_t bytes) {
  m.mark(0, bytes);
  m.publish();
}

// One 32-bit word stored with release order (a kernel may be polling it), then published.
inline void store_u32(ShadowMemory& m, uint64_t offset, uint32_t value) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(m.host() + offset), value, __ATOMIC_RELEASE);
  m.mark(offset, 4);
  m.publish();
}

}  // namespace hcq::testing_support
