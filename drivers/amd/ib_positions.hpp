// Shared by the AMD driver and the emulated KFD beyond KFD's interface: where the emulated GPU
// publishes the position inside the indirect buffer each waiting queue is on, a debugfs-style
// file only the emulated kernel has. A real GPU keeps it in CP registers (CP_IB1_BASE_LO/HI,
// CP_IB1_BUFSZ) that umr reads through amdgpu's debugfs as root and amdgpu's devcoredump
// (amdgpu_dev_coredump.c) shows only after a reset, so a KFD process cannot read it.
// One line per queue: "queue <id>: IB 0x<va> <dwords> dwords, at dword <n>".
#pragma once

namespace hcq::amd {

inline constexpr const char* kEmulatorIbPositions = "/sys/kernel/debug/kfd/hcq_emulator_ib_positions";
// The same for the register-level GPU hcq boots itself (emu:gfx1100_am), one line per hardware
// queue: "compute queue ME 1 pipe 0 queue 0: IB 0x<va> <dwords> dwords, at dword <n>".
inline constexpr const char* kAmEmulatorIbPositions = "/sys/kernel/debug/dri/hcq_am_emulator_ib_positions";

}  // namespace hcq::amd
