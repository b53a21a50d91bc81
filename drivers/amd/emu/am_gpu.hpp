// The top of the emulated register-level RX 7900 XTX (emu:gfx1100_am; issue 17 item 8): the
// register BAR's handler. It owns what no IP block model does:
//   - VRAM (the VRAM BAR's memory, given by the caller) with the IP discovery table placed
//     DISCOVERY_TMR_OFFSET (64 KiB) below its end, as the GPU's firmware leaves it (Linux
//     amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem; tinygrad am/amdev.py);
//   - RCC_CONFIG_MEMSIZE (the fixed dword 0xde3) answering the VRAM size in MiB;
//   - MM_INDEX / MM_INDEX_HI / MM_DATA: bit 31 of MM_INDEX set reaches VRAM at
//     (MM_INDEX_HI << 31) | MM_INDEX[30:0] (Linux amdgpu_device_mm_access), clear reaches the
//     register at byte MM_INDEX (the pre-SOC15 path of amdgpu_mm_rreg);
//   - the FB location: MMMC_ and GCMC_VM_FB_LOCATION_BASE/TOP reset to fb_base >> 24 and
//     (fb_base + VRAM size - 1) >> 24 (the firmware sets them; Linux gmc_v11_0.c
//     mmhub_v3_0_get_fb_location reads them back, FB_BASE in 16 MiB units);
//   - the HDP flush: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL / _REG_FLUSH_CNTL (plain registers)
//     place the remapped HDP_MEM_FLUSH_CNTL / HDP_REG_FLUSH_CNTL at the byte offset they hold
//     (ADDRESS, bits 18:2; Linux nbio_v4_3_remap_hdp_registers, soc21's MMIO hole at 0x7f000);
//     a write there is a flush and is counted (read: 0). The model keeps no HDP cache: VRAM
//     written through a plain mapping cannot be seen pending, so blocks that read what the CPU
//     wrote check instead that a flush came since their last command (AmBus::hdp_flushes;
//     the PSP does);
//   - a plain register file for every other register: a read returns the last value written,
//     or the reset value, or 0.
// Every access to a register some block handles() goes to that block instead (the first
// added that does): the SMU (AmSmu, built here) and the blocks add_block() is given (PSP,
// GMC, IH, GFX: wired in by whoever assembles the GPU).
//
// Resets: a mode-1 reset (the SMU's debug message Mode1Reset) and a function-level reset
// (VFIO_DEVICE_RESET, function_reset()) both return every block and the register file to
// power-on and write the discovery table again (the firmware does on every boot). VRAM is
// kept otherwise: the reset does not scrub memory, though Linux treats VRAM as lost after a
// mode-1 reset (amdgpu_device_check_vram_lost returns true for AMD_RESET_METHOD_MODE1), so a
// driver must not rely on what it left there. (Navi 31 behind vfio-pci has no real FLR; the
// model gives it one with the mode-1 reset's effect.)
//
// Threads: read32/write32 may be called from several threads at once (the register file has
// a mutex, every block its own). A reset racing with accesses from other threads is not
// atomic as a whole: each access sees each block before or after that block's reset.
// add_block() and set_interrupt() must come before the first access.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "amd/am/regs.hpp"
#include "amd/emu/am_block.hpp"
#include "amd/emu/am_mmu.hpp"
#include "amd/emu/am_smu.hpp"
#include "emu/memory.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::emu {

class AmGpu final : public os::MmioHandler {
 public:
  // The geometry the emulated GPU uses (tinygrad's AMDev maps the same BARs).
  static constexpr uint64_t kDefaultVramBytes = 24ull << 30;     // RX 7900 XTX
  static constexpr uint64_t kFbBase = 0x8000000000ull;           // MC address of VRAM byte 0
  static constexpr uint64_t kRegisterBarBytes = 1ull << 20;      // BAR5
  static constexpr uint64_t kDoorbellBarBytes = 2ull << 20;      // BAR2

  // `vram` and `doorbells` are the VRAM and doorbell BARs' memory (the caller's; they must
  // outlive this object); `dma` reaches host memory at an IOVA (AmBus::dma). VRAM must be a
  // whole number of MiB, at least 1 MiB (RCC_CONFIG_MEMSIZE counts MiB): InvalidInput
  // "AM GPU model: VRAM of 0x1234 bytes is not a whole number of MiB (at least 1)".
  // `discovery_table`: the IP discovery table its firmware leaves in VRAM (empty: gfx1100's,
  // gfx1100_discovery_table()); its register bases place every block's registers.
  // `register_tables`: per IP, the table of a version whose registers moved
  // (IpSegmentBases::tables; must outlive this object); empty: the .def's.
  AmGpu(std::span<uint8_t> vram, std::span<uint8_t> doorbells,
        std::function<void*(uint64_t iova, uint64_t size)> dma, uint64_t fb_base = kFbBase,
        std::vector<std::byte> discovery_table = {},
        std::array<std::span<const am::RegDesc>, am::kIpCount> register_tables = {});

  // The register BAR's handler: byte offsets in BAR5 (or beyond it, through MM_INDEX).
  uint32_t read32(uint64_t offset) override;
  void write32(uint64_t offset, uint32_t value) override;

