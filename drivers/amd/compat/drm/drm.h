// linux/kfd_ioctl.h includes <drm/drm.h>; Debian ships that header with libdrm as <drm.h>.
#pragma once
#include <drm.h>
