#include "amd/am/hdp.hpp"

#include "amd/am/regs.hpp"

namespace hcq::amd::am {

void Hdp::remap() {
  io_.write(nbio_4_3_0::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, uint32_t(kRemapHdpMemFlush));
  io_.write(nbio_4_3_0::BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL, uint32_t(kRemapHdpRegFlush));
}

void Hdp::flush() {
  window_.write32(kRemapHdpMemFlush, 0);
  window_.read32(kRemapHdpMemFlush);
}

void Hdp::post_flush() { window_.write32(kRemapHdpMemFlush, 0); }

}  // namespace hcq::amd::am
