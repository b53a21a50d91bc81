#include "amd/emu/am_gpu.hpp"

#include <cstring>

#include "amd/am/discovery.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "core/error.hpp"
#include "emu/kernels.hpp"

namespace hcq::amd::emu {

namespace {

namespace nbio = am::nbio_4_3_0;

// The fixed dwords amdgpu uses before discovery (nbio_4_3_0.def: Linux amdgpu_discovery.c
// mmMM_INDEX 0x0, mmMM_DATA 0x1, mmMM_INDEX_HI 0x6), as byte offsets.
constexpr uint64_t kMmIndex = nbio::MM_INDEX.offset * 4;
constexpr uint64_t kMmData = nbio::MM_DATA.offset * 4;
constexpr uint64_t kMmIndexHi = nbio::MM_INDEX_HI.offset * 4;
constexpr uint32_t kMmAperVram = 0x80000000u;  // MM_INDEX.MM_APER

uint64_t byte_offset(const am::Reg& r, const am::IpSegmentBases& bases) {
  return am::absolute_dword(am::describe(r), bases) * 4;
}

}  // namespace

AmGpu::AmGpu(std::span<uint8_t> vram, std::span<uint8_t> doorbells,
             std::function<void*(uint64_t, uint64_t)> dma, uint64_t fb_base,
             std::vector<std::byte> discovery_table,
             std::array<std::span<const am::RegDesc>, am::kIpCount> register_tables)
    : discovery_table_(discovery_table.empty() ? gfx1100_discovery_table()
                                               : std::move(discovery_table)) {
  if (vram.size() < (1u << 20) || vram.size() % (1u << 20))
    throw InvalidInput("AM GPU model: VRAM of " + hex(vram.size()) +
                       " bytes is not a whole number of MiB (at least 1)");
  bus_.vram = vram;
  bus_.doorbells = doorbells;
  bus_.fb_base = fb_base;
  bus_.dma = std::move(dma);
  bus_.interrupt = [this](const std::array<uint32_t, 8>& entry) {
    std::function<void(const std::array<uint32_t, 8>&)> to;
    {
      std::lock_guard lock(mu_);
      to = interrupt_;
      if (!to) ++dropped_interrupts_;
    }
    if (to) to(entry);
  };

  const std::vector<std::byte>& table = discovery_table_;
  std::memcpy(vram.data() + discovery_offset(), table.data(), table.size());
  bases_ = am::segment_bases(am::parse_discovery(table));
  bases_.tables = register_tables;
  memsize_offset_ = byte_offset(nbio::RCC_CONFIG_MEMSIZE, bases_);
  remap_mem_offset_ = byte_offset(nbio::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, bases_);
  remap_reg_offset_ = byte_offset(nbio::BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL, bases_);
  bus_.hdp_flushes = [this] { return hdp_mem_flushes(); };

  // FB_BASE / FB_TOP in 16 MiB units (mmhub_3_0_0.def, gc_11_0_0.def; Linux
  // mmhub_v3_0_get_fb_location: base = FB_BASE << 24, top = (FB_TOP << 24) + 0xffffff).
  const uint32_t fb_base_field = uint32_t(fb_base >> 24);
  const uint32_t fb_top_field = uint32_t((fb_base + vram.size() - 1) >> 24);
  reset_values_[byte_offset(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE, bases_)] = fb_base_field;
  reset_values_[byte_offset(am::mmhub_3_0_0::MMMC_VM_FB_LOCATION_TOP, bases_)] = fb_top_field;
  reset_values_[byte_offset(am::gc_11_0_0::GCMC_VM_FB_LOCATION_BASE, bases_)] = fb_base_field;
  reset_values_[byte_offset(am::gc_11_0_0::GCMC_VM_FB_LOCATION_TOP, bases_)] = fb_top_field;

  smu_ = std::make_shared<AmSmu>(bases_);
  smu_->set_mode1_reset_hook([this] { mode1_reset(); });
  blocks_.push_back(smu_);
}

uint64_t AmGpu::discovery_offset() const { return am::discovery_table_offset(bus_.vram.size()); }

void AmGpu::add_block(std::shared_ptr<AmBlock> block) { blocks_.push_back(std::move(block)); }

void AmGpu::set_interrupt(std::function<void(const std::array<uint32_t, 8>&)> interrupt) {
  std::lock_guard lock(mu_);
  interrupt_ = std::move(interrupt);
}

uint64_t AmGpu::dropped_interrupts() const {
  std::lock_guard lock(mu_);
  return dropped_interrupts_;
}

AmBlock* AmGpu::block_for(uint64_t offset) const {
  for (const auto& b : blocks_)
    if (b->handles(offset)) return b.get();
  return nullptr;
}

uint64_t AmGpu::mm_vram_address() const {
  auto at = [&](uint64_t off) {
    auto it = regs_.find(off);
    return it == regs_.end() ? 0u : it->second;
  };
  return uint64_t(at(kMmIndexHi)) << 31 | (at(kMmIndex) & ~kMmAperVram);
}

uint32_t AmGpu::read32(uint64_t offset) {
  if (offset == kMmData) {
    std::unique_lock lock(mu_);
    auto it = regs_.find(kMmIndex);
    const uint32_t index = it == regs_.end() ? 0 : it->second;
    if (index & kMmAperVram) {
      const uint64_t at = mm_vram_address();
      uint32_t v = 0;  // past VRAM: reads as 0 (the model's choice; hardware is undefined)
      if (at < bus_.vram.size() && bus_.vram.size() - at >= 4) std::memcpy(&v, bus_.vram.data() + at, 4);
      return v;
    }
    lock.unlock();
    if (index == kMmIndex || index == kMmData || index == kMmIndexHi) return read_register(index);
    return read32(index);
  }
  if (offset == memsize_offset_) return uint32_t(bus_.vram.size() >> 20);
  if (offset == hdp_mem_at_.load() || offset == hdp_reg_at_.load()) return 0;
  if (AmBlock* b = block_for(offset)) return b->read32(offset);
  return read_register(offset);
}

void AmGpu::write32(uint64_t offset, uint32_t value) {
  if (offset == kMmData) {
    std::unique_lock lock(mu_);
    auto it = regs_.find(kMmIndex);
    const uint32_t index = it == regs_.end() ? 0 : it->second;
    if (index & kMmAperVram) {
      const uint64_t at = mm_vram_address();
      if (at < bus_.vram.size() && bus_.vram.size() - at >= 4) std::memcpy(bus_.vram.data() + at, &value, 4);
      return;
    }
    lock.unlock();
    if (index == kMmIndex || index == kMmData || index == kMmIndexHi) return write_register(index, value);
    return write32(index, value);
  }
  if (offset == memsize_offset_) return;  // read-only: the firmware's strap
  if (offset == hdp_mem_at_.load()) {
    ++hdp_mem_flushes_;
    return;
  }
  if (offset == hdp_reg_at_.load()) {
    ++hdp_reg_flushes_;
    return;
  }
  if (offset == remap_mem_offset_ || offset == remap_reg_offset_) {
    // ADDRESS (bits 18:2) is the byte offset in the register BAR (nbio_4_3_0.def).
    constexpr am::RegField address = nbio::fields::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL::ADDRESS;
    const uint64_t at = uint64_t(address.get(value)) << 2;
    (offset == remap_mem_offset_ ? hdp_mem_at_ : hdp_reg_at_).store(at);
  }
  if (AmBlock* b = block_for(offset)) return b->write32(offset, value);
  write_register(offset, value);
}

uint32_t AmGpu::read_register(uint64_t offset) {
  std::lock_guard lock(mu_);
  if (auto it = regs_.find(offset); it != regs_.end()) return it->second;
  auto r = reset_values_.find(offset);
  return r == reset_values_.end() ? 0 : r->second;
}

void AmGpu::write_register(uint64_t offset, uint32_t value) {
  std::lock_guard lock(mu_);
  regs_[offset] = value;
}

void AmGpu::reset_all() {
  for (const auto& b : blocks_) b->reset();
  const std::vector<std::byte>& table = discovery_table_;
  hdp_mem_at_.store(kNotRemapped);
  hdp_reg_at_.store(kNotRemapped);
  std::lock_guard lock(mu_);
  regs_.clear();
  std::memcpy(bus_.vram.data() + discovery_offset(), table.data(), table.size());
}

void AmGpu::function_reset() {
  reset_all();
  std::lock_guard lock(mu_);
  ++function_resets_;
}

void AmGpu::mode1_reset() {
  reset_all();
  std::lock_guard lock(mu_);
  ++mode1_resets_;
}

unsigned AmGpu::function_resets() const {
  std::lock_guard lock(mu_);
  return function_resets_;
}

unsigned AmGpu::mode1_resets() const {
  std::lock_guard lock(mu_);
  return mode1_resets_;
}

// ---- AmAddressSpace ----

AmAddressSpace::AmAddressSpace(AmMmu& mmu, const AmBus& bus, uint32_t client,
                               std::function<void(const MmuFault&)> on_fault)
    : mmu_(mmu), bus_(bus), client_(client), on_fault_(std::move(on_fault)) {}

AmAddressSpace::Page AmAddressSpace::page(uint64_t va) const {
  Page p;
  const MmuTranslation t = mmu_.translate(va, MmuAccess::Read, client_);
  if (t.fault) {
    p.fault = t.fault;
    return p;
  }
  p.page_bytes = t.page_bytes;
  p.remaining = t.page_bytes - (t.pa & (t.page_bytes - 1));
  if (t.system) {
    p.host = static_cast<uint8_t*>(bus_.dma ? bus_.dma(t.pa, p.remaining) : nullptr);
    if (!p.host)
      p.error = "GPU VA " + hex(va) + ": IOVA " + hex(t.pa) +
                " (system page) has no DMA mapping (or bus mastering is off)";
    return p;
  }
  if (t.pa >= bus_.vram.size() || bus_.vram.size() - t.pa < p.remaining) {
    p.error = "GPU VA " + hex(va) + ": VRAM page at " + hex(t.pa) + " is outside VRAM (" +
              hex(bus_.vram.size()) + " bytes)";
    return p;
  }
  p.host = bus_.vram.data() + t.pa;
  return p;
}

void* AmAddressSpace::translate(uint64_t va, uint64_t size) const {
  const uint64_t bytes = size ? size : 1;
  if (va + bytes < va)
    throw hcq::emu::Fault("GPU access [" + hex(va) + ", +" + hex(size) + ") wraps around", va);
  uint8_t* host = nullptr;
  for (uint64_t covered = 0; covered < bytes;) {
    const uint64_t at = va + covered;
    const Page p = page(at);
    if (p.fault) {
      if (on_fault_) on_fault_(*p.fault);
      throw hcq::emu::Fault(p.fault->describe(), at);
    }
    if (!p.error.empty()) throw hcq::emu::Fault(p.error, at);
    if (!host) {
      host = p.host;
    } else if (p.host != host + covered) {
      throw hcq::emu::Fault("GPU access [" + hex(va) + ", +" + hex(size) + ") crosses from one page to another at " +
                                hex(at) + " that is not next to it in host memory (the emulator reaches one "
                                "host-contiguous run per access)",
                            at);
    }
    covered += p.remaining;
  }
  return host;
}

std::pair<uint64_t, uint64_t> AmAddressSpace::mapping_of(uint64_t va) const {
  const Page p = page(va);
  if (!p.host) return {0, 0};
  // Forward from va's page end while the next page follows in host memory.
  uint64_t end = va + p.remaining;
  while (end > va && end - va < kMaxMappingRun) {
    const Page q = page(end);
    if (!q.host || q.host != p.host + (end - va)) break;
    end += q.remaining;
  }
  // Backward from va's page start while the byte before the run is the host byte before it.
  uint64_t base = va - (p.page_bytes - p.remaining);
  while (base > 0 && va - base < kMaxMappingRun) {
    const Page q = page(base - 1);
    if (!q.host || q.host != p.host - (va - base) - 1 || q.page_bytes > base) break;
    base -= q.page_bytes;  // base - 1 is its page's last byte
  }
  return {base, end - base};
}

}  // namespace hcq::amd::emu
