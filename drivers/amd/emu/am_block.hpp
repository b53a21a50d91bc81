// The parts of the emulated register-level GPU (emu:gfx1100_am; issue 17 item 8): each IP
// block's model (SMU, PSP, GMC, IH, GFX/SDMA queues) owns some registers of the register BAR
// and sees the rest of the GPU only through AmBus. AmGpu (am_gpu.hpp) routes each register
// access to the block that handles() it and keeps every other register as plain storage.
//
// Every block is written from the public sources (Linux amdgpu, tinygrad's am), never from
// hcq's driver: the two share only the register descriptions (am/regs.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "os/mmio.hpp"

namespace hcq::amd::emu {

// What a block reaches besides its own registers.
struct AmBus {
  // VRAM from physical address 0 (the VRAM BAR's memory).
  std::span<uint8_t> vram;
  // The doorbell BAR's memory (BAR2): the driver writes a queue's 64-bit write pointer at
  // its doorbell's byte offset; engines read it from here.
  std::span<uint8_t> doorbells;
  // MC address of VRAM byte 0 (MMMC_VM_FB_LOCATION_BASE.FB_BASE << 24).
  uint64_t fb_base = 0;
  // Host memory at an IOVA, as the device's DMA reaches it through the IOMMU (VFIO DMA
  // mappings, bus master enabled); null when [iova, iova + size) is not mapped.
  std::function<void*(uint64_t iova, uint64_t size)> dma;
  // Writes one 8-dword entry into the IH ring (am_ih.hpp); set by AmGpu.
  std::function<void(const std::array<uint32_t, 8>& entry)> interrupt;
  // How many HDP memory flushes the driver has done (AmGpu counts them); empty: the HDP is
  // not modelled and nothing checks for flushes.
  std::function<uint64_t()> hdp_flushes;

  // VRAM at an MC address: null when [mc, mc + size) is not inside VRAM.
  uint8_t* vram_at_mc(uint64_t mc, uint64_t size) const {
    if (mc < fb_base || mc - fb_base > vram.size() || size > vram.size() - (mc - fb_base))
      return nullptr;
    return vram.data() + (mc - fb_base);
  }
};

class AmBlock : public os::MmioHandler {
 public:
  // Whether the byte offset in the register BAR is one of this block's registers.
  virtual bool handles(uint64_t offset) const = 0;
  // Power-on state (function-level reset, mode-1 reset).
  virtual void reset() = 0;
};

}  // namespace hcq::amd::emu
