// The RM/UVM ABI header against numbers worked out by hand from the public definitions in
// NVIDIA/open-gpu-kernel-modules 595.45.04: nv-ioctl-numbers.h, nv_escape.h, nv-ioctl.h, nvos.h,
// the class and ctrl headers, and uvm_ioctl.h. Every expected value below is a literal with its
// arithmetic in a comment; none is computed by the code under test.
#include "nv/rm_abi.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string_view>

namespace hcq::nv::rm {
namespace {

// _IOWR(type, nr, size) = 3 << 30 | size << 16 | type << 8 | nr, type 'F' = 0x46.
TEST(RmAbi, EscapeRequestCodes) {
  // NV_ESC_RM_ALLOC = 0x2B with NVOS21 (4 handles 16 + pAllocParms 8 + paramsSize 4 + status 4
  // = 32 = 0x20): 0xC0000000 | 0x20 << 16 | 0x46 << 8 | 0x2B.
  EXPECT_EQ(esc_for<Nvos21>(NV_ESC_RM_ALLOC), 0xC020462Bul);
  // ... with NVOS64 (16 + pAllocParms 8 + pRightsRequested 8 + paramsSize, flags, status 12 = 44,
  // padded to 8 -> 48 = 0x30).
  EXPECT_EQ(esc_for<Nvos64>(NV_ESC_RM_ALLOC), 0xC030462Bul);
  // NV_ESC_RM_CONTROL = 0x2A with NVOS54 (hClient, hObject, cmd, flags 16 + params 8 +
  // paramsSize, status 8 = 32 = 0x20).
  EXPECT_EQ(esc_for<Nvos54>(NV_ESC_RM_CONTROL), 0xC020462Aul);
  // NV_ESC_CARD_INFO = 200 + 0 = 0xC8, one nv_ioctl_card_info_t of 72 = 0x48 bytes.
  EXPECT_EQ(esc_for<CardInfo>(NV_ESC_CARD_INFO), 0xC04846C8ul);
  // ... and tinygrad's 64-entry array: 64 * 72 = 4608 = 0x1200; 0xC0000000 | 0x12000000.
  EXPECT_EQ(esc(NV_ESC_CARD_INFO, 64 * sizeof(CardInfo)), 0xD20046C8ul);
  // NV_ESC_RM_FREE = 0x29, NVOS00 = 4 x 4 = 16 = 0x10.
  EXPECT_EQ(esc_for<Nvos00>(NV_ESC_RM_FREE), 0xC0104629ul);
  // NV_ESC_RM_ALLOC_MEMORY = 0x27, NVOS02 (48) + int fd = 52, padded to 56 = 0x38.
  EXPECT_EQ(esc_for<Nvos02WithFd>(NV_ESC_RM_ALLOC_MEMORY), 0xC0384627ul);
  // NV_ESC_RM_MAP_MEMORY = 0x4E, NVOS33 (48) + int fd, padded: 56 = 0x38.
  EXPECT_EQ(esc_for<Nvos33WithFd>(NV_ESC_RM_MAP_MEMORY), 0xC038464Eul);
  // NV_ESC_RM_UNMAP_MEMORY = 0x4F, NVOS34 = 3 handles + pad 16, pLinearAddress 8, status,
  // flags 8 = 32 = 0x20.
  EXPECT_EQ(esc_for<Nvos34>(NV_ESC_RM_UNMAP_MEMORY), 0xC020464Ful);
  // NV_ESC_RM_MAP_MEMORY_DMA = 0x57: NVOS46 is 64 = 0x40 bytes since 580, 56 = 0x38 before.
  EXPECT_EQ(esc_for<Nvos46>(NV_ESC_RM_MAP_MEMORY_DMA), 0xC0404657ul);
  EXPECT_EQ(esc_for<Nvos46V575>(NV_ESC_RM_MAP_MEMORY_DMA), 0xC0384657ul);
  // NV_ESC_REGISTER_FD = 201 = 0xC9, one int.
  EXPECT_EQ(esc_for<RegisterFd>(NV_ESC_REGISTER_FD), 0xC00446C9ul);
  // NV_ESC_CHECK_VERSION_STR = 210 = 0xD2, cmd + reply + char[64] = 72 = 0x48.
  EXPECT_EQ(esc_for<RmApiVersion>(NV_ESC_CHECK_VERSION_STR), 0xC04846D2ul);
  // NV_ESC_ALLOC_OS_EVENT = 206 = 0xCE, 4 x 4 = 16.
  EXPECT_EQ(esc_for<OsEvent>(NV_ESC_ALLOC_OS_EVENT), 0xC01046CEul);
  // A size past the 14-bit field (max 0x3fff) has no _IOWR code.
  EXPECT_EQ(esc(NV_ESC_RM_CONTROL, 0x4000), 0ul);
  EXPECT_NE(esc(NV_ESC_RM_CONTROL, 0x3fff), 0ul);
}

TEST(RmAbi, EscapeNumbers) {
  EXPECT_EQ(kIoctlMagic, 0x46u);  // 'F'
  EXPECT_EQ(NV_ESC_CARD_INFO, 200u);
  EXPECT_EQ(NV_ESC_REGISTER_FD, 201u);
  EXPECT_EQ(NV_ESC_ALLOC_OS_EVENT, 206u);
  EXPECT_EQ(NV_ESC_FREE_OS_EVENT, 207u);
  EXPECT_EQ(NV_ESC_CHECK_VERSION_STR, 210u);
  EXPECT_EQ(NV_ESC_ATTACH_GPUS_TO_FD, 212u);
  EXPECT_EQ(NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO, 0x5Eu);
}

TEST(RmAbi, EscapeDecodeRoundTrips) {
  EXPECT_EQ(esc_nr(0xC020462Bul), 0x2Bu);
  EXPECT_EQ(esc_size(0xC020462Bul), 32u);
  EXPECT_EQ(esc_nr(0xC030462Bul), 0x2Bu);
  EXPECT_EQ(esc_size(0xC030462Bul), 48u);
  EXPECT_EQ(esc_nr(0xD20046C8ul), 200u);
  EXPECT_EQ(esc_size(0xD20046C8ul), 4608u);
  EXPECT_EQ(esc_type(0xC020462Aul), 0x46u);
  EXPECT_EQ(esc_dir(0xC020462Aul), 3u);
  EXPECT_TRUE(esc_is_nv(0xC020462Aul));
  // UVM's plain numbers are not escape requests (direction bits 0).
  EXPECT_FALSE(esc_is_nv(UVM_INITIALIZE));
  for (uint32_t nr : {NV_ESC_RM_ALLOC, NV_ESC_RM_CONTROL, NV_ESC_RM_FREE, NV_ESC_CARD_INFO,
                      NV_ESC_REGISTER_FD, NV_ESC_RM_MAP_MEMORY}) {
    for (size_t size : {size_t{4}, size_t{32}, size_t{48}, size_t{4608}, size_t{0x3fff}}) {
      unsigned long request = esc(nr, size);
      EXPECT_EQ(esc_nr(request), nr);
      EXPECT_EQ(esc_size(request), size);
      EXPECT_TRUE(esc_is_nv(request));
    }
  }
}

// Sizes worked out from the field lists with x86-64 alignment (NvU64/NvP64 aligned to 8).
TEST(RmAbi, StructSizes) {
  EXPECT_EQ(sizeof(PciInfo), 12u);    // domain 4, bus/slot/function 3, pad 1, ids 4
  EXPECT_EQ(sizeof(CardInfo), 72u);   // ... minor_number at 56, dev_name[10] to 70, pad to 72
  EXPECT_EQ(sizeof(Nvos00), 16u);
  EXPECT_EQ(sizeof(Nvos02), 48u);     // 5 x 4 = 20, pad 24, pMemory, limit -> 40, status 44 -> 48
  EXPECT_EQ(sizeof(Nvos21), 32u);
  EXPECT_EQ(sizeof(Nvos64), 48u);
  EXPECT_EQ(sizeof(Nvos54), 32u);
  EXPECT_EQ(sizeof(Nvos33), 48u);     // 3 x 4 + pad 16, offset, length, pLinearAddress 40, 2 x 4
  EXPECT_EQ(sizeof(Nvos34), 32u);
  EXPECT_EQ(sizeof(DeviceAllocParams), 56u);   // 5 x 4 + pad 24, 3 x 8 -> 48, vaMode 52 -> 56
  EXPECT_EQ(sizeof(VaspaceAllocParams), 56u);  // vaBase at 40, pasid 48 -> 52 -> 56
  EXPECT_EQ(sizeof(ChannelGroupAllocParams), 20u);  // 4 x 4 + NvBool 17 -> 20
  EXPECT_EQ(sizeof(CtxshareAllocParams), 12u);
  EXPECT_EQ(sizeof(MemoryDescParams), 24u);
  // 32 + hUserdMemory 8x4 = 64, userdOffset 8x8 = 128, 4 x 4 = 144, 4 descs = 240, 2 x 4 =
  // 248, 2 descs = 296, 2 x 4 = 304, 3 + 3 + 8 dwords = 360, tpcConfigID 364 -> 368.
  EXPECT_EQ(sizeof(ChannelAllocParams), 368u);
  EXPECT_EQ(offsetof(ChannelAllocParams, userdOffset), 64u);
  EXPECT_EQ(sizeof(MemoryAllocParams), 128u);  // 11 x 4 = 44, pad 48, 7 x 8 = 104, 5 x 4 -> 128
  EXPECT_EQ(sizeof(GpuGetIdInfoV2Params), 32u);
  EXPECT_EQ(sizeof(GpuGetProbedIdsParams), 384u);  // 3 x 32 x 4
  EXPECT_EQ(sizeof(ClassListV2Params), 804u);      // 4 + 200 x 4
  EXPECT_EQ(sizeof(GpuGetGidInfoParams), 268u);    // 12 + 256
  EXPECT_EQ(sizeof(McGetArchInfoParams), 16u);     // 3 x 4 + 1 -> 16
  EXPECT_EQ(sizeof(GrGetInfoParams), 32u);         // 4 + pad, ptr 8, route info {4 + pad, 8}
  EXPECT_EQ(sizeof(FbGetInfoV2Params), 1028u);     // 4 + 128 x 8
  EXPECT_EQ(sizeof(GpuGetNameStringParams), 68u);  // 4 + 64
  EXPECT_EQ(sizeof(GpfifoScheduleParams), 3u);
  EXPECT_EQ(sizeof(Userd), 512u);                  // 0x90 + 0x5c x 4 = 0x200
  EXPECT_EQ(offsetof(Userd, GPGet), 0x88u);
  EXPECT_EQ(offsetof(Userd, GPPut), 0x8cu);
  EXPECT_EQ(sizeof(Notification), 16u);
  EXPECT_EQ(sizeof(NvProcessorUuid), 16u);
  EXPECT_EQ(sizeof(UvmGpuMappingAttributes), 36u);  // 16 + 5 x 4
  // base, length, offset 24 + 256 x 36 = 9240, count 8 -> 9248, 4 x 4 -> 9264.
  EXPECT_EQ(sizeof(UvmMapExternalAllocationParams), 9264u);
  EXPECT_EQ(sizeof(UvmRegisterGpuParams), 40u);  // 16 + bool 1 + pad 20, 4 x 4 -> 40
  EXPECT_EQ(sizeof(UvmRegisterChannelParams), 56u);  // 16 + 3 x 4 = 28, pad 32, 2 x 8, 4 -> 56
  EXPECT_EQ(sizeof(UvmFreeParams), 16u);
  EXPECT_EQ(sizeof(UvmFreeParamsV580), 24u);
  EXPECT_EQ(sizeof(UvmUnregisterChannelParamsV580), 28u);
  EXPECT_EQ(sizeof(GpuGetNameStringParamsV590), 132u);  // 4 + 64 x 2
}

TEST(RmAbi, ClassIdsAndControlCommands) {
  EXPECT_EQ(NV01_ROOT_CLIENT, 0x41u);
  EXPECT_EQ(NV01_DEVICE_0, 0x80u);
  EXPECT_EQ(NV20_SUBDEVICE_0, 0x2080u);
  EXPECT_EQ(NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, 0x71u);
  EXPECT_EQ(AMPERE_CHANNEL_GPFIFO_A, 0xC56Fu);
  EXPECT_EQ(BLACKWELL_CHANNEL_GPFIFO_B, 0xCA6Fu);
  EXPECT_EQ(AMPERE_COMPUTE_B, 0xC7C0u);
  EXPECT_EQ(HOPPER_COMPUTE_A, 0xCBC0u);
  EXPECT_EQ(BLACKWELL_COMPUTE_B, 0xCEC0u);
  EXPECT_EQ(HOPPER_DMA_COPY_A, 0xC8B5u);
  EXPECT_EQ(HOPPER_USERMODE_A, 0xC661u);
  // A command is (FINN interface id << 8) | message id (g_finn_rm_api.h, the ctrl headers).
  EXPECT_EQ(NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, 0x205u);  // interface 0x2, message 0x5
  EXPECT_EQ(NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, 0x800292u);  // 0x8002 << 8 | 0x92
  EXPECT_EQ(NV2080_CTRL_CMD_GR_GET_INFO, 0x20801201u);     // 0x208012 << 8 | 0x01
  EXPECT_EQ(NV2080_CTRL_CMD_GPU_GET_GID_INFO, 0x2080014Au);  // 0x208001 << 8 | 0x4A
  EXPECT_EQ(NV2080_CTRL_CMD_FB_GET_INFO_V2, 0x20801303u);  // 0x208013 << 8 | 0x03
  EXPECT_EQ(NV2080_CTRL_CMD_MC_GET_ARCH_INFO, 0x20801701u);  // 0x208017 << 8 | 0x01
  EXPECT_EQ(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, 0xC36F0108u);  // 0xc36f01 << 8 | 8
  EXPECT_EQ(NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, 0xA06C0101u);  // 0xa06c01 << 8 | 1
  EXPECT_EQ(NV2080_CTRL_GR_INFO_SM_VERSION_9_0, 0x900u);
  EXPECT_EQ(NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100, 0x180u);
  EXPECT_EQ(NVC361_NOTIFY_CHANNEL_PENDING, 0x90u);
}

TEST(RmAbi, FlagFieldsComposeLikeTinygrad) {
  // tinygrad's host memory flags: NONCONTIGUOUS(1) << 4 | CACHED(1) << 12 | NO_MAP(1) << 30.
  EXPECT_EQ(NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS << NVOS02_FLAGS_PHYSICALITY_SHIFT |
                NVOS02_FLAGS_COHERENCY_CACHED << NVOS02_FLAGS_COHERENCY_SHIFT |
                NVOS02_FLAGS_MAPPING_NO_MAP << NVOS02_FLAGS_MAPPING_SHIFT,
            0x40001010u);
  // Huge-page contiguous vidmem: CONTIGUOUS(2) << 27 | HUGE(3) << 23 = 0x10000000 | 0x01800000.
  EXPECT_EQ(NVOS32_ATTR_PHYSICALITY_CONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT |
                NVOS32_ATTR_PAGE_SIZE_HUGE << NVOS32_ATTR_PAGE_SIZE_SHIFT,
            0x11800000u);
  // Uncached sysmem: PCI(1) << 25.
  EXPECT_EQ(NVOS32_ATTR_LOCATION_PCI << NVOS32_ATTR_LOCATION_SHIFT, 0x02000000u);
  // attr2: GPU_CACHEABLE_YES(1) << 2 | HUGE_2MB(1) << 20 | PREFER_NO_ZBC(1) = 0x100005.
  EXPECT_EQ(NVOS32_ATTR2_GPU_CACHEABLE_YES << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT |
                NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB << NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT |
                NVOS32_ATTR2_ZBC_PREFER_NO_ZBC,
            0x100005u);
  // WRITECOMBINED(2) << 23.
  EXPECT_EQ(NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED << NVOS33_FLAGS_CACHING_TYPE_SHIFT,
            0x01000000u);
  // NVOS46: PAGE_SIZE_4KB(1) << 8 | CACHE_SNOOP_ENABLE(1) << 4 | DMA_OFFSET_FIXED_TRUE << 15.
  EXPECT_EQ(NVOS46_FLAGS_PAGE_SIZE_4KB << NVOS46_FLAGS_PAGE_SIZE_SHIFT |
                NVOS46_FLAGS_CACHE_SNOOP_ENABLE << NVOS46_FLAGS_CACHE_SNOOP_SHIFT |
                NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT,
            0x8110u);
  // NV_VASPACE: ENABLE_PAGE_FAULTING BIT(6) | IS_EXTERNALLY_OWNED BIT(3) = 0x48.
  EXPECT_EQ(NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING |
                NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED,
            0x48u);
  EXPECT_EQ(NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED | NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED |
                NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT |
                NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM,
            0x1C101u);  // 0x8000 | 0x4000 | 0x100 | 0x1 | 0x10000
}

TEST(RmAbi, StatusAndErrorNames) {
  EXPECT_EQ(NV_OK, 0u);
  EXPECT_EQ(NV_ERR_GENERIC, 0xFFFFu);
  EXPECT_EQ(NV_ERR_INVALID_ARGUMENT, 0x1Fu);
  EXPECT_EQ(NV_ERR_NO_MEMORY, 0x51u);
  EXPECT_EQ(NV_ERR_LIB_RM_VERSION_MISMATCH, 0x6Au);
  EXPECT_STREQ(status_name(0x0), "NV_OK");
  EXPECT_STREQ(status_name(0x1F), "NV_ERR_INVALID_ARGUMENT");
  EXPECT_STREQ(status_name(0x22), "NV_ERR_INVALID_CLASS");
  EXPECT_STREQ(status_name(0x57), "NV_ERR_OBJECT_NOT_FOUND");
  EXPECT_STREQ(status_name(0xFFFF), "NV_ERR_GENERIC");
  EXPECT_EQ(status_name(0x12345), nullptr);
  static_assert(std::string_view(status_name(0x63)) == "NV_ERR_STATE_IN_USE");
  EXPECT_STREQ(rc_error_name(11), "ROBUST_CHANNEL_GR_ERROR_MISSING_HW");  // an H200's Xid
  EXPECT_STREQ(rc_error_name(13), "ROBUST_CHANNEL_GR_EXCEPTION");
  EXPECT_STREQ(rc_error_name(31), "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT");
  EXPECT_STREQ(rc_error_name(43), "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR");
  EXPECT_EQ(rc_error_name(1), nullptr);
}

TEST(RmAbi, UvmAndVersion) {
  EXPECT_EQ(UVM_INITIALIZE, 0x30000001ul);
  EXPECT_EQ(UVM_REGISTER_GPU, 37ul);
  EXPECT_EQ(UVM_MAP_EXTERNAL_ALLOCATION, 33ul);
  EXPECT_EQ(UVM_CREATE_EXTERNAL_RANGE, 73ul);
  EXPECT_EQ(UVM_MM_INITIALIZE, 75ul);
  EXPECT_EQ(UVM_MAX_GPUS, 256u);  // 32 devices x 8 sub-processors
  EXPECT_STREQ(kRmVersion, "595.45.04");
  EXPECT_EQ(driver_major("595.45.04"), 595u);
  EXPECT_EQ(driver_major("570.133.07"), 570u);
  EXPECT_EQ(driver_major("x"), 0u);
  EXPECT_EQ(driver_major(nullptr), 0u);
  RmApiVersion v{};
  v.cmd = NV_RM_API_VERSION_CMD_QUERY;
  EXPECT_EQ(v.cmd, 0x32u);  // '2'
  std::memcpy(v.versionString, kRmVersion, 10);
  EXPECT_STREQ(v.versionString, "595.45.04");
}

}  // namespace
}  // namespace hcq::nv::rm
