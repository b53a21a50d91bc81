// The user-space ABI of Qualcomm's KGSL kernel driver (/dev/kgsl-3d0): the ioctls, parameter
// structs, property ids and flag values a user-space Adreno compute driver needs, how a GPU
// object is mmap()ed, what KGSL reports after a GPU fault or hang, and the chip id format. Our
// own definitions, written from the public sources named on each group; every struct's size and
// field offsets are asserted for LP64 Linux (x86-64 and arm64 lay these out identically: natural
// alignment, 8-byte long/pointer/size_t, 4-byte int and enum).
//
// Sources (paths relative to each repository):
//  [uapi]  qualcomm-linux/kgsl at commit 27cf0e4f (2025-06-03), include/uapi/linux/msm_kgsl.h,
//          the KGSL UAPI header. Every ioctl, struct and flag below comes from it unless a group
//          says otherwise. The same header is vendored by mesa (turnip) and tinygrad.
//  [kgsl]  the driver sources of that same commit: kgsl.c, kgsl_ioctl.c, kgsl_device.h,
//          adreno.c, adreno.h, adreno_dispatch.c, adreno_hwsched.c, adreno_drawctxt.c,
//          kgsl_iommu.c (behaviour: errnos, mmap, cache ops).
//  [tu]    mesa src/freedreno/vulkan/tu_knl_kgsl.cc (turnip's KGSL backend) and
//          src/freedreno/common/freedreno_devices.py, freedreno_dev_info.h.
//  [tg]    tinygrad/tinygrad tinygrad/runtime/ops_qcom.py (tinygrad's KGSL compute backend).
//  [msm]   Linux drivers/gpu/drm/msm/adreno/a6xx_catalog.c (upstream chip id table).
//
// Names: KGSL's own macro name where one exists (IOCTL_KGSL_GPU_COMMAND, KGSL_MEMFLAGS_...);
// structs get CamelCase names (GpuCommand, GpuobjAlloc, ...) with KGSL's field names.
#pragma once

#include <linux/dma-heap.h>
#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace hcq::qcom::kgsl {

static_assert(sizeof(void*) == 8 && sizeof(long) == 8 && sizeof(size_t) == 8,
              "these layouts are for LP64 (x86-64 / arm64) only");

// ============================================================================================
// 1. Ioctl encoding
// ============================================================================================

// <linux/ioctl.h> (asm-generic/ioctl.h, used by both x86-64 and arm64): request = dir << 30 |
// size << 16 | type << 8 | nr, with dir WRITE (user -> kernel) = 1, READ (kernel -> user) = 2.
// Our own copies of the shifts and direction bits, checked against the system header.
inline constexpr unsigned long kIocNrShift = 0;
inline constexpr unsigned long kIocTypeShift = 8;
inline constexpr unsigned long kIocSizeShift = 16;
inline constexpr unsigned long kIocDirShift = 30;
inline constexpr unsigned long kIocSizeMask = 0x3fff;  // 14 bits
inline constexpr unsigned long kIocWrite = 1;
inline constexpr unsigned long kIocRead = 2;
static_assert(kIocNrShift == _IOC_NRSHIFT && kIocTypeShift == _IOC_TYPESHIFT &&
              kIocSizeShift == _IOC_SIZESHIFT && kIocDirShift == _IOC_DIRSHIFT);
static_assert(kIocSizeMask == _IOC_SIZEMASK && kIocWrite == _IOC_WRITE && kIocRead == _IOC_READ);

// [uapi] "#define KGSL_IOC_TYPE 0x09".
inline constexpr unsigned long KGSL_IOC_TYPE = 0x09;

constexpr unsigned long kgsl_ioc(unsigned long dir, unsigned long nr, size_t size) {
  return (dir << kIocDirShift) |
         ((static_cast<unsigned long>(size) & kIocSizeMask) << kIocSizeShift) |
         (KGSL_IOC_TYPE << kIocTypeShift) | ((nr & 0xff) << kIocNrShift);
}
// _IOW(KGSL_IOC_TYPE, nr, T) and _IOWR(KGSL_IOC_TYPE, nr, T).
template <class T>
constexpr unsigned long kgsl_iow(unsigned long nr) {
  static_assert(sizeof(T) <= kIocSizeMask);
  return kgsl_ioc(kIocWrite, nr, sizeof(T));
}
template <class T>
constexpr unsigned long kgsl_iowr(unsigned long nr) {
  static_assert(sizeof(T) <= kIocSizeMask);
  return kgsl_ioc(kIocRead | kIocWrite, nr, sizeof(T));
}
// Decoding, for an emulator.
constexpr unsigned long kgsl_ioc_nr(unsigned long req) { return (req >> kIocNrShift) & 0xff; }
constexpr unsigned long kgsl_ioc_type(unsigned long req) { return (req >> kIocTypeShift) & 0xff; }
constexpr size_t kgsl_ioc_size(unsigned long req) {
  return static_cast<size_t>((req >> kIocSizeShift) & kIocSizeMask);
}
constexpr unsigned long kgsl_ioc_dir(unsigned long req) { return (req >> kIocDirShift) & 3; }

// How the kernel matches a request ([kgsl] kgsl_ioctl.c kgsl_ioctl_helper): it looks the handler
// up by _IOC_NR alone, copies min(user _IOC_SIZE, kernel _IOC_SIZE) bytes in only when both the
// user's and the kernel's request have the WRITE bit, calls the handler, and copies the struct
// back (same min rule, READ bit on both) ONLY WHEN THE HANDLER RETURNED 0. An unknown nr gives
// -ENOIOCTLCMD (ENOTTY to user space). Structs over 128 bytes are refused (-EINVAL).

// ============================================================================================
// 2. Device properties: IOCTL_KGSL_DEVICE_GETPROPERTY / IOCTL_KGSL_SETPROPERTY
// ============================================================================================

// [uapi] struct kgsl_device_getproperty { unsigned int type; void __user *value;
// __kernel_size_t sizebytes; }. value points at a type-specific buffer of sizebytes bytes.
// Most adreno properties copy min(size of the property, sizebytes) ([kgsl] adreno.c copy_prop);
// KGSL_PROP_GPU_RESET_STAT and KGSL_PROP_VERSION insist on the exact size (-EINVAL otherwise).
struct DeviceGetProperty {
  uint32_t type;       // KGSL_PROP_*
  uint32_t pad0_;      // implicit padding in the C struct
  uint64_t value;      // user pointer
  uint64_t sizebytes;  // __kernel_size_t
};
static_assert(sizeof(DeviceGetProperty) == 24);
static_assert(offsetof(DeviceGetProperty, type) == 0);
static_assert(offsetof(DeviceGetProperty, value) == 8);
static_assert(offsetof(DeviceGetProperty, sizebytes) == 16);

// [uapi] struct kgsl_devinfo, the KGSL_PROP_DEVICE_INFO payload. chip_id is
// core:8 major:8 minor:8 patch:8 (see section 9). gpu_id: older KGSL set it to the adreno
// revision (630, 660, ...: "devinfo.gpu_id = adreno_dev->gpurev" in msm-3.x/4.x kgsl), but the
// current [kgsl] adreno.c adreno_prop_device_info no longer sets it (it reads 0); turnip and
// tinygrad ignore it and derive everything from chip_id. gmem_gpubaseaddr is also 0 today; the
// GMEM address comes from KGSL_PROP_UCHE_GMEM_VADDR.
struct DevInfo {
  uint32_t device_id;  // device->id + 1
  uint32_t chip_id;
  uint32_t mmu_enabled;
  uint32_t pad0_;
  uint64_t gmem_gpubaseaddr;  // unsigned long
  uint32_t gpu_id;
  uint32_t pad1_;
  uint64_t gmem_sizebytes;  // __kernel_size_t
};
static_assert(sizeof(DevInfo) == 40);
static_assert(offsetof(DevInfo, device_id) == 0);
static_assert(offsetof(DevInfo, chip_id) == 4);
static_assert(offsetof(DevInfo, mmu_enabled) == 8);
static_assert(offsetof(DevInfo, gmem_gpubaseaddr) == 16);
static_assert(offsetof(DevInfo, gpu_id) == 24);
static_assert(offsetof(DevInfo, gmem_sizebytes) == 32);

