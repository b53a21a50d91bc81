// The user-space ABI of NVIDIA's open kernel modules: RM escape ioctls on /dev/nvidiactl and
// /dev/nvidiaN, the RM classes, allocation and control parameters a compute driver needs, the
// USERD/usermode/notifier memory layouts, NV_STATUS codes, and the UVM ioctls on
// /dev/nvidia-uvm. Our own definitions, written from the public headers named on each group;
// every struct's size and field offsets are asserted for x86-64 Linux.
//
// Facts taken from NVIDIA/open-gpu-kernel-modules at tag 595.45.04 (commit df1c9a3d), whose
// version.mk says NVIDIA_VERSION = 595.45.04. Paths below are relative to that repository.
//
// Names: NVIDIA's own name where one exists (NV_ESC_RM_ALLOC, AMPERE_COMPUTE_B, ...); structs
// get CamelCase names (Nvos21, ChannelAllocParams, ...) with NVIDIA's field names.
#pragma once

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace hcq::nv::rm {

// nvtypes.h basics (src/common/sdk/nvidia/inc/nvtypes.h): NvHandle is a 32-bit object handle,
// NvP64 a user pointer carried as 64 bits with 8-byte alignment, NvBool one byte, NV_STATUS
// 32 bits.
using NvHandle = uint32_t;
using NvP64 = uint64_t;
using NvBool = uint8_t;
using NvStatus = uint32_t;
static_assert(alignof(uint64_t) == 8, "NV_ALIGN_BYTES(8) fields rely on 8-byte uint64_t");

// ============================================================================================
// 1. Escape ioctl numbers
// ============================================================================================

// kernel-open/common/inc/nv-ioctl-numbers.h: the OS-level escapes, NV_IOCTL_BASE + n.
inline constexpr uint32_t kIoctlMagic = 'F';  // NV_IOCTL_MAGIC
inline constexpr uint32_t kIoctlBase = 200;   // NV_IOCTL_BASE
inline constexpr uint32_t NV_ESC_CARD_INFO = kIoctlBase + 0;  // CardInfo[n], on nvidiactl
inline constexpr uint32_t NV_ESC_REGISTER_FD = kIoctlBase + 1;  // RegisterFd, on nvidiaN
inline constexpr uint32_t NV_ESC_ALLOC_OS_EVENT = kIoctlBase + 6;  // OsEvent
inline constexpr uint32_t NV_ESC_FREE_OS_EVENT = kIoctlBase + 7;   // OsEvent
inline constexpr uint32_t NV_ESC_STATUS_CODE = kIoctlBase + 9;
inline constexpr uint32_t NV_ESC_CHECK_VERSION_STR = kIoctlBase + 10;  // RmApiVersion
inline constexpr uint32_t NV_ESC_IOCTL_XFER_CMD = kIoctlBase + 11;     // IoctlXfer
inline constexpr uint32_t NV_ESC_ATTACH_GPUS_TO_FD = kIoctlBase + 12;  // uint32_t gpu_id[n]
inline constexpr uint32_t NV_ESC_QUERY_DEVICE_INTR = kIoctlBase + 13;
inline constexpr uint32_t NV_ESC_SYS_PARAMS = kIoctlBase + 14;
inline constexpr uint32_t NV_ESC_EXPORT_TO_DMABUF_FD = kIoctlBase + 17;
inline constexpr uint32_t NV_ESC_WAIT_OPEN_COMPLETE = kIoctlBase + 18;

// src/nvidia/arch/nvalloc/unix/include/nv_escape.h: the RM API escapes.
inline constexpr uint32_t NV_ESC_RM_ALLOC_MEMORY = 0x27;   // Nvos02WithFd, on nvidiaN
inline constexpr uint32_t NV_ESC_RM_ALLOC_OBJECT = 0x28;
inline constexpr uint32_t NV_ESC_RM_FREE = 0x29;           // Nvos00
inline constexpr uint32_t NV_ESC_RM_CONTROL = 0x2A;        // Nvos54
inline constexpr uint32_t NV_ESC_RM_ALLOC = 0x2B;          // Nvos21 or Nvos64
inline constexpr uint32_t NV_ESC_RM_DUP_OBJECT = 0x34;
inline constexpr uint32_t NV_ESC_RM_SHARE = 0x35;
inline constexpr uint32_t NV_ESC_RM_VID_HEAP_CONTROL = 0x4A;
inline constexpr uint32_t NV_ESC_RM_MAP_MEMORY = 0x4E;     // Nvos33WithFd, on nvidiactl
inline constexpr uint32_t NV_ESC_RM_UNMAP_MEMORY = 0x4F;   // Nvos34
inline constexpr uint32_t NV_ESC_RM_MAP_MEMORY_DMA = 0x57;    // Nvos46 (GPU VA mapping)
inline constexpr uint32_t NV_ESC_RM_UNMAP_MEMORY_DMA = 0x58;
inline constexpr uint32_t NV_ESC_RM_EXPORT_OBJECT_TO_FD = 0x5C;
inline constexpr uint32_t NV_ESC_RM_IMPORT_OBJECT_FROM_FD = 0x5D;
inline constexpr uint32_t NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO = 0x5E;  // Nvos56

// Request codes. The user-space library issues every escape as _IOWR(NV_IOCTL_MAGIC, nr, size)
// (<linux/ioctl.h>: dir 31:30 = READ|WRITE = 3, size 29:16, type 15:8, nr 7:0). The kernel
// (kernel-open/nvidia/nv.c, nvidia_ioctl / nv_validate_ioctls) looks only at _IOC_NR and
// _IOC_SIZE: the size must equal the parameter struct's size exactly, except NV_ESC_CARD_INFO
// and NV_ESC_ATTACH_GPUS_TO_FD, which take any non-zero multiple of the element size (an
// array). A size that does not fit the 14-bit field needs NV_ESC_IOCTL_XFER_CMD (IoctlXfer);
// esc() returns 0 (an invalid request) for such a size rather than wrapping it.
inline constexpr unsigned long kIocSizeMax = _IOC_SIZEMASK;  // 0x3fff
constexpr unsigned long esc(uint32_t nr, size_t size) {
  if (size > kIocSizeMax) return 0;
  return (static_cast<unsigned long>(_IOC_READ | _IOC_WRITE) << _IOC_DIRSHIFT) |
         (static_cast<unsigned long>(size) << _IOC_SIZESHIFT) |
         (static_cast<unsigned long>(kIoctlMagic) << _IOC_TYPESHIFT) |
         (static_cast<unsigned long>(nr & _IOC_NRMASK) << _IOC_NRSHIFT);
}
template <class T>
constexpr unsigned long esc_for(uint32_t nr) {
  static_assert(sizeof(T) <= _IOC_SIZEMASK, "too big for _IOC_SIZE; use NV_ESC_IOCTL_XFER_CMD");
  return esc(nr, sizeof(T));
}
// The inverse, for an emulator decoding a request.
constexpr uint32_t esc_nr(unsigned long request) {
  return static_cast<uint32_t>((request >> _IOC_NRSHIFT) & _IOC_NRMASK);
}
constexpr size_t esc_size(unsigned long request) {
  return static_cast<size_t>((request >> _IOC_SIZESHIFT) & _IOC_SIZEMASK);
}
constexpr uint32_t esc_type(unsigned long request) {
  return static_cast<uint32_t>((request >> _IOC_TYPESHIFT) & _IOC_TYPEMASK);
}
constexpr uint32_t esc_dir(unsigned long request) {
  return static_cast<uint32_t>((request >> _IOC_DIRSHIFT) & _IOC_DIRMASK);
}
// True for a request shaped like the library's: type 'F', direction read|write.
constexpr bool esc_is_nv(unsigned long request) {
  return esc_type(request) == kIoctlMagic && esc_dir(request) == (_IOC_READ | _IOC_WRITE);
}

// ============================================================================================
// 2. Escape parameter structs
// ============================================================================================

// kernel-open/common/inc/nv-ioctl.h: nv_pci_info_t and nv_ioctl_card_info_t. NV_ESC_CARD_INFO
// fills an array of these (one per probed GPU, valid != 0); tinygrad passes 64 entries. The
// kernel (nv.c nvidia_read_card_info) fills every field but pci_info.function.
struct PciInfo {
  uint32_t domain;
  uint8_t bus;
  uint8_t slot;
  uint8_t function;
  uint16_t vendor_id;
  uint16_t device_id;
};
static_assert(sizeof(PciInfo) == 12);
static_assert(offsetof(PciInfo, domain) == 0 && offsetof(PciInfo, bus) == 4 &&
              offsetof(PciInfo, slot) == 5 && offsetof(PciInfo, function) == 6 &&
              offsetof(PciInfo, vendor_id) == 8 && offsetof(PciInfo, device_id) == 10);

struct CardInfo {
  NvBool valid;
  PciInfo pci_info;
  uint32_t gpu_id;  // RM's gpuId: the key for NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2
  uint16_t interrupt_line;
  uint64_t reg_address;
  uint64_t reg_size;
  uint64_t fb_address;
  uint64_t fb_size;
  uint32_t minor_number;  // N of /dev/nvidiaN
  uint8_t dev_name[10];
};
static_assert(sizeof(CardInfo) == 72);
static_assert(offsetof(CardInfo, valid) == 0 && offsetof(CardInfo, pci_info) == 4 &&
              offsetof(CardInfo, gpu_id) == 16 && offsetof(CardInfo, interrupt_line) == 20 &&
              offsetof(CardInfo, reg_address) == 24 && offsetof(CardInfo, reg_size) == 32 &&
              offsetof(CardInfo, fb_address) == 40 && offsetof(CardInfo, fb_size) == 48 &&
              offsetof(CardInfo, minor_number) == 56 && offsetof(CardInfo, dev_name) == 60);

// kernel-open/common/inc/nv-ioctl.h: nv_ioctl_register_fd_t. Issued on an open /dev/nvidiaN
// with the /dev/nvidiactl fd; later NV_ESC_RM_MAP_MEMORY calls name the nvidiaN fd in
// Nvos33WithFd::fd and the mapping is then made by mmap() on that nvidiaN fd.
struct RegisterFd {
  int32_t ctl_fd;
};
static_assert(sizeof(RegisterFd) == 4 && offsetof(RegisterFd, ctl_fd) == 0);

// kernel-open/common/inc/nv-ioctl.h: nv_ioctl_alloc_os_event_t / nv_ioctl_free_os_event_t
// (same layout): binds an fd to RM events of (hClient, hDevice).
struct OsEvent {
  NvHandle hClient;
  NvHandle hDevice;
  uint32_t fd;
  uint32_t Status;
};
static_assert(sizeof(OsEvent) == 16);
static_assert(offsetof(OsEvent, hClient) == 0 && offsetof(OsEvent, hDevice) == 4 &&
              offsetof(OsEvent, fd) == 8 && offsetof(OsEvent, Status) == 12);

// kernel-open/common/inc/nv-ioctl.h: nv_ioctl_xfer_t, for parameters over 16 KiB: the request
// carries this, and the kernel reads cmd/size/ptr from it instead of from the ioctl number.
struct IoctlXfer {
  uint32_t cmd;
  uint32_t size;
  NvP64 ptr;
};
static_assert(sizeof(IoctlXfer) == 16);
static_assert(offsetof(IoctlXfer, cmd) == 0 && offsetof(IoctlXfer, size) == 4 &&
              offsetof(IoctlXfer, ptr) == 8);

// kernel-open/common/inc/nv-ioctl.h: nv_ioctl_rm_api_version_t and its cmd/reply values.
//
// What the kernel does with NV_ESC_CHECK_VERSION_STR (only valid on nvidiactl; handled by
// RmPerformVersionCheck in src/nvidia/arch/nvalloc/unix/src/osapi.c):
//  * it always sets reply = NV_RM_API_VERSION_REPLY_RECOGNIZED first;
//  * cmd == QUERY: copies the kernel's NV_VERSION_STRING into versionString, succeeds;
//  * otherwise it compares versionString with NV_VERSION_STRING character by character:
//    STRICT (any cmd other than RELAXED/QUERY) succeeds only if the strings are equal up to
//    and including the terminating NUL; RELAXED also succeeds at the first '.' reached
//    while still equal, i.e. only the major version ("595") has to match;
//  * on a mismatch it logs, copies the kernel's string into versionString and returns
//    NV_ERR_GENERIC, which nv.c turns into ioctl() failing with EINVAL.
inline constexpr size_t NV_RM_API_VERSION_STRING_LENGTH = 64;
inline constexpr uint32_t NV_RM_API_VERSION_CMD_STRICT = 0;
inline constexpr uint32_t NV_RM_API_VERSION_CMD_RELAXED = '1';
inline constexpr uint32_t NV_RM_API_VERSION_CMD_QUERY = '2';
inline constexpr uint32_t NV_RM_API_VERSION_REPLY_UNRECOGNIZED = 0;
inline constexpr uint32_t NV_RM_API_VERSION_REPLY_RECOGNIZED = 1;
struct RmApiVersion {
  uint32_t cmd;
  uint32_t reply;
  char versionString[NV_RM_API_VERSION_STRING_LENGTH];
};
static_assert(sizeof(RmApiVersion) == 72);
static_assert(offsetof(RmApiVersion, cmd) == 0 && offsetof(RmApiVersion, reply) == 4 &&
              offsetof(RmApiVersion, versionString) == 8);

// The driver version of the source snapshot these facts come from (version.mk NVIDIA_VERSION,
// which becomes NV_VERSION_STRING). A strict NV_ESC_CHECK_VERSION_STR against another kernel
// fails; NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 reports the running kernel's string.
inline constexpr const char* kRmVersion = "595.45.04";

// src/common/sdk/nvidia/inc/nvos.h: NVOS00_PARAMETERS (NV_ESC_RM_FREE). Freeing the client
// handle (hObjectOld == hRoot) frees the whole client.
struct Nvos00 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectOld;
  NvStatus status;
};
static_assert(sizeof(Nvos00) == 16);
static_assert(offsetof(Nvos00, hRoot) == 0 && offsetof(Nvos00, hObjectParent) == 4 &&
              offsetof(Nvos00, hObjectOld) == 8 && offsetof(Nvos00, status) == 12);

