// What the AM block tests (GMC, IH, PSP, GFX, HDP, SMU) share: the emulated RX 7900 XTX's
// segment bases, a router that sends a register access to the block model that handles it and
// keeps every other register as plain storage (recording the writes, by register name and as
// byte offset and value), and VRAM as a host array
// that is at once the driver's BootMemory, its page-table memory and the models' AmBus VRAM,
// with fb_base 0x8000000000 (the geometry the AM pieces agree on).
#pragma once

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "amd/am/boot_memory.hpp"
#include "amd/am/discovery.hpp"
#include "amd/am/page_tables.hpp"
#include "amd/am/regs.hpp"
#include "amd/am/vram_allocator.hpp"
#include "amd/emu/am_block.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "core/error.hpp"

namespace hcq::amd::am::test {

inline IpSegmentBases gfx1100_bases() {
  std::vector<std::byte> vram_tail(kDiscoveryTmrSize);
  const std::vector<std::byte> t = emu::gfx1100_discovery_table();
  std::copy(t.begin(), t.end(), vram_tail.begin());
  return segment_bases(parse_discovery(vram_tail));
}

class Router final : public os::MmioHandler {
 public:
  explicit Router(const IpSegmentBases& bases) {
    for (const RegDesc& r : registers()) {
      if (r.reg.base_idx == kAbsolute) continue;
      try {
        names_[absolute_dword(r, bases) * 4] = std::string(r.name);
      } catch (const InvalidInput&) {
      }
    }
  }
  void add(emu::AmBlock& block) { blocks_.push_back(&block); }

  uint32_t read32(uint64_t offset) override {
    {
      std::lock_guard lock(mu_);
      ++reads_;
    }
    if (emu::AmBlock* b = owner(offset)) return b->read32(offset);
    std::lock_guard lock(mu_);
    return plain_[offset];
  }
  void write32(uint64_t offset, uint32_t value) override {
    {
      std::lock_guard lock(mu_);
      if (recording_) {
        writes_.push_back(name(offset) + "=" + hex(value));
        raw_writes_.emplace_back(offset, value);
      }
    }
    if (emu::AmBlock* b = owner(offset)) return b->write32(offset, value);
    std::lock_guard lock(mu_);
    plain_[offset] = value;
  }

  // A plain register's value by name (0 when never written).
  uint32_t plain(const std::string& reg_name) const {
    std::lock_guard lock(mu_);
    for (const auto& [offset, n] : names_)
      if (n == reg_name) {
        auto it = plain_.find(offset);
        return it == plain_.end() ? 0 : it->second;
      }
    throw InvalidInput(std::string("no register ") + reg_name);
  }
  void set_plain(const std::string& reg_name, uint32_t value) {
    std::lock_guard lock(mu_);
    for (const auto& [offset, n] : names_)
      if (n == reg_name) plain_[offset] = value;
  }

  void record(bool on) {
    std::lock_guard lock(mu_);
    recording_ = on;
  }
  // Register reads since the router was made.
  uint64_t reads() const {
    std::lock_guard lock(mu_);
    return reads_;
  }
  // The writes since the last take, as "NAME=0x..." (an offset no .def names: "0x7f000=...").
  std::vector<std::string> take_writes() {
    std::lock_guard lock(mu_);
    raw_writes_.clear();
    return std::exchange(writes_, {});
  }
  // The same writes as (byte offset, value).
  std::vector<std::pair<uint64_t, uint32_t>> take_raw_writes() {
    std::lock_guard lock(mu_);
    writes_.clear();
    return std::exchange(raw_writes_, {});
  }

 private:
  emu::AmBlock* owner(uint64_t offset) const {
    for (emu::AmBlock* b : blocks_)
      if (b->handles(offset)) return b;
    return nullptr;
  }
  std::string name(uint64_t offset) const {
    auto it = names_.find(offset);
    return it == names_.end() ? hex(offset) : it->second;
  }
  std::vector<emu::AmBlock*> blocks_;
  std::map<uint64_t, std::string> names_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint32_t> plain_;
  bool recording_ = false;
  uint64_t reads_ = 0;
  std::vector<std::string> writes_;
  std::vector<std::pair<uint64_t, uint32_t>> raw_writes_;
};

// VRAM [0, bytes) as a host array: BootMemory for the driver's boot buffers, VramAccess for its
// page tables, and the models' AmBus VRAM. One allocator hands out both.
class TestVram final : public BootMemory, public VramAccess {
 public:
  static constexpr uint64_t kFbBase = 0x8000000000;
  explicit TestVram(uint64_t bytes) : bytes_(bytes), allocator_(0, bytes) {}

  VramBuffer alloc(uint64_t size, uint64_t align, const char*) override {
    const uint64_t pa = allocator_.alloc(size, align);
    std::memset(bytes_.data() + pa, 0, size);
    return {pa, kFbBase + pa, size, reinterpret_cast<std::byte*>(bytes_.data() + pa)};
  }
  uint64_t mc(uint64_t pa) const override { return kFbBase + pa; }
  uint64_t read64(uint64_t pa) override {
    uint64_t v;
    std::memcpy(&v, bytes_.data() + pa, 8);
    return v;
  }
  void write64(uint64_t pa, uint64_t value) override { std::memcpy(bytes_.data() + pa, &value, 8); }

  VramAllocator& allocator() { return allocator_; }
  std::span<uint8_t> span() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  VramAllocator allocator_;
};

// The models' view of that VRAM (interrupts left to the test).
inline emu::AmBus bus_over(TestVram& vram) {
  emu::AmBus bus;
  bus.vram = vram.span();
  bus.fb_base = TestVram::kFbBase;
  return bus;
}

}  // namespace hcq::amd::am::test
