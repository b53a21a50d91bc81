// KFD's dma-buf export, which Debian's linux/kfd_ioctl.h (KFD 1.11) predates: defined here
// from Linux's include/uapi/linux/kfd_ioctl.h, where KFD 1.12 (Linux 6.2) added it as
// ioctl 0x24 with struct kfd_ioctl_export_dmabuf_args {u64 handle (to KFD); u32 flags (to
// KFD: the new fd's flags, O_CLOEXEC); u32 dmabuf_fd (from KFD)}. Import (0x1D,
// AMDKFD_IOC_IMPORT_DMABUF) and AMDKFD_IOC_GET_DMABUF_INFO (0x1C) are in Debian's header.
#pragma once

#include <linux/kfd_ioctl.h>

#ifndef AMDKFD_IOC_EXPORT_DMABUF
struct kfd_ioctl_export_dmabuf_args {
  __u64 handle;
  __u32 flags;
  __u32 dmabuf_fd;
};
#define AMDKFD_IOC_EXPORT_DMABUF AMDKFD_IOWR(0x24, struct kfd_ioctl_export_dmabuf_args)
#endif
