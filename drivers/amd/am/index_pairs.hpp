// The index/data register pairs of amdgpu ASICs (os::IndexDataLayout is the vendor-neutral
// mechanism, lib/os/mmio.hpp): where each pair sits and how it takes an address.
//
// Thread safety: pure functions; call from any thread.
#pragma once

#include <cstdint>

#include "os/mmio.hpp"

namespace hcq::amd::am {

// MM_INDEX 0x0, MM_DATA 0x1, MM_INDEX_HI 0x6 (dwords; byte 0x0, 0x4, 0x18): fixed in the BIF
// register space of amdgpu ASICs: Linux amdgpu_discovery.c defines them as absolute dwords
// (mmMM_INDEX, mmMM_DATA, mmMM_INDEX_HI) to read the discovery table before discovery.
// amdgpu_device_mm_access writes MM_INDEX = address | 0x80000000 (bit 31 selects VRAM) and
// MM_INDEX_HI = address >> 31; with bit 31 clear MM_INDEX selects a register byte address (the
// pre-SOC15 amdgpu_mm_rreg path for registers beyond the BAR).
os::IndexDataLayout mm_index_layout();
// PCIE_INDEX2 0xe, PCIE_DATA2 0xf, PCIE_INDEX2_HI 0x11 (dwords in NBIO segment 0, Linux
// nbio_4_3_0_offset.h regBIF_BX0_PCIE_INDEX2/_DATA2/_INDEX2_HI, BASE_IDX 0): an SMN byte
// address in the index, the index read back, then the data (Linux amdgpu_device_indirect_rreg
// and _wreg; the high index for addresses above 4 GiB as amdgpu_device_indirect_rreg_ext
// writes it; tinygrad's amdev.py indirect_wreg_pcie). `nbio_segment0` is NBIO's segment-0 base
// in dwords from IP discovery (0 on Navi 31).
os::IndexDataLayout pcie_index2_layout_nbio_4_3_0(uint64_t nbio_segment0);
// BIF_BX_PF0_RSMU_INDEX 0x0, BIF_BX_PF0_RSMU_DATA 0x1 (dwords in NBIO segment 1,
// nbio_4_3_0_offset.h, BASE_IDX 1): the pair Linux nbio_v4_3.c get_pcie_index_offset and
// get_pcie_data_offset return today, so what soc21.c's adev->pcie_rreg
// (amdgpu_device_indirect_rreg) goes through, and what tinygrad's amdev.py indirect_rreg uses
// for registers beyond the BAR. No high index (nbio_v4_3 has no get_pcie_index_hi_offset), so
// addresses below 4 GiB. `nbio_segment1` is NBIO's segment-1 base in dwords (0x14 on Navi 31).
os::IndexDataLayout rsmu_layout_nbio_4_3_0(uint64_t nbio_segment1);

}  // namespace hcq::amd::am
