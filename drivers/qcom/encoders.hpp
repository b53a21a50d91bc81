// The Adreno encoder for the core queue commands, a6xx and a7xx: CP type-7 packets and pkt4
// register writes from cp.def / regs.def. Adreno has one command processor per context and no
// copy engine: copies are host copies on its shared memory (lib/core) or kernels.
#pragma once

#include <vector>

#include "core/driver.hpp"
#include "qcom/ir3_program.hpp"
#include "qcom/packets.hpp"

namespace hcq::qcom {

// An ir3 compute kernel loaded on an Adreno device. Its kernarg area is the argument block,
// loaded into the constant file at `args_offset` for each launch.
class AdrenoKernel final : public KernelObject {
 public:
  uint64_t instr_dwords = 0;
  uint32_t full_regs = 0, half_regs = 0, branch_stack = 0, threadsize = 64;
  uint32_t const_dwords = 0, args_offset = 0, args_bytes = 0, uav_count = 0;
  // Register ids (regid: register * 4 + component) the shader reads its workgroup id and
  // local invocation id from; 0xfc (regid(63, 0)) when it reads none.
  uint32_t workgroup_id_regid = 0xfc, local_id_regid = 0xfc;
  uint64_t immediates_va = 0;  // where the ir3 immediates sit in code memory (0: none)
  uint32_t immediates_offset = 0, immediates_dwords = 0;
  // UAVs (ir3 container version 2; uav_count of them): where each one's buffer address lies
  // in the argument block, and where the descriptors lie in the kernarg area, after the
  // argument block (64-byte aligned, 16 dwords each; their words other than the address come
  // from kernarg_init). A launch copies each address into its descriptor on the GPU, so a
  // re-bound argument (a new kernarg area, or a new address patched into one) moves the UAV.
  std::vector<uint32_t> uav_arg_offsets;
  uint32_t uav_table_offset = 0;
  // The launch encoded once (CpEncoder::prepare) with zero grid, block and arguments, its patch
  // sites (dwords from its start; the kernarg address sites first), and for which generation.
  std::vector<uint32_t> launch_words;
  std::vector<PatchSite> launch_sites;
  // Where its sizes go: HLSQ_CS_NDRANGE_0 (local sizes; the global sizes in NDRANGE_1/3/5
  // follow), HLSQ_CS_LAST_LOCAL_SIZE (a7xx; 0 on a6xx) and CP_EXEC_CS's workgroup counts.
  uint32_t ndrange_at = 0, last_local_at = 0, exec_at = 0;
  Gen prepared_for = Gen::A6xx;
};

// Device memory the encoder's commands use: a dword that holds 1 (CP_COND_EXEC's condition)
// and a scratch dword cache-flush events write to.
struct EncoderMemory {
  uint64_t one_va = 0;
  uint64_t scratch_va = 0;
};

class CpEncoder final : public hcq::Encoder {
 public:
  CpEncoder(Gen gen, EncoderMemory mem) : gen_(gen), mem_(mem) {}
  // A 64-bit >= wait from 32-bit CP_WAIT_REG_MEMs: the high word >= H, then, only while it
  // equals H (CP_COND_EXEC: high word < H + 1), the low word >= L.
  void wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) override;
  // After prior work and a cache flush, CP_MEM_WRITE of the 64-bit value.
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
              std::vector<PatchSite>& s) override;
  // The always-on counter (CP_REG_TO_MEM, 64-bit) into the record's second half.
  void timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) override;
  void memory_barrier(CommandStream& cs) override;
  void exec(CommandStream& cs, const KernelObject& k, uint64_t kernargs, Dim3 grid, Dim3 block,
            std::vector<PatchSite>& s) override;
  void copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
            std::vector<PatchSite>& s) override;

  // Encode `k`'s launch template for this generation (done once at program load).
  void prepare(AdrenoKernel& k) const;

  // A CP_INDIRECT_BUFFER running `dwords` at `va` (4 dwords); InvalidInput when `dwords` does
  // not fit its IB_SIZE field (kMaxIbDwords).
  static void indirect_buffer(uint32_t* out, uint64_t va, uint32_t dwords);
  // A UAV descriptor viewing a buffer of `format` elements, all but its address (dwords 4-5,
  // which each launch fills): descriptors.def TEX_MEMOBJ, kTEX_MEMOBJ_DWORDS dwords.
  static void uav_descriptor(uint32_t* out, Ir3UavFormat format);

 private:
  uint32_t reg(RegId r) const { return reg_address(r, gen_); }
  // A cache flush event (CP_EVENT_WRITE on a6xx, CP_EVENT_WRITE7 on a7xx) at p, of
  // flush_event_dwords dwords.
  void flush_event(uint32_t* p, uint32_t event_a6xx, uint32_t event_a7xx) const;
  uint32_t flush_event_dwords(uint32_t event_a6xx) const;
  // The whole launch, field by field (prepare() records it; exec copies the record).
  void encode_launch(CommandStream& cs, const AdrenoKernel& k, uint64_t kernargs, Dim3 grid,
                     Dim3 block, std::vector<PatchSite>& s) const;
  Gen gen_;
  EncoderMemory mem_;
};

// The most dwords one indirect buffer may hold: CP_INDIRECT_BUFFER's IB_SIZE field (cp.def), the
// field KGSL's and drm/msm's ring packets put a submission's IB size in.
inline constexpr uint32_t kMaxIbDwords = CP_INDIRECT_BUFFER_IB_SIZE.mask();

// The always-on counter's frequency (the timestamps CP_REG_TO_MEM writes): 19.2 MHz on
// Snapdragon SoCs (turnip's tu_device timestamp period, tinygrad ops_qcom.py).
inline constexpr uint64_t kAlwaysOnHz = 19'200'000;

}  // namespace hcq::qcom
