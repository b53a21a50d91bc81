// The one thing the NVIDIA driver and the emulated NVIDIA kernel driver share beyond NVIDIA's
// interface (nv/rm_abi.hpp): where the emulated GPU publishes its own words about each channel
// error, a debugfs-style file that only the emulated kernel has. The emulator writes it, the
// driver adds it to its fault errors when present; neither includes the other's headers.
#pragma once

namespace hcq::nv {

inline constexpr const char* kEmulatorFaultLog = "/sys/kernel/debug/nvidia/hcq_emulator_faults";

}  // namespace hcq::nv
