// The HDP (host data path, HDP 6.0.0 behind NBIO 4.3.0) flush of an AM GPU (issue 17): the
// CPU's writes to VRAM through the VRAM BAR pass the HDP, which may hold them; before an engine
// or the PSP reads what the CPU wrote there, the driver flushes it.
//
// Sources (facts only):
//   Linux soc21.c soc21_common_early_init   rmmio_remap.reg_offset = MMIO_REG_HOLE_OFFSET
//                                           (0x80000 - PAGE_SIZE: byte 0x7f000 of the register
//                                           BAR with 4 KiB pages)
//   Linux nbio_v4_3.c                       remap_hdp_registers: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL
//                                           = reg_offset + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL (0),
//                                           BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL = reg_offset +
//                                           KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL (4)
//                                           (uapi kfd_ioctl.h); soc21_common_hw_init calls it
//   Linux amdgpu_hdp.c / hdp_v6_0.c         amdgpu_hdp_generic_flush: 0 written to the remapped
//                                           HDP_MEM_FLUSH_CNTL, then a register read so that the
//                                           write has landed (older Linux reads the flush
//                                           register back, newer reads RCC_CONFIG_MEMSIZE)
//   tinygrad am/ip.py AM_GMC.flush_hdp      the same write (no read); called after the PSP's
//                                           buffer copies, after writing an MQD, before each TLB
//                                           flush, and (ops_amd.py signal_doorbell) before every
//                                           doorbell of an AM queue
//
// Threads: remap, flush and post_flush may be called from several threads at once (each is
// independent register accesses; flushes need no ordering among themselves).
#pragma once

#include <cstdint>

#include "amd/am/register_io.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {

// Where soc21 puts the remapped HDP flush registers in the register BAR, and their places.
inline constexpr uint64_t kMmioRemapOffset = 0x80000 - 4096;  // MMIO_REG_HOLE_OFFSET
inline constexpr uint64_t kRemapHdpMemFlush = kMmioRemapOffset + 0;  // KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL
inline constexpr uint64_t kRemapHdpRegFlush = kMmioRemapOffset + 4;  // KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL

class Hdp {
 public:
  // The window must outlive this object.
  Hdp(RegisterIo& io, os::Mmio& window) : io_(io), window_(window) {}

  // nbio_v4_3_remap_hdp_registers: the two flush registers at kRemapHdpMemFlush/RegFlush.
  void remap();
  // amdgpu_hdp_generic_flush: 0 to the remapped HDP_MEM_FLUSH_CNTL, read back.
  void flush();
  // The write alone (tinygrad's flush_hdp), for the doorbell path: the flush write and the
  // doorbell write that follows are both posted writes of the same function and reach the GPU
  // in order, so the read-back's round trip is not paid per submission.
  void post_flush();

 private:
  RegisterIo& io_;
  os::Mmio& window_;
};

}  // namespace hcq::amd::am
