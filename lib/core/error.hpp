// Errors: every failure hcq reports derives from hcq::Error, with a message a person can act
// on (what failed, on which device/queue/signal, the value expected and seen).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace hcq {

// "0x1f00": how addresses and raw values read in error messages and decoded packets.
std::string hex(uint64_t v);

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A call across the kernel boundary failed (open, ioctl, mmap ...); carries errno.
class OsError : public Error {
 public:
  OsError(const std::string& what, int err);
  int err() const { return err_; }

 private:
  int err_;
};

// A host wait ran out of time.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The GPU reported a fault (bad packet, bad address, hardware exception).
class GpuFaultError : public Error {
 public:
  using Error::Error;
};

// Input that cannot be used: a malformed code object, a bad argument, an unknown device name.
class InvalidInput : public Error {
 public:
  using Error::Error;
};

// Runs `undo` (a stop, a dequeue) from a destructor, which must not throw: any exception is
// dropped. The function itself reports the same failure to a caller that calls it directly.
template <class F>
void ignoring_errors(F&& undo) noexcept {
  try {
    undo();
  } catch (...) {
  }
}

}  // namespace hcq
