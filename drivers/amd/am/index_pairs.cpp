#include "amd/am/index_pairs.hpp"

namespace hcq::amd::am {

os::IndexDataLayout mm_index_layout() {
  os::IndexDataLayout l;
  l.name = "MM_INDEX/MM_DATA";
  l.index = 0x0 * 4;
  l.data = 0x1 * 4;
  l.address_limit = uint64_t(1) << 31;  // bit 31 of MM_INDEX selects VRAM
  l.vram_index_hi = 0x6 * 4;
  l.reaches_vram = true;
  return l;
}

namespace {

// A pair of NBIO 4.3.0 at dwords `index` and `data`, both read back after a write as Linux
// amdgpu_device_indirect_rreg/_wreg do.
os::IndexDataLayout nbio_pair(const char* name, uint64_t index_dword, uint64_t data_dword) {
  os::IndexDataLayout l;
  l.name = name;
  l.index = index_dword * 4;
  l.data = data_dword * 4;
  l.read_back_index = true;
  l.read_back_data = true;
  return l;
}

}  // namespace

os::IndexDataLayout pcie_index2_layout_nbio_4_3_0(uint64_t nbio_segment0) {
  os::IndexDataLayout l =
      nbio_pair("PCIE_INDEX2/PCIE_DATA2", nbio_segment0 + 0xe, nbio_segment0 + 0xf);
  // PCIE_INDEX2_HI holds address bits 32..39 (nbio_4_3_0_sh_mask.h PCIE_INDEX2_HI mask 0xff;
  // Linux amdgpu_device_indirect_rreg_ext writes (reg_addr >> 32) & 0xff).
  l.index_hi = (nbio_segment0 + 0x11) * 4;
  l.address_limit = uint64_t(1) << 40;
  return l;
}

os::IndexDataLayout rsmu_layout_nbio_4_3_0(uint64_t nbio_segment1) {
  return nbio_pair("BIF_BX_PF0_RSMU_INDEX/BIF_BX_PF0_RSMU_DATA", nbio_segment1 + 0x0,
                   nbio_segment1 + 0x1);
}

}  // namespace hcq::amd::am
