// Memory the AM driver's boot hands to the GPU's own engines (PSP firmware buffers and fences,
// the TMR, IH rings, MQDs, EOP buffers, the SMU's driver table): VRAM the driver writes through
// the VRAM BAR (mapped, or a VramPort's requests behind a USB bridge) and the GPU reads at an
// MC address. On gfx11 the MC address of VRAM byte `pa`
// is the frame buffer's base (MMMC_VM_FB_LOCATION_BASE.FB_BASE << 24) + pa (Linux
// gmc_v11_0.c gmc_v11_0_vram_gtt_location; tinygrad am/amdev.py paddr2mc).
//
// Threads: implementations say; the boot itself runs on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hcq::amd::am {

class VramPort;

struct VramBuffer {
  uint64_t pa = 0;    // VRAM physical address (offset in VRAM)
  uint64_t mc = 0;    // the GPU's MC address of it (fb_base + pa)
  uint64_t size = 0;  // bytes
  // The CPU's mapping through the VRAM BAR (zeroed when handed out); null where the CPU
  // cannot map VRAM (behind a USB bridge): then only `port` reaches it.
  std::byte* cpu = nullptr;
  VramPort* port = nullptr;  // VRAM byte pa of the buffer is the port's address pa
  std::span<std::byte> bytes() const { return {cpu, size}; }
  // [offset, offset + bytes) of the buffer: through the mapping where there is one, else
  // through the port. hcq::Error for a range outside the buffer or a buffer with neither.
  void write(uint64_t offset, std::span<const std::byte> data) const;
  void write(uint64_t offset, std::span<const uint8_t> data) const {
    write(offset, std::as_bytes(data));
  }
  void read(uint64_t offset, std::span<std::byte> out) const;
  void read(uint64_t offset, std::span<uint8_t> out) const {
    read(offset, std::as_writable_bytes(out));
  }
  uint32_t read32(uint64_t offset) const;  // little-endian, as the GPU writes it
  void zero() const;                       // the whole buffer
};

class BootMemory {
 public:
  virtual ~BootMemory() = default;
  // `size` bytes aligned to `align` (a power of two, at least 4096), zeroed. Throws hcq::Error
  // naming `what` when VRAM is exhausted.
  virtual VramBuffer alloc(uint64_t size, uint64_t align, const char* what) = 0;
  // The MC address of VRAM byte `pa`.
  virtual uint64_t mc(uint64_t pa) const = 0;
};

}  // namespace hcq::amd::am
