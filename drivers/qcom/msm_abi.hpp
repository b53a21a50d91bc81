// The msm DRM interface hcq uses: our own definitions of the structures and ioctl numbers,
// written from Linux's include/uapi/drm/msm_drm.h (as Mesa carries it in
// include/drm-uapi/msm_drm.h). libdrm's msm_drm.h in Debian 12 predates per-process address
// spaces (no MSM_PARAM_VA_START/VA_SIZE, no MSM_INFO_SET_IOVA, an older drm_msm_gem_info)
// and does not compile as C++ (a field named `or`); tests/qcom/msm_test.cpp checks the ioctl
// numbers against values worked out by hand. Only generic DRM (drm.h) comes from libdrm.
#pragma once

#include <libdrm/drm.h>

#include <cstdint>

namespace hcq::qcom::msm {

inline constexpr uint32_t MSM_PIPE_3D0 = 0x10;
// A submission's flags: the pipe in the low bits (MSM_PIPE_ID), MSM_SUBMIT_x above them.
inline constexpr uint32_t MSM_PIPE_ID_MASK = 0xffff;

inline constexpr uint32_t MSM_PARAM_GPU_ID = 0x01;
inline constexpr uint32_t MSM_PARAM_GMEM_SIZE = 0x02;
inline constexpr uint32_t MSM_PARAM_CHIP_ID = 0x03;
inline constexpr uint32_t MSM_PARAM_FAULTS = 0x09;
inline constexpr uint32_t MSM_PARAM_VA_START = 0x0e;  // start of the process's GPU iova range
inline constexpr uint32_t MSM_PARAM_VA_SIZE = 0x0f;

struct Param {  // struct drm_msm_param
  uint32_t pipe;   // MSM_PIPE_x
  uint32_t param;  // MSM_PARAM_x
  uint64_t value;
  uint32_t len;  // zero for non-pointer params
  uint32_t pad;
};
static_assert(sizeof(Param) == 24);

inline constexpr uint32_t MSM_BO_NO_SHARE = 0x00000004;  // private: need not be in the bo table
inline constexpr uint32_t MSM_BO_CACHED = 0x00010000;
inline constexpr uint32_t MSM_BO_WC = 0x00020000;
inline constexpr uint32_t MSM_BO_CACHED_COHERENT = 0x00080000;

struct GemNew {  // struct drm_msm_gem_new
  uint64_t size;
  uint32_t flags;   // MSM_BO_x
  uint32_t handle;  // out
};
static_assert(sizeof(GemNew) == 16);

inline constexpr uint32_t MSM_INFO_GET_OFFSET = 0x00;  // the mmap() offset
inline constexpr uint32_t MSM_INFO_GET_IOVA = 0x01;
inline constexpr uint32_t MSM_INFO_SET_IOVA = 0x04;  // the process chooses the GPU address

struct GemInfo {  // struct drm_msm_gem_info
  uint32_t handle;
  uint32_t info;  // MSM_INFO_x
  uint64_t value;
  uint32_t len;
  uint32_t pad;
};
static_assert(sizeof(GemInfo) == 24);

inline constexpr uint32_t MSM_SUBMIT_CMD_BUF = 0x0001;

struct SubmitCmd {  // struct drm_msm_gem_submit_cmd
  uint32_t type;           // MSM_SUBMIT_CMD_x
  uint32_t submit_idx;     // index of the command buffer's bo in the bo table
  uint32_t submit_offset;  // bytes into that bo
  uint32_t size;           // bytes
  uint32_t pad;
  uint32_t nr_relocs;
  uint64_t relocs;
};
static_assert(sizeof(SubmitCmd) == 32);

inline constexpr uint32_t MSM_SUBMIT_BO_READ = 0x0001;
inline constexpr uint32_t MSM_SUBMIT_BO_WRITE = 0x0002;

struct SubmitBo {  // struct drm_msm_gem_submit_bo
  uint32_t flags;  // MSM_SUBMIT_BO_x
  uint32_t handle;
  uint64_t address;  // presumed GPU address
};
static_assert(sizeof(SubmitBo) == 16);

inline constexpr uint32_t MSM_SUBMIT_NO_IMPLICIT = 0x80000000;

struct GemSubmit {  // struct drm_msm_gem_submit
  uint32_t flags;  // MSM_PIPE_x | MSM_SUBMIT_x
  uint32_t fence;  // out
  uint32_t nr_bos;
  uint32_t nr_cmds;
  uint64_t bos;   // SubmitBo[nr_bos]
  uint64_t cmds;  // SubmitCmd[nr_cmds]
  int32_t fence_fd;
  uint32_t queueid;
  uint64_t in_syncobjs, out_syncobjs;
  uint32_t nr_in_syncobjs, nr_out_syncobjs;
  uint32_t syncobj_stride;
  uint32_t bos_stride;  // 0: sizeof(SubmitBo)
};
static_assert(sizeof(GemSubmit) == 72);

struct Timespec {  // struct drm_msm_timespec: CLOCK_MONOTONIC, absolute
  int64_t tv_sec;
  int64_t tv_nsec;
};

struct WaitFence {  // struct drm_msm_wait_fence
  uint32_t fence;
  uint32_t flags;
  Timespec timeout;
  uint32_t queueid;
  uint32_t pad;  // the kernel's struct is padded to 8 bytes too
};
static_assert(sizeof(WaitFence) == 32);

struct Submitqueue {  // struct drm_msm_submitqueue
  uint32_t flags;
  uint32_t prio;  // 0 is the highest
  uint32_t id;    // out
};
static_assert(sizeof(Submitqueue) == 12);

inline constexpr uint32_t MSM_SUBMITQUEUE_PARAM_FAULTS = 0;

struct SubmitqueueQuery {  // struct drm_msm_submitqueue_query
  uint64_t data;  // pointer to the answer
  uint32_t id;
  uint32_t param;
  uint32_t len;
  uint32_t pad;
};
static_assert(sizeof(SubmitqueueQuery) == 24);

inline constexpr unsigned DRM_MSM_GET_PARAM = 0x00;
inline constexpr unsigned DRM_MSM_GEM_NEW = 0x02;
inline constexpr unsigned DRM_MSM_GEM_INFO = 0x03;
inline constexpr unsigned DRM_MSM_GEM_SUBMIT = 0x06;
inline constexpr unsigned DRM_MSM_WAIT_FENCE = 0x07;
inline constexpr unsigned DRM_MSM_SUBMITQUEUE_NEW = 0x0A;
inline constexpr unsigned DRM_MSM_SUBMITQUEUE_CLOSE = 0x0B;
inline constexpr unsigned DRM_MSM_SUBMITQUEUE_QUERY = 0x0C;

inline constexpr unsigned long IOCTL_MSM_GET_PARAM = DRM_IOWR(DRM_COMMAND_BASE + DRM_MSM_GET_PARAM, Param);
inline constexpr unsigned long IOCTL_MSM_GEM_NEW = DRM_IOWR(DRM_COMMAND_BASE + DRM_MSM_GEM_NEW, GemNew);
inline constexpr unsigned long IOCTL_MSM_GEM_INFO = DRM_IOWR(DRM_COMMAND_BASE + DRM_MSM_GEM_INFO, GemInfo);
inline constexpr unsigned long IOCTL_MSM_GEM_SUBMIT =
    DRM_IOWR(DRM_COMMAND_BASE + DRM_MSM_GEM_SUBMIT, GemSubmit);
inline constexpr unsigned long IOCTL_MSM_WAIT_FENCE = DRM_IOW(DRM_COMMAND_BASE + DRM_MSM_WAIT_FENCE, WaitFence);
inline constexpr unsigned long IOCTL_MSM_SUBMITQUEUE_NEW =
    DRM_IOWR(DRM_COMMAND_BASE + DRM_MSM_SUBMITQUEUE_NEW, Submitqueue);
inline constexpr unsigned long IOCTL_MSM_SUBMITQUEUE_CLOSE =
    DRM_IOW(DRM_COMMAND_BASE + DRM_MSM_SUBMITQUEUE_CLOSE, uint32_t);
inline constexpr unsigned long IOCTL_MSM_SUBMITQUEUE_QUERY =
    DRM_IOW(DRM_COMMAND_BASE + DRM_MSM_SUBMITQUEUE_QUERY, SubmitqueueQuery);

// Generic DRM (drm.h): the driver's name to tell an msm render node from others, and closing
// a GEM handle.
inline constexpr const char* kDriverName = "msm";

}  // namespace hcq::qcom::msm
