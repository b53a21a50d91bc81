// Where a driver puts the GPU address range it reserves. Drivers reserve host address space
// that doubles as GPU addresses wherever mmap puts it; hcq replay must put it where the
// captured process had it, so that the capture's addresses mean the same memory.
//
// Thread safety: the wanted base is per thread (a WantedHeapBase on the thread that opens the
// device); reserve_window may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace hcq::os {

class Kernel;

// The heap base (DeviceDriver::va_base) the driver opened next on this thread must give, or 0
// for anywhere.
uint64_t wanted_heap_base();

// Sets wanted_heap_base() on this thread while it lives (Device::open with Options::va_base).
class WantedHeapBase {
 public:
  explicit WantedHeapBase(uint64_t base);
  ~WantedHeapBase();
  WantedHeapBase(const WantedHeapBase&) = delete;
  WantedHeapBase& operator=(const WantedHeapBase&) = delete;

 private:
  uint64_t prev_;
};

// Reserves `size` bytes of inaccessible address space for a driver whose heap starts
// `private_bytes` into it: at wanted_heap_base() - private_bytes exactly when a base is
// wanted (never moved: InvalidInput "<who>: cannot place its GPU addresses at 0x...:
// [0x..., 0x...) is taken in this process" when that range is in use), else where mmap puts
// it (OsError when it cannot). Returns the reservation's start.
uint64_t reserve_window(Kernel& kernel, uint64_t size, uint64_t private_bytes,
                        const std::string& who);

}  // namespace hcq::os
