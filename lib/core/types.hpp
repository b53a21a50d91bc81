// Small value types shared by every layer of lib/core and the drivers.
#pragma once

#include <cstdint>
#include <string>

namespace hcq {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
  bool operator==(const Dim3&) const = default;
};

enum class MemoryKind : uint8_t {
  Device,  // VRAM (or the device's own memory on UMA parts)
  Host,    // system memory the device can reach (GTT)
};

enum class QueueKind : uint8_t { Compute, Copy };

const char* to_string(QueueKind k);
const char* to_string(MemoryKind k);

// What a device can do, so lib/ decides by capability and never by vendor.
struct Capabilities {
  bool copy_engine = true;     // has a DMA engine (else copies run as kernels)
  bool uma = false;            // device memory is host memory (copies may be memcpy)
  bool host_reachable = true;  // can reach host memory at all (USB-attached GPUs cannot)
  bool indirect_buffers = true;  // queues can run command buffers bound in device memory
  bool map_host = true;  // can map the process's own memory (Device::map_host; msm DRM cannot)
  // The CPU maps the device's memory (a BAR, or UMA). False behind a USB bridge: no
  // allocation has a host pointer, and every CPU access to device memory is a request through
  // the driver's port (DeviceDriver::write_memory / read_memory).
  bool cpu_maps_memory = true;
  // Bytes of host-side memory the device can reach where that is only a small window (a USB
  // bridge's SRAM, 0x80000 bytes): Host allocations come from it; 0: no such limit.
  uint64_t host_window_bytes = 0;
  // The most copy queues the driver can create (0: no limit); a device opened with more in
  // its options gets this many.
  uint32_t max_copy_queues = 0;
};

struct DeviceProperties {
  std::string name;         // the name it was opened by: "amd:0", "emu:gfx1100"
  std::string vendor;       // "AMD"
  std::string arch;         // "gfx1100"
  std::string description;  // one line for people
  bool emulated = false;
  uint64_t device_memory_bytes = 0;
  uint64_t timestamp_hz = 0;  // GPU timestamp counter frequency
  uint32_t compute_units = 0;
  uint32_t wave_size = 0;
  Capabilities caps;
};

}  // namespace hcq
