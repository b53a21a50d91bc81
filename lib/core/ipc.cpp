#include "core/ipc.hpp"

#include <cstring>
#include <string>

#include "core/device.hpp"
#include "core/error.hpp"

namespace hcq {

const char* to_string(IpcHandle::Kind k) {
  return k == IpcHandle::Kind::Signal ? "signal" : "buffer";
}

// ---- the driver's defaults -------------------------------------------------------------

int DeviceDriver::export_memory(const Allocation&) {
  throw InvalidInput(properties().name +
                     ": its driver cannot share memory with another process");
}

Allocation DeviceDriver::import_memory(int, uint64_t, uint64_t, MemoryKind) {
  throw InvalidInput(properties().name +
                     ": its driver cannot share memory with another process");
}

// ---- the wire -----------------------------------------------------------------------

namespace {

constexpr uint64_t kMagic = 0x31304350494d4348;  // "HCMIPC01" in memory
constexpr uint32_t kWireVersion = 1;
constexpr uint64_t kPageBytes = 4096;

// One handle as it travels, with its fd beside it (SCM_RIGHTS). Fixed size: a message of
// another size is not a handle of this build.
struct Wire {
  uint64_t magic;
  uint32_t version;
  uint32_t kind;
  uint32_t memory;
  uint32_t reserved;
  uint64_t size, alloc_bytes, offset;
  char device[64];
  char arch[32];
};
static_assert(sizeof(Wire) == 144);

template <size_t N>
void put(char (&out)[N], const std::string& s, const char* what) {
  if (s.size() >= N)
    throw InvalidInput(std::string("IPC handle: ") + what + " '" + s + "' is longer than " +
                       std::to_string(N - 1) + " characters");
  std::memcpy(out, s.data(), s.size());
}

template <size_t N>
std::string get(const char (&in)[N]) {
  return std::string(in, strnlen(in, N));
}

}  // namespace

void send_handle(int sock, const IpcHandle& h, std::chrono::milliseconds timeout) {
  if (!h.fd) throw InvalidInput("IPC handle: sending a handle without its file descriptor");
  Wire w{};
  w.magic = kMagic;
  w.version = kWireVersion;
  w.kind = uint32_t(h.kind);
  w.memory = uint32_t(h.memory);
  w.size = h.size;
  w.alloc_bytes = h.alloc_bytes;
  w.offset = h.offset;
  put(w.device, h.device, "device name");
  put(w.arch, h.arch, "arch");
  const int fd = h.fd.get();
  os::send_fds(sock, std::as_bytes(std::span(&w, 1)), std::span(&fd, 1), timeout);
}

IpcHandle receive_handle(int sock, std::chrono::milliseconds timeout) {
  os::FdMessage m;
  try {
    m = os::receive_fds(sock, sizeof(Wire), timeout);
  } catch (const InvalidInput& e) {
    throw InvalidInput(std::string("IPC handle: ") + e.what());
  } catch (const TimeoutError&) {
    throw TimeoutError("IPC handle: none received in " + std::to_string(timeout.count()) +
                       " ms");
  } catch (const OsError&) {
    throw;
  } catch (const Error&) {  // the peer closed the connection
    throw Error("IPC handle: the peer closed the connection");
  }
  Wire w{};
  if (m.bytes.size() != sizeof(Wire))
    throw InvalidInput("IPC handle: a message of " + std::to_string(m.bytes.size()) +
                       " bytes is not a handle (" + std::to_string(sizeof(Wire)) + " bytes)");
  std::memcpy(&w, m.bytes.data(), sizeof(w));
  if (w.magic != kMagic)
    throw InvalidInput("IPC handle: a message of the right size without the handle magic");
  if (w.version != kWireVersion)
    throw InvalidInput("IPC handle: version " + std::to_string(w.version) + ", this build reads " +
                       std::to_string(kWireVersion));
  if (m.fds.size() != 1)
    throw InvalidInput("IPC handle: the " + std::string(w.kind == 2 ? "signal" : "buffer") +
                       " handle came with " + std::to_string(m.fds.size()) +
                       " file descriptors, not 1");
  if (w.kind != 1 && w.kind != 2)
    throw InvalidInput("IPC handle: unknown kind " + std::to_string(w.kind));
  if (w.memory > uint32_t(MemoryKind::Host))
    throw InvalidInput("IPC handle: unknown memory kind " + std::to_string(w.memory));
  IpcHandle h;
  h.kind = IpcHandle::Kind(w.kind);
  h.memory = MemoryKind(w.memory);
  h.size = w.size;
  h.alloc_bytes = w.alloc_bytes;
  h.offset = w.offset;
  h.device = get(w.device);
  h.arch = get(w.arch);
  h.fd = std::move(m.fds[0]);
  return h;
}

// ---- export and import ----------------------------------------------------------------

IpcHandle Buffer::export_ipc() const {
  if (!link_) throw InvalidInput("export of an empty Buffer");
  Device& d = link_->checked(("buffer at " + hex(a_.va)).c_str());
  return d.export_allocation(a_, IpcHandle::Kind::Buffer, size_, 0);
}

IpcHandle Signal::export_ipc() const {
  check_alive();
  return link_->get()->export_signal(*this);
}

IpcHandle Device::export_allocation(const Allocation& a, IpcHandle::Kind kind, uint64_t size,
                                    uint64_t offset) {
  if (a.user)
    throw InvalidInput(name() + ": the " + std::string(to_string(kind)) + " at " + hex(a.va) +
                       " is the caller's host memory (map_host): share it as the host memory "
                       "it is, not as a device buffer");
  IpcHandle h;
  h.kind = kind;
  h.device = name();
  h.arch = properties().arch;
  h.memory = a.kind;
  h.size = size;
  h.alloc_bytes = a.size;
  h.offset = offset;
  h.fd = os::OwnedFd(driver_->export_memory(a));
  return h;
}

Buffer Device::import_allocation(IpcHandle& h, IpcHandle::Kind want, const char* what) {
  const std::string me = name() + ": " + what + ": ";
  if (!h.fd) throw InvalidInput(me + "the handle has no file descriptor (used already?)");
  if (h.kind != want)
    throw InvalidInput(me + "the handle is of a " + to_string(h.kind) + ", not a " +
                       to_string(want));
  if (want == IpcHandle::Kind::Buffer && h.offset != 0)
    throw InvalidInput(me + "a buffer handle with offset " + std::to_string(h.offset) +
                       " (a buffer starts its memory)");
  if (want == IpcHandle::Kind::Signal && (h.size != Signal::kBytes || h.offset % 8))
    throw InvalidInput(me + "a signal of " + std::to_string(h.size) + " bytes at offset " +
                       std::to_string(h.offset) + " (signals are " +
                       std::to_string(Signal::kBytes) + " bytes, 8-byte aligned)");
  if (h.device != name() || h.arch != properties().arch)
    throw InvalidInput(me + "the handle is of " + h.device + " (" + h.arch +
                       "), this device is " + name() + " (" + properties().arch + ")");
  if (h.alloc_bytes == 0 || h.alloc_bytes % kPageBytes || h.size == 0 ||
      h.size > h.alloc_bytes || h.offset > h.alloc_bytes - h.size)
    throw InvalidInput(me + "the handle's sizes do not fit: " + std::to_string(h.size) +
                       " bytes at offset " + std::to_string(h.offset) + " of " +
                       std::to_string(h.alloc_bytes) + " (a multiple of 4096)");
  if (h.memory == MemoryKind::Host && !properties().caps.host_reachable)
    throw InvalidInput(me + "the handle is of host memory, which this device cannot reach");
  Allocation a;
  {
    std::lock_guard lk(mem_mu_);
    const uint64_t align = h.alloc_bytes >= (2u << 20) ? (2u << 20) : kPageBytes;
    const uint64_t va = heap_.allocate(h.alloc_bytes, align);
    try {
      a = driver_->import_memory(h.fd.get(), va, h.alloc_bytes, h.memory);
    } catch (...) {
      heap_.free(va);
      throw;
    }
  }
  a.imported = true;
  h.fd.reset();  // the import holds the memory now
  Buffer b;
  b.link_ = link_;
  b.a_ = a;
  b.size_ = h.size;
  {
    std::lock_guard live(live_mu_);
    live_[a.va] = a;
  }
  return b;
}

Buffer Device::import_buffer(IpcHandle h) {
  return import_allocation(h, IpcHandle::Kind::Buffer, "import_buffer");
}

Signal Device::import_signal(IpcHandle h) {
  const uint64_t offset = h.offset;
  Buffer page = import_allocation(h, IpcHandle::Kind::Signal, "import_signal");
  if (!page.host())
    throw InvalidInput(name() + ": import_signal: the CPU cannot map the imported signal");
  Signal s;
  s.link_ = link_;
  s.id_ = UINT32_MAX;  // not one of this device's slots
  s.va_ = page.va() + offset;
  s.slot_ = reinterpret_cast<uint64_t*>(static_cast<char*>(page.host()) + offset);
  s.page_ = std::move(page);
  return s;
}

}  // namespace hcq