// src/common/sdk/nvidia/inc/nvos.h: NVOS02_PARAMETERS (NV_ESC_RM_ALLOC_MEMORY, the
// "Nv01AllocMemory" form; tinygrad uses it for NV01_MEMORY_SYSTEM_OS_DESCRIPTOR over existing
// user pages, pMemory = user VA, limit = size - 1, flags = NVOS02_FLAGS_*).
struct Nvos02 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectNew;
  uint32_t hClass;
  uint32_t flags;
  NvP64 pMemory;
  uint64_t limit;
  NvStatus status;
};
static_assert(sizeof(Nvos02) == 48);
static_assert(offsetof(Nvos02, hRoot) == 0 && offsetof(Nvos02, hObjectParent) == 4 &&
              offsetof(Nvos02, hObjectNew) == 8 && offsetof(Nvos02, hClass) == 12 &&
              offsetof(Nvos02, flags) == 16 && offsetof(Nvos02, pMemory) == 24 &&
              offsetof(Nvos02, limit) == 32 && offsetof(Nvos02, status) == 40);

// src/nvidia/arch/nvalloc/unix/include/nv-unix-nvos-params-wrappers.h:
// nv_ioctl_nvos02_parameters_with_fd. This escape must go to /dev/nvidiaN, not nvidiactl
// (escape.c NV_ACTUAL_DEVICE_ONLY); fd is only used when NV01_MEMORY_SYSTEM is to be mapped
// right away (-1 otherwise).
struct Nvos02WithFd {
  Nvos02 params;
  int32_t fd;
};
static_assert(sizeof(Nvos02WithFd) == 56);
static_assert(offsetof(Nvos02WithFd, params) == 0 && offsetof(Nvos02WithFd, fd) == 48);

// src/common/sdk/nvidia/inc/nvos.h: NVOS21_PARAMETERS and NVOS64_PARAMETERS, the two forms of
// NV_ESC_RM_ALLOC. The kernel tells them apart by the ioctl's _IOC_SIZE alone
// (src/nvidia/arch/nvalloc/unix/src/escape.c RmIoctl: bAccessApi = dataSize ==
// sizeof(NVOS64_PARAMETERS)): 32 bytes is NVOS21, 48 bytes is NVOS64 (adds pRightsRequested
// and flags, NVOS64_FLAGS_FINN_SERIALIZED); any other size is NV_ERR_INVALID_ARGUMENT. The
// leading fields line up (escape.c ct_asserts). For user-mode callers RM copies in as many
// bytes of *pAllocParms as the class's own parameter struct has, looked up by hClass
// (src/nvidia/src/kernel/rmapi/alloc_free.c, rmapiParamsCopyInit); paramsSize may be left 0.
// hObjectNew = 0 lets RM pick the handle. Every class but the NV01_EVENT* ones must be
// allocated through nvidiactl (NV_CTL_DEVICE_ONLY); a root (NV01_ROOT*) allocation is forced
// to NV01_ROOT_CLIENT.
struct Nvos21 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectNew;
  uint32_t hClass;
  NvP64 pAllocParms;
  uint32_t paramsSize;
  NvStatus status;
};
static_assert(sizeof(Nvos21) == 32);
static_assert(offsetof(Nvos21, hRoot) == 0 && offsetof(Nvos21, hObjectParent) == 4 &&
              offsetof(Nvos21, hObjectNew) == 8 && offsetof(Nvos21, hClass) == 12 &&
              offsetof(Nvos21, pAllocParms) == 16 && offsetof(Nvos21, paramsSize) == 24 &&
              offsetof(Nvos21, status) == 28);

inline constexpr uint32_t NVOS64_FLAGS_FINN_SERIALIZED = 0x1;
struct Nvos64 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectNew;
  uint32_t hClass;
  NvP64 pAllocParms;
  NvP64 pRightsRequested;
  uint32_t paramsSize;
  uint32_t flags;
  NvStatus status;
};
static_assert(sizeof(Nvos64) == 48);
static_assert(offsetof(Nvos64, hRoot) == 0 && offsetof(Nvos64, hObjectParent) == 4 &&
              offsetof(Nvos64, hObjectNew) == 8 && offsetof(Nvos64, hClass) == 12 &&
              offsetof(Nvos64, pAllocParms) == 16 && offsetof(Nvos64, pRightsRequested) == 24 &&
              offsetof(Nvos64, paramsSize) == 32 && offsetof(Nvos64, flags) == 36 &&
              offsetof(Nvos64, status) == 40);

// src/common/sdk/nvidia/inc/nvos.h: NVOS54_PARAMETERS (NV_ESC_RM_CONTROL). paramsSize must equal
// the control's registered parameter size, and params/paramsSize must be both set or both 0,
// else status = NV_ERR_INVALID_ARGUMENT (src/nvidia/src/kernel/rmapi/control.c).
struct Nvos54 {
  NvHandle hClient;
  NvHandle hObject;
  uint32_t cmd;
  uint32_t flags;
  NvP64 params;
  uint32_t paramsSize;
  NvStatus status;
};
static_assert(sizeof(Nvos54) == 32);
static_assert(offsetof(Nvos54, hClient) == 0 && offsetof(Nvos54, hObject) == 4 &&
              offsetof(Nvos54, cmd) == 8 && offsetof(Nvos54, flags) == 12 &&
              offsetof(Nvos54, params) == 16 && offsetof(Nvos54, paramsSize) == 24 &&
              offsetof(Nvos54, status) == 28);

// src/common/sdk/nvidia/inc/nvos.h: NVOS33_PARAMETERS (NV_ESC_RM_MAP_MEMORY, CPU mapping of a
// memory object) and NVOS34_PARAMETERS (NV_ESC_RM_UNMAP_MEMORY).
struct Nvos33 {
  NvHandle hClient;
  NvHandle hDevice;  // device or subdevice
  NvHandle hMemory;
  uint64_t offset;
  uint64_t length;
  NvP64 pLinearAddress;  // out: the address/offset the following mmap() uses
  NvStatus status;
  uint32_t flags;  // NVOS33_FLAGS_*
};
static_assert(sizeof(Nvos33) == 48);
static_assert(offsetof(Nvos33, hClient) == 0 && offsetof(Nvos33, hDevice) == 4 &&
              offsetof(Nvos33, hMemory) == 8 && offsetof(Nvos33, offset) == 16 &&
              offsetof(Nvos33, length) == 24 && offsetof(Nvos33, pLinearAddress) == 32 &&
              offsetof(Nvos33, status) == 40 && offsetof(Nvos33, flags) == 44);

// src/nvidia/arch/nvalloc/unix/include/nv-unix-nvos-params-wrappers.h:
// nv_ioctl_nvos33_parameters_with_fd. Sent to nvidiactl (NV_CTL_DEVICE_ONLY); fd is a
// /dev/nvidiaN fd registered with NV_ESC_REGISTER_FD (or nvidiactl for system memory, as
// tinygrad does). RM records an mmap context on that fd; the caller then mmap()s that fd at
// the wanted address (tinygrad: MAP_SHARED|MAP_FIXED, file offset 0).
struct Nvos33WithFd {
  Nvos33 params;
  int32_t fd;
};
static_assert(sizeof(Nvos33WithFd) == 56);
static_assert(offsetof(Nvos33WithFd, params) == 0 && offsetof(Nvos33WithFd, fd) == 48);

struct Nvos34 {
  NvHandle hClient;
  NvHandle hDevice;
  NvHandle hMemory;
  NvP64 pLinearAddress;
  NvStatus status;
  uint32_t flags;
};
static_assert(sizeof(Nvos34) == 32);
static_assert(offsetof(Nvos34, hClient) == 0 && offsetof(Nvos34, hDevice) == 4 &&
              offsetof(Nvos34, hMemory) == 8 && offsetof(Nvos34, pLinearAddress) == 16 &&
              offsetof(Nvos34, status) == 24 && offsetof(Nvos34, flags) == 28);

// src/common/sdk/nvidia/inc/nvos.h: NVOS46_PARAMETERS (NV_ESC_RM_MAP_MEMORY_DMA): map a memory
// object into a GPU VA space (hDma = an NV01_MEMORY_VIRTUAL object). tinygrad uses it with
// DMA_OFFSET_FIXED so the GPU VA equals its UVM-reserved VA before UVM_MAP_EXTERNAL_ALLOCATION.
// Drivers before 580 lack flags2/kindOverride: Nvos46V575 (section 12).
struct Nvos46 {
  NvHandle hClient;
  NvHandle hDevice;
  NvHandle hDma;
  NvHandle hMemory;
  uint64_t offset;
  uint64_t length;
  uint32_t flags;  // NVOS46_FLAGS_*
  uint32_t flags2;
  uint32_t kindOverride;
  uint64_t dmaOffset;  // in with DMA_OFFSET_FIXED, out otherwise
  NvStatus status;
};
static_assert(sizeof(Nvos46) == 64);
static_assert(offsetof(Nvos46, hClient) == 0 && offsetof(Nvos46, hDevice) == 4 &&
              offsetof(Nvos46, hDma) == 8 && offsetof(Nvos46, hMemory) == 12 &&
              offsetof(Nvos46, offset) == 16 && offsetof(Nvos46, length) == 24 &&
              offsetof(Nvos46, flags) == 32 && offsetof(Nvos46, flags2) == 36 &&
              offsetof(Nvos46, kindOverride) == 40 && offsetof(Nvos46, dmaOffset) == 48 &&
              offsetof(Nvos46, status) == 56);

// src/common/sdk/nvidia/inc/nvos.h: NVOS56_PARAMETERS (NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO).
struct Nvos56 {
  NvHandle hClient;
  NvHandle hDevice;
  NvHandle hMemory;
  NvP64 pOldCpuAddress;
  NvP64 pNewCpuAddress;
  NvStatus status;
};
static_assert(sizeof(Nvos56) == 40);
static_assert(offsetof(Nvos56, hClient) == 0 && offsetof(Nvos56, hDevice) == 4 &&
              offsetof(Nvos56, hMemory) == 8 && offsetof(Nvos56, pOldCpuAddress) == 16 &&
              offsetof(Nvos56, pNewCpuAddress) == 24 && offsetof(Nvos56, status) == 32);

// ============================================================================================
// 3. Class ids
// ============================================================================================

// src/common/sdk/nvidia/inc/nvos.h (NV01_ROOT_CLIENT, NV01_EVENT_OS_EVENT) and
// src/common/sdk/nvidia/inc/class/: cl0000.h cl0005.h cl003e.h cl0040.h cl0070.h cl0071.h
// cl0080.h cl2080.h cl90f1.h cla06c.h cl9067.h clc461.h clc661.h clc761.h clc56f.h clc86f.h
// clc96f.h clca6f.h clc6c0.h clc7c0.h clc9c0.h clcbc0.h clcdc0.h clcec0.h clc6b5.h clc7b5.h
// clc8b5.h clc9b5.h clcab5.h.
inline constexpr uint32_t NV01_ROOT = 0x0000;
inline constexpr uint32_t NV01_ROOT_NON_PRIV = 0x0001;
inline constexpr uint32_t NV01_ROOT_CLIENT = 0x0041;
inline constexpr uint32_t NV01_EVENT = 0x0005;
inline constexpr uint32_t NV01_EVENT_OS_EVENT = 0x0079;
inline constexpr uint32_t NV01_DEVICE_0 = 0x0080;
inline constexpr uint32_t NV20_SUBDEVICE_0 = 0x2080;
inline constexpr uint32_t NV01_MEMORY_SYSTEM = 0x003E;
inline constexpr uint32_t NV01_MEMORY_LOCAL_USER = 0x0040;
inline constexpr uint32_t NV01_MEMORY_VIRTUAL = 0x0070;
inline constexpr uint32_t NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x0071;
inline constexpr uint32_t TURING_USERMODE_A = 0xC461;
inline constexpr uint32_t HOPPER_USERMODE_A = 0xC661;
inline constexpr uint32_t BLACKWELL_USERMODE_A = 0xC761;
inline constexpr uint32_t FERMI_VASPACE_A = 0x90F1;
inline constexpr uint32_t KEPLER_CHANNEL_GROUP_A = 0xA06C;
inline constexpr uint32_t FERMI_CONTEXT_SHARE_A = 0x9067;
inline constexpr uint32_t AMPERE_CHANNEL_GPFIFO_A = 0xC56F;
inline constexpr uint32_t HOPPER_CHANNEL_GPFIFO_A = 0xC86F;
inline constexpr uint32_t BLACKWELL_CHANNEL_GPFIFO_A = 0xC96F;
inline constexpr uint32_t BLACKWELL_CHANNEL_GPFIFO_B = 0xCA6F;
inline constexpr uint32_t AMPERE_COMPUTE_A = 0xC6C0;
inline constexpr uint32_t AMPERE_COMPUTE_B = 0xC7C0;
inline constexpr uint32_t ADA_COMPUTE_A = 0xC9C0;
inline constexpr uint32_t HOPPER_COMPUTE_A = 0xCBC0;
inline constexpr uint32_t BLACKWELL_COMPUTE_A = 0xCDC0;
inline constexpr uint32_t BLACKWELL_COMPUTE_B = 0xCEC0;
inline constexpr uint32_t AMPERE_DMA_COPY_A = 0xC6B5;
inline constexpr uint32_t AMPERE_DMA_COPY_B = 0xC7B5;
inline constexpr uint32_t HOPPER_DMA_COPY_A = 0xC8B5;
inline constexpr uint32_t BLACKWELL_DMA_COPY_A = 0xC9B5;
inline constexpr uint32_t BLACKWELL_DMA_COPY_B = 0xCAB5;

