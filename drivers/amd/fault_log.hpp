// The one thing the AMD driver and the emulated KFD share beyond the kernel's interface
// (linux/kfd_ioctl.h): where the emulated GPU publishes its own words about each fault, a
// debugfs-style file that only the emulated kernel has. The emulator writes it, the driver adds
// it to its fault errors when present; neither includes the other's headers.
#pragma once

namespace hcq::amd {

inline constexpr const char* kEmulatorFaultLog = "/sys/kernel/debug/kfd/hcq_emulator_faults";
// The same for the register-level GPU hcq boots itself (emu:gfx1100_am), which has no KFD.
inline constexpr const char* kAmEmulatorFaultLog = "/sys/kernel/debug/dri/hcq_am_emulator_faults";

}  // namespace hcq::amd
