// The KGSL ABI header against numbers worked out by hand from the public msm_kgsl.h UAPI header
// (qualcomm-linux/kgsl include/uapi/linux/msm_kgsl.h), mesa's freedreno_devices.py /
// tu_knl_kgsl.cc and tinygrad's ops_qcom.py. Every expected value below is a literal with its
// arithmetic in a comment; none is computed by the code under test.
#include "qcom/kgsl_abi.hpp"

#include <gtest/gtest.h>

namespace hcq::qcom::kgsl {
namespace {

// _IOW(type, nr, size) = 1 << 30 | size << 16 | type << 8 | nr and _IOWR = 3 << 30 | ...,
// with KGSL_IOC_TYPE = 0x09, so type << 8 = 0x900.
TEST(KgslAbi, IoctlNumbers) {
  // GETPROPERTY _IOWR nr 0x02, kgsl_device_getproperty = type 4 + pad 4 + value 8 +
  // sizebytes 8 = 24 = 0x18: 0xC0000000 | 0x00180000 | 0x900 | 0x02.
  EXPECT_EQ(IOCTL_KGSL_DEVICE_GETPROPERTY, 0xC0180902ul);
  // SETPROPERTY _IOW nr 0x32, same struct: 0x40000000 | 0x00180000 | 0x900 | 0x32.
  EXPECT_EQ(IOCTL_KGSL_SETPROPERTY, 0x40180932ul);
  // DRAWCTXT_CREATE _IOWR nr 0x13, flags + drawctxt_id = 8: 0xC0000000 | 0x00080000 | 0x913.
  EXPECT_EQ(IOCTL_KGSL_DRAWCTXT_CREATE, 0xC0080913ul);
  // DRAWCTXT_DESTROY _IOW nr 0x14, drawctxt_id = 4: 0x40000000 | 0x00040000 | 0x914.
  EXPECT_EQ(IOCTL_KGSL_DRAWCTXT_DESTROY, 0x40040914ul);
  // GPUOBJ_ALLOC _IOWR nr 0x45, 4 x u64 32 + id, metadata_len 8 + metadata 8 = 48 = 0x30:
  // 0xC0000000 | 0x00300000 | 0x900 | 0x45.
  EXPECT_EQ(IOCTL_KGSL_GPUOBJ_ALLOC, 0xC0300945ul);
  // GPUOBJ_FREE _IOW nr 0x46, flags 8 + priv 8 + id, type, len 12 = 28, padded to 32 = 0x20:
  // 0x40000000 | 0x00200000 | 0x900 | 0x46.
  EXPECT_EQ(IOCTL_KGSL_GPUOBJ_FREE, 0x40200946ul);
  // GPUOBJ_INFO _IOWR nr 0x47, 5 x u64 40 + id 4 = 44, padded to 48 = 0x30.
  EXPECT_EQ(IOCTL_KGSL_GPUOBJ_INFO, 0xC0300947ul);
  // GPUOBJ_IMPORT _IOWR nr 0x48, 3 x u64 24 + type, id 8 = 32 = 0x20.
  EXPECT_EQ(IOCTL_KGSL_GPUOBJ_IMPORT, 0xC0200948ul);
  // MAP_USER_MEM _IOWR nr 0x15, fd 4 + pad 4 + gpuaddr, len, offset, hostptr 32 + memtype,
  // flags 8 = 48 = 0x30: 0xC0000000 | 0x00300000 | 0x900 | 0x15.
  EXPECT_EQ(IOCTL_KGSL_MAP_USER_MEM, 0xC0300915ul);
  // SHAREDMEM_FREE _IOW nr 0x21, gpuaddr 8: 0x40000000 | 0x00080000 | 0x900 | 0x21.
  EXPECT_EQ(IOCTL_KGSL_SHAREDMEM_FREE, 0x40080921ul);
  // GPUOBJ_SYNC _IOW nr 0x49, objs 8 + obj_len, count 8 = 16 = 0x10.
  EXPECT_EQ(IOCTL_KGSL_GPUOBJ_SYNC, 0x40100949ul);
  // GPU_COMMAND _IOWR nr 0x4A, flags, cmdlist 16 + 2 x u32 8 + objlist 8 + 2 x u32 8 +
  // synclist 8 + 4 x u32 16 = 64 = 0x40: 0xC0000000 | 0x00400000 | 0x900 | 0x4A.
  EXPECT_EQ(IOCTL_KGSL_GPU_COMMAND, 0xC040094Aul);
  // DEVICE_WAITTIMESTAMP_CTXTID _IOW nr 0x07, 3 x u32 = 12 = 0xC:
  // 0x40000000 | 0x000C0000 | 0x900 | 0x07.
  EXPECT_EQ(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, 0x400C0907ul);
  // CMDSTREAM_READTIMESTAMP_CTXTID _IOWR nr 0x16, 3 x u32 = 12.
  EXPECT_EQ(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, 0xC00C0916ul);
  // TIMESTAMP_EVENT _IOWR nr 0x33, type, timestamp, context_id 12 + pad 4 + priv 8 + len 8
  // = 32 = 0x20.
  EXPECT_EQ(IOCTL_KGSL_TIMESTAMP_EVENT, 0xC0200933ul);
  // GET_FAULT_REPORT _IOWR nr 0x5E, faultlist 8 + 4 x u32 16 = 24 = 0x18.
  EXPECT_EQ(IOCTL_KGSL_GET_FAULT_REPORT, 0xC018095Eul);
}

TEST(KgslAbi, IoctlDecode) {
  // 0xC040094A: nr 0x4A, type 0x09, size 0x40 = 64, dir 3 (read | write).
  EXPECT_EQ(kgsl_ioc_nr(0xC040094Aul), 0x4Aul);
  EXPECT_EQ(kgsl_ioc_type(0xC040094Aul), 0x09ul);
  EXPECT_EQ(kgsl_ioc_size(0xC040094Aul), 64u);
  EXPECT_EQ(kgsl_ioc_dir(0xC040094Aul), 3ul);
  // 0x400C0907: dir 1 (write only), size 12.
  EXPECT_EQ(kgsl_ioc_dir(0x400C0907ul), 1ul);
  EXPECT_EQ(kgsl_ioc_size(0x400C0907ul), 12u);
}

TEST(KgslAbi, StructSizes) {
  EXPECT_EQ(sizeof(DeviceGetProperty), 24u);  // u32 + pad + ptr + size_t
  EXPECT_EQ(sizeof(DevInfo), 40u);            // 3 x u32 + pad, ulong, u32 + pad, size_t
  EXPECT_EQ(sizeof(DrawctxtCreate), 8u);
  EXPECT_EQ(sizeof(DrawctxtDestroy), 4u);
  EXPECT_EQ(sizeof(GpuobjAlloc), 48u);
  EXPECT_EQ(sizeof(GpuobjFree), 32u);
  EXPECT_EQ(sizeof(GpuobjInfo), 48u);
  EXPECT_EQ(sizeof(GpuobjImport), 32u);
  EXPECT_EQ(sizeof(MapUserMem), 48u);
  EXPECT_EQ(sizeof(SharedmemFree), 8u);
  EXPECT_EQ(sizeof(GpuobjSyncObj), 24u);  // 2 x u64 + 2 x u32
  EXPECT_EQ(sizeof(GpuobjSync), 16u);
  EXPECT_EQ(sizeof(CommandObject), 32u);  // 3 x u64 + 2 x u32
  EXPECT_EQ(sizeof(CommandSyncpoint), 24u);  // 2 x u64 + u32, padded
  EXPECT_EQ(sizeof(GpuCommand), 64u);
  EXPECT_EQ(sizeof(DeviceWaittimestampCtxtid), 12u);
  EXPECT_EQ(sizeof(CmdstreamReadtimestampCtxtid), 12u);
  EXPECT_EQ(sizeof(TimestampEvent), 32u);
  EXPECT_EQ(sizeof(ContextProperty), 24u);  // u64 + 3 x u32 = 20, padded to 24
  EXPECT_EQ(sizeof(ContextPropertyFault), 8u);
  EXPECT_EQ(sizeof(DeviceConstraint), 24u);  // tinygrad's 'IIQQ' pack is 0x18 bytes
  EXPECT_EQ(sizeof(CmdbatchProfilingBuffer), 40u);
  EXPECT_EQ(sizeof(FaultReport), 24u);
  EXPECT_EQ(sizeof(PagefaultReport), 32u);
}

TEST(KgslAbi, FieldOffsets) {
  EXPECT_EQ(offsetof(DevInfo, chip_id), 4u);
  EXPECT_EQ(offsetof(DevInfo, gmem_sizebytes), 32u);
  EXPECT_EQ(offsetof(GpuobjAlloc, mmapsize), 24u);
  EXPECT_EQ(offsetof(GpuobjAlloc, id), 32u);
  EXPECT_EQ(offsetof(MapUserMem, hostptr), 32u);
  EXPECT_EQ(offsetof(MapUserMem, memtype), 40u);
  EXPECT_EQ(offsetof(GpuCommand, context_id), 56u);
  EXPECT_EQ(offsetof(GpuCommand, timestamp), 60u);
  EXPECT_EQ(offsetof(TimestampEvent, priv), 16u);
}

TEST(KgslAbi, FlagValues) {
  // Context flags as tinygrad builds them: PREAMBLE 0x10 | PWR_CONSTRAINT 0x800 |
  // NO_FAULT_TOLERANCE 0x200 | NO_GMEM_ALLOC 0x2 | priority 8 << 12 = 0x8000 |
  // preempt FINEGRAIN 2 << 25 = 0x04000000 -> 0x04008A12.
  EXPECT_EQ(KGSL_CONTEXT_PREAMBLE | KGSL_CONTEXT_PWR_CONSTRAINT |
                KGSL_CONTEXT_NO_FAULT_TOLERANCE | KGSL_CONTEXT_NO_GMEM_ALLOC |
                context_priority(8) |
                context_preempt_style(KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN),
            0x04008A12u);
  // TYPE_CL = 2 at bit 20 -> 0x00200000.
  EXPECT_EQ(context_type(KGSL_CONTEXT_TYPE_CL), 0x00200000u);
  // tinygrad's allocation flags: MEMALIGN 12 << 16 = 0xC0000 | USE_CPU_MAP 1 << 28.
  EXPECT_EQ(memflags_align(12) | KGSL_MEMFLAGS_USE_CPU_MAP, 0x100C0000ull);
  // turnip's cached-coherent probe: IOCOHERENT 1 << 31 | WRITEBACK 3 << 26 = 0x0C000000.
  EXPECT_EQ(KGSL_MEMFLAGS_IOCOHERENT | memflags_cachemode(KGSL_CACHEMODE_WRITEBACK),
            0x8C000000ull);
  // UNCACHED 1 << 26.
  EXPECT_EQ(memflags_cachemode(KGSL_CACHEMODE_UNCACHED), 0x04000000ull);
  // MEMTYPE_COMMAND 16 << 8.
  EXPECT_EQ(memflags_memtype(KGSL_MEMTYPE_COMMAND), 0x1000ull);
  EXPECT_EQ(KGSL_MEMFLAGS_GPUREADONLY, 0x01000000ull);
  EXPECT_EQ(KGSL_MEMFLAGS_FORCE_32BIT, 0x100000000ull);
  EXPECT_EQ(KGSL_GPUMEM_CACHE_FLUSH, 3u);
  EXPECT_EQ(KGSL_CMDBATCH_SUBMIT_IB_LIST, 4ull);
  EXPECT_EQ(KGSL_USER_MEM_TYPE_ADDR, 2u);
  EXPECT_EQ(KGSL_TIMESTAMP_RETIRED, 2u);
}

TEST(KgslAbi, MmapOffset) {
  // id << 12: turnip "gem_handle << 12", tinygrad "alloc.id * 0x1000".
  EXPECT_EQ(mmap_offset_of(0), 0ull);
  EXPECT_EQ(mmap_offset_of(1), 0x1000ull);
  EXPECT_EQ(mmap_offset_of(5), 0x5000ull);
  // 0xFFFFFFFF << 12 = 0xFFFFFFFF000 (no 32-bit overflow).
  EXPECT_EQ(mmap_offset_of(0xFFFFFFFFu), 0xFFFFFFFF000ull);
  // 16 KiB pages: 3 << 14 = 0xC000.
  EXPECT_EQ(mmap_offset_of(3, 14), 0xC000ull);
}

TEST(KgslAbi, ChipIds) {
  EXPECT_EQ(kChipIdA630, 0x06030001u);
  EXPECT_EQ(kChipIdA660, 0x06060001u);
  EXPECT_EQ(kChipIdA730, 0x07030001u);
  EXPECT_EQ(kChipIdA740, 0x43050a01u);
  // turnip's decimal gpu id: core * 100 + major * 10 + minor.
  EXPECT_EQ(gpu_id_from_chip_id(0x06030001u), 630u);  // 600 + 30 + 0
  EXPECT_EQ(gpu_id_from_chip_id(0x06060001u), 660u);  // 600 + 60 + 0
  EXPECT_EQ(gpu_id_from_chip_id(0x07030001u), 730u);  // 700 + 30 + 0
  EXPECT_EQ(gpu_id_from_chip_id(0x43050a01u), 6760u);  // 0x43 = 67: 6700 + 50 + 10
  EXPECT_EQ(chip_patch(0x43050a01u), 1u);
  EXPECT_EQ(chip_minor(0x43050a01u), 0x0au);
}

TEST(KgslAbi, AdrenoFamily) {
  EXPECT_EQ(adreno_family(0x06030001u), 6);  // a630
  EXPECT_EQ(adreno_family(0x06060001u), 6);  // a660
  EXPECT_EQ(adreno_family(0x07030001u), 7);  // a730
  EXPECT_EQ(adreno_family(0x43050a01u), 7);  // a740
  EXPECT_EQ(adreno_family(0x07000200u), 6);  // a702, an a6xx-class part
  EXPECT_EQ(adreno_family(0x43051401u), 7);  // a750
  EXPECT_EQ(adreno_family(0x44050001u), 0);  // a830 (a8xx): not handled
  EXPECT_EQ(adreno_family(0x05040000u), 0);  // a540
  EXPECT_EQ(adreno_family(0u), 0);
}

}  // namespace
}  // namespace hcq::qcom::kgsl