// ============================================================================================
// 4. Allocation parameters (what Nvos21::pAllocParms points at, per class)
// ============================================================================================

// src/common/sdk/nvidia/inc/class/cl0080.h: NV0080_ALLOC_PARAMETERS (NV01_DEVICE_0, parent =
// client). deviceId = NV0000_CTRL_GPU_GET_ID_INFO_V2 deviceInstance. VA modes: nvos.h.
inline constexpr uint32_t NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES = 0;
inline constexpr uint32_t NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE = 1;
inline constexpr uint32_t NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES = 2;
struct DeviceAllocParams {
  uint32_t deviceId;
  NvHandle hClientShare;
  NvHandle hTargetClient;
  NvHandle hTargetDevice;
  uint32_t flags;  // NV_DEVICE_ALLOCATION_FLAGS_* (nvos.h)
  uint64_t vaSpaceSize;
  uint64_t vaStartInternal;
  uint64_t vaLimitInternal;
  uint32_t vaMode;
};
static_assert(sizeof(DeviceAllocParams) == 56);
static_assert(offsetof(DeviceAllocParams, deviceId) == 0 &&
              offsetof(DeviceAllocParams, hClientShare) == 4 &&
              offsetof(DeviceAllocParams, hTargetClient) == 8 &&
              offsetof(DeviceAllocParams, hTargetDevice) == 12 &&
              offsetof(DeviceAllocParams, flags) == 16 &&
              offsetof(DeviceAllocParams, vaSpaceSize) == 24 &&
              offsetof(DeviceAllocParams, vaStartInternal) == 32 &&
              offsetof(DeviceAllocParams, vaLimitInternal) == 40 &&
              offsetof(DeviceAllocParams, vaMode) == 48);

// src/common/sdk/nvidia/inc/class/cl2080.h: NV2080_ALLOC_PARAMETERS (NV20_SUBDEVICE_0, parent =
// device).
struct SubdeviceAllocParams {
  uint32_t subDeviceId;
};
static_assert(sizeof(SubdeviceAllocParams) == 4 &&
              offsetof(SubdeviceAllocParams, subDeviceId) == 0);

// src/common/sdk/nvidia/inc/nvos.h: NV_VASPACE_ALLOCATION_PARAMETERS (FERMI_VASPACE_A, parent =
// device) and its flags (BIT(n)) and index values. tinygrad: vaBase 0x1000, vaSize
// 0x1fffffb000000, flags ENABLE_PAGE_FAULTING | IS_EXTERNALLY_OWNED (UVM owns the page tables).
// pasid is new in 580; this 56-byte form also works on older drivers (section 12).
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_NONE = 0;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_MINIMIZE_PTETABLE_SIZE = 1u << 0;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_RETRY_PTE_ALLOC_IN_SYS = 1u << 1;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_SHARED_MANAGEMENT = 1u << 2;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1u << 3;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_ENABLE_NVLINK_ATS = 1u << 4;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1u << 6;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_VA_INTERNAL_LIMIT = 1u << 7;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_FLAGS_ALLOW_ZERO_ADDRESS = 1u << 8;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_INDEX_GPU_NEW = 0;
inline constexpr uint32_t NV_VASPACE_ALLOCATION_INDEX_GPU_HOST = 1;
struct VaspaceAllocParams {
  uint32_t index;
  uint32_t flags;
  uint64_t vaSize;
  uint64_t vaStartInternal;
  uint64_t vaLimitInternal;
  uint32_t bigPageSize;
  uint64_t vaBase;
  uint32_t pasid;
};
static_assert(sizeof(VaspaceAllocParams) == 56);
static_assert(offsetof(VaspaceAllocParams, index) == 0 &&
              offsetof(VaspaceAllocParams, flags) == 4 &&
              offsetof(VaspaceAllocParams, vaSize) == 8 &&
              offsetof(VaspaceAllocParams, vaStartInternal) == 16 &&
              offsetof(VaspaceAllocParams, vaLimitInternal) == 24 &&
              offsetof(VaspaceAllocParams, bigPageSize) == 32 &&
              offsetof(VaspaceAllocParams, vaBase) == 40 &&
              offsetof(VaspaceAllocParams, pasid) == 48);

// src/common/sdk/nvidia/inc/class/cl2080_notification.h: NV2080_ENGINE_TYPE_* (a TSG's engine,
// and info16 of an error notifier).
inline constexpr uint32_t NV2080_ENGINE_TYPE_NULL = 0x0;
inline constexpr uint32_t NV2080_ENGINE_TYPE_GRAPHICS = 0x1;
inline constexpr uint32_t NV2080_ENGINE_TYPE_GR0 = NV2080_ENGINE_TYPE_GRAPHICS;
inline constexpr uint32_t NV2080_ENGINE_TYPE_COPY0 = 0x9;
inline constexpr uint32_t NV2080_ENGINE_TYPE_COPY1 = 0xA;

// src/common/sdk/nvidia/inc/nvos.h: NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS (KEPLER_CHANNEL_GROUP_A
// = a TSG, parent = device).
struct ChannelGroupAllocParams {
  NvHandle hObjectError;
  NvHandle hObjectEccError;
  NvHandle hVASpace;
  uint32_t engineType;  // NV2080_ENGINE_TYPE_*
  NvBool bIsCallingContextVgpuPlugin;
};
static_assert(sizeof(ChannelGroupAllocParams) == 20);
static_assert(offsetof(ChannelGroupAllocParams, hObjectError) == 0 &&
              offsetof(ChannelGroupAllocParams, hObjectEccError) == 4 &&
              offsetof(ChannelGroupAllocParams, hVASpace) == 8 &&
              offsetof(ChannelGroupAllocParams, engineType) == 12 &&
              offsetof(ChannelGroupAllocParams, bIsCallingContextVgpuPlugin) == 16);

// src/common/sdk/nvidia/inc/nvos.h: NV_CTXSHARE_ALLOCATION_PARAMETERS (FERMI_CONTEXT_SHARE_A = a
// subcontext/VEID, parent = channel group). flags field SUBCONTEXT is bits 1:0, so these values
// are also the flag words.
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SHIFT = 0;
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC = 0;
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1;
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED = 2;
inline constexpr uint32_t NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC_PREFER_LOWER = 3;
struct CtxshareAllocParams {
  NvHandle hVASpace;
  uint32_t flags;
  uint32_t subctxId;
};
static_assert(sizeof(CtxshareAllocParams) == 12);
static_assert(offsetof(CtxshareAllocParams, hVASpace) == 0 &&
              offsetof(CtxshareAllocParams, flags) == 4 &&
              offsetof(CtxshareAllocParams, subctxId) == 8);

// src/common/sdk/nvidia/inc/alloc/alloc_channel.h: NV_MEMORY_DESC_PARAMS and
// NV_CHANNEL_ALLOC_PARAMS (= NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS) for the *_CHANNEL_GPFIFO_*
// classes, parent = channel group. NV_MAX_SUBDEVICES = 8 (src/common/sdk/nvidia/inc/nvlimits.h).
// The ring is gpFifoEntries 8-byte entries at GPU VA gpFifoOffset; USERD (struct Userd) sits at
// userdOffset[0] inside memory object hUserdMemory[0]; errors are written to the notifier
// memory hObjectError (struct Notification, index NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR).
inline constexpr size_t NV_MAX_SUBDEVICES = 8;
struct MemoryDescParams {
  uint64_t base;
  uint64_t size;
  uint32_t addressSpace;
  uint32_t cacheAttrib;
};
static_assert(sizeof(MemoryDescParams) == 24);
static_assert(offsetof(MemoryDescParams, base) == 0 && offsetof(MemoryDescParams, size) == 8 &&
              offsetof(MemoryDescParams, addressSpace) == 16 &&
              offsetof(MemoryDescParams, cacheAttrib) == 20);

inline constexpr size_t CC_CHAN_ALLOC_IV_SIZE_DWORD = 3;
inline constexpr size_t CC_CHAN_ALLOC_NONCE_SIZE_DWORD = 8;
struct ChannelAllocParams {
  NvHandle hObjectError;   // error notifier memory
  NvHandle hObjectBuffer;  // no longer used (tinygrad passes the ring's memory)
  uint64_t gpFifoOffset;
  uint32_t gpFifoEntries;
  uint32_t flags;  // NVOS04_FLAGS_*
  NvHandle hContextShare;
  NvHandle hVASpace;
  NvHandle hUserdMemory[NV_MAX_SUBDEVICES];
  uint64_t userdOffset[NV_MAX_SUBDEVICES];
  uint32_t engineType;
  uint32_t cid;
  uint32_t subDeviceId;
  NvHandle hObjectEccError;
  MemoryDescParams instanceMem;
  MemoryDescParams userdMem;
  MemoryDescParams ramfcMem;
  MemoryDescParams mthdbufMem;
  NvHandle hPhysChannelGroup;
  uint32_t internalFlags;
  MemoryDescParams errorNotifierMem;
  MemoryDescParams eccErrorNotifierMem;
  uint32_t ProcessID;
  uint32_t SubProcessID;
  uint32_t encryptIv[CC_CHAN_ALLOC_IV_SIZE_DWORD];
  uint32_t decryptIv[CC_CHAN_ALLOC_IV_SIZE_DWORD];
  uint32_t hmacNonce[CC_CHAN_ALLOC_NONCE_SIZE_DWORD];
  uint32_t tpcConfigID;
};
static_assert(sizeof(ChannelAllocParams) == 368);
static_assert(offsetof(ChannelAllocParams, hObjectError) == 0 &&
              offsetof(ChannelAllocParams, hObjectBuffer) == 4 &&
              offsetof(ChannelAllocParams, gpFifoOffset) == 8 &&
              offsetof(ChannelAllocParams, gpFifoEntries) == 16 &&
              offsetof(ChannelAllocParams, flags) == 20 &&
              offsetof(ChannelAllocParams, hContextShare) == 24 &&
              offsetof(ChannelAllocParams, hVASpace) == 28 &&
              offsetof(ChannelAllocParams, hUserdMemory) == 32 &&
              offsetof(ChannelAllocParams, userdOffset) == 64 &&
              offsetof(ChannelAllocParams, engineType) == 128 &&
              offsetof(ChannelAllocParams, cid) == 132 &&
              offsetof(ChannelAllocParams, subDeviceId) == 136 &&
              offsetof(ChannelAllocParams, hObjectEccError) == 140 &&
              offsetof(ChannelAllocParams, instanceMem) == 144 &&
              offsetof(ChannelAllocParams, userdMem) == 168 &&
              offsetof(ChannelAllocParams, ramfcMem) == 192 &&
              offsetof(ChannelAllocParams, mthdbufMem) == 216 &&
              offsetof(ChannelAllocParams, hPhysChannelGroup) == 240 &&
              offsetof(ChannelAllocParams, internalFlags) == 244 &&
              offsetof(ChannelAllocParams, errorNotifierMem) == 248 &&
              offsetof(ChannelAllocParams, eccErrorNotifierMem) == 272 &&
              offsetof(ChannelAllocParams, ProcessID) == 296 &&
              offsetof(ChannelAllocParams, SubProcessID) == 300 &&
              offsetof(ChannelAllocParams, encryptIv) == 304 &&
              offsetof(ChannelAllocParams, decryptIv) == 316 &&
              offsetof(ChannelAllocParams, hmacNonce) == 328 &&
              offsetof(ChannelAllocParams, tpcConfigID) == 360);

// src/common/sdk/nvidia/inc/nvos.h: NV_MEMORY_ALLOCATION_PARAMS, for NV01_MEMORY_LOCAL_USER
// (vidmem) and NV01_MEMORY_SYSTEM (sysmem), parent = device. attr/attr2/flags/type below.
// tinygrad: owner = client, type IMAGE (vidmem) or NOTIFIER (sysmem), format 6, size,
// alignment = page size, limit = size - 1.
struct MemoryAllocParams {
  uint32_t owner;
  uint32_t type;   // NVOS32_TYPE_*
  uint32_t flags;  // NVOS32_ALLOC_FLAGS_*
  uint32_t width;
  uint32_t height;
  int32_t pitch;
  uint32_t attr;   // NVOS32_ATTR_*
  uint32_t attr2;  // NVOS32_ATTR2_*
  uint32_t format;
  uint32_t comprCovg;
  uint32_t zcullCovg;
  uint64_t rangeLo;
  uint64_t rangeHi;
  uint64_t size;
  uint64_t alignment;
  uint64_t offset;
  uint64_t limit;
  NvP64 address;
  uint32_t ctagOffset;
  NvHandle hVASpace;
  uint32_t internalflags;
  uint32_t tag;
  int32_t numaNode;
};
static_assert(sizeof(MemoryAllocParams) == 128);
static_assert(offsetof(MemoryAllocParams, owner) == 0 && offsetof(MemoryAllocParams, type) == 4 &&
              offsetof(MemoryAllocParams, flags) == 8 && offsetof(MemoryAllocParams, width) == 12 &&
              offsetof(MemoryAllocParams, height) == 16 &&
              offsetof(MemoryAllocParams, pitch) == 20 && offsetof(MemoryAllocParams, attr) == 24 &&
              offsetof(MemoryAllocParams, attr2) == 28 &&
              offsetof(MemoryAllocParams, format) == 32 &&
              offsetof(MemoryAllocParams, comprCovg) == 36 &&
              offsetof(MemoryAllocParams, zcullCovg) == 40 &&
              offsetof(MemoryAllocParams, rangeLo) == 48 &&
              offsetof(MemoryAllocParams, rangeHi) == 56 &&
              offsetof(MemoryAllocParams, size) == 64 &&
              offsetof(MemoryAllocParams, alignment) == 72 &&
              offsetof(MemoryAllocParams, offset) == 80 &&
              offsetof(MemoryAllocParams, limit) == 88 &&
              offsetof(MemoryAllocParams, address) == 96 &&
              offsetof(MemoryAllocParams, ctagOffset) == 104 &&
              offsetof(MemoryAllocParams, hVASpace) == 108 &&
              offsetof(MemoryAllocParams, internalflags) == 112 &&
              offsetof(MemoryAllocParams, tag) == 116 &&
              offsetof(MemoryAllocParams, numaNode) == 120);

