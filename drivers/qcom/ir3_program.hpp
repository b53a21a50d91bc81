// Adreno compute programs: hcq's ir3 container, a small documented file holding compute
// shaders in ir3 machine code (the ISA of Adreno a6xx/a7xx shader cores, as Mesa's ir3
// compiler writes it) with what a launch needs besides the code: register footprints, branch
// stack, wave size, the constant-file layout of the kernel arguments, the immediates the
// shader expects in the constant file, the registers it reads the workgroup and local ids
// from, and the argument metadata core lays arguments out with.
//
// The byte format, every field and how to produce a container from Mesa's ir3 compiler are in
// docs/ir3-container.md. In short: little-endian; a 24-byte header (magic "HCQIR3\0\0",
// version 1, family, kernel count, header length), then one length-prefixed record per kernel
// (an 88-byte fixed part, the name, the instructions, the immediates, the arguments), so a
// reader skips fields a later compatible writer appends to a record. Version 2 adds, after the
// arguments, one entry per UAV slot saying which buffer argument its descriptor views and with
// what element size; version-1 files are still read.
//
// Loading model. The instructions are copied into device memory (SP_CS_OBJ_START), padded with
// nops (zero words) to whole groups of 16 instructions as Mesa pads them; the constant file is
// loaded before a launch with the immediates at immediates_offset and the kernel argument
// block at args_offset, const_dwords dwords in all (HLSQ_CS_CNTL.CONSTLEN: const_dwords / 4
// vec4s, rounded up to a multiple of 4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/driver.hpp"