// [uapi] property ids ("property types - used with kgsl_device_getproperty"). Payloads per
// [kgsl] adreno.c / kgsl.c and how [tu]/[tg] read them.
inline constexpr uint32_t KGSL_PROP_DEVICE_INFO = 0x1;      // DevInfo (turnip, tinygrad)
inline constexpr uint32_t KGSL_PROP_DEVICE_SHADOW = 0x2;    // kgsl_shadowprop (memstore mmap)
inline constexpr uint32_t KGSL_PROP_DEVICE_POWER = 0x3;
inline constexpr uint32_t KGSL_PROP_SHMEM = 0x4;
inline constexpr uint32_t KGSL_PROP_SHMEM_APERTURES = 0x5;
inline constexpr uint32_t KGSL_PROP_MMU_ENABLE = 0x6;
inline constexpr uint32_t KGSL_PROP_INTERRUPT_WAITS = 0x7;
inline constexpr uint32_t KGSL_PROP_VERSION = 0x8;          // kgsl_version, 4 x u32
inline constexpr uint32_t KGSL_PROP_GPU_RESET_STAT = 0x9;   // u32: context id in, CTX_STAT out
inline constexpr uint32_t KGSL_PROP_PWRCTRL = 0xE;
inline constexpr uint32_t KGSL_PROP_PWR_CONSTRAINT = 0x12;  // SETPROPERTY with DeviceConstraint
inline constexpr uint32_t KGSL_PROP_UCHE_GMEM_VADDR = 0x13;  // u64 GMEM GPU address (turnip)
inline constexpr uint32_t KGSL_PROP_SP_GENERIC_MEM = 0x14;
inline constexpr uint32_t KGSL_PROP_UCODE_VERSION = 0x15;   // kgsl_ucode_version {pfp, pm4}
inline constexpr uint32_t KGSL_PROP_GPMU_VERSION = 0x16;
inline constexpr uint32_t KGSL_PROP_HIGHEST_BANK_BIT = 0x17;  // u32 (turnip, UBWC config)
inline constexpr uint32_t KGSL_PROP_DEVICE_BITNESS = 0x18;  // u32: 48 with 64-bit GPU VAs, else 32
inline constexpr uint32_t KGSL_PROP_DEVICE_QDSS_STM = 0x19;
inline constexpr uint32_t KGSL_PROP_MIN_ACCESS_LENGTH = 0x1A;  // u32
inline constexpr uint32_t KGSL_PROP_UBWC_MODE = 0x1B;       // u32 KGSL_UBWC_* (turnip)
inline constexpr uint32_t KGSL_PROP_DEVICE_QTIMER = 0x20;
inline constexpr uint32_t KGSL_PROP_SECURE_BUFFER_ALIGNMENT = 0x23;
inline constexpr uint32_t KGSL_PROP_SPEED_BIN = 0x25;       // u32
inline constexpr uint32_t KGSL_PROP_QUERY_CAPABILITIES = 0x27;
inline constexpr uint32_t KGSL_PROP_CONTEXT_PROPERTY = 0x28;  // ContextProperty (fault stats)
inline constexpr uint32_t KGSL_PROP_GPU_MODEL = 0x29;       // char[32]
inline constexpr uint32_t KGSL_PROP_VK_DEVICE_ID = 0x2A;    // u32
inline constexpr uint32_t KGSL_PROP_IS_LPAC_ENABLED = 0x2B;
inline constexpr uint32_t KGSL_PROP_GPU_VA64_SIZE = 0x2C;
inline constexpr uint32_t KGSL_PROP_IS_RAYTRACING_ENABLED = 0x2D;  // u32 (turnip)

// [uapi] UBWC modes returned by KGSL_PROP_UBWC_MODE.
inline constexpr uint32_t KGSL_UBWC_NONE = 0;
inline constexpr uint32_t KGSL_UBWC_1_0 = 1;
inline constexpr uint32_t KGSL_UBWC_2_0 = 2;
inline constexpr uint32_t KGSL_UBWC_3_0 = 3;
inline constexpr uint32_t KGSL_UBWC_4_0 = 4;

// [uapi] struct kgsl_version (KGSL_PROP_VERSION; the driver answers 3.14 / 3.1).
struct Version {
  uint32_t drv_major;
  uint32_t drv_minor;
  uint32_t dev_major;
  uint32_t dev_minor;
};
static_assert(sizeof(Version) == 16);

// [uapi] struct kgsl_device_constraint, the SETPROPERTY payload for KGSL_PROP_PWR_CONSTRAINT.
// tinygrad packs {type = KGSL_CONSTRAINT_PWRLEVEL, context_id, &level, 4} with level =
// KGSL_CONSTRAINT_PWR_MAX to pin the GPU clock high.
struct DeviceConstraint {
  uint32_t type;
  uint32_t context_id;
  uint64_t data;  // user pointer to e.g. a u32 level
  uint64_t size;  // __kernel_size_t
};
static_assert(sizeof(DeviceConstraint) == 24);
static_assert(offsetof(DeviceConstraint, context_id) == 4);
static_assert(offsetof(DeviceConstraint, data) == 8);
static_assert(offsetof(DeviceConstraint, size) == 16);
inline constexpr uint32_t KGSL_CONSTRAINT_NONE = 0;
inline constexpr uint32_t KGSL_CONSTRAINT_PWRLEVEL = 1;
inline constexpr uint32_t KGSL_CONSTRAINT_PWR_MIN = 0;
inline constexpr uint32_t KGSL_CONSTRAINT_PWR_MAX = 1;

// [uapi] IOCTL_KGSL_DEVICE_GETPROPERTY = _IOWR(0x09, 0x2, struct kgsl_device_getproperty);
// IOCTL_KGSL_SETPROPERTY = _IOW(0x09, 0x32, struct kgsl_device_getproperty).
inline constexpr unsigned long IOCTL_KGSL_DEVICE_GETPROPERTY = kgsl_iowr<DeviceGetProperty>(0x2);
inline constexpr unsigned long IOCTL_KGSL_SETPROPERTY = kgsl_iow<DeviceGetProperty>(0x32);
// 3 << 30 = 0xC0000000 | 24 = 0x18 << 16 = 0x00180000 | 0x09 << 8 = 0x900 | 0x02.
static_assert(IOCTL_KGSL_DEVICE_GETPROPERTY == 0xC0180902ul);
// 1 << 30 = 0x40000000 | 0x00180000 | 0x900 | 0x32.
static_assert(IOCTL_KGSL_SETPROPERTY == 0x40180932ul);

// ============================================================================================
// 3. Draw contexts (a KGSL context is the submission queue)
// ============================================================================================

// [uapi] struct kgsl_drawctxt_create { unsigned int flags; unsigned int drawctxt_id; } and
// struct kgsl_drawctxt_destroy { unsigned int drawctxt_id; }.
struct DrawctxtCreate {
  uint32_t flags;        // KGSL_CONTEXT_*
  uint32_t drawctxt_id;  // out
};
static_assert(sizeof(DrawctxtCreate) == 8);
static_assert(offsetof(DrawctxtCreate, drawctxt_id) == 4);

struct DrawctxtDestroy {
  uint32_t drawctxt_id;
};
static_assert(sizeof(DrawctxtDestroy) == 4);