// src/common/sdk/nvidia/inc/nvos.h: NVOS32_TYPE_* (MemoryAllocParams::type).
inline constexpr uint32_t NVOS32_TYPE_IMAGE = 0;
inline constexpr uint32_t NVOS32_TYPE_DMA = 6;
inline constexpr uint32_t NVOS32_TYPE_NOTIFIER = 13;

// src/common/sdk/nvidia/inc/nvos.h: NVOS32_ATTR_* (MemoryAllocParams::attr). Each field is
// (value << _SHIFT); the field's bit range is in the comment.
inline constexpr uint32_t NVOS32_ATTR_PAGE_SIZE_SHIFT = 23;  // 24:23
inline constexpr uint32_t NVOS32_ATTR_PAGE_SIZE_DEFAULT = 0;
inline constexpr uint32_t NVOS32_ATTR_PAGE_SIZE_4KB = 1;
inline constexpr uint32_t NVOS32_ATTR_PAGE_SIZE_BIG = 2;
inline constexpr uint32_t NVOS32_ATTR_PAGE_SIZE_HUGE = 3;
inline constexpr uint32_t NVOS32_ATTR_LOCATION_SHIFT = 25;  // 26:25
inline constexpr uint32_t NVOS32_ATTR_LOCATION_VIDMEM = 0;
inline constexpr uint32_t NVOS32_ATTR_LOCATION_PCI = 1;
inline constexpr uint32_t NVOS32_ATTR_LOCATION_ANY = 3;
inline constexpr uint32_t NVOS32_ATTR_PHYSICALITY_SHIFT = 27;  // 28:27
inline constexpr uint32_t NVOS32_ATTR_PHYSICALITY_DEFAULT = 0;
inline constexpr uint32_t NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS = 1;
inline constexpr uint32_t NVOS32_ATTR_PHYSICALITY_CONTIGUOUS = 2;
inline constexpr uint32_t NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS = 3;
inline constexpr uint32_t NVOS32_ATTR_COHERENCY_SHIFT = 29;  // 31:29
inline constexpr uint32_t NVOS32_ATTR_COHERENCY_UNCACHED = 0;
inline constexpr uint32_t NVOS32_ATTR_COHERENCY_CACHED = 1;
inline constexpr uint32_t NVOS32_ATTR_COHERENCY_WRITE_COMBINE = 2;

// src/common/sdk/nvidia/inc/nvos.h: NVOS32_ATTR2_* (MemoryAllocParams::attr2).
inline constexpr uint32_t NVOS32_ATTR2_ZBC_SHIFT = 0;  // 1:0
inline constexpr uint32_t NVOS32_ATTR2_ZBC_DEFAULT = 0;
inline constexpr uint32_t NVOS32_ATTR2_ZBC_PREFER_NO_ZBC = 1;
inline constexpr uint32_t NVOS32_ATTR2_GPU_CACHEABLE_SHIFT = 2;  // 3:2
inline constexpr uint32_t NVOS32_ATTR2_GPU_CACHEABLE_DEFAULT = 0;
inline constexpr uint32_t NVOS32_ATTR2_GPU_CACHEABLE_YES = 1;
inline constexpr uint32_t NVOS32_ATTR2_GPU_CACHEABLE_NO = 2;
inline constexpr uint32_t NVOS32_ATTR2_P2P_GPU_CACHEABLE_SHIFT = 4;  // 5:4
inline constexpr uint32_t NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT = 20;  // 21:20
inline constexpr uint32_t NVOS32_ATTR2_PAGE_SIZE_HUGE_DEFAULT = 0;
inline constexpr uint32_t NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB = 1;
inline constexpr uint32_t NVOS32_ATTR2_PAGE_SIZE_HUGE_512MB = 2;
inline constexpr uint32_t NVOS32_ATTR2_PROTECTION_USER_SHIFT = 22;  // 22:22
inline constexpr uint32_t NVOS32_ATTR2_PROTECTION_USER_READ_WRITE = 0;
inline constexpr uint32_t NVOS32_ATTR2_PROTECTION_USER_READ_ONLY = 1;

// src/common/sdk/nvidia/inc/nvos.h: NVOS32_ALLOC_FLAGS_* (MemoryAllocParams::flags), plain bits.
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT = 0x00000001;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE = 0x00000010;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_ALIGNMENT_HINT = 0x00000080;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE = 0x00000100;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED = 0x00004000;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED = 0x00008000;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM = 0x00010000;
inline constexpr uint32_t NVOS32_ALLOC_FLAGS_VIRTUAL = 0x00080000;

// src/common/sdk/nvidia/inc/nvos.h: NVOS02_FLAGS_* (Nvos02::flags), (value << _SHIFT). tinygrad's
// host memory: PHYSICALITY_NONCONTIGUOUS | COHERENCY_CACHED | MAPPING_NO_MAP.
inline constexpr uint32_t NVOS02_FLAGS_PHYSICALITY_SHIFT = 4;  // 7:4
inline constexpr uint32_t NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS = 0;
inline constexpr uint32_t NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS = 1;
inline constexpr uint32_t NVOS02_FLAGS_COHERENCY_SHIFT = 12;  // 15:12
inline constexpr uint32_t NVOS02_FLAGS_COHERENCY_UNCACHED = 0;
inline constexpr uint32_t NVOS02_FLAGS_COHERENCY_CACHED = 1;
inline constexpr uint32_t NVOS02_FLAGS_COHERENCY_WRITE_COMBINE = 2;
inline constexpr uint32_t NVOS02_FLAGS_COHERENCY_WRITE_BACK = 5;
inline constexpr uint32_t NVOS02_FLAGS_ALLOC_SHIFT = 16;  // 17:16
inline constexpr uint32_t NVOS02_FLAGS_ALLOC_NONE = 1;
inline constexpr uint32_t NVOS02_FLAGS_MAPPING_SHIFT = 30;  // 31:30
inline constexpr uint32_t NVOS02_FLAGS_MAPPING_DEFAULT = 0;
inline constexpr uint32_t NVOS02_FLAGS_MAPPING_NO_MAP = 1;
inline constexpr uint32_t NVOS02_FLAGS_MAPPING_NEVER_MAP = 2;

// src/common/sdk/nvidia/inc/nvos.h: NVOS33_FLAGS_* (Nvos33::flags, CPU mapping), (value <<
// _SHIFT). tinygrad asks for CACHING_TYPE_WRITECOMBINED on the GPFIFO/USERD area, but this
// kernel's escape.c (NV_ESC_RM_MAP_MEMORY) overwrites CACHING_TYPE with DEFAULT before RM sees
// it ("Don't allow userspace to override the caching type"), so RM picks the caching. MAPPING
// DEFAULT uses a direct mapping when possible (no BAR1), else BAR1 ("reflected").
inline constexpr uint32_t NVOS33_FLAGS_ACCESS_SHIFT = 0;  // 1:0
inline constexpr uint32_t NVOS33_FLAGS_ACCESS_READ_WRITE = 0;
inline constexpr uint32_t NVOS33_FLAGS_ACCESS_READ_ONLY = 1;
inline constexpr uint32_t NVOS33_FLAGS_ACCESS_WRITE_ONLY = 2;
inline constexpr uint32_t NVOS33_FLAGS_MAPPING_SHIFT = 15;  // 16:15
inline constexpr uint32_t NVOS33_FLAGS_MAPPING_DEFAULT = 0;
inline constexpr uint32_t NVOS33_FLAGS_MAPPING_DIRECT = 1;
inline constexpr uint32_t NVOS33_FLAGS_MAPPING_REFLECTED = 2;
inline constexpr uint32_t NVOS33_FLAGS_MAP_FIXED_SHIFT = 18;  // 18:18
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_SHIFT = 23;  // 25:23
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_CACHED = 0;
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_UNCACHED = 1;
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED = 2;
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_WRITEBACK = 5;
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_DEFAULT = 6;
inline constexpr uint32_t NVOS33_FLAGS_CACHING_TYPE_UNCACHED_WEAK = 7;

// src/common/sdk/nvidia/inc/nvos.h: NVOS46_FLAGS_* (Nvos46::flags, GPU VA mapping). tinygrad:
// PAGE_SIZE_4KB | CACHE_SNOOP_ENABLE | DMA_OFFSET_FIXED_TRUE.
inline constexpr uint32_t NVOS46_FLAGS_ACCESS_SHIFT = 0;  // 1:0
inline constexpr uint32_t NVOS46_FLAGS_CACHE_SNOOP_SHIFT = 4;  // 4:4
inline constexpr uint32_t NVOS46_FLAGS_CACHE_SNOOP_DISABLE = 0;
inline constexpr uint32_t NVOS46_FLAGS_CACHE_SNOOP_ENABLE = 1;
inline constexpr uint32_t NVOS46_FLAGS_PAGE_SIZE_SHIFT = 8;  // 11:8
inline constexpr uint32_t NVOS46_FLAGS_PAGE_SIZE_DEFAULT = 0;
inline constexpr uint32_t NVOS46_FLAGS_PAGE_SIZE_4KB = 1;
inline constexpr uint32_t NVOS46_FLAGS_PAGE_SIZE_BIG = 2;
inline constexpr uint32_t NVOS46_FLAGS_PAGE_SIZE_HUGE = 4;
inline constexpr uint32_t NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT = 15;  // 15:15
inline constexpr uint32_t NVOS46_FLAGS_DMA_OFFSET_FIXED_FALSE = 0;
inline constexpr uint32_t NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE = 1;

// src/common/sdk/nvidia/inc/class/cl0070.h: NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS
// (NV01_MEMORY_VIRTUAL, the hDma of Nvos46). hVASpace 0 (NV01_NULL_OBJECT) selects the device's
// default GPU VA space; limit 0 means the maximum. tinygrad: limit 0x1ffffffffffff, hVASpace 0.
struct MemoryVirtualAllocParams {
  uint64_t offset;
  uint64_t limit;
  NvHandle hVASpace;
};
static_assert(sizeof(MemoryVirtualAllocParams) == 24);
static_assert(offsetof(MemoryVirtualAllocParams, offset) == 0 &&
              offsetof(MemoryVirtualAllocParams, limit) == 8 &&
              offsetof(MemoryVirtualAllocParams, hVASpace) == 16);

// src/common/sdk/nvidia/inc/class/cl0005.h: NV0005_ALLOC_PARAMETERS (NV01_EVENT*, parent = the
// object whose notifier index is watched; notifyIndex bits 15:0 index, 23:16 subdevice,
// 31:24 flags).
struct EventAllocParams {
  NvHandle hParentClient;
  NvHandle hSrcResource;
  uint32_t hClass;
  uint32_t notifyIndex;
  NvP64 data;
};
static_assert(sizeof(EventAllocParams) == 24);
static_assert(offsetof(EventAllocParams, hParentClient) == 0 &&
              offsetof(EventAllocParams, hSrcResource) == 4 &&
              offsetof(EventAllocParams, hClass) == 8 &&
              offsetof(EventAllocParams, notifyIndex) == 12 &&
              offsetof(EventAllocParams, data) == 16);

// ============================================================================================
// 5. Control commands (Nvos54::cmd) and their parameters
// ============================================================================================
// A command is (interface id << 8 | message id) inside the class's 0xCCCC0000 range; all
// values below are the "finn: Evaluated from" literals of the named headers.

// src/common/sdk/nvidia/inc/nvlimits.h
inline constexpr size_t NV_MAX_DEVICES = 32;

