// Described registers of an AM GPU (regs.hpp) read, written and polled through a register
// window (os::Mmio): the register's byte offset comes from its segment base (IP discovery) and
// its offset, and every error names the register.
//
// Threads: read/write/wait may be called from several threads at once; each is one or more
// accesses of the window (see os::Mmio), none of them atomic with another. A caller that needs
// a sequence of accesses to stay together (a mailbox) holds its own lock (Smu does).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "amd/am/regs.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {

class RegisterIo {
 public:
  // The bases are copied; the window must outlive this object.
  // Where the bases carry a moved table (IpSegmentBases::tables), every described register is
  // resolved here once, so an access does not search the table.
  RegisterIo(os::Mmio& mmio, IpSegmentBases bases);

  // The register's byte offset in the window (4 * absolute_dword). InvalidInput when the bases
  // lack its segment (absolute_dword's message).
  uint64_t byte_offset(const RegDesc& r) const;

  uint32_t read(const RegDesc& r);
  void write(const RegDesc& r, uint32_t value);
  // By the compile-time constant (am::mp_13_0_0::MP1_SMN_C2PMSG_90): looked up among
  // registers() for its name; InvalidInput for a Reg no .def describes.
  uint32_t read(const Reg& r) { return read(describe(r)); }
  void write(const Reg& r, uint32_t value) { write(describe(r), value); }

  // Polls until (read & mask) == value and returns the last value read. Throws
  // hcq::TimeoutError when `timeout` passes first:
  // "MP1_SMN_C2PMSG_90: waited 100 ms for 0x1 (mask 0xffffffff), last read 0x0".
  // The register is read at least once, and once more after the deadline.
  uint32_t wait(const RegDesc& r, uint32_t mask, uint32_t value,
                std::chrono::microseconds timeout);
  // Polls until (read & mask) != value (a mailbox's response turning non-zero):
  // "MP1_SMN_C2PMSG_90: waited 100 ms for a value other than 0x0 (mask 0xffffffff), last read
  // 0x0".
  uint32_t wait_not(const RegDesc& r, uint32_t mask, uint32_t value,
                    std::chrono::microseconds timeout);
  uint32_t wait(const Reg& r, uint32_t mask, uint32_t value, std::chrono::microseconds timeout) {
    return wait(describe(r), mask, value, timeout);
  }
  uint32_t wait_not(const Reg& r, uint32_t mask, uint32_t value,
                    std::chrono::microseconds timeout) {
    return wait_not(describe(r), mask, value, timeout);
  }

  static const RegDesc& describe(const Reg& r);

 private:
  template <class Done>
  uint32_t poll(const RegDesc& r, std::chrono::microseconds timeout, Done done,
                const std::string& waiting_for);
  os::Mmio& mmio_;
  IpSegmentBases bases_;
  // Byte offsets by position in registers(), or -1 where the GPU's table lacks the register;
  // empty when no table moved anything.
  std::vector<int64_t> resolved_;
};

}  // namespace hcq::amd::am