// [uapi] "--- context flags ---". [kgsl] adreno_drawctxt.c adreno_drawctxt_create keeps only
// PREAMBLE, NO_GMEM_ALLOC, PER_CONTEXT_TS, USER_GENERATED_TS, NO_FAULT_TOLERANCE,
// INVALIDATE_ON_FAULT, CTX_SWITCH, the PRIORITY and TYPE fields, PWR_CONSTRAINT, IFH_NOP,
// SECURE, the PREEMPT_STYLE field, LPAC, NO_SNAPSHOT and FAULT_INFO; other bits are dropped.
// turnip creates with SAVE_GMEM | NO_GMEM_ALLOC | PREAMBLE; tinygrad with PREAMBLE |
// PWR_CONSTRAINT | NO_FAULT_TOLERANCE | NO_GMEM_ALLOC | priority 8 | preempt style FINEGRAIN.
inline constexpr uint32_t KGSL_CONTEXT_SAVE_GMEM = 0x00000001;
inline constexpr uint32_t KGSL_CONTEXT_NO_GMEM_ALLOC = 0x00000002;
inline constexpr uint32_t KGSL_CONTEXT_SUBMIT_IB_LIST = 0x00000004;  // cmdbatch-only
inline constexpr uint32_t KGSL_CONTEXT_CTX_SWITCH = 0x00000008;
inline constexpr uint32_t KGSL_CONTEXT_PREAMBLE = 0x00000010;
inline constexpr uint32_t KGSL_CONTEXT_TRASH_STATE = 0x00000020;
inline constexpr uint32_t KGSL_CONTEXT_PER_CONTEXT_TS = 0x00000040;
inline constexpr uint32_t KGSL_CONTEXT_USER_GENERATED_TS = 0x00000080;
inline constexpr uint32_t KGSL_CONTEXT_END_OF_FRAME = 0x00000100;  // cmdbatch-only
inline constexpr uint32_t KGSL_CONTEXT_NO_FAULT_TOLERANCE = 0x00000200;
inline constexpr uint32_t KGSL_CONTEXT_SYNC = 0x00000400;  // cmdbatch-only
inline constexpr uint32_t KGSL_CONTEXT_PWR_CONSTRAINT = 0x00000800;
// Priority field: 0 = undefined (the kernel substitutes 8, "KGSL_CONTEXT_PRIORITY_MED" in
// adreno_drawctxt.c); the ringbuffer used is priority / 4, ringbuffer 0 the most urgent.
inline constexpr uint32_t KGSL_CONTEXT_PRIORITY_MASK = 0x0000F000;
inline constexpr uint32_t KGSL_CONTEXT_PRIORITY_SHIFT = 12;
inline constexpr uint32_t KGSL_CONTEXT_PRIORITY_UNDEF = 0;
inline constexpr uint32_t KGSL_CONTEXT_IFH_NOP = 0x00010000;
inline constexpr uint32_t KGSL_CONTEXT_SECURE = 0x00020000;
inline constexpr uint32_t KGSL_CONTEXT_NO_SNAPSHOT = 0x00040000;
inline constexpr uint32_t KGSL_CONTEXT_SPARSE = 0x00080000;
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_MASK = 0x0E000000;
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_SHIFT = 25;
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_DEFAULT = 0x0;
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_RINGBUFFER = 0x1;
inline constexpr uint32_t KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN = 0x2;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_MASK = 0x01F00000;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_SHIFT = 20;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_ANY = 0;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_GL = 1;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_CL = 2;  // compute
inline constexpr uint32_t KGSL_CONTEXT_TYPE_C2D = 3;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_RS = 4;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_VK = 5;
inline constexpr uint32_t KGSL_CONTEXT_TYPE_UNKNOWN = 0x1E;
inline constexpr uint32_t KGSL_CONTEXT_INVALIDATE_ON_FAULT = 0x10000000;
inline constexpr uint32_t KGSL_CONTEXT_LPAC = 0x20000000;
inline constexpr uint32_t KGSL_CONTEXT_FAULT_INFO = 0x40000000;  // enables GET_FAULT_REPORT
inline constexpr uint32_t KGSL_CONTEXT_INVALID = 0xffffffff;

// Field builders, as tinygrad's flag(): (value << SHIFT) & MASK.
constexpr uint32_t context_priority(uint32_t prio) {
  return (prio << KGSL_CONTEXT_PRIORITY_SHIFT) & KGSL_CONTEXT_PRIORITY_MASK;
}
constexpr uint32_t context_type(uint32_t type) {
  return (type << KGSL_CONTEXT_TYPE_SHIFT) & KGSL_CONTEXT_TYPE_MASK;
}
constexpr uint32_t context_preempt_style(uint32_t style) {
  return (style << KGSL_CONTEXT_PREEMPT_STYLE_SHIFT) & KGSL_CONTEXT_PREEMPT_STYLE_MASK;
}

// [uapi] IOCTL_KGSL_DRAWCTXT_CREATE = _IOWR(0x09, 0x13, ...), IOCTL_KGSL_DRAWCTXT_DESTROY =
// _IOW(0x09, 0x14, ...).
inline constexpr unsigned long IOCTL_KGSL_DRAWCTXT_CREATE = kgsl_iowr<DrawctxtCreate>(0x13);
inline constexpr unsigned long IOCTL_KGSL_DRAWCTXT_DESTROY = kgsl_iow<DrawctxtDestroy>(0x14);
// 0xC0000000 | 8 << 16 = 0x00080000 | 0x900 | 0x13.
static_assert(IOCTL_KGSL_DRAWCTXT_CREATE == 0xC0080913ul);
// 0x40000000 | 4 << 16 = 0x00040000 | 0x900 | 0x14.
static_assert(IOCTL_KGSL_DRAWCTXT_DESTROY == 0x40040914ul);

// ============================================================================================
// 4. Memory flags (the u64 flags of GpuobjAlloc, u32 flags of MapUserMem)
// ============================================================================================

// [uapi] "--- Memory allocation flags ---".
inline constexpr uint64_t KGSL_MEMFLAGS_SECURE = 1ull << 3;
inline constexpr uint64_t KGSL_MEMFLAGS_GPUREADONLY = 1ull << 24;
inline constexpr uint64_t KGSL_MEMFLAGS_GPUWRITEONLY = 1ull << 25;
// [uapi] "If set on call and return, the returned GPU address will be 0. Calling mmap() will
// set the GPU address": the GPU VA becomes the CPU VA of the mmap (SVM). tinygrad sets it on
// every allocation and uses the mmap address as the GPU address; turnip uses it to place BOs.
inline constexpr uint64_t KGSL_MEMFLAGS_USE_CPU_MAP = 1ull << 28;
inline constexpr uint64_t KGSL_MEMFLAGS_SPARSE_PHYS = 1ull << 29;
inline constexpr uint64_t KGSL_MEMFLAGS_SPARSE_VIRT = 1ull << 30;
// I/O-coherent (cached CPU mapping snooped by the GPU); turnip probes for it with
// IOCOHERENT | WRITEBACK and falls back if the allocation fails.
inline constexpr uint64_t KGSL_MEMFLAGS_IOCOHERENT = 1ull << 31;
inline constexpr uint64_t KGSL_MEMFLAGS_FORCE_32BIT = 1ull << 32;  // VA below 4 GiB
inline constexpr uint64_t KGSL_MEMFLAGS_GUARD_PAGE = 1ull << 33;
inline constexpr uint64_t KGSL_MEMFLAGS_VBO = 1ull << 34;
inline constexpr uint64_t KGSL_MEMFLAGS_VBO_NO_MAP_ZERO = 1ull << 35;