namespace hcq::qcom {

// The register id ("regid": register number * 4 + component, r48.x = 0xc0) that says "none":
// regid(63, 0), what Mesa writes to SP_CS_CNTL_0's WGIDCONSTID / LOCALIDREGID for a sysval the
// shader does not read.
inline constexpr uint32_t kIr3NoRegid = 0xfc;

// One kernel argument: `size` bytes at `offset` in the kernel's argument block.
struct Ir3Arg {
  std::string name;
  uint32_t offset = 0, size = 0;  // bytes in the kernel's argument block
  // Buffer (a 64-bit GPU address, size 8) or Value (size bytes, copied as they are).
  KernelArg::Kind kind = KernelArg::Kind::Value;
  // For a buffer: ReadOnly for a `const` pointer; ReadWrite when the producer knows no better.
  KernelArg::Access access = KernelArg::Access::ReadWrite;
};

// The element a UAV's typed-buffer descriptor reads and writes: the a6xx formats FMT6_32_UINT,
// FMT6_16_UINT and FMT6_8_UINT. ir3 indexes a storage buffer in these elements (Mesa's
// freedreno views an SSBO as R32_UINT, or R16_UINT where the GPU has 16-bit storage).
enum class Ir3UavFormat : uint8_t { U32 = 0, U16 = 1, U8 = 2 };
constexpr uint32_t uav_element_bytes(Ir3UavFormat f) {
  return f == Ir3UavFormat::U32 ? 4 : f == Ir3UavFormat::U16 ? 2 : 1;
}

// A UAV slot (version 2): its descriptor views the buffer passed as argument `arg`.
struct Ir3Uav {
  uint32_t arg = 0;  // index into Ir3Kernel::args; a Buffer argument
  Ir3UavFormat format = Ir3UavFormat::U32;
};

struct Ir3Kernel {
  std::string name;
  // ir3 machine code: 64-bit instructions, each as two dwords (low dword first), as ir3's
  // assembler writes them (ir3_shader_variant::bin, info.sizedwords dwords).
  std::vector<uint32_t> instructions;
  uint32_t full_regs = 0;  // full-precision register footprint (SP_CS_CTRL_REG0.FULLREGFOOTPRINT,
                           // Mesa: info.max_reg + 1)
  uint32_t half_regs = 0;  // half-precision footprint (HALFREGFOOTPRINT, info.max_half_reg + 1)
  uint32_t branch_stack = 0;  // SP_CS_CTRL_REG0.BRANCHSTACK (Mesa: ir3_shader_branchstack_hw())
  uint32_t threadsize = 64;   // 64 or 128 (wave size the shader was compiled for)
  uint32_t local_size[3] = {0, 0, 0};  // required workgroup size, 0 = any (all or none zero)
  uint32_t const_dwords = 0;  // constant dwords the shader reads (vec4 multiple), args included
  uint32_t args_offset = 0;   // byte offset of the argument block in the constant file (16-aligned)
  uint32_t args_bytes = 0;
  uint32_t uav_count = 0;     // UAV (IBO) descriptors the shader uses (SP_CS_CONFIG.NIBO)
  uint32_t local_memory_bytes = 0;    // shared (local) memory per workgroup
  uint32_t private_memory_bytes = 0;  // per-thread private memory
  // Words the shader expects in the constant file at immediates_offset (bytes, 16-aligned):
  // the immediates ir3 lowered to constants (Mesa: imm_state / const_state->immediates).
  std::vector<uint32_t> immediates;
  uint32_t immediates_offset = 0;
  // Where the shader reads its workgroup id (x, y, z) and local invocation id (x, y, z): the
  // register ids for SP_CS_CNTL_0 / HLSQ_CS_CNTL_0 WGIDCONSTID and LOCALIDREGID; kIr3NoRegid
  // when it reads none.
  uint32_t workgroup_id_regid = kIr3NoRegid;
  uint32_t local_id_regid = kIr3NoRegid;
  bool early_preamble = false;  // SP_CS_CTRL_REG0.EARLYPREAMBLE (Mesa: early_preamble)
  std::vector<Ir3Arg> args;     // in argument order
  // Version 2: the buffer bound to each UAV slot, uav_count of them. Empty in version 1, whose
  // kernels with UAVs cannot be launched (nothing says what the UAVs view).
  std::vector<Ir3Uav> uavs;
};

struct Ir3Module {
  // 1 or 2 as parsed. On writing, 0 means the lowest that holds the module: 2 when a kernel
  // binds UAVs, else 1.
  uint32_t version = 0;
  uint32_t family = 0;  // 6 (a6xx), 7 (a7xx), 0 = any
  std::vector<Ir3Kernel> kernels;
  const Ir3Kernel* find(const std::string& name) const;  // null when absent
};

// Parse a container. Throws hcq::InvalidInput ("ir3 container: ...") naming the kernel, the
// file offset and what was wrong: bad magic, unsupported version or family, a truncated header
// or kernel record, counts or lengths past the end of the file or record, instructions not a
// whole number of 64-bit words, an argument outside args_bytes or overlapping another, a buffer
// argument not 8 bytes, args_offset / immediates_offset not 16-aligned, const_dwords not a vec4
// multiple, not covering the argument block or the immediates, or larger than the family's
// constant file, the immediates overlapping the arguments, threadsize not 64/128, footprints or
// branch stack too large for their 6-bit fields, a register id above 0xff, a partly zero or too
// large local size, unknown flags, nonzero padding, duplicate kernel names, names empty (for a
// kernel), longer than 255 bytes or not clean UTF-8, a UAV count above SP_CS_CONFIG.NIBO's 127;
// in version 2 a UAV entry naming no argument or a value argument, an unknown UAV format or a
// nonzero reserved byte. Never reads outside `file`.
Ir3Module parse_ir3(std::span<const std::byte> file);

// The inverse (for tests and tools): writes the module as it is, without checking what
// parse_ir3 checks (so tests can write containers parse_ir3 must reject). Throws
// hcq::InvalidInput only for what the format cannot hold: a name longer than 255 bytes, an
// argument kind other than Buffer / Value, a record over 4 GiB, UAV bindings in version 1.
// The UAV table is written as `uavs` holds it, whatever uav_count says.
std::vector<std::byte> write_ir3(const Ir3Module& m);

}  // namespace hcq::qcom
