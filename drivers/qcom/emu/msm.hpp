// An emulated msm DRM driver (a render node of mainline Linux's drm/msm) behind the kernel
// boundary for one Adreno GPU of a chosen target, with the emulated GPU (Engine) running its
// submit queues' submissions.
#pragma once

#include <memory>

#include "os/kernel.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom::emu {

inline constexpr const char* kMsmRenderNode = "/dev/dri/renderD128";

// Its GPU address window (MSM_PARAM_VA_START / VA_SIZE): from 4 GiB to the top of the
// 47-bit user address space, as a 48-bit per-process address space allows.
inline constexpr uint64_t kMsmVaStart = 1ull << 32;
inline constexpr uint64_t kMsmVaSize = (1ull << 47) - (2ull << 32);

// `io_coherent` false emulates a GPU that does not snoop the CPU's caches: drm/msm then
// refuses MSM_BO_CACHED_COHERENT buffers with EINVAL.
std::shared_ptr<os::Kernel> make_emulated_msm_system(const Target& target, bool io_coherent = true);

}  // namespace hcq::qcom::emu