// src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000system.h (on the client)
inline constexpr uint32_t NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 = 0x13E;
inline constexpr size_t NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE = 256;
struct BuildVersionV2Params {
  char driverVersionBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
  char versionBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
  char driverBranch[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
  char titleBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
  uint32_t changelistNumber;
  uint32_t officialChangelistNumber;
};
static_assert(sizeof(BuildVersionV2Params) == 1032);
static_assert(offsetof(BuildVersionV2Params, driverVersionBuffer) == 0 &&
              offsetof(BuildVersionV2Params, versionBuffer) == 256 &&
              offsetof(BuildVersionV2Params, driverBranch) == 512 &&
              offsetof(BuildVersionV2Params, titleBuffer) == 768 &&
              offsetof(BuildVersionV2Params, changelistNumber) == 1024 &&
              offsetof(BuildVersionV2Params, officialChangelistNumber) == 1028);

// src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000unix.h (on the client): an RM object
// exported to an open /dev/nvidiactl fd (the fd is an input at the ioctl level), which another
// process receives and imports into its own client under a handle it picks.
inline constexpr uint32_t NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD = 0x3d05;
inline constexpr uint32_t NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD = 0x3d06;
inline constexpr uint32_t NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM = 1;
struct OsUnixExportObject {  // NV0000_CTRL_OS_UNIX_EXPORT_OBJECT, type RM
  uint32_t type;
  NvHandle hDevice, hParent, hObject;
};
struct OsUnixExportObjectToFdParams {
  OsUnixExportObject object;
  int32_t fd;
  uint32_t flags;  // 0: EMPTY_FD_FALSE
};
struct OsUnixImportObjectFromFdParams {
  int32_t fd;
  OsUnixExportObject object;
};
static_assert(sizeof(OsUnixExportObjectToFdParams) == 24 &&
              offsetof(OsUnixExportObjectToFdParams, fd) == 16 &&
              offsetof(OsUnixExportObjectToFdParams, flags) == 20);
static_assert(sizeof(OsUnixImportObjectFromFdParams) == 20 &&
              offsetof(OsUnixImportObjectFromFdParams, object) == 4);

// src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000gpu.h (on the client)
inline constexpr uint32_t NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS = 0x201;
inline constexpr uint32_t NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 = 0x205;
inline constexpr uint32_t NV0000_CTRL_CMD_GPU_GET_PROBED_IDS = 0x214;
// Attaches (initializes in RM) probed GPUs by gpuId; NV0000_CTRL_GPU_ATTACH_ALL_PROBED_IDS in
// gpuIds[0] attaches all. tinygrad's bring-up does not issue it (it opens /dev/nvidiaN and
// allocates NV01_DEVICE_0 directly).
inline constexpr uint32_t NV0000_CTRL_CMD_GPU_ATTACH_IDS = 0x215;
inline constexpr uint32_t NV0000_CTRL_GPU_ATTACH_ALL_PROBED_IDS = 0x0000ffff;
inline constexpr uint32_t NV0000_CTRL_GPU_INVALID_ID = 0xffffffff;
inline constexpr size_t NV0000_CTRL_GPU_MAX_PROBED_GPUS = NV_MAX_DEVICES;
inline constexpr size_t NV0000_CTRL_GPU_MAX_ATTACHED_GPUS = 32;

struct GpuGetAttachedIdsParams {
  uint32_t gpuIds[NV0000_CTRL_GPU_MAX_ATTACHED_GPUS];  // NV0000_CTRL_GPU_INVALID_ID-terminated
};
static_assert(sizeof(GpuGetAttachedIdsParams) == 128 &&
              offsetof(GpuGetAttachedIdsParams, gpuIds) == 0);

struct GpuGetIdInfoV2Params {
  uint32_t gpuId;  // in: CardInfo::gpu_id
  uint32_t gpuFlags;
  uint32_t deviceInstance;  // -> DeviceAllocParams::deviceId
  uint32_t subDeviceInstance;
  uint32_t sliStatus;
  uint32_t boardId;
  uint32_t gpuInstance;
  int32_t numaId;
};
static_assert(sizeof(GpuGetIdInfoV2Params) == 32);
static_assert(offsetof(GpuGetIdInfoV2Params, gpuId) == 0 &&
              offsetof(GpuGetIdInfoV2Params, gpuFlags) == 4 &&
              offsetof(GpuGetIdInfoV2Params, deviceInstance) == 8 &&
              offsetof(GpuGetIdInfoV2Params, subDeviceInstance) == 12 &&
              offsetof(GpuGetIdInfoV2Params, sliStatus) == 16 &&
              offsetof(GpuGetIdInfoV2Params, boardId) == 20 &&
              offsetof(GpuGetIdInfoV2Params, gpuInstance) == 24 &&
              offsetof(GpuGetIdInfoV2Params, numaId) == 28);

// gpuFlags is new in 580; older drivers: GpuGetProbedIdsParamsV575.
struct GpuGetProbedIdsParams {
  uint32_t gpuIds[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
  uint32_t excludedGpuIds[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
  uint32_t gpuFlags[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
};
static_assert(sizeof(GpuGetProbedIdsParams) == 384);
static_assert(offsetof(GpuGetProbedIdsParams, gpuIds) == 0 &&
              offsetof(GpuGetProbedIdsParams, excludedGpuIds) == 128 &&
              offsetof(GpuGetProbedIdsParams, gpuFlags) == 256);

struct GpuAttachIdsParams {
  uint32_t gpuIds[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
  uint32_t failedId;
};
static_assert(sizeof(GpuAttachIdsParams) == 132);
static_assert(offsetof(GpuAttachIdsParams, gpuIds) == 0 &&
              offsetof(GpuAttachIdsParams, failedId) == 128);

// src/common/sdk/nvidia/inc/ctrl/ctrl0080/ctrl0080gpu.h (on the device). V1 takes a user
// pointer (call once with numClasses = 0 to get the count, as tinygrad does); V2 returns up
// to NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE ids inline (100 before 580: ClassListV2ParamsV575).
inline constexpr uint32_t NV0080_CTRL_CMD_GPU_GET_CLASSLIST = 0x800201;
inline constexpr uint32_t NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800292;
inline constexpr size_t NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE = 200;
struct ClassListParams {
  uint32_t numClasses;
  NvP64 classList;  // uint32_t[numClasses]
};
static_assert(sizeof(ClassListParams) == 16);
static_assert(offsetof(ClassListParams, numClasses) == 0 &&
              offsetof(ClassListParams, classList) == 8);
struct ClassListV2Params {
  uint32_t numClasses;
  uint32_t classList[NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE];
};
static_assert(sizeof(ClassListV2Params) == 804);
static_assert(offsetof(ClassListV2Params, numClasses) == 0 &&
              offsetof(ClassListV2Params, classList) == 4);

// src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080gpu.h (on the subdevice): GID = the GPU
// UUID. With FORMAT_BINARY (and TYPE_SHA1 = 0) RM returns 16 raw bytes, tinygrad's
// NvProcessorUuid for UVM. NV2080_GPU_MAX_GID_LENGTH = 0x100.
inline constexpr uint32_t NV2080_CTRL_CMD_GPU_GET_NAME_STRING = 0x20800110;
inline constexpr uint32_t NV2080_CTRL_CMD_GPU_GET_GID_INFO = 0x2080014A;
inline constexpr size_t NV2080_GPU_MAX_GID_LENGTH = 0x100;
inline constexpr size_t NV2080_GPU_MAX_SHA1_BINARY_GID_LENGTH = 0x10;
inline constexpr uint32_t NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_ASCII = 0x0;   // bits 1:0
inline constexpr uint32_t NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY = 0x2;  // bits 1:0
struct GpuGetGidInfoParams {
  uint32_t index;
  uint32_t flags;
  uint32_t length;
  uint8_t data[NV2080_GPU_MAX_GID_LENGTH];
};
static_assert(sizeof(GpuGetGidInfoParams) == 268);
static_assert(offsetof(GpuGetGidInfoParams, index) == 0 &&
              offsetof(GpuGetGidInfoParams, flags) == 4 &&
              offsetof(GpuGetGidInfoParams, length) == 8 &&
              offsetof(GpuGetGidInfoParams, data) == 12);

// gpuNameStringFlags is a plain scalar now; ASCII (0) is the only value. Before 595 the
// string was a union with unicode[64]: GpuGetNameStringParamsV590.
inline constexpr size_t NV2080_GPU_MAX_NAME_STRING_LENGTH = 0x40;
inline constexpr uint32_t NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII = 0;
struct GpuGetNameStringParams {
  uint32_t gpuNameStringFlags;
  uint8_t ascii[NV2080_GPU_MAX_NAME_STRING_LENGTH];  // NVIDIA: gpuNameString.ascii
};
static_assert(sizeof(GpuGetNameStringParams) == 68);
static_assert(offsetof(GpuGetNameStringParams, gpuNameStringFlags) == 0 &&
              offsetof(GpuGetNameStringParams, ascii) == 4);

// src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080mc.h (on the subdevice)
inline constexpr uint32_t NV2080_CTRL_CMD_MC_GET_ARCH_INFO = 0x20801701;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_TU100 = 0x160;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100 = 0x170;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100 = 0x180;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_AD100 = 0x190;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB100 = 0x1A0;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB200 = 0x1B0;  // GB20x
// A few implementations (same header): GA102 = 2, GA104 = 4, AD102 = 2, GB202 = 2, ...
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA100 = 0x0;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA102 = 0x2;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GH100 = 0x0;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_AD102 = 0x2;
inline constexpr uint32_t NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GB202 = 0x2;
struct McGetArchInfoParams {
  uint32_t architecture;
  uint32_t implementation;
  uint32_t revision;
  uint8_t subRevision;
};
static_assert(sizeof(McGetArchInfoParams) == 16);
static_assert(offsetof(McGetArchInfoParams, architecture) == 0 &&
              offsetof(McGetArchInfoParams, implementation) == 4 &&
              offsetof(McGetArchInfoParams, revision) == 8 &&
              offsetof(McGetArchInfoParams, subRevision) == 12);

// src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080gr.h, ctrl0080/ctrl0080gr.h (index values and
// NV0080_CTRL_GR_ROUTE_INFO) and ctrl/ctrlxxxx.h (NVXXXX_CTRL_XXX_INFO = {index, data}).
// grInfoList points at grInfoListSize GrInfo entries; RM fills each data.
inline constexpr uint32_t NV2080_CTRL_CMD_GR_GET_INFO = 0x20801201;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_SM_VERSION = 0x0C;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM = 0x0D;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS = 0x14;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC = 0x17;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT = 0x1D;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC = 0x20;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_INDEX_MAX = 0x3A;
// SM_VERSION data is major << 8 | minor (two hex digits): 8.6 = 0x806, 9.0 = 0x900.
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_8_2 = 0x802;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_8_6 = 0x806;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_8_7 = 0x807;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_8_9 = 0x809;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_9_0 = 0x900;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_10_0 = 0xA00;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_10_1 = 0xA01;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_10_3 = 0xA03;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_10_4 = 0xA04;  // tinygrad: sm_120
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_12_00 = 0xC00;
inline constexpr uint32_t NV2080_CTRL_GR_INFO_SM_VERSION_12_01 = 0xC01;
struct GrInfo {
  uint32_t index;
  uint32_t data;
};
static_assert(sizeof(GrInfo) == 8 && offsetof(GrInfo, index) == 0 && offsetof(GrInfo, data) == 4);
struct GrRouteInfo {
  uint32_t flags;
  uint64_t route;
};
static_assert(sizeof(GrRouteInfo) == 16);
static_assert(offsetof(GrRouteInfo, flags) == 0 && offsetof(GrRouteInfo, route) == 8);
struct GrGetInfoParams {
  uint32_t grInfoListSize;
  NvP64 grInfoList;  // GrInfo[grInfoListSize]
  GrRouteInfo grRouteInfo;
};
static_assert(sizeof(GrGetInfoParams) == 32);
static_assert(offsetof(GrGetInfoParams, grInfoListSize) == 0 &&
              offsetof(GrGetInfoParams, grInfoList) == 8 &&
              offsetof(GrGetInfoParams, grRouteInfo) == 16);

// ctrl2080gr.h: the enabled (not floorswept) GPCs, and each enabled GPC's enabled TPCs; the
// SMs a GPU runs are the TPCs counted so, times LITTER_NUM_SM_PER_TPC. A GPC that is not
// enabled reports a TPC mask of 0.
inline constexpr uint32_t NV2080_CTRL_CMD_GR_GET_GPC_MASK = 0x2080122a;
inline constexpr uint32_t NV2080_CTRL_CMD_GR_GET_TPC_MASK = 0x2080122b;
struct GrGetGpcMaskParams {
  GrRouteInfo grRouteInfo;
  uint32_t gpcMask;
};
static_assert(sizeof(GrGetGpcMaskParams) == 24 && offsetof(GrGetGpcMaskParams, gpcMask) == 16);
struct GrGetTpcMaskParams {
  GrRouteInfo grRouteInfo;
  uint32_t gpcId;
  uint32_t tpcMask;
};
static_assert(sizeof(GrGetTpcMaskParams) == 24 && offsetof(GrGetTpcMaskParams, gpcId) == 16 &&
              offsetof(GrGetTpcMaskParams, tpcMask) == 20);

// src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080fb.h (on the subdevice). RAM sizes are in
// KiB: RAM_SIZE = framebuffer physically present, TOTAL_RAM_SIZE = all video memory for the
// subdevice (FB plus any dedicated system memory); RAM_SIZE never exceeds TOTAL_RAM_SIZE.
// The V2 list holds 0x80 entries from 580 on, 0x39 before (FbGetInfoV2ParamsV575).
inline constexpr uint32_t NV2080_CTRL_CMD_FB_GET_INFO_V2 = 0x20801303;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_BAR1_SIZE = 0x05;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE = 0x07;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE = 0x08;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE = 0x09;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE = 0x16;
inline constexpr uint32_t NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE = 0x20;
inline constexpr size_t NV2080_CTRL_FB_INFO_MAX_LIST_SIZE = 0x80;
struct FbInfo {
  uint32_t index;
  uint32_t data;
};
static_assert(sizeof(FbInfo) == 8 && offsetof(FbInfo, index) == 0 && offsetof(FbInfo, data) == 4);
struct FbGetInfoV2Params {
  uint32_t fbInfoListSize;
  FbInfo fbInfoList[NV2080_CTRL_FB_INFO_MAX_LIST_SIZE];
};
static_assert(sizeof(FbGetInfoV2Params) == 1028);
static_assert(offsetof(FbGetInfoV2Params, fbInfoListSize) == 0 &&
              offsetof(FbGetInfoV2Params, fbInfoList) == 4);

// src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080perf.h (on the subdevice). tinygrad:
// flags = CUDA_YES << 4 | CUDA_PRIORITY_HIGH << 6 | CMD_BOOST_TO_MAX, duration = INFINITE.
inline constexpr uint32_t NV2080_CTRL_CMD_PERF_BOOST = 0x2080200A;
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CMD_CLEAR = 0;         // bits 1:0
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_1LEVEL = 1;
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX = 2;
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_SHIFT = 4;        // 4:4
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES = 1;
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_ASYNC_SHIFT = 5;       // 5:5
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_SHIFT = 6;  // 6:6
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH = 1;
inline constexpr uint32_t NV2080_CTRL_PERF_BOOST_DURATION_INFINITE = 0xffffffff;
struct PerfBoostParams {
  uint32_t flags;
  uint32_t duration;  // seconds (at most 3600) or DURATION_INFINITE
};
static_assert(sizeof(PerfBoostParams) == 8);
static_assert(offsetof(PerfBoostParams, flags) == 0 && offsetof(PerfBoostParams, duration) == 4);

// src/common/sdk/nvidia/inc/ctrl/ctrlc36f.h (on a GPFIFO channel): the token written to the
// usermode doorbell (NVC361_NOTIFY_CHANNEL_PENDING) to make host fetch the channel's work.
// tinygrad seeds workSubmitToken with -1.
inline constexpr uint32_t NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108;
struct WorkSubmitTokenParams {
  uint32_t workSubmitToken;
};
static_assert(sizeof(WorkSubmitTokenParams) == 4 &&
              offsetof(WorkSubmitTokenParams, workSubmitToken) == 0);

// src/common/sdk/nvidia/inc/ctrl/ctrla06c.h (on a channel group, = NVA06F_CTRL_GPFIFO_SCHEDULE_
// PARAMS of ctrl/ctrla06f/ctrla06fgpfifo.h): enable the TSG's channels on the runlist.
// bSkipEnable is new in 575; 570 and older: GpfifoScheduleParamsV570.
inline constexpr uint32_t NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101;
inline constexpr uint32_t NVA06F_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06F0103;  // same, one channel
struct GpfifoScheduleParams {
  NvBool bEnable;
  NvBool bSkipSubmit;
  NvBool bSkipEnable;
};
static_assert(sizeof(GpfifoScheduleParams) == 3);
static_assert(offsetof(GpfifoScheduleParams, bEnable) == 0 &&
              offsetof(GpfifoScheduleParams, bSkipSubmit) == 1 &&
              offsetof(GpfifoScheduleParams, bSkipEnable) == 2);

// ============================================================================================
// 6. Usermode (doorbell) page
// ============================================================================================

// src/common/sdk/nvidia/inc/class/clc361.h (VOLTA_USERMODE_A; TURING/HOPPER/BLACKWELL_USERMODE_A
// keep its layout): a 64 KiB MMIO window (NVC361_NV_USERMODE__SIZE), CPU-mapped with
// NV_ESC_RM_MAP_MEMORY on the usermode object (parent = subdevice). Writing a channel's work
// submit token to NOTIFY_CHANNEL_PENDING rings its doorbell.
inline constexpr size_t kUsermodeMapBytes = 0x10000;
inline constexpr uint32_t NVC361_TIME_0 = 0x80;
inline constexpr uint32_t NVC361_TIME_1 = 0x84;
inline constexpr uint32_t NVC361_NOTIFY_CHANNEL_PENDING = 0x90;

// ============================================================================================
// 7. USERD: the GPFIFO channel's control area
// ============================================================================================

// src/common/sdk/nvidia/inc/class/clc56f.h Nvc56fControl / AmpereAControlGPFifo (clc86f.h
// Hopper is identical; clc96f.h/clca6f.h Blackwell name only GPPut at the same 0x8c). Plain
// fields: access them as volatile/atomic. The driver advances GPPut (an entry index into the
// ring) and rings the doorbell; host advances GPGet.
struct Userd {
  uint32_t Ignored00[0x10];
  uint32_t Put;
  uint32_t Get;
  uint32_t Reference;
  uint32_t PutHi;
  uint32_t Ignored01[0x2];
  uint32_t TopLevelGet;
  uint32_t TopLevelGetHi;
  uint32_t GetHi;
  uint32_t Ignored02[0x7];
  uint32_t Ignored03;
  uint32_t Ignored04[0x1];
  uint32_t GPGet;
  uint32_t GPPut;
  uint32_t Ignored05[0x5c];
};
// USERD size and required alignment: 1 << NV_RAMUSERD_BASE_SHIFT = 512 bytes
// (src/common/inc/swref/published/maxwell/gm107/dev_ram.h; kfifoGetUserdSizeAlign_GM107 in
// src/nvidia/src/kernel/gpu/fifo/arch/maxwell/kernel_fifo_gm107.c; kchannelCreateUserdMemDesc_
// GV100 drops the low 9 address bits, so keep userdOffset 512-byte aligned).
inline constexpr size_t kUserdBytes = 0x200;
static_assert(sizeof(Userd) == kUserdBytes);
static_assert(offsetof(Userd, Put) == 0x40 && offsetof(Userd, Get) == 0x44 &&
              offsetof(Userd, Reference) == 0x48 && offsetof(Userd, PutHi) == 0x4c &&
              offsetof(Userd, TopLevelGet) == 0x58 && offsetof(Userd, TopLevelGetHi) == 0x5c &&
              offsetof(Userd, GetHi) == 0x60 && offsetof(Userd, GPGet) == 0x88 &&
              offsetof(Userd, GPPut) == 0x8c);

// ============================================================================================
// 8. Notifiers and robust-channel (RC) errors
// ============================================================================================

// src/common/sdk/nvidia/inc/nvgputypes.h: NvNotification, 16 bytes; a notifier memory is an
// array of these. Channel notifier indices and status bits: nvos.h
// NV_CHANNELGPFIFO_NOTIFICATION_*.
struct Notification {
  struct {
    uint32_t nanoseconds[2];
  } timeStamp;
  uint32_t info32;
  uint16_t info16;
  uint16_t status;
};
static_assert(sizeof(Notification) == 16);
static_assert(offsetof(Notification, timeStamp) == 0 && offsetof(Notification, info32) == 8 &&
              offsetof(Notification, info16) == 12 && offsetof(Notification, status) == 14);

inline constexpr uint32_t NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR = 0;
inline constexpr uint32_t NV_CHANNELGPFIFO_NOTIFICATION_TYPE_WORK_SUBMIT_TOKEN = 1;
inline constexpr uint32_t NV_CHANNELGPFIFO_NOTIFICATION_TYPE_KEY_ROTATION_STATUS = 2;
inline constexpr uint32_t NV_CHANNELGPFIFO_NOTIFICATION_TYPE__SIZE_1 = 3;
inline constexpr uint16_t NV_CHANNELGPFIFO_NOTIFICATION_STATUS_VALUE_MASK = 0x7fff;  // 14:0
inline constexpr uint32_t NV_CHANNELGPFIFO_NOTIFICATION_STATUS_IN_PROGRESS_SHIFT = 15;  // 15:15

// What RM writes when it kills a channel (robust channel recovery,
// src/nvidia/src/kernel/gpu/rc/kernel_rc_notification.c -> krcErrorWriteNotifier_CPU ->
// notifyFillNotifierMemory/notifyFillNotifierGPUVA in
// src/nvidia/src/kernel/gpu/mem_mgr/method_notification.c), into entry
// NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR of the channel's hObjectError memory:
//   info32 = the ROBUST_CHANNEL_* error code (the "Xid"), info16 = the NV2080_ENGINE_TYPE_*
//   of the faulting engine, status = 0xffff, timeStamp = the GPU timer in ns.
// status is written last, so status != 0 means "an error was reported". For a sysmem/vidmem
// memory object (notifyFillNvNotification) nanoseconds[0] gets the HIGH 32 bits and [1] the
// low; the GPU-VA path (NOTIFICATION in src/nvidia/inc/kernel/gpu/mem_mgr/
// virt_mem_allocator_common.h) stores low then high.
inline constexpr uint16_t kChannelErrorNotifierStatus = 0xffff;

// src/common/sdk/nvidia/inc/nverror.h: robust-channel error codes (info32 above; the "Xid" in
// kernel logs). 11 is missing from the 580 header but in older ones, and RM 580.159 still
// reports it (an H200, for an unknown compute method); 13 is ROBUST_CHANNEL_GR_EXCEPTION
// (SM/GR exception, e.g. illegal instruction or address).
inline constexpr uint32_t ROBUST_CHANNEL_GR_ERROR_MISSING_HW = 11;
inline constexpr uint32_t ROBUST_CHANNEL_GR_EXCEPTION = 13;
inline constexpr uint32_t ROBUST_CHANNEL_FAKE_ERROR = 14;
inline constexpr uint32_t ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT = 31;
inline constexpr uint32_t ROBUST_CHANNEL_PBDMA_ERROR = 32;
inline constexpr uint32_t ROBUST_CHANNEL_CE0_ERROR = 39;
inline constexpr uint32_t ROBUST_CHANNEL_CE1_ERROR = 40;
inline constexpr uint32_t ROBUST_CHANNEL_CE2_ERROR = 41;
inline constexpr uint32_t ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR = 43;
inline constexpr uint32_t ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW = 44;
inline constexpr uint32_t ROBUST_CHANNEL_PREEMPTIVE_REMOVAL = 45;
inline constexpr uint32_t ROBUST_CHANNEL_GPU_ECC_DBE = 48;
inline constexpr uint32_t ROBUST_CHANNEL_GR_CLASS_ERROR = 69;
inline constexpr uint32_t ROBUST_CHANNEL_CE3_ERROR = 70;
inline constexpr uint32_t ROBUST_CHANNEL_CE4_ERROR = 71;
inline constexpr uint32_t ROBUST_CHANNEL_CE5_ERROR = 72;
inline constexpr uint32_t ROBUST_CHANNEL_CE6_ERROR = 75;
inline constexpr uint32_t ROBUST_CHANNEL_CE7_ERROR = 76;
inline constexpr uint32_t ROBUST_CHANNEL_CE8_ERROR = 77;
inline constexpr uint32_t ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS = 79;
inline constexpr uint32_t ROBUST_CHANNEL_CE9_ERROR = 85;
inline constexpr uint32_t ROBUST_CHANNEL_CONTAINED_ERROR = 94;
inline constexpr uint32_t ROBUST_CHANNEL_UNCONTAINED_ERROR = 95;
inline constexpr uint32_t ROBUST_CHANNEL_FAST_PATH_ERROR = 141;
inline constexpr uint32_t ROBUST_CHANNEL_KEY_ROTATION_ERROR = 151;
inline constexpr uint32_t ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT = 174;
inline constexpr uint32_t ROBUST_CHANNEL_LAST_ERROR = 176;

// The NVIDIA name of a code above, or nullptr.
constexpr const char* rc_error_name(uint32_t code) {
  switch (code) {
    case ROBUST_CHANNEL_GR_ERROR_MISSING_HW: return "ROBUST_CHANNEL_GR_ERROR_MISSING_HW";
    case ROBUST_CHANNEL_GR_EXCEPTION: return "ROBUST_CHANNEL_GR_EXCEPTION";
    case ROBUST_CHANNEL_FAKE_ERROR: return "ROBUST_CHANNEL_FAKE_ERROR";
    case ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT: return "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT";
    case ROBUST_CHANNEL_PBDMA_ERROR: return "ROBUST_CHANNEL_PBDMA_ERROR";
    case ROBUST_CHANNEL_CE0_ERROR: return "ROBUST_CHANNEL_CE0_ERROR";
    case ROBUST_CHANNEL_CE1_ERROR: return "ROBUST_CHANNEL_CE1_ERROR";
    case ROBUST_CHANNEL_CE2_ERROR: return "ROBUST_CHANNEL_CE2_ERROR";
    case ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR: return "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR";
    case ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW: return "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW";
    case ROBUST_CHANNEL_PREEMPTIVE_REMOVAL: return "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL";
    case ROBUST_CHANNEL_GPU_ECC_DBE: return "ROBUST_CHANNEL_GPU_ECC_DBE";
    case ROBUST_CHANNEL_GR_CLASS_ERROR: return "ROBUST_CHANNEL_GR_CLASS_ERROR";
    case ROBUST_CHANNEL_CE3_ERROR: return "ROBUST_CHANNEL_CE3_ERROR";
    case ROBUST_CHANNEL_CE4_ERROR: return "ROBUST_CHANNEL_CE4_ERROR";
    case ROBUST_CHANNEL_CE5_ERROR: return "ROBUST_CHANNEL_CE5_ERROR";
    case ROBUST_CHANNEL_CE6_ERROR: return "ROBUST_CHANNEL_CE6_ERROR";
    case ROBUST_CHANNEL_CE7_ERROR: return "ROBUST_CHANNEL_CE7_ERROR";
    case ROBUST_CHANNEL_CE8_ERROR: return "ROBUST_CHANNEL_CE8_ERROR";
    case ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS:
      return "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS";
    case ROBUST_CHANNEL_CE9_ERROR: return "ROBUST_CHANNEL_CE9_ERROR";
    case ROBUST_CHANNEL_CONTAINED_ERROR: return "ROBUST_CHANNEL_CONTAINED_ERROR";
    case ROBUST_CHANNEL_UNCONTAINED_ERROR: return "ROBUST_CHANNEL_UNCONTAINED_ERROR";
    case ROBUST_CHANNEL_FAST_PATH_ERROR: return "ROBUST_CHANNEL_FAST_PATH_ERROR";
    case ROBUST_CHANNEL_KEY_ROTATION_ERROR: return "ROBUST_CHANNEL_KEY_ROTATION_ERROR";
    case ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT:
      return "ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT";
    default: return nullptr;
  }
}

// ============================================================================================
// 9. NV_STATUS codes
// ============================================================================================

// src/common/sdk/nvidia/inc/nvstatuscodes.h (also kernel-open/common/inc/nvstatuscodes.h).
inline constexpr NvStatus NV_OK = 0x00000000;
inline constexpr NvStatus NV_ERR_GENERIC = 0x0000FFFF;
inline constexpr NvStatus NV_ERR_BUFFER_TOO_SMALL = 0x00000002;
inline constexpr NvStatus NV_ERR_BUSY_RETRY = 0x00000003;
inline constexpr NvStatus NV_ERR_GPU_IS_LOST = 0x0000000F;
inline constexpr NvStatus NV_ERR_GPU_UUID_NOT_FOUND = 0x00000012;
inline constexpr NvStatus NV_ERR_ILLEGAL_ACTION = 0x00000016;
inline constexpr NvStatus NV_ERR_IN_USE = 0x00000017;
inline constexpr NvStatus NV_ERR_INSUFFICIENT_RESOURCES = 0x0000001A;
inline constexpr NvStatus NV_ERR_INSUFFICIENT_PERMISSIONS = 0x0000001B;
inline constexpr NvStatus NV_ERR_INVALID_ADDRESS = 0x0000001E;
inline constexpr NvStatus NV_ERR_INVALID_ARGUMENT = 0x0000001F;
inline constexpr NvStatus NV_ERR_INVALID_PARAMETER = 0x0000003B;
inline constexpr NvStatus NV_ERR_INVALID_CHANNEL = 0x00000021;
inline constexpr NvStatus NV_ERR_INVALID_CLASS = 0x00000022;
inline constexpr NvStatus NV_ERR_INVALID_CLIENT = 0x00000023;
inline constexpr NvStatus NV_ERR_INVALID_COMMAND = 0x00000024;
inline constexpr NvStatus NV_ERR_INVALID_DEVICE = 0x00000026;
inline constexpr NvStatus NV_ERR_INVALID_FLAGS = 0x00000029;
inline constexpr NvStatus NV_ERR_INVALID_LIMIT = 0x0000002E;
inline constexpr NvStatus NV_ERR_INVALID_OBJECT_HANDLE = 0x00000033;
inline constexpr NvStatus NV_ERR_INVALID_OBJECT_PARENT = 0x00000036;
inline constexpr NvStatus NV_ERR_INVALID_OFFSET = 0x00000037;
inline constexpr NvStatus NV_ERR_INVALID_PARAM_STRUCT = 0x0000003A;
inline constexpr NvStatus NV_ERR_INVALID_STATE = 0x00000040;
inline constexpr NvStatus NV_ERR_NO_MEMORY = 0x00000051;
inline constexpr NvStatus NV_ERR_NOT_SUPPORTED = 0x00000056;
inline constexpr NvStatus NV_ERR_OBJECT_NOT_FOUND = 0x00000057;
inline constexpr NvStatus NV_ERR_OPERATING_SYSTEM = 0x00000059;
inline constexpr NvStatus NV_ERR_STATE_IN_USE = 0x00000063;
inline constexpr NvStatus NV_ERR_TIMEOUT = 0x00000065;
inline constexpr NvStatus NV_ERR_UVM_ADDRESS_IN_USE = 0x00000068;
inline constexpr NvStatus NV_ERR_LIB_RM_VERSION_MISMATCH = 0x0000006A;
inline constexpr NvStatus NV_WARN_NOTHING_TO_DO = 0x00010006;

// The NVIDIA name of a status above, or nullptr for any other value.
constexpr const char* status_name(uint32_t status) {
  switch (status) {
    case NV_OK: return "NV_OK";
    case NV_ERR_GENERIC: return "NV_ERR_GENERIC";
    case NV_ERR_BUFFER_TOO_SMALL: return "NV_ERR_BUFFER_TOO_SMALL";
    case NV_ERR_BUSY_RETRY: return "NV_ERR_BUSY_RETRY";
    case NV_ERR_GPU_IS_LOST: return "NV_ERR_GPU_IS_LOST";
    case NV_ERR_GPU_UUID_NOT_FOUND: return "NV_ERR_GPU_UUID_NOT_FOUND";
    case NV_ERR_ILLEGAL_ACTION: return "NV_ERR_ILLEGAL_ACTION";
    case NV_ERR_IN_USE: return "NV_ERR_IN_USE";
    case NV_ERR_INSUFFICIENT_RESOURCES: return "NV_ERR_INSUFFICIENT_RESOURCES";
    case NV_ERR_INSUFFICIENT_PERMISSIONS: return "NV_ERR_INSUFFICIENT_PERMISSIONS";
    case NV_ERR_INVALID_ADDRESS: return "NV_ERR_INVALID_ADDRESS";
    case NV_ERR_INVALID_ARGUMENT: return "NV_ERR_INVALID_ARGUMENT";
    case NV_ERR_INVALID_PARAMETER: return "NV_ERR_INVALID_PARAMETER";
    case NV_ERR_INVALID_CHANNEL: return "NV_ERR_INVALID_CHANNEL";
    case NV_ERR_INVALID_CLASS: return "NV_ERR_INVALID_CLASS";
    case NV_ERR_INVALID_CLIENT: return "NV_ERR_INVALID_CLIENT";
    case NV_ERR_INVALID_COMMAND: return "NV_ERR_INVALID_COMMAND";
    case NV_ERR_INVALID_DEVICE: return "NV_ERR_INVALID_DEVICE";
    case NV_ERR_INVALID_FLAGS: return "NV_ERR_INVALID_FLAGS";
    case NV_ERR_INVALID_LIMIT: return "NV_ERR_INVALID_LIMIT";
    case NV_ERR_INVALID_OBJECT_HANDLE: return "NV_ERR_INVALID_OBJECT_HANDLE";
    case NV_ERR_INVALID_OBJECT_PARENT: return "NV_ERR_INVALID_OBJECT_PARENT";
    case NV_ERR_INVALID_OFFSET: return "NV_ERR_INVALID_OFFSET";
    case NV_ERR_INVALID_PARAM_STRUCT: return "NV_ERR_INVALID_PARAM_STRUCT";
    case NV_ERR_INVALID_STATE: return "NV_ERR_INVALID_STATE";
    case NV_ERR_NO_MEMORY: return "NV_ERR_NO_MEMORY";
    case NV_ERR_NOT_SUPPORTED: return "NV_ERR_NOT_SUPPORTED";
    case NV_ERR_OBJECT_NOT_FOUND: return "NV_ERR_OBJECT_NOT_FOUND";
    case NV_ERR_OPERATING_SYSTEM: return "NV_ERR_OPERATING_SYSTEM";
    case NV_ERR_STATE_IN_USE: return "NV_ERR_STATE_IN_USE";
    case NV_ERR_TIMEOUT: return "NV_ERR_TIMEOUT";
    case NV_ERR_UVM_ADDRESS_IN_USE: return "NV_ERR_UVM_ADDRESS_IN_USE";
    case NV_ERR_LIB_RM_VERSION_MISMATCH: return "NV_ERR_LIB_RM_VERSION_MISMATCH";
    case NV_WARN_NOTHING_TO_DO: return "NV_WARN_NOTHING_TO_DO";
    default: return nullptr;
  }
}

// ============================================================================================
// 11. UVM: /dev/nvidia-uvm
// ============================================================================================

// kernel-open/nvidia-uvm/uvm_ioctl.h (UVM_IOCTL_BASE(i) is plain i on Linux) and
// uvm_linux_ioctl.h (UVM_INITIALIZE/DEINITIALIZE). These are NOT _IOWR codes: the request is
// the bare number, and the kernel (kernel-open/nvidia-uvm/uvm.c uvm_ioctl, uvm_api.h
// UVM_ROUTE_CMD_*) copies sizeof(the command's params struct) from the argument. Each params
// struct ends in rmStatus (an NV_STATUS); ioctl() itself returns 0 whenever the command is
// known and its parameters could be copied in and out (-EFAULT, -ENOMEM otherwise).
// UVM_INITIALIZE must come first on a UVM fd (others fail with NV_ERR_ILLEGAL_ACTION until
// then); UVM_MM_INITIALIZE goes on a second UVM fd, naming the first in uvmFd.
inline constexpr unsigned long UVM_INITIALIZE = 0x30000001;
inline constexpr unsigned long UVM_DEINITIALIZE = 0x30000002;  // no parameters
inline constexpr unsigned long UVM_REGISTER_GPU_VASPACE = 25;
inline constexpr unsigned long UVM_UNREGISTER_GPU_VASPACE = 26;
inline constexpr unsigned long UVM_REGISTER_CHANNEL = 27;
inline constexpr unsigned long UVM_UNREGISTER_CHANNEL = 28;
inline constexpr unsigned long UVM_ENABLE_PEER_ACCESS = 29;
inline constexpr unsigned long UVM_DISABLE_PEER_ACCESS = 30;
inline constexpr unsigned long UVM_MAP_EXTERNAL_ALLOCATION = 33;
inline constexpr unsigned long UVM_FREE = 34;
inline constexpr unsigned long UVM_REGISTER_GPU = 37;
inline constexpr unsigned long UVM_UNREGISTER_GPU = 38;
inline constexpr unsigned long UVM_UNMAP_EXTERNAL = 66;
inline constexpr unsigned long UVM_CREATE_EXTERNAL_RANGE = 73;
inline constexpr unsigned long UVM_MM_INITIALIZE = 75;

// kernel-open/nvidia-uvm/uvm_types.h: UVM_INIT_FLAGS_* and UVM_MAX_GPUS = NV_MAX_DEVICES (32) *
// UVM_PARENT_ID_MAX_SUB_PROCESSORS (8) = 256.
inline constexpr uint64_t UVM_INIT_FLAGS_DISABLE_HMM = 0x1;
inline constexpr uint64_t UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE = 0x2;
inline constexpr uint64_t UVM_INIT_FLAGS_MASK = 0x3;
inline constexpr size_t UVM_PARENT_ID_MAX_SUB_PROCESSORS = 8;
inline constexpr size_t UVM_MAX_GPUS = NV_MAX_DEVICES * UVM_PARENT_ID_MAX_SUB_PROCESSORS;
static_assert(UVM_MAX_GPUS == 256);

// kernel-open/common/inc/nv_uvm_user_types.h: UvmGpuMappingType, UvmGpuCachingType,
// UvmGpuFormatType, UvmGpuFormatElementBits, UvmGpuCompressionType (enums carried as NvU32).
inline constexpr uint32_t UvmGpuMappingTypeDefault = 0;
inline constexpr uint32_t UvmGpuMappingTypeReadWriteAtomic = 1;
inline constexpr uint32_t UvmGpuMappingTypeReadWrite = 2;
inline constexpr uint32_t UvmGpuMappingTypeReadOnly = 3;
inline constexpr uint32_t UvmGpuCachingTypeDefault = 0;
inline constexpr uint32_t UvmGpuCachingTypeForceUncached = 1;
inline constexpr uint32_t UvmGpuCachingTypeForceCached = 2;
inline constexpr uint32_t UvmGpuFormatTypeDefault = 0;
inline constexpr uint32_t UvmGpuFormatTypeBlockLinear = 1;
inline constexpr uint32_t UvmGpuFormatElementBitsDefault = 0;
inline constexpr uint32_t UvmGpuCompressionTypeDefault = 0;
inline constexpr uint32_t UvmGpuCompressionTypeEnabledNoPlc = 1;

// kernel-open/common/inc/nvCpuUuid.h / nvtypes.h: NvProcessorUuid = NvUuid, 16 bytes.
struct NvProcessorUuid {
  uint8_t uuid[16];
};
static_assert(sizeof(NvProcessorUuid) == 16 && alignof(NvProcessorUuid) == 1);

// kernel-open/nvidia-uvm/uvm_types.h
struct UvmGpuMappingAttributes {
  NvProcessorUuid gpuUuid;
  uint32_t gpuMappingType;
  uint32_t gpuCachingType;
  uint32_t gpuFormatType;
  uint32_t gpuElementBits;
  uint32_t gpuCompressionType;
};
static_assert(sizeof(UvmGpuMappingAttributes) == 36);
static_assert(offsetof(UvmGpuMappingAttributes, gpuUuid) == 0 &&
              offsetof(UvmGpuMappingAttributes, gpuMappingType) == 16 &&
              offsetof(UvmGpuMappingAttributes, gpuCachingType) == 20 &&
              offsetof(UvmGpuMappingAttributes, gpuFormatType) == 24 &&
              offsetof(UvmGpuMappingAttributes, gpuElementBits) == 28 &&
              offsetof(UvmGpuMappingAttributes, gpuCompressionType) == 32);

// kernel-open/nvidia-uvm/uvm_linux_ioctl.h
struct UvmInitializeParams {
  uint64_t flags;  // UVM_INIT_FLAGS_*
  NvStatus rmStatus;
};
static_assert(sizeof(UvmInitializeParams) == 16);
static_assert(offsetof(UvmInitializeParams, flags) == 0 &&
              offsetof(UvmInitializeParams, rmStatus) == 8);

// kernel-open/nvidia-uvm/uvm_ioctl.h, from here on.
struct UvmMmInitializeParams {
  int32_t uvmFd;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmMmInitializeParams) == 8);
static_assert(offsetof(UvmMmInitializeParams, uvmFd) == 0 &&
              offsetof(UvmMmInitializeParams, rmStatus) == 4);

// rmCtrlFd = -1 lets UVM use its own RM client (tinygrad does that).
struct UvmRegisterGpuParams {
  NvProcessorUuid gpu_uuid;
  NvBool numaEnabled;
  int32_t numaNodeId;
  int32_t rmCtrlFd;
  NvHandle hClient;
  NvHandle hSmcPartRef;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmRegisterGpuParams) == 40);
static_assert(offsetof(UvmRegisterGpuParams, gpu_uuid) == 0 &&
              offsetof(UvmRegisterGpuParams, numaEnabled) == 16 &&
              offsetof(UvmRegisterGpuParams, numaNodeId) == 20 &&
              offsetof(UvmRegisterGpuParams, rmCtrlFd) == 24 &&
              offsetof(UvmRegisterGpuParams, hClient) == 28 &&
              offsetof(UvmRegisterGpuParams, hSmcPartRef) == 32 &&
              offsetof(UvmRegisterGpuParams, rmStatus) == 36);

struct UvmUnregisterGpuParams {
  NvProcessorUuid gpu_uuid;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmUnregisterGpuParams) == 20);
static_assert(offsetof(UvmUnregisterGpuParams, gpu_uuid) == 0 &&
              offsetof(UvmUnregisterGpuParams, rmStatus) == 16);

struct UvmRegisterGpuVaspaceParams {
  NvProcessorUuid gpuUuid;
  int32_t rmCtrlFd;
  NvHandle hClient;
  NvHandle hVaSpace;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmRegisterGpuVaspaceParams) == 32);
static_assert(offsetof(UvmRegisterGpuVaspaceParams, gpuUuid) == 0 &&
              offsetof(UvmRegisterGpuVaspaceParams, rmCtrlFd) == 16 &&
              offsetof(UvmRegisterGpuVaspaceParams, hClient) == 20 &&
              offsetof(UvmRegisterGpuVaspaceParams, hVaSpace) == 24 &&
              offsetof(UvmRegisterGpuVaspaceParams, rmStatus) == 28);

struct UvmUnregisterGpuVaspaceParams {
  NvProcessorUuid gpuUuid;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmUnregisterGpuVaspaceParams) == 20);
