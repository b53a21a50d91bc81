// CPU implementations of kernels for emulated GPUs. An emulated GPU that decodes a dispatch
// finds the kernel's name from the code it was pointed at, and runs the implementation
// registered under that name over the decoded grid, workgroup size and kernel arguments.
// Vendor-neutral: every emulated GPU uses the same registry and the same implementations.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>

#include "core/types.hpp"

namespace hcq::emu {

// An access the emulated GPU cannot make (no mapping, out of bounds, bad packet). The
// engine turns it into a queue fault the driver sees.
class Fault : public std::runtime_error {
 public:
  Fault(const std::string& what, uint64_t address) : std::runtime_error(what), address_(address) {}
  uint64_t address() const { return address_; }

 private:
  uint64_t address_;
};

// GPU virtual addresses as the emulated GPU sees them.
class AddressSpace {
 public:
  virtual ~AddressSpace() = default;
  // Host pointer for [va, va+size); throws Fault when any byte is unmapped.
  virtual void* translate(uint64_t va, uint64_t size) const = 0;
};

// A buffer a kernel reaches through a descriptor (an Adreno UAV): where the descriptor says it
// starts and how many bytes it says it spans.
struct BufferView {
  uint64_t va = 0;
  uint64_t bytes = 0;
};

// Tells running kernels to stop: the emulated GPU is being destroyed, or the queue a kernel
// runs on is (a real GPU preempts the queue's waves or resets; a CPU kernel has to return).
// The engine brackets each kernel call with begin/end; removal and teardown call abandon.
class Preemption {
 public:
  // Marks a kernel of `owner` running until the returned guard goes.
  class Running {
   public:
    explicit Running(Preemption& p) : p_(p) {}
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    ~Running() { p_.end(); }

   private:
    Preemption& p_;
  };
  [[nodiscard]] Running run(uint64_t owner) {
    begin(owner);
    return Running(*this);
  }
  // Abandons the running kernel when `owner` (a queue or context id) runs it.
  void abandon(uint64_t owner);
  // Abandons the running kernel and every later one.
  void abandon_all();
  const std::atomic<bool>* flag() const { return &flag_; }

 private:
  void begin(uint64_t owner);
  void end();

  std::mutex mu_;
  bool running_ = false, all_ = false;
  uint64_t owner_ = 0;
  std::atomic<bool> flag_{false};
};

struct Dispatch {
  Dim3 grid;   // workgroups in each dimension
  Dim3 block;  // work-items per workgroup in each dimension
  const std::byte* kernargs = nullptr;
  uint32_t kernarg_size = 0;
  const AddressSpace* memory = nullptr;
  // The buffers the launch bound through descriptors, by slot (empty where a GPU has none).
  std::span<const BufferView> uavs;

  // A kernel argument at `offset` in the kernarg segment.
  template <class T>
  T arg(uint32_t offset) const {
    if (offset + sizeof(T) > kernarg_size)
      throw Fault("kernel argument at offset " + std::to_string(offset) +
                      " is past the kernarg segment", offset);
    T v;
    std::memcpy(&v, kernargs + offset, sizeof(T));
    return v;
  }
  // `count` elements of T at GPU address `va`, bounds-checked against the mappings.
  template <class T>
  T* ptr(uint64_t va, uint64_t count) const {
    return static_cast<T*>(memory->translate(va, count * sizeof(T)));
  }
  // `count` elements of T from element `index` of the buffer bound to UAV `slot`: bounds-checked
  // against the slots the launch bound, the size the descriptor gives, and the mappings.
  template <class T>
  T* uav(uint32_t slot, uint64_t index, uint64_t count) const {
    if (slot >= uavs.size())
      throw Fault("UAV " + std::to_string(slot) + " is not bound (the launch bound " +
                      std::to_string(uavs.size()) + ")", 0);
    const BufferView& v = uavs[slot];
    if (index > v.bytes / sizeof(T) || count > v.bytes / sizeof(T) - index)
      throw Fault("UAV " + std::to_string(slot) + ": elements [" + std::to_string(index) + ", " +
                      std::to_string(index + count) + ") of " + std::to_string(sizeof(T)) +
                      " bytes lie past its descriptor's " + std::to_string(v.bytes) + " bytes",
                  v.va + index * sizeof(T));
    return ptr<T>(v.va + index * sizeof(T), count);
  }
  uint64_t threads() const { return grid.count() * block.count(); }
  // Set when the GPU gives up on this launch (Preemption). A kernel that can run for long,
  // one waiting on memory, checks it and returns or throws Fault.
  const std::atomic<bool>* abandon = nullptr;
  bool abandoned() const { return abandon && abandon->load(std::memory_order_relaxed); }
};

using KernelFn = std::function<void(const Dispatch&)>;

void register_kernel(const std::string& name, KernelFn fn);
// Null when no implementation is registered under `name`.
const KernelFn* find_kernel(const std::string& name);

}  // namespace hcq::emu