// [uapi] "Memory caching hints": a 2-bit field at 27:26. The default 0 is write-combine.
inline constexpr uint64_t KGSL_CACHEMODE_MASK = 0x0C000000;
inline constexpr uint32_t KGSL_CACHEMODE_SHIFT = 26;
inline constexpr uint32_t KGSL_CACHEMODE_WRITECOMBINE = 0;
inline constexpr uint32_t KGSL_CACHEMODE_UNCACHED = 1;
inline constexpr uint32_t KGSL_CACHEMODE_WRITETHROUGH = 2;
inline constexpr uint32_t KGSL_CACHEMODE_WRITEBACK = 3;

// [uapi] "Memory types for which allocations are made": a debugging hint at 15:8.
inline constexpr uint64_t KGSL_MEMTYPE_MASK = 0x0000FF00;
inline constexpr uint32_t KGSL_MEMTYPE_SHIFT = 8;
inline constexpr uint32_t KGSL_MEMTYPE_OBJECTANY = 0;
inline constexpr uint32_t KGSL_MEMTYPE_CL = 10;
inline constexpr uint32_t KGSL_MEMTYPE_CL_KERNEL_STACK = 15;
inline constexpr uint32_t KGSL_MEMTYPE_COMMAND = 16;
inline constexpr uint32_t KGSL_MEMTYPE_KERNEL = 255;

// [uapi] "Alignment hint, passed as the power of 2 exponent" at 23:16 (12 = 4 KiB, 16 = 64 KiB).
inline constexpr uint64_t KGSL_MEMALIGN_MASK = 0x00FF0000;
inline constexpr uint32_t KGSL_MEMALIGN_SHIFT = 16;

// [uapi] USERMEM type field at 7:5 (0 = allocated by KGSL; n + 1 for user mem type n).
inline constexpr uint64_t KGSL_MEMFLAGS_USERMEM_MASK = 0x000000e0;
inline constexpr uint32_t KGSL_MEMFLAGS_USERMEM_SHIFT = 5;

constexpr uint64_t memflags_cachemode(uint32_t mode) {
  return (static_cast<uint64_t>(mode) << KGSL_CACHEMODE_SHIFT) & KGSL_CACHEMODE_MASK;
}
constexpr uint64_t memflags_memtype(uint32_t type) {
  return (static_cast<uint64_t>(type) << KGSL_MEMTYPE_SHIFT) & KGSL_MEMTYPE_MASK;
}
constexpr uint64_t memflags_align(uint32_t log2_bytes) {
  return (static_cast<uint64_t>(log2_bytes) << KGSL_MEMALIGN_SHIFT) & KGSL_MEMALIGN_MASK;
}

// ============================================================================================
// 5. GPU objects: IOCTL_KGSL_GPUOBJ_ALLOC / FREE / INFO / IMPORT, MAP_USER_MEM, SHAREDMEM_FREE
// ============================================================================================

// [uapi] struct kgsl_gpuobj_alloc. size/flags in, flags/mmapsize/id out (the kernel echoes the
// flags it actually applied). mmapsize is the length to pass to mmap(). va_len is for
// KGSL_MEMFLAGS_VBO (leave 0); metadata is a user pointer to at most 64 bytes of debug text.
struct GpuobjAlloc {
  uint64_t size;
  uint64_t flags;
  uint64_t va_len;
  uint64_t mmapsize;  // out
  uint32_t id;        // out
  uint32_t metadata_len;
  uint64_t metadata;  // user pointer
};
static_assert(sizeof(GpuobjAlloc) == 48);
static_assert(offsetof(GpuobjAlloc, flags) == 8);
static_assert(offsetof(GpuobjAlloc, va_len) == 16);
static_assert(offsetof(GpuobjAlloc, mmapsize) == 24);
static_assert(offsetof(GpuobjAlloc, id) == 32);
static_assert(offsetof(GpuobjAlloc, metadata_len) == 36);
static_assert(offsetof(GpuobjAlloc, metadata) == 40);
inline constexpr uint32_t KGSL_GPUOBJ_ALLOC_METADATA_MAX = 64;

// [uapi] struct kgsl_gpuobj_free. flags = 0 frees now; KGSL_GPUOBJ_FREE_ON_EVENT defers the
// free to the event in type/priv/len (a GpuEventTimestamp or a fence fd).
struct GpuobjFree {
  uint64_t flags;
  uint64_t priv;  // user pointer
  uint32_t id;
  uint32_t type;  // KGSL_GPU_EVENT_*
  uint32_t len;
  uint32_t pad0_;
};
static_assert(sizeof(GpuobjFree) == 32);
static_assert(offsetof(GpuobjFree, priv) == 8);
static_assert(offsetof(GpuobjFree, id) == 16);
static_assert(offsetof(GpuobjFree, type) == 20);
static_assert(offsetof(GpuobjFree, len) == 24);
inline constexpr uint64_t KGSL_GPUOBJ_FREE_ON_EVENT = 1;
inline constexpr uint32_t KGSL_GPU_EVENT_TIMESTAMP = 1;
inline constexpr uint32_t KGSL_GPU_EVENT_FENCE = 2;

// [uapi] struct kgsl_gpu_event_timestamp.
struct GpuEventTimestamp {
  uint32_t context_id;
  uint32_t timestamp;
};
static_assert(sizeof(GpuEventTimestamp) == 8);

// [uapi] struct kgsl_gpuobj_info: id in, the rest out. va_addr is the CPU mapping if any.
struct GpuobjInfo {
  uint64_t gpuaddr;
  uint64_t flags;
  uint64_t size;
  uint64_t va_len;
  uint64_t va_addr;
  uint32_t id;
  uint32_t pad0_;
};
static_assert(sizeof(GpuobjInfo) == 48);
static_assert(offsetof(GpuobjInfo, flags) == 8);
static_assert(offsetof(GpuobjInfo, size) == 16);
static_assert(offsetof(GpuobjInfo, va_len) == 24);
static_assert(offsetof(GpuobjInfo, va_addr) == 32);
static_assert(offsetof(GpuobjInfo, id) == 40);

// [uapi] struct kgsl_gpuobj_import (turnip imports dma-bufs with it): priv points at a
// GpuobjImportDmaBuf (type KGSL_USER_MEM_TYPE_DMABUF) or GpuobjImportUseraddr
// (type KGSL_USER_MEM_TYPE_ADDR); id comes back.
struct GpuobjImport {
  uint64_t priv;  // user pointer
  uint64_t priv_len;
  uint64_t flags;
  uint32_t type;  // KGSL_USER_MEM_TYPE_*
  uint32_t id;    // out
};
static_assert(sizeof(GpuobjImport) == 32);
static_assert(offsetof(GpuobjImport, priv_len) == 8);
static_assert(offsetof(GpuobjImport, flags) == 16);
static_assert(offsetof(GpuobjImport, type) == 24);
static_assert(offsetof(GpuobjImport, id) == 28);
struct GpuobjImportDmaBuf {
  int32_t fd;
};
static_assert(sizeof(GpuobjImportDmaBuf) == 4);
struct GpuobjImportUseraddr {
  uint64_t virtaddr;
};
static_assert(sizeof(GpuobjImportUseraddr) == 8);

// [uapi] enum kgsl_user_mem_type (a 4-byte enum in the structs).
inline constexpr uint32_t KGSL_USER_MEM_TYPE_PMEM = 0;
inline constexpr uint32_t KGSL_USER_MEM_TYPE_ASHMEM = 1;
inline constexpr uint32_t KGSL_USER_MEM_TYPE_ADDR = 2;
inline constexpr uint32_t KGSL_USER_MEM_TYPE_ION = 3;
inline constexpr uint32_t KGSL_USER_MEM_TYPE_DMABUF = 3;

