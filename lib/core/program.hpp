// Program: a code object loaded on a device and one kernel in it; lays out kernel arguments
// from the code object's metadata and launches on the device's compute queue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.hpp"
#include "core/driver.hpp"
#include "core/error.hpp"

namespace hcq {

// Kernel arguments in declaration order: buffers (their address) and plain values.
class KernelArgs {
 public:
  // InvalidInput for an empty Buffer (freed or moved from): its old address may be another
  // buffer's by now.
  KernelArgs& buffer(const Buffer& b, uint64_t offset = 0) {
    if (!b) throw InvalidInput("kernel argument " + std::to_string(args_.size()) +
                               ": an empty Buffer (freed or moved from) has no address");
    return address(b.va() + offset);
  }
  KernelArgs& address(uint64_t va) { return push(&va, 8, true); }
  template <class T>
  KernelArgs& value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return push(&v, sizeof(T), false);
  }
  struct Arg {
    std::vector<std::byte> bytes;
    bool is_address;
  };
  const std::vector<Arg>& args() const { return args_; }

 private:
  KernelArgs& push(const void* p, size_t n, bool addr) {
    Arg a{std::vector<std::byte>(n), addr};
    std::memcpy(a.bytes.data(), p, n);
    args_.push_back(std::move(a));
    return *this;
  }
  std::vector<Arg> args_;
};

// Load a code object (the device's native format) into the device's memory: the driver
// lays it out (DeviceDriver::program_layout), this allocates, relocates and copies it and
// builds its kernels. Throws InvalidInput for a file the device cannot load.
// Thread safety: as Device::allocate and Device::copy_in; the image is read-only once loaded.
std::unique_ptr<ProgramImage> load_program(Device& dev, std::span<const std::byte> image);

// Thread safety: launch() and fill_args() may be called from several threads at once.
class Program {
 public:
  // `image` is the device's native code object; `kernel` a kernel in it.
  Program(Device& dev, std::span<const std::byte> image, const std::string& kernel);
  Program(Device& dev, std::shared_ptr<const ProgramImage> image, const std::string& kernel);

  // Lay out `args` into `out` (kernarg_size() bytes) by the metadata's offsets; throws
  // InvalidInput naming the kernel and argument on a count, size or kind mismatch.
  void fill_args(const KernelArgs& args, void* out) const;

  // Launch on the device's compute queue, ordered on the device timeline. With `wait`,
  // returns the GPU-timestamped duration in seconds.
  std::optional<double> launch(const KernelArgs& args, Dim3 grid, Dim3 block, bool wait = false,
                               std::chrono::milliseconds timeout = Signal::kDefaultTimeout);

  const KernelObject& kernel() const { return *kernel_; }
  uint32_t kernarg_size() const { return kernel_->kernarg_size; }
  // Throws Error once the device was closed (a Program may outlive it; launching it then is
  // an error).
  Device& device() const;

 private:
  std::shared_ptr<DeviceLink> link_;
  std::shared_ptr<const ProgramImage> image_;
  std::shared_ptr<const KernelObject> kernel_;
};

}  // namespace hcq
