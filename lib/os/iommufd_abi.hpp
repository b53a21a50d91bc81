// The iommufd uAPI hcq uses (Linux 6.6+; Debian 12's linux-libc-dev predates it): an
// IO address space (IOAS) on /dev/iommu, and a VFIO device cdev bound to it. Layouts from
// Linux include/uapi/linux/iommufd.h and include/uapi/linux/vfio.h.
#pragma once

#include <linux/vfio.h>
#include <sys/ioctl.h>

#include <cstdint>

namespace hcq::os::iommufd {

inline constexpr char kType = ';';  // IOMMUFD_TYPE
inline constexpr unsigned kCmdDestroy = 0x80, kCmdIoasAlloc = 0x81, kCmdIoasMap = 0x83,
                          kCmdIoasUnmap = 0x85;

struct IoasAlloc {
  uint32_t size, flags, out_ioas_id;
};
struct IoasMap {
  uint32_t size, flags, ioas_id, reserved;
  uint64_t user_va, length, iova;
};
inline constexpr uint32_t kMapFixedIova = 1 << 0, kMapWriteable = 1 << 1, kMapReadable = 1 << 2;
struct IoasUnmap {
  uint32_t size, ioas_id;
  uint64_t iova, length;  // length: in the bytes to unmap, out the bytes unmapped
};
static_assert(sizeof(IoasMap) == 40 && sizeof(IoasUnmap) == 24);

inline constexpr unsigned long IOMMU_IOAS_ALLOC = _IO(kType, kCmdIoasAlloc);
inline constexpr unsigned long IOMMU_IOAS_MAP = _IO(kType, kCmdIoasMap);
inline constexpr unsigned long IOMMU_IOAS_UNMAP = _IO(kType, kCmdIoasUnmap);

// The VFIO cdev side (/dev/vfio/devices/vfioN).
struct BindIommufd {
  uint32_t argsz, flags;
  int32_t iommufd;
  uint32_t out_devid;
};
struct AttachPt {
  uint32_t argsz, flags, pt_id;
};
inline constexpr unsigned long VFIO_DEVICE_BIND_IOMMUFD = _IO(VFIO_TYPE, VFIO_BASE + 18);
inline constexpr unsigned long VFIO_DEVICE_ATTACH_IOMMUFD_PT = _IO(VFIO_TYPE, VFIO_BASE + 19);

}  // namespace hcq::os::iommufd