// [uapi] struct kgsl_map_user_mem: maps existing memory into the GPU address space. With
// memtype = KGSL_USER_MEM_TYPE_ADDR, hostptr/len name a page-aligned range of this process
// (tinygrad aligns hostptr down and len up to 4 KiB and sets nothing else); gpuaddr comes back.
// Free it with IOCTL_KGSL_SHAREDMEM_FREE on that gpuaddr. Such objects cannot be mmap()ed
// through KGSL ([kgsl] kgsl.c get_mmap_entry: -EBUSY).
struct MapUserMem {
  int32_t fd;  // for fd-backed types; -1/0 unused with ADDR
  uint32_t pad0_;
  uint64_t gpuaddr;  // out (unsigned long)
  uint64_t len;      // __kernel_size_t
  uint64_t offset;   // __kernel_size_t
  uint64_t hostptr;  // unsigned long
  uint32_t memtype;  // enum kgsl_user_mem_type
  uint32_t flags;    // KGSL_MEMFLAGS_* (low 32 bits)
};
static_assert(sizeof(MapUserMem) == 48);
static_assert(offsetof(MapUserMem, fd) == 0);
static_assert(offsetof(MapUserMem, gpuaddr) == 8);
static_assert(offsetof(MapUserMem, len) == 16);
static_assert(offsetof(MapUserMem, offset) == 24);
static_assert(offsetof(MapUserMem, hostptr) == 32);
static_assert(offsetof(MapUserMem, memtype) == 40);
static_assert(offsetof(MapUserMem, flags) == 44);

// [uapi] struct kgsl_sharedmem_free { unsigned long gpuaddr; }.
struct SharedmemFree {
  uint64_t gpuaddr;
};
static_assert(sizeof(SharedmemFree) == 8);

// [uapi] IOCTL_KGSL_GPUOBJ_ALLOC = _IOWR(0x09, 0x45, ...), IOCTL_KGSL_GPUOBJ_FREE =
// _IOW(0x09, 0x46, ...), IOCTL_KGSL_GPUOBJ_INFO = _IOWR(0x09, 0x47, ...),
// IOCTL_KGSL_GPUOBJ_IMPORT = _IOWR(0x09, 0x48, ...), IOCTL_KGSL_MAP_USER_MEM =
// _IOWR(0x09, 0x15, ...), IOCTL_KGSL_SHAREDMEM_FREE = _IOW(0x09, 0x21, ...).
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_ALLOC = kgsl_iowr<GpuobjAlloc>(0x45);
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_FREE = kgsl_iow<GpuobjFree>(0x46);
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_INFO = kgsl_iowr<GpuobjInfo>(0x47);
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_IMPORT = kgsl_iowr<GpuobjImport>(0x48);
inline constexpr unsigned long IOCTL_KGSL_MAP_USER_MEM = kgsl_iowr<MapUserMem>(0x15);
inline constexpr unsigned long IOCTL_KGSL_SHAREDMEM_FREE = kgsl_iow<SharedmemFree>(0x21);
// 0xC0000000 | 48 = 0x30 << 16 = 0x00300000 | 0x900 | 0x45.
static_assert(IOCTL_KGSL_GPUOBJ_ALLOC == 0xC0300945ul);
// 0x40000000 | 32 = 0x20 << 16 = 0x00200000 | 0x900 | 0x46.
static_assert(IOCTL_KGSL_GPUOBJ_FREE == 0x40200946ul);
// 0xC0000000 | 0x00300000 | 0x900 | 0x47.
static_assert(IOCTL_KGSL_GPUOBJ_INFO == 0xC0300947ul);
// 0xC0000000 | 0x00200000 | 0x900 | 0x48.
static_assert(IOCTL_KGSL_GPUOBJ_IMPORT == 0xC0200948ul);
// 0xC0000000 | 0x00300000 | 0x900 | 0x15.
static_assert(IOCTL_KGSL_MAP_USER_MEM == 0xC0300915ul);
// 0x40000000 | 8 << 16 = 0x00080000 | 0x900 | 0x21.
static_assert(IOCTL_KGSL_SHAREDMEM_FREE == 0x40080921ul);

// [uapi] linux/dma-heap.h (Debian's linux-libc-dev, included for the struct): the memory a
// process shares comes from the system dma-buf heap, /dev/dma_heap/system, and is imported
// into KGSL (GpuobjImport, KGSL_USER_MEM_TYPE_DMABUF): KGSL has no export of its own objects.
// struct dma_heap_allocation_data {u64 len; u32 fd (out); u32 fd_flags (O_CLOEXEC |
// O_ACCMODE); u64 heap_flags (none valid)}; DMA_HEAP_IOCTL_ALLOC = _IOWR('H', 0x0, ...).
inline constexpr const char* kDmaHeapSystem = "/dev/dma_heap/system";
static_assert(sizeof(dma_heap_allocation_data) == 24);
static_assert(offsetof(dma_heap_allocation_data, fd) == 8);
static_assert(offsetof(dma_heap_allocation_data, fd_flags) == 12);
static_assert(offsetof(dma_heap_allocation_data, heap_flags) == 16);
// 0xC0000000 | 24 << 16 = 0x00180000 | 'H' << 8 = 0x4800 | 0x0.
static_assert(DMA_HEAP_IOCTL_ALLOC == 0xC0184800ul);

// ============================================================================================
// 6. Cache maintenance: IOCTL_KGSL_GPUOBJ_SYNC
// ============================================================================================

// [uapi] struct kgsl_gpuobj_sync_obj and struct kgsl_gpuobj_sync. [kgsl] kgsl.c
// kgsl_ioctl_gpuobj_sync: count must be 1..128 (-EINVAL otherwise); obj_len is the element
// size (copy_struct_from_user, so sizeof(GpuobjSyncObj)); an unknown id is skipped silently;
// offset/length are honoured only with KGSL_GPUMEM_CACHE_RANGE in op, otherwise the whole
// object is synced; nothing is done for non-cached (write-combine/uncached) or secure memory.
struct GpuobjSyncObj {
  uint64_t offset;
  uint64_t length;
  uint32_t id;
  uint32_t op;  // KGSL_GPUMEM_CACHE_*
};
static_assert(sizeof(GpuobjSyncObj) == 24);
static_assert(offsetof(GpuobjSyncObj, length) == 8);
static_assert(offsetof(GpuobjSyncObj, id) == 16);
static_assert(offsetof(GpuobjSyncObj, op) == 20);

struct GpuobjSync {
  uint64_t objs;  // user pointer to GpuobjSyncObj[count]
  uint32_t obj_len;
  uint32_t count;
};
static_assert(sizeof(GpuobjSync) == 16);
static_assert(offsetof(GpuobjSync, obj_len) == 8);
static_assert(offsetof(GpuobjSync, count) == 12);

// [uapi] "KGSL_GPUMEM_CACHE_*": CLEAN (= TO_GPU) writes dirty CPU lines back, INV (= FROM_GPU)
// drops them, FLUSH = both. RANGE (bit 31) makes offset/length count.
inline constexpr uint32_t KGSL_GPUMEM_CACHE_CLEAN = 1u << 0;
inline constexpr uint32_t KGSL_GPUMEM_CACHE_TO_GPU = KGSL_GPUMEM_CACHE_CLEAN;
inline constexpr uint32_t KGSL_GPUMEM_CACHE_INV = 1u << 1;
inline constexpr uint32_t KGSL_GPUMEM_CACHE_FROM_GPU = KGSL_GPUMEM_CACHE_INV;
inline constexpr uint32_t KGSL_GPUMEM_CACHE_FLUSH = KGSL_GPUMEM_CACHE_CLEAN | KGSL_GPUMEM_CACHE_INV;
inline constexpr uint32_t KGSL_GPUMEM_CACHE_RANGE = 1u << 31;

