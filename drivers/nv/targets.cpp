#include "nv/targets.hpp"

#include <algorithm>
#include <cstring>

#include "nv/rm_abi.hpp"

namespace hcq::nv {

using namespace rm;

ClassSet pick_classes(std::span<const uint32_t> classes) {
  auto newest = [&](std::initializer_list<uint32_t> prefer) -> uint32_t {
    for (uint32_t c : prefer)
      if (std::find(classes.begin(), classes.end(), c) != classes.end()) return c;
    return 0;
  };
  ClassSet s;
  s.gpfifo = newest({BLACKWELL_CHANNEL_GPFIFO_B, BLACKWELL_CHANNEL_GPFIFO_A,
                     HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A});
  s.compute = newest({BLACKWELL_COMPUTE_B, BLACKWELL_COMPUTE_A, HOPPER_COMPUTE_A, ADA_COMPUTE_A,
                      AMPERE_COMPUTE_B, AMPERE_COMPUTE_A});
  s.copy = newest({BLACKWELL_DMA_COPY_B, BLACKWELL_DMA_COPY_A, HOPPER_DMA_COPY_A,
                   AMPERE_DMA_COPY_B, AMPERE_DMA_COPY_A});
  s.usermode = newest({BLACKWELL_USERMODE_A, HOPPER_USERMODE_A, TURING_USERMODE_A});
  return s;
}

Gen gen_of_compute_class(uint32_t c) {
  switch (c) {
    case AMPERE_COMPUTE_A:
    case AMPERE_COMPUTE_B: return Gen::Ampere;
    case ADA_COMPUTE_A: return Gen::Ada;
    case HOPPER_COMPUTE_A: return Gen::Hopper;
    default: return Gen::Blackwell;
  }
}

// Hopper takes V04 (clcbc0qmd.h): an H200 (RM 580.159) accepted V03 QMDs without an error
// but ran none of their CTAs.
QmdVersion qmd_version_for(Gen gen) {
  switch (gen) {
    case Gen::Blackwell: return QmdVersion::V05;
    case Gen::Hopper: return QmdVersion::V04;
    default: return QmdVersion::V03;
  }
}

std::vector<std::byte> cbuf0_driver_words(Gen gen, uint64_t shared_window, uint64_t local_window) {
  // The initial stack pointer tinygrad gives every kernel (c[0x0][0x28] before Blackwell).
  constexpr uint64_t kStackTop = 0xfffdc0;
  const bool blackwell = gen == Gen::Blackwell;
  std::vector<uint32_t> w(blackwell ? 224 : 12, 0);
  auto put64 = [&](size_t at, uint64_t v) {
    w[at] = uint32_t(v);
    w[at + 1] = uint32_t(v >> 32);
  };
  if (blackwell) {
    put64(188, shared_window);
    put64(190, local_window);
    w[223] = uint32_t(kStackTop);
  } else {
    put64(6, shared_window);
    put64(8, local_window);
    put64(10, kStackTop);
  }
  std::vector<std::byte> out(w.size() * 4);
  std::memcpy(out.data(), w.data(), out.size());
  return out;
}

const std::vector<Target>& targets() {
  // PCI ids: A100-SXM4-80GB 0x20b2, H100 SXM5 80GB 0x2330, B200 0x2901 (pci.ids). Enabled
  // SMs: 108 of GA100's 128, 132 of GH100's 144, 148 of two GB100 dies' 160 (NVIDIA's
  // datasheets; the H200, a GH100, ran 132).
  static const std::vector<Target> t = {
      {"sm_80", 80, "NVIDIA A100-SXM4-80GB (emulated)", NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GA100,
       NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GA100, 0x20b2,
       {AMPERE_CHANNEL_GPFIFO_A, AMPERE_COMPUTE_A, AMPERE_DMA_COPY_B, TURING_USERMODE_A}, 8, 8,
       2, 108, 80ull << 30},
      {"sm_90", 90, "NVIDIA H100 80GB HBM3 (emulated)", NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GH100,
       NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_GH100, 0x2330,
       {HOPPER_CHANNEL_GPFIFO_A, HOPPER_COMPUTE_A, HOPPER_DMA_COPY_A, HOPPER_USERMODE_A}, 8, 9, 2,
       132, 80ull << 30},
      {"sm_100", 100, "NVIDIA B200 (emulated)", NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_GB100, 0,
       0x2901,
       {BLACKWELL_CHANNEL_GPFIFO_A, BLACKWELL_COMPUTE_A, BLACKWELL_DMA_COPY_A,
        BLACKWELL_USERMODE_A},
       8, 10, 2, 148, 180ull << 30},
  };
  return t;
}

const Target* find_target(const std::string& name) {
  for (auto& t : targets())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace hcq::nv
