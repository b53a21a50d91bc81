// The narrow interface between lib/core and a vendor driver in drivers/<vendor>/.
// lib/core owns policy (address heap, caches, rings, timelines, queues as recordings);
// a driver owns the kernel objects, the hardware rings and the packet encoders.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/command_stream.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace hcq {

class Device;

struct Allocation {
  uint64_t va = 0;
  uint64_t size = 0;
  void* host = nullptr;  // CPU mapping at the same address, or null when not CPU-visible
  MemoryKind kind = MemoryKind::Device;
  uint64_t handle = 0;   // the driver's own handle
  bool user = false;     // the caller's host memory, mapped for the device (not ours to free)
  bool imported = false; // another process's memory (import_memory): freed, never cached
  bool executable = false;  // allocated for code (Device::allocate sets it)
};

// One kernel argument as a program's metadata describes it.
struct KernelArg {
  // Bytes: a buffer address or a value of `size` bytes; the code object does not say which
  // (a cubin records only offsets and sizes).
  enum class Kind : uint8_t { Buffer, Value, Hidden, Bytes };
  // What the kernel does with a buffer argument's memory, as far as its metadata says
  // (a `const` pointer is read-only); ReadWrite when it says nothing.
  enum class Access : uint8_t { ReadWrite, ReadOnly, WriteOnly };
  std::string name;
  uint32_t offset = 0;
  uint32_t size = 0;
  Kind kind = Kind::Value;
  Access access = Access::ReadWrite;
};

// A kernel loaded on a device: what core needs to lay out arguments and launch it.
// Drivers derive from it to keep what their encoder needs (register words ...).
class KernelObject {
 public:
  virtual ~KernelObject() = default;
  std::string name;
  uint64_t code_va = 0;  // where the kernel's machine code starts
  uint32_t kernarg_size = 0;
  uint32_t kernarg_align = 16;
  uint32_t lds_bytes = 0;
  uint32_t scratch_bytes = 0;
  std::vector<KernelArg> args;
  // The kernarg area's bytes before any argument is laid in (driver words the kernel reads,
  // such as NVIDIA's constant bank 0 windows); zeros past its end.
  std::vector<std::byte> kernarg_init;
};

// A loaded code object: its device memory and its kernels.
class ProgramImage {
 public:
  virtual ~ProgramImage() = default;
  virtual std::shared_ptr<const KernelObject> kernel(const std::string& name) const = 0;
  virtual std::vector<std::string> kernel_names() const = 0;
};

// The common part of a driver's program image: its kernels by name, and those it holds but
// cannot launch with the reason (asking for one of those is an error that says why).
template <class Kernel>
class KernelTable : public ProgramImage {
 public:
  std::shared_ptr<const KernelObject> kernel(const std::string& name) const override {
    auto it = kernels_.find(name);
    if (it != kernels_.end()) return it->second;
    auto u = unsupported_.find(name);
    if (u != unsupported_.end())
      throw InvalidInput("kernel '" + name + "' " + u->second + ", which hcq's " + vendor_ +
                         " launches do not provide yet");
    return nullptr;
  }
  std::vector<std::string> kernel_names() const override {
    std::vector<std::string> n;
    for (auto& [k, _] : kernels_) n.push_back(k);
    return n;
  }

 protected:
  explicit KernelTable(std::string vendor) : vendor_(std::move(vendor)) {}
  std::map<std::string, std::shared_ptr<Kernel>> kernels_;
  std::map<std::string, std::string> unsupported_;  // name -> why it cannot launch

 private:
  std::string vendor_;
};

// A code object as its driver lays it out in device memory (DeviceDriver::program_layout).
// The driver only parses the file; lib/core's load_program (core/program.hpp) allocates the
// memory, writes the bytes, copies them in and builds the ProgramImage.
struct ProgramLayout {
  std::string vendor;            // names the vendor in a not-launchable kernel's error ("AMD")
  std::vector<std::byte> bytes;  // the image as placed at its start (before relocation)
  uint64_t size = 0;             // bytes the image spans (zeros past `bytes`); at least 1 allocated
  uint64_t alignment = 1;        // its address must be a multiple of this (an Error otherwise)
  bool executable = true;
  // Writes what depends on the address `va` the image got into its `size` placed bytes
  // (relocations; AMD's loader writes the whole image here); may be empty.
  std::function<void(std::span<std::byte> image, uint64_t va)> relocate;
  struct Kernel {
    // Addresses (code_va and the driver's own) still offsets from the image's start.
    std::shared_ptr<KernelObject> object;
    std::string unsupported;  // why it cannot launch (then it is not launchable), or empty
  };
  std::vector<Kernel> kernels;  // in the file's order
  // Turns a kernel's offsets into addresses for an image at `va` and prepares what its
  // launches need (the encoder's words); called once per launchable kernel.
  std::function<void(KernelObject& kernel, uint64_t va)> place;
};

// Encodes the common queue commands into a command stream and returns the patch sites of
// every patchable field, appended to `sites`.
class Encoder {
 public:
  virtual ~Encoder() = default;
  // Block until the 64-bit value at `va` is >= `value`.
  virtual void wait(CommandStream& cs, uint64_t va, uint64_t value,
                    std::vector<PatchSite>& sites) = 0;
  // Write the 64-bit `value` to `va` after all prior work; `wake` also interrupts the host.
  virtual void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                      std::vector<PatchSite>& sites) = 0;
  // Write a timestamp record at `va` (16 bytes, 16-byte aligned) after all prior work: the GPU
  // timestamp counter (64-bit) at va+8. The first 8 bytes are the engine's to overwrite:
  // NVIDIA engines write a timestamp only together with a semaphore payload in front of it.
  virtual void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& sites) = 0;
  // Compute queues: make prior writes visible to later reads (caches written back/invalidated).
  virtual void memory_barrier(CommandStream& cs) = 0;
  virtual void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid,
                    Dim3 block, std::vector<PatchSite>& sites) = 0;
  // Copy queues: a linear copy of any size (split at the engine's limit).
  virtual void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
                    std::vector<PatchSite>& sites) = 0;
};

