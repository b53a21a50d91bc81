#include "os/address_window.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "os/kernel.hpp"

namespace hcq::os {
namespace {
thread_local uint64_t wanted = 0;
}

uint64_t wanted_heap_base() { return wanted; }

WantedHeapBase::WantedHeapBase(uint64_t base) : prev_(wanted) { wanted = base; }
WantedHeapBase::~WantedHeapBase() { wanted = prev_; }

uint64_t reserve_window(Kernel& kernel, uint64_t size, uint64_t private_bytes,
                        const std::string& who) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (!wanted) {
    void* p = kernel.mmap(nullptr, size, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) throw OsError(who + ": reserving GPU address space", errno);
    return reinterpret_cast<uint64_t>(p);
  }
  const uint64_t at = wanted - private_bytes;
  auto taken = [&](const std::string& why) {
    return InvalidInput(who + ": cannot place its GPU addresses at " + hex(wanted) + ": [" +
                        hex(at) + ", " + hex(at + size) + ") " + why);
  };
  if (wanted < private_bytes) throw taken("starts below address 0");
  // MAP_FIXED_NOREPLACE (Linux 4.17): never replaces what is mapped there; an older kernel
  // takes it as a hint and may put the range elsewhere, which is undone and refused too.
  void* p = kernel.mmap(reinterpret_cast<void*>(at), size, PROT_NONE,
                        flags | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED)
    throw taken(errno == EEXIST ? "is taken in this process"
                                : std::string("cannot be reserved: ") + std::strerror(errno));
  if (reinterpret_cast<uint64_t>(p) != at) {
    kernel.munmap(p, size);
    throw taken("is taken in this process");
  }
  return at;
}

}  // namespace hcq::os