// [uapi] IOCTL_KGSL_GPUOBJ_SYNC = _IOW(0x09, 0x49, struct kgsl_gpuobj_sync).
inline constexpr unsigned long IOCTL_KGSL_GPUOBJ_SYNC = kgsl_iow<GpuobjSync>(0x49);
// 0x40000000 | 16 = 0x10 << 16 = 0x00100000 | 0x900 | 0x49.
static_assert(IOCTL_KGSL_GPUOBJ_SYNC == 0x40100949ul);

// ============================================================================================
// 7. Command submission: IOCTL_KGSL_GPU_COMMAND
// ============================================================================================

// [uapi] struct kgsl_command_object: one IB (indirect buffer) in cmdlist, or one memory object
// in objlist. For an IB: gpuaddr/size of the PM4 stream, flags = KGSL_CMDLIST_IB (tinygrad
// leaves offset and id 0).
struct CommandObject {
  uint64_t offset;
  uint64_t gpuaddr;
  uint64_t size;  // bytes
  uint32_t flags;  // KGSL_CMDLIST_* / KGSL_OBJLIST_*
  uint32_t id;
};
static_assert(sizeof(CommandObject) == 32);
static_assert(offsetof(CommandObject, gpuaddr) == 8);
static_assert(offsetof(CommandObject, size) == 16);
static_assert(offsetof(CommandObject, flags) == 24);
static_assert(offsetof(CommandObject, id) == 28);

// [uapi] flags for command objects and memory objects.
inline constexpr uint32_t KGSL_CMDLIST_IB = 0x00000001;
inline constexpr uint32_t KGSL_CMDLIST_CTXTSWITCH_PREAMBLE = 0x00000002;
inline constexpr uint32_t KGSL_CMDLIST_IB_PREAMBLE = 0x00000004;
inline constexpr uint32_t KGSL_OBJLIST_MEMOBJ = 0x00000008;
inline constexpr uint32_t KGSL_OBJLIST_PROFILE = 0x00000010;  // a CmdbatchProfilingBuffer

// [uapi] struct kgsl_command_syncpoint: a wait before the command runs. priv points at a
// CmdSyncpointTimestamp (type TIMESTAMP) or an int fence fd (type FENCE).
struct CommandSyncpoint {
  uint64_t priv;  // user pointer
  uint64_t size;
  uint32_t type;  // KGSL_CMD_SYNCPOINT_TYPE_*
  uint32_t pad0_;
};
static_assert(sizeof(CommandSyncpoint) == 24);
static_assert(offsetof(CommandSyncpoint, size) == 8);
static_assert(offsetof(CommandSyncpoint, type) == 16);
inline constexpr uint32_t KGSL_CMD_SYNCPOINT_TYPE_TIMESTAMP = 0;
inline constexpr uint32_t KGSL_CMD_SYNCPOINT_TYPE_FENCE = 1;
inline constexpr uint32_t KGSL_CMD_SYNCPOINT_TYPE_TIMELINE = 2;

// [uapi] struct kgsl_cmd_syncpoint_timestamp.
struct CmdSyncpointTimestamp {
  uint32_t context_id;
  uint32_t timestamp;
};
static_assert(sizeof(CmdSyncpointTimestamp) == 8);

// [uapi] struct kgsl_cmdbatch_profiling_buffer (the KGSL_OBJLIST_PROFILE target, filled by
// the kernel/GPU when KGSL_CMDBATCH_PROFILING is set).
struct CmdbatchProfilingBuffer {
  uint64_t wall_clock_s;
  uint64_t wall_clock_ns;
  uint64_t gpu_ticks_queued;
  uint64_t gpu_ticks_submitted;
  uint64_t gpu_ticks_retired;
};
static_assert(sizeof(CmdbatchProfilingBuffer) == 40);

// [uapi] struct kgsl_gpu_command. cmdsize/objsize/syncsize are the element sizes
// (sizeof(CommandObject), sizeof(CommandSyncpoint)); timestamp comes back: the per-context
// timestamp this submission retires at (what WAITTIMESTAMP_CTXTID waits for).
struct GpuCommand {
  uint64_t flags;    // KGSL_CMDBATCH_*
  uint64_t cmdlist;  // user pointer to CommandObject[numcmds]
  uint32_t cmdsize;
  uint32_t numcmds;
  uint64_t objlist;  // user pointer to CommandObject[numobjs]
  uint32_t objsize;
  uint32_t numobjs;
  uint64_t synclist;  // user pointer to CommandSyncpoint[numsyncs]
  uint32_t syncsize;
  uint32_t numsyncs;
  uint32_t context_id;
  uint32_t timestamp;  // out
};
static_assert(sizeof(GpuCommand) == 64);
static_assert(offsetof(GpuCommand, flags) == 0);
static_assert(offsetof(GpuCommand, cmdlist) == 8);
static_assert(offsetof(GpuCommand, cmdsize) == 16);
static_assert(offsetof(GpuCommand, numcmds) == 20);
static_assert(offsetof(GpuCommand, objlist) == 24);
static_assert(offsetof(GpuCommand, objsize) == 32);
static_assert(offsetof(GpuCommand, numobjs) == 36);
static_assert(offsetof(GpuCommand, synclist) == 40);
static_assert(offsetof(GpuCommand, syncsize) == 48);
static_assert(offsetof(GpuCommand, numsyncs) == 52);
static_assert(offsetof(GpuCommand, context_id) == 56);
static_assert(offsetof(GpuCommand, timestamp) == 60);

// [uapi] "--- command batch flags ---". turnip submits with SUBMIT_IB_LIST (| PROFILING when
// tracing); tinygrad with 0.
inline constexpr uint64_t KGSL_CMDBATCH_MEMLIST = 0x00000001;
inline constexpr uint64_t KGSL_CMDBATCH_MARKER = 0x00000002;
inline constexpr uint64_t KGSL_CMDBATCH_SUBMIT_IB_LIST = KGSL_CONTEXT_SUBMIT_IB_LIST;  // 0x4
inline constexpr uint64_t KGSL_CMDBATCH_CTX_SWITCH = KGSL_CONTEXT_CTX_SWITCH;          // 0x8
inline constexpr uint64_t KGSL_CMDBATCH_PROFILING = 0x00000010;
inline constexpr uint64_t KGSL_CMDBATCH_PROFILING_KTIME = 0x00000020;
inline constexpr uint64_t KGSL_CMDBATCH_END_OF_FRAME = KGSL_CONTEXT_END_OF_FRAME;  // 0x100
inline constexpr uint64_t KGSL_CMDBATCH_SYNC = KGSL_CONTEXT_SYNC;                  // 0x400
inline constexpr uint64_t KGSL_CMDBATCH_PWR_CONSTRAINT = KGSL_CONTEXT_PWR_CONSTRAINT;  // 0x800
inline constexpr uint64_t KGSL_CMDBATCH_SPARSE = 0x1000;

// [uapi] IOCTL_KGSL_GPU_COMMAND = _IOWR(0x09, 0x4A, struct kgsl_gpu_command).
inline constexpr unsigned long IOCTL_KGSL_GPU_COMMAND = kgsl_iowr<GpuCommand>(0x4A);
// 0xC0000000 | 64 = 0x40 << 16 = 0x00400000 | 0x900 | 0x4A.
static_assert(IOCTL_KGSL_GPU_COMMAND == 0xC040094Aul);

// ============================================================================================
// 8. Timestamps: WAITTIMESTAMP_CTXTID, READTIMESTAMP_CTXTID, TIMESTAMP_EVENT
// ============================================================================================