static_assert(offsetof(UvmUnregisterGpuVaspaceParams, gpuUuid) == 0 &&
              offsetof(UvmUnregisterGpuVaspaceParams, rmStatus) == 16);

// base/length: a VA range UVM may use for the channel's internal buffers.
struct UvmRegisterChannelParams {
  NvProcessorUuid gpuUuid;
  int32_t rmCtrlFd;
  NvHandle hClient;
  NvHandle hChannel;
  uint64_t base;
  uint64_t length;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmRegisterChannelParams) == 56);
static_assert(offsetof(UvmRegisterChannelParams, gpuUuid) == 0 &&
              offsetof(UvmRegisterChannelParams, rmCtrlFd) == 16 &&
              offsetof(UvmRegisterChannelParams, hClient) == 20 &&
              offsetof(UvmRegisterChannelParams, hChannel) == 24 &&
              offsetof(UvmRegisterChannelParams, base) == 32 &&
              offsetof(UvmRegisterChannelParams, length) == 40 &&
              offsetof(UvmRegisterChannelParams, rmStatus) == 48);

// Drivers before 590 start with a gpuUuid: UvmUnregisterChannelParamsV580.
struct UvmUnregisterChannelParams {
  NvHandle hClient;
  NvHandle hChannel;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmUnregisterChannelParams) == 12);
