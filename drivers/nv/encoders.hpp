// NVIDIA encoders for the core queue commands: host-class semaphores for waits, signals and
// timestamps (both channels), compute launches through a QMD written by the compute class's
// inline-to-memory DMA, and linear copies on the DMA copy class. Every method and field comes
// from classes.def / qmd.def.
#pragma once

#include <functional>
#include <vector>

#include "core/driver.hpp"
#include "nv/push.hpp"

namespace hcq::nv {

// Subchannels hcq binds its classes to (kDefaultSubchannels): host methods go on 0.
inline constexpr uint32_t kSubHost = 0, kSubCompute = 1, kSubCopy = 4;

// A cubin kernel loaded on an NVIDIA device. Its kernarg area holds the QMD, then constant
// bank 0: the driver words (blockDim, gridDim, shared/local windows ...) and, from
// `param_base`, the parameters. The encoder writes the QMD and the launch dimensions;
// `kernarg_init` supplies the launch-independent driver words.
class NvKernel final : public KernelObject {
 public:
  uint32_t registers = 0, barriers = 0, shared_bytes = 0;
  uint64_t code_bytes = 0;
  uint32_t sm = 0;          // 90 for sm_90
  uint32_t param_base = 0;  // constant bank 0 offset of the parameters
  uint32_t cbuf0_bytes = 0;
  QmdVersion qmd_version = QmdVersion::V03;
  std::vector<uint32_t> qmd;  // launch-independent QMD words (ComputeEncoder::prepare)
  // The whole launch encoded once with zero addresses and sizes, and its patch sites
  // (dwords from the launch's start): a launch copies it and writes its values through them.
  std::vector<uint32_t> launch_words;
  std::vector<PatchSite> launch_sites;
};

// Where constant bank 0 starts in a kernel's kernarg area (the QMD comes first).
constexpr uint32_t cbuf0_offset(QmdVersion v) { return qmd_bytes(v); }
// The launch dimensions at the start of constant bank 0: blockDim x,y,z then gridDim x,y,z
// (what CUDA kernels read as c[0x0][0x0..0x14]; tinygrad ops_nv.py writes them the same way).
inline constexpr uint32_t kCbuf0DimDwords = 6;

// Host-class semaphore methods, for both channels.
void encode_semaphore_wait(CommandStream& cs, uint64_t va, uint64_t value,
                           std::vector<PatchSite>& s);
void encode_semaphore_release(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                              bool timestamp, std::vector<PatchSite>& s);

class ComputeEncoder final : public Encoder {
 public:
  // Where the CPU writes [va, va + bytes) of device-visible memory, or null where it cannot.
  using HostView = std::function<void*(uint64_t va, uint64_t bytes)>;
  // Launches send the QMD inline (LOAD_INLINE_DATA into the kernarg area, then SEND_PCAS_A).
  explicit ComputeEncoder(QmdVersion v) : version_(v) {}
  // Launches by address (HCQ_NV_QMD_BY_ADDRESS, as the CUDA driver launches): exec writes the
  // QMD and the launch dimensions into the kernarg area through `host_view` and encodes only
  // SEND_PCAS_A, SEND_SIGNALING_PCAS2_B and the host WFI. Such a launch has no patch sites
  // (its values are in memory, not in the stream) and never chains.
  ComputeEncoder(QmdVersion v, HostView host_view) : version_(v), host_view_(std::move(host_view)) {}
  void wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) override;
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
              std::vector<PatchSite>& s) override;
  void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) override;
  void memory_barrier(CommandStream& cs) override;
  // A grid or CTA dimension its QMD field cannot hold (e.g. a 16-bit CTA_THREAD_DIMENSION1)
  // is the same exact error as prepare's, here where it enters.
  void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid, Dim3 block,
            std::vector<PatchSite>& s) override;
  void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
            std::vector<PatchSite>& s) override;

  // Fill k.qmd with every launch-independent field of this QMD version (done at load).
  // Throws InvalidInput "kernel 'K': QMD V0n.FIELD: V does not fit in W bits (at most M)"
  // for a register count, barrier count, shared memory or constant bank size its field
  // cannot hold.
  void prepare(NvKernel& k) const;
  // A channel's first commands: bind `compute_class` and place the shared and local memory
  // windows (4 GiB aligned: Hopper refuses 0xfe000000; rm_driver.cpp picks them).
  static std::vector<uint32_t> setup(uint32_t compute_class, uint64_t shared_window,
                                     uint64_t local_window);

 private:
  // A launch ends with three one-method runs (a header and a data dword each):
  // SEND_PCAS_A, SEND_SIGNALING_PCAS2_B and a host WFI. encode_launch checks the runs it
  // writes against this.
  static constexpr uint32_t kLaunchTailDwords = 3 * 2;
  struct Chain {
    bool ok = false;
    uint32_t tail_at = 0;    // where the previous launch's tail (and a barrier) starts
    uint32_t qmd_at = 0;     // its QMD's first dword in the stream
    size_t pcas_site = 0;    // its SEND_PCAS patch site
    uint32_t tail[kLaunchTailDwords] = {};
  };
  // Whether the stream ends with a launch this one can chain to.
  Chain chainable(const CommandStream& cs, const std::vector<PatchSite>& s) const;
  // The launch as prepare() lays it into the template.
  void encode_launch(CommandStream& cs, const NvKernel& k, uint64_t kernargs, Dim3 grid,
                     Dim3 block, std::vector<PatchSite>& s) const;
  // exec with host_view_: the QMD into memory, the tail into the stream.
  void exec_by_address(CommandStream& cs, const NvKernel& k, uint64_t kernargs, Dim3 grid,
                       Dim3 block) const;
  QmdVersion version_;
  HostView host_view_;  // set: launches by address
};

class CopyEncoder final : public Encoder {
 public:
  // One LAUNCH_DMA moves at most this many bytes (LINE_LENGTH_IN is 32 bits); larger copies
  // are split.
  static constexpr uint64_t kMaxCopy = 1ull << 31;

  void wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) override;
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
              std::vector<PatchSite>& s) override;
  void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) override;
  void memory_barrier(CommandStream& cs) override;
  void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid, Dim3 block,
            std::vector<PatchSite>& s) override;
  void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
            std::vector<PatchSite>& s) override;

  static std::vector<uint32_t> setup(uint32_t copy_class);
};

}  // namespace hcq::nv