// [uapi] struct kgsl_device_waittimestamp_ctxtid: blocks until the context's retired timestamp
// reaches `timestamp` (compared modulo 2^32) or `timeout` milliseconds pass (-ETIMEDOUT).
// [kgsl] adreno_drawctxt.c adreno_drawctxt_wait: timeout 0 means wait forever (tinygrad passes
// 0xffffffff, which msecs_to_jiffies also treats as forever). Interruptible: EINTR/EAGAIN ->
// retry (turnip recomputes the remaining timeout).
struct DeviceWaittimestampCtxtid {
  uint32_t context_id;
  uint32_t timestamp;
  uint32_t timeout;  // ms
};
static_assert(sizeof(DeviceWaittimestampCtxtid) == 12);
static_assert(offsetof(DeviceWaittimestampCtxtid, timestamp) == 4);
static_assert(offsetof(DeviceWaittimestampCtxtid, timeout) == 8);

// [uapi] struct kgsl_cmdstream_readtimestamp_ctxtid and enum kgsl_timestamp_type.
struct CmdstreamReadtimestampCtxtid {
  uint32_t context_id;
  uint32_t type;       // KGSL_TIMESTAMP_*
  uint32_t timestamp;  // out
};
static_assert(sizeof(CmdstreamReadtimestampCtxtid) == 12);
static_assert(offsetof(CmdstreamReadtimestampCtxtid, type) == 4);
static_assert(offsetof(CmdstreamReadtimestampCtxtid, timestamp) == 8);
inline constexpr uint32_t KGSL_TIMESTAMP_CONSUMED = 1;  // start of pipeline
inline constexpr uint32_t KGSL_TIMESTAMP_RETIRED = 2;   // end of pipeline
inline constexpr uint32_t KGSL_TIMESTAMP_QUEUED = 3;

// [uapi] struct kgsl_timestamp_event: with type KGSL_TIMESTAMP_EVENT_FENCE, priv points at an
// int that receives a sync_file fd signalled when (context_id, timestamp) retires (turnip's
// timestamp_to_fd), len = sizeof(int).
struct TimestampEvent {
  int32_t type;
  uint32_t timestamp;
  uint32_t context_id;
  uint32_t pad0_;
  uint64_t priv;  // user pointer
  uint64_t len;   // __kernel_size_t
};
static_assert(sizeof(TimestampEvent) == 32);
static_assert(offsetof(TimestampEvent, timestamp) == 4);
static_assert(offsetof(TimestampEvent, context_id) == 8);
static_assert(offsetof(TimestampEvent, priv) == 16);
static_assert(offsetof(TimestampEvent, len) == 24);
inline constexpr int32_t KGSL_TIMESTAMP_EVENT_GENLOCK = 1;
inline constexpr int32_t KGSL_TIMESTAMP_EVENT_FENCE = 2;

// [uapi] IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID = _IOW(0x09, 0x7, ...),
// IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID = _IOWR(0x09, 0x16, ...),
// IOCTL_KGSL_TIMESTAMP_EVENT = _IOWR(0x09, 0x33, ...) (0x31 is the old _IOW form).
inline constexpr unsigned long IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID =
    kgsl_iow<DeviceWaittimestampCtxtid>(0x7);
inline constexpr unsigned long IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID =
    kgsl_iowr<CmdstreamReadtimestampCtxtid>(0x16);
inline constexpr unsigned long IOCTL_KGSL_TIMESTAMP_EVENT = kgsl_iowr<TimestampEvent>(0x33);
// 0x40000000 | 12 = 0xC << 16 = 0x000C0000 | 0x900 | 0x07.
static_assert(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID == 0x400C0907ul);
// 0xC0000000 | 0x000C0000 | 0x900 | 0x16.
static_assert(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID == 0xC00C0916ul);
// 0xC0000000 | 32 = 0x20 << 16 = 0x00200000 | 0x900 | 0x33.
static_assert(IOCTL_KGSL_TIMESTAMP_EVENT == 0xC0200933ul);

// ============================================================================================
// 9. GPU faults and hangs: what KGSL reports
// ============================================================================================
//
// From [kgsl] (adreno_dispatch.c, adreno_hwsched.c, adreno_drawctxt.c, adreno.c, kgsl.c,
// kgsl_device.h, kgsl_iommu.c):
//
// * Detection. A hang (IB timeout, "gpu timeout ctx %u ts %u") or a hardware fault makes the
//   dispatcher snapshot and reset/recover the GPU. Each context has a fault-tolerance policy:
//   by default KGSL replays/skips the faulting command and the context survives; with
//   KGSL_CONTEXT_NO_FAULT_TOLERANCE (tinygrad) or KGSL_CONTEXT_INVALIDATE_ON_FAULT, or after
//   too many faults in a short time (throttling), the context is marked guilty:
//   reset_status = KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT and the context is invalidated
//   (KGSL_CONTEXT_PRIV_INVALID), its pending commands are dropped and waiters woken. On the
//   hardware scheduler (a7xx hwsched) the faulting command's timestamp is force-retired.
//   NO_FAULT_TOLERANCE also turns off the dispatcher's long-IB timeout for that context.
// * IOCTL_KGSL_GPU_COMMAND on an invalidated context fails with EDEADLK
//   (kgsl_check_context_state), on a detached/destroyed one with ENOENT. If the context had a
//   fault that was recovered since the last check it returns EPROTO: a "success" error, the
//   command WAS queued, but because kgsl_ioctl_helper copies results out only on 0, the
//   returned `timestamp` is NOT written back to user space (fetch it with
//   READTIMESTAMP_CTXTID, type KGSL_TIMESTAMP_QUEUED). The "faulted and recovered" flag
//   (ADRENO_CONTEXT_FAULT) is set only by the software dispatcher (adreno_dispatch.c); on the
//   GMU hardware scheduler (adreno_hwsched.c) neither ioctl returns EPROTO.
// * IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID returns EDEADLK if the context is (or becomes,
//   while waiting) invalid, ETIMEDOUT on timeout, ENOENT if detached, EINVAL for an unknown
//   context id, and EPROTO once (the flag is cleared) when the wait succeeded but the context
//   faulted and was recovered since the last check.
// * KGSL_PROP_GPU_RESET_STAT (GETPROPERTY, value -> u32 context id in, KGSL_CTX_STAT_* out,
//   sizebytes must be exactly 4) returns and clears the context's reset status. turnip treats
//   anything but NO_ERROR / INNOCENT_CONTEXT_RESET_EXT as device lost.
// * KGSL_PROP_CONTEXT_PROPERTY with a ContextProperty {data -> ContextPropertyFault, size,
//   type = KGSL_CONTEXT_PROP_FAULTS, contextid} returns the context's total fault count and the
//   timestamp of the last faulting command (sizebytes 0 asks for the struct size).
// * GPU page faults (IOMMU): by default the faulting transaction is terminated and execution
//   goes on (logged, no reset), unless the GPUHALT page-fault policy is on. Contexts created
//   with KGSL_CONTEXT_FAULT_INFO can read the fault list with IOCTL_KGSL_GET_FAULT_REPORT.
inline constexpr int kErrContextInvalid = 35;  // EDEADLK (asm-generic/errno.h)
inline constexpr int kErrContextFaulted = 71;  // EPROTO
inline constexpr int kErrTimedOut = 110;       // ETIMEDOUT
inline constexpr int kErrContextDetached = 2;  // ENOENT

// [uapi] enum kgsl_ctx_reset_stat.
inline constexpr uint32_t KGSL_CTX_STAT_NO_ERROR = 0x00000000;
inline constexpr uint32_t KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT = 0x00000001;
inline constexpr uint32_t KGSL_CTX_STAT_INNOCENT_CONTEXT_RESET_EXT = 0x00000002;
inline constexpr uint32_t KGSL_CTX_STAT_UNKNOWN_CONTEXT_RESET_EXT = 0x00000003;

