// The kernel boundary: every open, close, ioctl, mmap, munmap, poll and sysfs read or write a driver
// makes goes through one Kernel. RealKernel calls the OS; EmulatedKernel routes device nodes and
// sysfs paths to emulated kernel drivers, so the driver code above is the same in both.
//
// Calls follow the POSIX conventions so driver code reads like code against the real OS:
// open/ioctl/munmap return -errno on failure, mmap returns MAP_FAILED and sets errno.
#pragma once

#include <poll.h>
#include <cerrno>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hcq::os {

// What an emulated GPU says of itself beyond its kernel driver's interface (issue 35 item 5):
// its own words about each fault, and where each waiting queue is inside its indirect buffer
// (one line a queue; a real GPU keeps that in registers a process cannot read). A real kernel
// answers neither; drivers add what an emulated one answers to their errors and hang reports.
enum class EmulatorReport : uint8_t { FaultLog, IbPositions };

class Kernel {
 public:
  virtual ~Kernel() = default;

  virtual int open(const std::string& path, int flags) = 0;
  virtual int close(int fd) = 0;
  virtual int ioctl(int fd, unsigned long request, void* arg) = 0;
  virtual void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) = 0;
  virtual int munmap(void* addr, size_t length) = 0;
  // pread(2)/pwrite(2): the bytes transferred or -errno (VFIO config space is reached this
  // way, not through mmap).
  virtual ssize_t pread(int fd, void* buf, size_t size, off_t offset) = 0;
  virtual ssize_t pwrite(int fd, const void* buf, size_t size, off_t offset) = 0;
  // read(2): the bytes read or -errno (an eventfd's counter: 8 bytes).
  virtual ssize_t read(int fd, void* buf, size_t size) = 0;
  // eventfd(2): a new fd or -errno. A VFIO device signals its interrupts through one
  // (VFIO_DEVICE_SET_IRQS).
  virtual int eventfd(unsigned initval, int flags) = 0;
  // poll(2): the number of fds with events, 0 on timeout, or -errno. timeout_ms < 0 waits
  // without limit; callers in hcq always pass a limit (usbfs URB completions are polled so).
  virtual int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) = 0;

  // Whole-file reads of small (sysfs/procfs) files; nullopt when the file does not exist.
  virtual std::optional<std::string> read_file(const std::string& path) = 0;
  // Entry names of a directory (without "." and ".."), sorted; empty when it does not exist.
  virtual std::vector<std::string> list_dir(const std::string& path) = 0;
  // Writes `data` to a sysfs attribute (unbind, driver_override ...): 0 or -errno.
  virtual int write_file(const std::string& path, const std::string& data) = 0;
  // The directory that stands for /sys. Paths given to this interface always start with /sys;
  // a library that reads sysfs itself (libpci) is pointed at this directory instead.
  virtual std::string sysfs_root() const = 0;

  // A new descriptor for the object behind `fd` that another process can receive over a
  // Unix socket (SCM_RIGHTS): a dup on the real OS, where `fd` is one already (an RM export
  // fd); the emulated kernel asks the node (its fds exist only in this process). -errno on
  // failure; by default -EOPNOTSUPP.
  virtual int passable_fd(int /*fd*/) { return -EOPNOTSUPP; }

  // True for kernels that route to emulated drivers (device names are marked as such).
  virtual bool emulated() const = 0;
  // The emulated GPU's report of `what`; nothing on a real kernel (the default).
  virtual std::optional<std::string> emulator_report(EmulatorReport /*what*/) { return std::nullopt; }
};

// The process-wide real OS.
std::shared_ptr<Kernel> real_kernel();

}  // namespace hcq::os