static_assert(offsetof(UvmUnregisterChannelParams, hClient) == 0 &&
              offsetof(UvmUnregisterChannelParams, hChannel) == 4 &&
              offsetof(UvmUnregisterChannelParams, rmStatus) == 8);

struct UvmEnablePeerAccessParams {
  NvProcessorUuid gpuUuidA;
  NvProcessorUuid gpuUuidB;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmEnablePeerAccessParams) == 36);
static_assert(offsetof(UvmEnablePeerAccessParams, gpuUuidA) == 0 &&
              offsetof(UvmEnablePeerAccessParams, gpuUuidB) == 16 &&
              offsetof(UvmEnablePeerAccessParams, rmStatus) == 32);
using UvmDisablePeerAccessParams = UvmEnablePeerAccessParams;  // same layout in uvm_ioctl.h

// Reserve [base, base+length) in the process's UVM VA space for external mappings.
struct UvmCreateExternalRangeParams {
  uint64_t base;
  uint64_t length;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmCreateExternalRangeParams) == 24);
static_assert(offsetof(UvmCreateExternalRangeParams, base) == 0 &&
              offsetof(UvmCreateExternalRangeParams, length) == 8 &&
              offsetof(UvmCreateExternalRangeParams, rmStatus) == 16);

// Map RM memory hMemory (of RM client hClient, reached through the nvidiactl fd rmCtrlFd) at
// [base, base+length) on each listed GPU. 9264 bytes: above the stack limit, so the kernel
// routes it through UVM_ROUTE_CMD_ALLOC (a heap copy).
struct UvmMapExternalAllocationParams {
  uint64_t base;
  uint64_t length;
  uint64_t offset;
  UvmGpuMappingAttributes perGpuAttributes[UVM_MAX_GPUS];
  uint64_t gpuAttributesCount;
  int32_t rmCtrlFd;
  NvHandle hClient;
  NvHandle hMemory;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmMapExternalAllocationParams) == 9264);
