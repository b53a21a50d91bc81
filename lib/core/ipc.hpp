// Buffers and signals shared between processes (issue 19, part 4), as CUDA IPC handles do:
// Buffer::export_ipc() / Signal::export_ipc() give a handle, send_handle() passes it over a
// Unix socket (SCM_RIGHTS, os/fd_passing.hpp), and the other process's
// Device::import_buffer() / import_signal() maps the same memory on its own device.
// The memory travels as a file descriptor: a dma-buf on real devices (KFD's
// AMDKFD_IOC_EXPORT_DMABUF, RM's export to an fd, a dma-buf heap for KGSL), a memfd on
// emulated ones. The fd keeps the pages alive: an import stays valid after the exporter
// closed its buffer or exited. A signal is shared with the memory it lives in (a page of
// signals; the handle says which one), host memory both processes map, so a queue of one
// process waits on another process's signal on the GPU, with no CPU in between.
//
// Threads: an IpcHandle is a value (move-only: it owns its fd); send_handle and
// receive_handle may be called from several threads at once (whole messages interleave).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/types.hpp"
#include "os/fd_passing.hpp"

namespace hcq {

struct IpcHandle {
  enum class Kind : uint32_t { Buffer = 1, Signal = 2 };
  Kind kind = Kind::Buffer;
  // The device it came from: its name ("emu:gfx1100", "amd:0") and arch ("gfx1100"); an
  // import into a device of another name or arch is refused.
  std::string device, arch;
  MemoryKind memory = MemoryKind::Device;
  uint64_t size = 0;        // the buffer's size as allocated by its owner (Buffer::size())
  uint64_t alloc_bytes = 0; // bytes the fd holds that are mapped (page multiple, >= size)
  uint64_t offset = 0;      // a signal: its value's offset in that memory
  os::OwnedFd fd;
};

const char* to_string(IpcHandle::Kind k);

// Sends `h` over `sock` (SOCK_SEQPACKET or SOCK_DGRAM) with its fd; `h` stays the caller's
// (the receiver gets its own descriptor). Throws as os::send_fds does.
void send_handle(int sock, const IpcHandle& h,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
// Receives one handle. Throws Error "IPC handle: the peer closed the connection" when the
// peer closed it, InvalidInput for a message that is not a handle of this build (its size,
// magic or version) or one that came without its fd, TimeoutError when none came in time.
IpcHandle receive_handle(int sock,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

}  // namespace hcq
