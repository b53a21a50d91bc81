// What the Adreno driver needs of a kernel driver: KGSL (Android, /dev/kgsl-3d0) or msm DRM
// (mainline Linux, a render node). The Adreno driver (adreno_driver.cpp) owns the address
// space, the command ring, faults and programs; a Kmd only turns those needs into its ioctls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/driver.hpp"
#include "os/kernel.hpp"

namespace hcq::qcom {

// An indirect buffer of a submission.
struct IbRef {
  uint64_t va;
  uint64_t bytes;
};

class Kmd {
 public:
  virtual ~Kmd() = default;
  virtual std::string name() const = 0;      // "KGSL", "msm DRM"
  virtual std::string context() const = 0;   // "KGSL context 1", "msm submit queue 1"
  virtual const char* fence_word() const = 0;  // what the kernel calls a submission's number
  virtual uint32_t chip_id() const = 0;
  // The GPU addresses this process may choose: [first, first + second). The driver puts every
  // object at the same CPU and GPU address inside it.
  virtual std::pair<uint64_t, uint64_t> va_window() const = 0;
  // A GPU object of `size` bytes (page multiple) mapped for the CPU and the GPU at `va`, inside
  // a range the driver reserved; returns its handle. Throws OsError or Error (the range stays
  // reserved).
  virtual uint64_t allocate(uint64_t va, uint64_t size, MemoryKind kind) = 0;
  // Whether host memory is CPU-cached and kept coherent by the hardware. Where the GPU does
  // not snoop the CPU's caches, host memory is write-combined like device memory instead, so
  // host copies never need cache maintenance (learnt at the first host allocation).
  virtual bool host_memory_cached() const = 0;
  // Frees an object whose CPU mapping the driver already replaced by its reservation.
  virtual void free(uint64_t handle) = 0;
  // The process's own pages at the same GPU address; returns a handle for free_user. Throws
  // InvalidInput where the kernel cannot (maps_user_memory() false).
  virtual bool maps_user_memory() const = 0;
  virtual uint64_t map_user(void* host, uint64_t size) = 0;
  virtual void free_user(uint64_t handle, uint64_t va) = 0;
  // Sharing memory with another process (DeviceDriver::export_memory / import_memory), where
  // shares_memory(): export_memory gives a new fd the caller owns for an object allocate()
  // or import_memory made (throws InvalidInput for one the kernel cannot export);
  // import_memory places the `size` bytes another process's fd holds at `va` as allocate()
  // does (the fd stays the caller's) and returns the handle for free(). By default the
  // kernel driver cannot, and these are never called.
  virtual bool shares_memory() const { return false; }
  virtual int export_memory(uint64_t handle);
  virtual uint64_t import_memory(int fd, uint64_t va, uint64_t size);
  // Submits the IBs to run in order: 0 and the submission's fence, or -errno (-EDEADLK: the
  // context faulted).
  virtual int submit(std::span<const IbRef> ibs, uint32_t& fence) = 0;
  // Waits for a fence: 0 once it retired, -ETIMEDOUT, -EDEADLK when the context faulted (a
  // fault also retires fences), or another -errno.
  virtual int wait(uint32_t fence, std::chrono::milliseconds timeout) = 0;
};

// Replaces [va, va + size) of the process by an inaccessible reservation (MAP_FIXED): what
// is left of a freed object, or a range put aside for the GPU.
void reserve_range(os::Kernel& kernel, uint64_t va, uint64_t size);

// The Adreno GPUs of each kind of kernel driver, as paths to open ("/dev/kgsl-3d0",
// "/dev/dri/renderD128") with a description; the Kmds for one (throw OsError / Error).
struct KmdNode {
  std::string path;
  std::string description;  // "Adreno a660 (KGSL)"
};
std::vector<KmdNode> kgsl_nodes(os::Kernel& kernel);
std::vector<KmdNode> msm_nodes(os::Kernel& kernel);
// `device` ("qcom:0", "emu:a660") starts every error message.
std::unique_ptr<Kmd> open_kgsl(std::shared_ptr<os::Kernel> kernel, const std::string& path,
                               const std::string& device);
std::unique_ptr<Kmd> open_msm(std::shared_ptr<os::Kernel> kernel, const std::string& path,
                              const std::string& device);

}  // namespace hcq::qcom
