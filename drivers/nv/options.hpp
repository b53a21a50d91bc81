// The NVIDIA driver's submission switches (issue 21's A/B levers for the H200), the one place
// they are defined. Each is an environment variable read once, when a device opens
// (NvOptions::from_environment); unset or "0" keeps today's path, "1" turns the lever on, any
// other value is an InvalidInput naming the variable. docs/performance.md ("A/B switches for
// the H200") says what each changes and what the device session measures with them.
//
//   HCQ_NV_GPFIFO_HOST=1     the GPFIFO ring and USERD in system memory instead of video
//                            memory: a submission writes the entry and GP_PUT to host memory
//                            and reads nothing back through BAR1 before the doorbell.
//   HCQ_NV_QMD_BY_ADDRESS=1  a launch's QMD (and its launch dimensions in constant bank 0)
//                            written by the CPU into the kernarg area, the push buffer
//                            carrying only SEND_PCAS_A (its address) and
//                            SEND_SIGNALING_PCAS2_B, as the CUDA driver launches; instead of
//                            the QMD inline through the compute class's LOAD_INLINE_DATA.
//                            Such a launch has no patch sites: update_exec refuses it.
//
// Threads: a plain value, copied into the driver at open.
#pragma once

#include <string>

namespace hcq::nv {

struct NvOptions {
  bool gpfifo_host = false;
  bool qmd_by_address = false;

  // The switches as the environment sets them now. Throws InvalidInput
  // "HCQ_NV_GPFIFO_HOST='yes': expected 0 or 1" for any other value.
  static NvOptions from_environment();
  // "gpfifo_host,qmd_by_address" for the ones on; "" when none is.
  std::string text() const;
};

}  // namespace hcq::nv
