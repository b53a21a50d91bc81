// NVIDIA GPUs hcq knows: how a class list maps to a generation, its QMD version and the
// constant-bank-0 layout its kernels expect, and the emulated targets (emu:sm_80 ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nv/push.hpp"

namespace hcq::nv {

// The classes a channel of this GPU uses, picked from the GPU's class list.
struct ClassSet {
  uint32_t gpfifo = 0, compute = 0, copy = 0, usermode = 0;
};
// The newest class of each kind hcq speaks that `classes` lists; a zero member when none.
ClassSet pick_classes(std::span<const uint32_t> classes);

Gen gen_of_compute_class(uint32_t compute_class);
// QMD V03_00 for Ampere, Ada and Hopper (the layout tinygrad drives an H100 with; Hopper's
// class also takes V04_00), V05_00 for Blackwell.
QmdVersion qmd_version_for(Gen gen);

// Driver words of constant bank 0 that do not change per launch, as bytes to lay under the
// parameters: the shared and local memory windows and the initial stack pointer (dwords
// 6..11 before Blackwell; 188..191 and 223 on Blackwell; tinygrad ops_nv.py).
std::vector<std::byte> cbuf0_driver_words(Gen gen, uint64_t shared_window, uint64_t local_window);

// An emulated GPU: what its RM reports.
struct Target {
  std::string name;            // "sm_90"
  uint32_t sm = 0;             // 90
  std::string marketing_name;  // "NVIDIA H100 80GB HBM3 (emulated)"
  uint32_t architecture = 0, implementation = 0;  // NV2080_CTRL_CMD_MC_GET_ARCH_INFO
  uint16_t device_id = 0;      // PCI device id
  ClassSet classes;
  uint32_t gpcs = 0, tpc_per_gpc = 0, sm_per_tpc = 0;  // the die's layout (LITTER values)
  uint32_t enabled_sms = 0;  // what the product runs: the rest are floorswept
  uint64_t vram_bytes = 0;
};
const std::vector<Target>& targets();
const Target* find_target(const std::string& name);

}  // namespace hcq::nv
