// The interrupt handler's rings of a gfx1100 (OSSSYS 6.0.0, IH 6.0; issue 17 item 6/7): the GPU
// writes an 8-dword entry per interrupt into a ring in VRAM and its write pointer into a
// write-back slot; the driver reads entries from its read pointer up to the write pointer and
// hands the read pointer back through IH_RB_RPTR. The driver looks at the write-back slot
// (pending) when its MSI arrives or its wait times out, and drains only when it moved.
//
// Sequences: init follows Linux ih_v6_0_irq_init (rings off, each ring's base, control,
// write-back address, pointers and doorbell, storm and flood control, rings on, the self-IV
// write-pointer update); drain follows ih_v6_0_get_wptr (with its overflow recovery),
// amdgpu_ih_decode_iv_helper and ih_v6_0_set_rptr. Two rings as tinygrad AM_IH sets up (ring 1
// without Linux's redirection of retry faults to it, which hcq does not use); entries are read
// from ring 0.
//
// Where the CPU cannot map VRAM (a GPU behind a USB bridge; the buffers have no `cpu` pointer)
// the write-back slot and the entries are read through the VRAM port instead: the entries a
// drain takes in one read (two where they wrap around the ring's end).
//
// Threads: init runs once during the boot; drain and pending may be called from several
// threads (one lock: each entry is returned by exactly one call); the decoders are pure
// functions.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "amd/am/am_function.hpp"
#include "amd/am/boot_memory.hpp"
#include "amd/am/gmc.hpp"
#include "amd/am/ih_entry.hpp"
#include "amd/am/register_io.hpp"

namespace hcq::amd::am {

// One IH ring entry (amdgpu_ih_decode_iv_helper's field layout).
struct IhEntry {
  uint32_t client_id = 0;              // dw0 7:0
  uint32_t source_id = 0;              // dw0 15:8
  uint32_t ring_id = 0;                // dw0 23:16
  uint32_t vmid = 0;                   // dw0 27:24
  bool vmid_src = false;               // dw0 31: the VMID is the MM hub's
  uint64_t timestamp = 0;              // dw1, dw2 15:0
  uint32_t pasid = 0;                  // dw3 15:0
  uint32_t node_id = 0;                // dw3 23:16
  std::array<uint32_t, 4> src_data{};  // dw4..dw7
  std::array<uint32_t, 8> raw{};

  static IhEntry decode(const std::array<uint32_t, 8>& dw);
  // "client 0xa source 0xb5 (CP_EOP) ring 0 vmid 0"
  std::string describe() const;
};

// A VM fault entry: client VMC (MM hub) or GFX with source UTCL2_FAULT (GC hub).
struct IhVmFault {
  Hub hub = Hub::Gc;
  uint64_t address = 0;  // the faulting page (src_data[0] << 12 | src_data[1] 3:0 << 44)
  uint32_t vmid = 0;
  uint32_t client_id = 0;
  bool write = false;
  bool retry = false;
  // "gfxhub page fault (IH, client 0xa source 0x0 vmid 0) at 0x5000, write"
  std::string describe() const;
};
std::optional<IhVmFault> decode_vm_fault(const IhEntry& e);

enum class IhSource : uint8_t {
  VmFault,
  CpEndOfPipe,
  SdmaTrap,
  CpBadOpcode,
  CpPrivRegFault,
  Other
};
IhSource classify(const IhEntry& e);
// "VM_FAULT", "CP_EOP", "SDMA_TRAP", "CP_BAD_OPCODE", "CP_PRIV_REG_FAULT", "OTHER".
const char* source_name(IhSource s);

class Ih {
 public:
  // Linux's IH ring 0 size (amdgpu_ih.c: 256 KiB for ih_v6_0 dGPUs; tinygrad's too).
  static constexpr uint64_t kDefaultRingBytes = 256 << 10;
  static constexpr uint32_t kEntryBytes = ih_entry::kBytes;

  // Takes each ring (`ring_bytes`: a power of two, at least 4 KiB, at most 256 KiB: RB_SIZE
  // and the 18-bit pointers) and a write-back page per ring from `memory`; `vram` reads what
  // the CPU does not map (null: every buffer must be mapped; it must outlive this object).
  // hcq::InvalidInput for another size: "IH ring of 0x3000 bytes: a power of two from 0x1000 to
  // 0x40000 expected".
  Ih(RegisterIo& regs, BootMemory& memory, uint64_t ring_bytes = kDefaultRingBytes,
     VramPort* vram = nullptr);

  void init();

  // The entries from the read pointer up to the write pointer, oldest first; the read pointer
  // is then handed back. An overflow (RB_OVERFLOW) is counted and recovered as Linux does:
  // reading restarts at the oldest entry not overwritten (wptr + 32).
  std::vector<IhEntry> drain();
  // Whether the GPU wrote entries (or flagged an overflow) since the last drain started: a look
  // at the write-back slot in memory, no register access, so a waiter may ask on every
  // wake-up.
  bool pending() const;

  uint64_t overflows() const;
  uint64_t ring_bytes() const { return ring_bytes_; }
  const VramBuffer& ring(int i) const { return rings_[i]; }
  const VramBuffer& writeback(int i) const { return writeback_[i]; }

 private:
  uint32_t read_wptr_writeback() const;
  // [offset, offset + out.size()) of `buffer`: through its mapping, else the VRAM port.
  void read(const VramBuffer& buffer, uint64_t offset, std::span<std::byte> out) const;
  RegisterIo& regs_;
  VramPort* vram_;
  uint64_t ring_bytes_;
  std::array<VramBuffer, 2> rings_, writeback_;
  mutable std::mutex mu_;
  uint32_t rptr_ = 0;  // bytes
  // The write-back value the last drain started from: the GPU wrote nothing since while the
  // slot still holds it (an overflow flag already recovered from stays in the slot until the
  // next entry).
  uint32_t drained_writeback_ = 0;
  uint64_t overflows_ = 0;
};

}  // namespace hcq::amd::am