static_assert(offsetof(UvmMapExternalAllocationParams, base) == 0 &&
              offsetof(UvmMapExternalAllocationParams, length) == 8 &&
              offsetof(UvmMapExternalAllocationParams, offset) == 16 &&
              offsetof(UvmMapExternalAllocationParams, perGpuAttributes) == 24 &&
              offsetof(UvmMapExternalAllocationParams, gpuAttributesCount) == 9240 &&
              offsetof(UvmMapExternalAllocationParams, rmCtrlFd) == 9248 &&
              offsetof(UvmMapExternalAllocationParams, hClient) == 9252 &&
              offsetof(UvmMapExternalAllocationParams, hMemory) == 9256 &&
              offsetof(UvmMapExternalAllocationParams, rmStatus) == 9260);

// Unmap one GPU's mapping of an external range.
struct UvmUnmapExternalParams {
  uint64_t base;
  uint64_t length;
  NvProcessorUuid gpuUuid;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmUnmapExternalParams) == 40);
static_assert(offsetof(UvmUnmapExternalParams, base) == 0 &&
              offsetof(UvmUnmapExternalParams, length) == 8 &&
              offsetof(UvmUnmapExternalParams, gpuUuid) == 16 &&
              offsetof(UvmUnmapExternalParams, rmStatus) == 32);

// Free the UVM range starting at base. Drivers before 590 also take a length:
// UvmFreeParamsV580 (section 12).
struct UvmFreeParams {
  uint64_t base;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmFreeParams) == 16);
static_assert(offsetof(UvmFreeParams, base) == 0 && offsetof(UvmFreeParams, rmStatus) == 8);

// ============================================================================================
// 12. Older drivers' layouts
// ============================================================================================
// Everything above is the 595.45.04 layout. Comparing the same headers at every
// open-gpu-kernel-modules tag from 570.86.15 to 595.45.04, only these changed (all other
// structs here are identical over that range). The ones that matter are exact-size checks:
// escapes (nv.c / escape.c compare _IOC_SIZE), controls (control.c compares paramsSize) and
// UVM (the kernel copies its own sizeof, so a mismatched struct reads/writes the wrong
// rmStatus). Allocation parameters are safe to send in the newest (longest) form: RM copies
// the size of its own struct for the class, and the new fields were appended.
//   first major  change
//   575          NVA06F/NVA06C GPFIFO_SCHEDULE params gain bSkipEnable (2 -> 3 bytes)
//   580          NVOS46 gains flags2, kindOverride (56 -> 64); NV_VASPACE_ALLOCATION_PARAMETERS
//                gains pasid (48 -> 56); GET_PROBED_IDS gains gpuFlags[] (256 -> 384);
//                NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE 100 -> 200 (V2: 404 -> 804);
//                NV2080_CTRL_FB_INFO_MAX_LIST_SIZE 0x39 -> 0x80 (V2: 460 -> 1028)
//   590          UVM_UNREGISTER_CHANNEL_PARAMS drops gpuUuid (28 -> 12); UVM_FREE_PARAMS drops
//                length (24 -> 16)
//   595          GET_NAME_STRING drops the unicode[] half of its union (132 -> 68)
// A name ending in VNNN is the layout of drivers up to and including major NNN. The running
// driver's version string comes from NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2
// (driverVersionBuffer, same layout in every version above) or /sys/module/nvidia/version.
inline constexpr unsigned kMajorGpfifoScheduleSkipEnable = 575;
inline constexpr unsigned kMajor580Layouts = 580;
inline constexpr unsigned kMajorUvmFreeNoLength = 590;
inline constexpr unsigned kMajorNameStringAsciiOnly = 595;

// The leading decimal number of a version string ("580.95.05" -> 580; 0 if none).
constexpr unsigned driver_major(const char* version) {
  unsigned major = 0;
  for (; version != nullptr && *version >= '0' && *version <= '9'; ++version)
    major = major * 10 + static_cast<unsigned>(*version - '0');
  return major;
}

// ctrl/ctrla06f/ctrla06fgpfifo.h at 570.211.01
struct GpfifoScheduleParamsV570 {
  NvBool bEnable;
  NvBool bSkipSubmit;
};
static_assert(sizeof(GpfifoScheduleParamsV570) == 2);
static_assert(offsetof(GpfifoScheduleParamsV570, bEnable) == 0 &&
              offsetof(GpfifoScheduleParamsV570, bSkipSubmit) == 1);

// nvos.h at 575.64.05: NVOS46_PARAMETERS without flags2/kindOverride.
struct Nvos46V575 {
  NvHandle hClient;
  NvHandle hDevice;
  NvHandle hDma;
  NvHandle hMemory;
  uint64_t offset;
  uint64_t length;
  uint32_t flags;
  uint64_t dmaOffset;
  NvStatus status;
};
static_assert(sizeof(Nvos46V575) == 56);
static_assert(offsetof(Nvos46V575, hClient) == 0 && offsetof(Nvos46V575, hDevice) == 4 &&
              offsetof(Nvos46V575, hDma) == 8 && offsetof(Nvos46V575, hMemory) == 12 &&
              offsetof(Nvos46V575, offset) == 16 && offsetof(Nvos46V575, length) == 24 &&
              offsetof(Nvos46V575, flags) == 32 && offsetof(Nvos46V575, dmaOffset) == 40 &&
              offsetof(Nvos46V575, status) == 48);

// ctrl/ctrl0000/ctrl0000gpu.h at 575.64.05
struct GpuGetProbedIdsParamsV575 {
  uint32_t gpuIds[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
  uint32_t excludedGpuIds[NV0000_CTRL_GPU_MAX_PROBED_GPUS];
};
static_assert(sizeof(GpuGetProbedIdsParamsV575) == 256);
static_assert(offsetof(GpuGetProbedIdsParamsV575, gpuIds) == 0 &&
              offsetof(GpuGetProbedIdsParamsV575, excludedGpuIds) == 128);

// ctrl/ctrl0080/ctrl0080gpu.h at 575.64.05
inline constexpr size_t NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE_V575 = 100;
struct ClassListV2ParamsV575 {
  uint32_t numClasses;
  uint32_t classList[NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE_V575];
};
static_assert(sizeof(ClassListV2ParamsV575) == 404);
static_assert(offsetof(ClassListV2ParamsV575, numClasses) == 0 &&
              offsetof(ClassListV2ParamsV575, classList) == 4);

// ctrl/ctrl2080/ctrl2080fb.h at 575.64.05
inline constexpr size_t NV2080_CTRL_FB_INFO_MAX_LIST_SIZE_V575 = 0x39;
struct FbGetInfoV2ParamsV575 {
  uint32_t fbInfoListSize;
  FbInfo fbInfoList[NV2080_CTRL_FB_INFO_MAX_LIST_SIZE_V575];
};
static_assert(sizeof(FbGetInfoV2ParamsV575) == 460);
static_assert(offsetof(FbGetInfoV2ParamsV575, fbInfoListSize) == 0 &&
              offsetof(FbGetInfoV2ParamsV575, fbInfoList) == 4);

// nvos.h at 575.64.05 (also fine to send the 56-byte VaspaceAllocParams, see above).
struct VaspaceAllocParamsV575 {
  uint32_t index;
  uint32_t flags;
  uint64_t vaSize;
  uint64_t vaStartInternal;
  uint64_t vaLimitInternal;
  uint32_t bigPageSize;
  uint64_t vaBase;
};
static_assert(sizeof(VaspaceAllocParamsV575) == 48);
static_assert(offsetof(VaspaceAllocParamsV575, vaBase) == offsetof(VaspaceAllocParams, vaBase) &&
              offsetof(VaspaceAllocParamsV575, bigPageSize) == 32);

// kernel-open/nvidia-uvm/uvm_ioctl.h at 580.142
struct UvmUnregisterChannelParamsV580 {
  NvProcessorUuid gpuUuid;
  NvHandle hClient;
  NvHandle hChannel;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmUnregisterChannelParamsV580) == 28);
static_assert(offsetof(UvmUnregisterChannelParamsV580, gpuUuid) == 0 &&
              offsetof(UvmUnregisterChannelParamsV580, hClient) == 16 &&
              offsetof(UvmUnregisterChannelParamsV580, hChannel) == 20 &&
              offsetof(UvmUnregisterChannelParamsV580, rmStatus) == 24);

struct UvmFreeParamsV580 {
  uint64_t base;
  uint64_t length;
  NvStatus rmStatus;
};
static_assert(sizeof(UvmFreeParamsV580) == 24);
static_assert(offsetof(UvmFreeParamsV580, base) == 0 && offsetof(UvmFreeParamsV580, length) == 8 &&
              offsetof(UvmFreeParamsV580, rmStatus) == 16);

// ctrl/ctrl2080/ctrl2080gpu.h at 590.48.01: gpuNameString was a union of ascii[64] and
// unicode[64] (uint16_t); flags TYPE_UNICODE = 1 selected the latter.
inline constexpr uint32_t NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_UNICODE_V590 = 1;
struct GpuGetNameStringParamsV590 {
  uint32_t gpuNameStringFlags;
  union {
    uint8_t ascii[NV2080_GPU_MAX_NAME_STRING_LENGTH];
    uint16_t unicode[NV2080_GPU_MAX_NAME_STRING_LENGTH];
  } gpuNameString;
};
static_assert(sizeof(GpuGetNameStringParamsV590) == 132);
static_assert(offsetof(GpuGetNameStringParamsV590, gpuNameStringFlags) == 0 &&
              offsetof(GpuGetNameStringParamsV590, gpuNameString) == 4);

}  // namespace hcq::nv::rm