// A hardware queue (ring) of the device.
class HwQueue {
 public:
  virtual ~HwQueue() = default;
  // Copy `n` dwords into the ring and ring the doorbell.
  virtual void submit(const uint32_t* words, size_t n) = 0;
  // Run a command buffer resident in device memory at `va` (indirect buffer): `ndwords` is at
  // most max_indirect_dwords(); `va` is a multiple of indirect_granule_dwords() dwords, and so
  // is `ndwords` unless the buffer ends a recording (zero dwords follow it up to a multiple
  // of 8: Queue::bind).
  virtual void submit_indirect(uint64_t va, size_t ndwords) = 0;
  // The largest command buffer one indirect submission runs, in dwords: what the size field
  // of the queue's indirect-buffer packet or GPFIFO entry holds, a multiple of the granule.
  // Queue splits a longer recording into several indirect buffers between commands.
  virtual size_t max_indirect_dwords() const = 0;
  // What an indirect buffer's address and length must be multiples of, in dwords. Above 1,
  // a zero dword must be a no-op on the queue (it pads the pieces of a split recording).
  virtual size_t indirect_granule_dwords() const { return 1; }
};

// A command buffer for one of a device's queues (DeviceDriver::submit_indirect).
struct IndirectRun {
  HwQueue* queue;
  uint64_t va;
  size_t ndwords;
};

class DeviceDriver {
 public:
  virtual ~DeviceDriver() = default;
  virtual const DeviceProperties& properties() const = 0;

  // The address range lib/core's heap hands out from (reserved by the driver).
  virtual uint64_t va_base() const = 0;
  virtual uint64_t va_size() const = 0;
  // Back [va, va+size) with memory of `kind`; mapped for the CPU when possible.
  virtual Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) = 0;
  virtual void free(const Allocation& a) = 0;
  // Map the caller's page-aligned host memory for the device at the same address (KFD
  // userptr); free() unmaps it. Throws InvalidInput when the device cannot reach host memory.
  virtual Allocation map_user(void* host, uint64_t size) = 0;
  // Sharing memory with another process (core/ipc.hpp). export_memory: a new file
  // descriptor the caller owns for allocation `a` (one allocate() made, or one imported): a
  // dma-buf on real devices, a memfd on emulated ones. import_memory: maps what another
  // process exported (`fd`, which stays the caller's; at least `size` bytes) at
  // [va, va+size) for this device and, where it can, the CPU; free() releases it. Throws
  // InvalidInput for memory that cannot be shared (the caller's own host memory) or an fd
  // holding fewer than `size` bytes. The defaults: InvalidInput naming the device.
  virtual int export_memory(const Allocation& a);
  virtual Allocation import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind);
  // The device-memory port, for a device whose memory the CPU cannot map
  // (caps.cpu_maps_memory false): writes or reads [va, va + size) inside one allocation this
  // driver made, as few transport requests as its size allows (streamed). Ordered after the
  // port's earlier writes; not after GPU work (the caller waits for that). The default, for a
  // driver whose memory is mapped: InvalidInput naming the device.
  virtual void write_memory(uint64_t va, std::span<const std::byte> data);
  virtual void read_memory(uint64_t va, std::span<std::byte> out);

  virtual std::unique_ptr<HwQueue> create_queue(QueueKind kind) = 0;
  virtual std::unique_ptr<Encoder> encoder(QueueKind kind) = 0;
  // Command buffers for several of the device's queues together: a driver whose
  // doorbells need an ordering read first (NVIDIA: GP_PUT read back through BAR1) pays it
  // once for all of them.
  virtual void submit_indirect(std::span<const IndirectRun> runs) {
    for (const IndirectRun& r : runs) r.queue->submit_indirect(r.va, r.ndwords);
  }

  // Parse a code object (the device's native format) and say how it lays out in device
  // memory; lib/core's load_program (core/program.hpp) loads it. Throws InvalidInput for a
  // malformed file or one built for another target.
  virtual ProgramLayout program_layout(std::span<const std::byte> image) = 0;

  // Sleep until the device interrupts the host (a `wake` signal), or `timeout` passes.
  // Throws GpuFaultError when the device reports a fault.
  virtual void wait_interrupt(std::chrono::milliseconds timeout) = 0;
  // Throws GpuFaultError if a fault was reported since the device was opened.
  virtual void check_faults() = 0;
  // Whether wake_waiters() makes a wait_interrupt under way in another thread return soon.
  // Where it does not, Signal::wait sleeps here in short slices while it waits (a value the
  // host sets raises no interrupt).
  virtual bool can_wake_waiters() const { return false; }
  // A host thread set a signal that a thread in wait_interrupt may be waiting for: make that
  // wait return soon. Called from any thread, with or without a wait under way.
  virtual void wake_waiters() {}
  // For a hang: every queue with unfinished work, its packets around the read pointer
  // decoded, the completed ones and the one the engine is on marked. Empty when idle.
  virtual std::string hang_report() = 0;
};

}  // namespace hcq
