#include "emu/memory.hpp"

#include <mutex>
#include <string>

#include "core/error.hpp"

namespace hcq::emu {

void Memory::map(uint64_t va, uint64_t size) {
  if (size == 0 || va + size < va)
    throw hcq::InvalidInput("emulated GPU: cannot map [" + hex(va) + ", +" + hex(size) + ")");
  std::unique_lock lk(mu_);
  auto it = maps_.lower_bound(va + size);
  if (it != maps_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second > va)
      throw hcq::InvalidInput("emulated GPU: mapping [" + hex(va) + ", " + hex(va + size) +
                              ") overlaps mapping [" + hex(prev->first) + ", " +
                              hex(prev->first + prev->second) + ")");
  }
  maps_.emplace(va, size);
}

void Memory::unmap(uint64_t va) {
  std::unique_lock lk(mu_);
  if (maps_.erase(va) == 0)
    throw hcq::InvalidInput("emulated GPU: no mapping starts at " + hex(va));
}

void* Memory::translate(uint64_t va, uint64_t size) const {
  std::shared_lock lk(mu_);
  auto it = maps_.upper_bound(va);
  if (it != maps_.begin()) {
    --it;
    uint64_t off = va - it->first;
    if (off < it->second) {
      if (size <= it->second - off) return reinterpret_cast<void*>(va);
      throw Fault("GPU access [" + hex(va) + ", +" + hex(size) + ") runs past the end of mapping [" +
                      hex(it->first) + ", " + hex(it->first + it->second) + ")",
                  va);
    }
  }
  throw Fault("GPU address " + hex(va) + " is not mapped (access of " + hex(size) + " bytes)", va);
}

std::pair<uint64_t, uint64_t> Memory::mapping_of(uint64_t va) const {
  std::shared_lock lk(mu_);
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return {0, 0};
  --it;
  if (va - it->first >= it->second) return {0, 0};
  return {it->first, it->second};
}

}  // namespace hcq::emu