  // What blocks are built from.
  AmBus& bus() { return bus_; }
  const am::IpSegmentBases& bases() const { return bases_; }
  AmSmu& smu() { return *smu_; }
  // Routes the block's registers to it from now on; it is reset with the GPU.
  void add_block(std::shared_ptr<AmBlock> block);
  // Where blocks' interrupts go (the IH block's ring): AmBus::interrupt calls it; until set,
  // interrupts are counted and dropped.
  void set_interrupt(std::function<void(const std::array<uint32_t, 8>&)> interrupt);
  uint64_t dropped_interrupts() const;

  // VRAM_size - 64 KiB: where the discovery table is.
  uint64_t discovery_offset() const;
  // Function-level reset (VFIO_DEVICE_RESET) and mode-1 reset (the SMU's message runs it).
  void function_reset();
  void mode1_reset();
  unsigned function_resets() const;
  unsigned mode1_resets() const;
  // Writes of the remapped HDP_MEM_FLUSH_CNTL and HDP_REG_FLUSH_CNTL since construction.
  uint64_t hdp_mem_flushes() const { return hdp_mem_flushes_.load(); }
  uint64_t hdp_reg_flushes() const { return hdp_reg_flushes_.load(); }

 private:
  void reset_all();
  AmBlock* block_for(uint64_t offset) const;
  uint32_t read_register(uint64_t offset);
  void write_register(uint64_t offset, uint32_t value);
  uint64_t mm_vram_address() const;  // under mu_

  AmBus bus_;
  am::IpSegmentBases bases_;
  std::vector<std::byte> discovery_table_;  // written back into VRAM by every reset
  std::map<uint64_t, uint32_t> reset_values_;
  uint64_t memsize_offset_ = 0;
  uint64_t remap_mem_offset_ = 0, remap_reg_offset_ = 0;  // the REMAP_HDP_* registers
  static constexpr uint64_t kNotRemapped = ~uint64_t(0);
  // Where the remapped flush registers are (kNotRemapped until the driver remaps them).
  std::atomic<uint64_t> hdp_mem_at_{kNotRemapped}, hdp_reg_at_{kNotRemapped};
  std::atomic<uint64_t> hdp_mem_flushes_{0}, hdp_reg_flushes_{0};
  std::shared_ptr<AmSmu> smu_;
  std::vector<std::shared_ptr<AmBlock>> blocks_;

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> regs_;
  std::function<void(const std::array<uint32_t, 8>&)> interrupt_;
  uint64_t dropped_interrupts_ = 0;
  unsigned function_resets_ = 0, mode1_resets_ = 0;
};

// A GPU virtual address space as the emulated GPU's engines see it (hcq::emu::GpuAddressSpace
// for engine.hpp): each page translated by an AmMmu walking the driver's page tables, then
// reached in VRAM (by physical address) or in host memory (a system page's address is an
// IOVA, through AmBus::dma: the VFIO DMA mappings, with bus mastering on).
//
// Limits of the emulator, not of hardware: a translated range must be one run of host memory,
// so [va, va + size) crossing pages that are not contiguous in host memory (two VRAM pages
// apart, VRAM then system, two DMA mappings) throws Fault saying so; the access kind is not
// known (the engine asks for a pointer, then reads or writes), so pages are checked as reads:
// a write to a read-only page is not caught.
//
// An MMU fault calls on_fault (the GMC model latches it and raises the IH entry) and throws
// hcq::emu::Fault with MmuFault::describe(); an IOVA without a DMA mapping throws Fault
// "GPU VA 0x...: IOVA 0x... (system page) has no DMA mapping (or bus mastering is off)" and
// calls nothing (the IOMMU's fault, not the GPU's).
//
// Threads: translate and mapping_of may be called from several threads at once and while the
// driver writes registers (AmMmu and the DMA lookup lock themselves); on_fault is called from
// the translating thread.
class AmAddressSpace final : public hcq::emu::GpuAddressSpace {
 public:
  // mapping_of looks at most this far each side of va (a cap on the walk, not a GPU limit).
  static constexpr uint64_t kMaxMappingRun = 256ull << 20;

  AmAddressSpace(AmMmu& mmu, const AmBus& bus, uint32_t client,
                 std::function<void(const MmuFault&)> on_fault);

  void* translate(uint64_t va, uint64_t size) const override;
  // The run of valid pages around va that are contiguous in host memory: {base, size}; {0, 0}
  // when va itself does not translate. Never calls on_fault.
  std::pair<uint64_t, uint64_t> mapping_of(uint64_t va) const override;

 private:
  // One page's translation, from va to the page's end.
  struct Page {
    uint8_t* host = nullptr;  // host address of va (null on a fault or an error)
    uint64_t page_bytes = 0;
    uint64_t remaining = 0;   // bytes from va to the end of its page
    std::optional<MmuFault> fault;
    std::string error;        // no DMA mapping, or outside VRAM
  };
  Page page(uint64_t va) const;

  AmMmu& mmu_;
  const AmBus& bus_;
  uint32_t client_;
  std::function<void(const MmuFault&)> on_fault_;
};

}  // namespace hcq::amd::emu