// [uapi] struct kgsl_context_property and struct kgsl_context_property_fault.
struct ContextProperty {
  uint64_t data;  // user pointer to the sub-type payload
  uint32_t size;
  uint32_t type;  // KGSL_CONTEXT_PROP_*; 0 is rejected
  uint32_t contextid;
  uint32_t pad0_;
};
static_assert(sizeof(ContextProperty) == 24);
static_assert(offsetof(ContextProperty, size) == 8);
static_assert(offsetof(ContextProperty, type) == 12);
static_assert(offsetof(ContextProperty, contextid) == 16);
inline constexpr uint32_t KGSL_CONTEXT_PROP_FAULTS = 1;

struct ContextPropertyFault {
  int32_t faults;
  uint32_t timestamp;
};
static_assert(sizeof(ContextPropertyFault) == 8);

// [uapi] struct kgsl_fault_report / kgsl_fault / kgsl_pagefault_report, IOCTL 0x5E. Call once
// with faultnents = 0 to learn the count, then with arrays filled in.
struct FaultReport {
  uint64_t faultlist;  // user pointer to Fault[faultnents]
  uint32_t faultnents;
  uint32_t faultsize;
  uint32_t context_id;
  uint32_t padding;
};
static_assert(sizeof(FaultReport) == 24);
static_assert(offsetof(FaultReport, context_id) == 16);
struct Fault {
  uint64_t fault;  // user pointer to PagefaultReport[count]
  uint32_t type;   // KGSL_FAULT_TYPE_*
  uint32_t count;
  uint32_t size;
  uint32_t padding;
};
static_assert(sizeof(Fault) == 24);
struct PagefaultReport {
  uint64_t fault_addr;
  uint64_t reserved[2];
  uint32_t fault_type;  // KGSL_PAGEFAULT_TYPE_* bits
  uint32_t pad0_;
};
static_assert(sizeof(PagefaultReport) == 32);
static_assert(offsetof(PagefaultReport, fault_type) == 24);
inline constexpr uint32_t KGSL_FAULT_TYPE_NO_FAULT = 0;
inline constexpr uint32_t KGSL_FAULT_TYPE_PAGEFAULT = 1;
inline constexpr uint32_t KGSL_PAGEFAULT_TYPE_READ = 1u << 0;
inline constexpr uint32_t KGSL_PAGEFAULT_TYPE_WRITE = 1u << 1;
inline constexpr uint32_t KGSL_PAGEFAULT_TYPE_TRANSLATION = 1u << 2;
inline constexpr uint32_t KGSL_PAGEFAULT_TYPE_PERMISSION = 1u << 3;

// [uapi] IOCTL_KGSL_GET_FAULT_REPORT = _IOWR(0x09, 0x5E, struct kgsl_fault_report).
inline constexpr unsigned long IOCTL_KGSL_GET_FAULT_REPORT = kgsl_iowr<FaultReport>(0x5E);
// 0xC0000000 | 24 = 0x18 << 16 = 0x00180000 | 0x900 | 0x5E.
static_assert(IOCTL_KGSL_GET_FAULT_REPORT == 0xC018095Eul);

// ============================================================================================
// 10. mmap of a GPU object
// ============================================================================================

// [kgsl] kgsl.c kgsl_mmap / get_mmap_entry: the mmap offset's page number (vm_pgoff) is looked
// up first as a GPU object id (kgsl_sharedmem_find_id), then as a GPU address >> PAGE_SHIFT.
// So a GpuobjAlloc'ed object is mapped with offset = id << PAGE_SHIFT and length = mmapsize
// (exactly mmapsize with USE_CPU_MAP, -ERANGE otherwise; else mmapsize or size), MAP_SHARED on
// the /dev/kgsl-3d0 fd. turnip (tu_knl_kgsl.cc: "offset = bo->gem_handle << 12") and tinygrad
// (ops_qcom.py: "alloc.id * 0x1000") hard-code 4 KiB pages, as does this default; pass the
// page shift for 16K/64K-page kernels.
inline constexpr uint32_t kKgslPageShift = 12;
constexpr uint64_t mmap_offset_of(uint32_t id, uint32_t page_shift = kKgslPageShift) {
  return static_cast<uint64_t>(id) << page_shift;
}

// ============================================================================================
// 11. Chip ids and generations
// ============================================================================================

// [uapi] kgsl_devinfo comment: "chip revision id: coreid:8 majorrev:8 minorrev:8 patch:8";
// [kgsl] adreno.h ADRENO_CHIPID_CORE/MAJOR/MINOR/PATCH = bits 31:24 / 23:16 / 15:8 / 7:0. KGSL
// reports the device tree's qcom,chipid. For a6xx and the first a7xx the core byte is the
// generation and major/minor the model (a660 = 6.6.0 patch 1). From a740 on Qualcomm uses core
// byte 0x43 ('C') for a7xx and 0x44 for a8xx, so the old decimal "gpu id"
// (core*100 + major*10 + minor, [tu] freedreno_dev_info.h fd_dev_gpu_id and tu_knl_kgsl.cc)
// gives nonsense there (a740 -> 6760); turnip matches those by the full chip id instead.
constexpr uint32_t chip_core(uint32_t chip_id) { return (chip_id >> 24) & 0xff; }
constexpr uint32_t chip_major(uint32_t chip_id) { return (chip_id >> 16) & 0xff; }
constexpr uint32_t chip_minor(uint32_t chip_id) { return (chip_id >> 8) & 0xff; }
constexpr uint32_t chip_patch(uint32_t chip_id) { return chip_id & 0xff; }
constexpr uint32_t gpu_id_from_chip_id(uint32_t chip_id) {
  return chip_core(chip_id) * 100 + chip_major(chip_id) * 10 + chip_minor(chip_id);
}

// Known chip ids as KGSL reports them:
//  a630 (SDM845): [msm] a6xx_catalog.c ADRENO_CHIP_IDS(0x06030001, 0x06030002); tinygrad's mock
//                 KGSL (test/mockgpu/qcom) uses A630_CHIP_ID = 0x06030001. [tu] lists it as
//                 GPUId(630), i.e. 0x060300ff with a wildcard patch.
//  a660 (SM8350): [msm] a6xx_catalog.c ADRENO_CHIP_IDS(0x06060001); [tu] GPUId(660).
//  a730 (SM8450): [tu] freedreno_devices.py GPUId(chip_id=0x07030001, name="FD730") "KGSL".
//  a740 (SM8550): [tu] freedreno_devices.py GPUId(chip_id=0x43050a01, name="FD740") "KGSL".
inline constexpr uint32_t kChipIdA630 = 0x06030001;
inline constexpr uint32_t kChipIdA660 = 0x06060001;
inline constexpr uint32_t kChipIdA730 = 0x07030001;
inline constexpr uint32_t kChipIdA740 = 0x43050a01;

// The register-level family (freedreno's CHIP.A6XX / CHIP.A7XX, [tu] freedreno_devices.py):
//  core 6                 -> 6 (a605 ... a690);
//  core 7, major 0        -> 6: A702 (0x07000200) is an a6xx-class part ("CHIP.A6XX, # NOT a
//                            mistake!");
//  core 7, major >= 1     -> 7 (a725 0x07030002, a730 0x07030001);
//  core 0x43              -> 7 (a735 0x43030B00, a740 0x43050a01, a750 0x43051401, X1-85);
//  anything else          -> 0 (unknown here, including 0x44 = a8xx and a5xx and older).
// tinygrad (ops_qcom.py) drives only chip ids below (7, 3) in its (core, major) order.
constexpr int adreno_family(uint32_t chip_id) {
  const uint32_t core = chip_core(chip_id);
  if (core == 6) return 6;
  if (core == 7) return chip_major(chip_id) == 0 ? 6 : 7;
  if (core == 0x43) return 7;
  return 0;
}
static_assert(adreno_family(kChipIdA630) == 6 && adreno_family(kChipIdA740) == 7);

}  // namespace hcq::qcom::kgsl
