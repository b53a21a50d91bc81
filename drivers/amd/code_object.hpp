// AMDHSA code objects (the ELF shared objects clang emits for amdgcn-amd-amdhsa): parsing,
// the 64-byte kernel descriptor, kernel metadata (the NT_AMDGPU_METADATA msgpack note), and
// loading into device memory with relocations applied.
//
// Facts from LLVM AMDGPUUsage.rst, llvm/BinaryFormat/ELF.h and AMDHSAKernelDescriptor.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "amd/packets.hpp"
#include "core/driver.hpp"

namespace hcq::amd {

// The kernel descriptor (symbol "<kernel>.kd", 64 bytes), decoded.
struct KernelDescriptor {
  static constexpr size_t kBytes = 64;
  uint32_t group_segment_fixed_size = 0;    // offset 0
  uint32_t private_segment_fixed_size = 0;  // offset 4
  uint32_t kernarg_size = 0;                // offset 8
  int64_t kernel_code_entry_byte_offset = 0;  // offset 16, from the descriptor's address
  uint32_t compute_pgm_rsrc3 = 0;           // offset 44
  uint32_t compute_pgm_rsrc1 = 0;           // offset 48
  uint32_t compute_pgm_rsrc2 = 0;           // offset 52
  uint16_t kernel_code_properties = 0;      // offset 56
  uint16_t kernarg_preload = 0;             // offset 58

  static KernelDescriptor decode(const std::byte* bytes);  // 64 bytes
  // Number of user SGPRs the hardware loads (COMPUTE_PGM_RSRC2.USER_SGPR, regs.def).
  uint32_t user_sgpr_count() const {
    return regs::COMPUTE_PGM_RSRC2_USER_SGPR_ALL.get(compute_pgm_rsrc2);
  }
  // Index of the first user SGPR holding the kernarg segment pointer, in AMDHSA order
  // (private segment buffer 4, dispatch ptr 2, queue ptr 2, kernarg ptr 2 ...); -1 if not enabled.
  int kernarg_sgpr() const;
  bool wave32() const { return kernel_code_properties & (1u << 10); }
};

// An AMD kernel loaded on a device: what the PM4 encoder needs to launch it.
class AmdKernel : public KernelObject {
 public:
  uint64_t descriptor_va = 0;
  KernelDescriptor kd;
  uint32_t wave_size = 64;

  // The kernel's dispatch packets, encoded once (Pm4Encoder::prepare) so a launch is a copy
  // plus the launch's own values at these dword offsets. Empty until prepared.
  struct DispatchTemplate {
    std::vector<uint32_t> words;
    uint8_t gen = 0;  // the amd::Gen it was encoded for
    int32_t kernarg_at = -1;
    uint32_t block_at = 0, grid_at = 0;
  } dispatch;
};

class CodeObject {
 public:
  struct Kernel {
    std::string name;
    uint64_t descriptor_offset = 0;  // image address of the descriptor
    KernelDescriptor kd;
    uint32_t kernarg_size = 0, kernarg_align = 16, wave_size = 64;
    uint32_t lds_bytes = 0, scratch_bytes = 0;
    std::vector<KernelArg> args;
  };

  // Throws hcq::InvalidInput saying what is wrong (not ELF, truncated, wrong machine or ABI,
  // missing descriptor, unsupported relocation, malformed metadata) without reading past
  // the input.
  static CodeObject parse(std::span<const std::byte> image);

  const std::string& target() const { return target_; }  // "gfx1100"
  uint32_t mach() const { return mach_; }                  // EF_AMDGPU_MACH value
  uint64_t image_bytes() const { return image_bytes_; }    // size of the loaded image
  const std::vector<Kernel>& kernels() const { return kernels_; }

  // Lay the image out for execution at `base_va`: each PT_LOAD segment at base_va + p_vaddr
  // (so the ELF header lands at base_va), zero-filled to p_memsz, relocations applied.
  // `dst` is the CPU view of [base_va, base_va + image_bytes()).
  void load(void* dst, uint64_t base_va) const;

 private:
  friend class CodeObjectParser;  // code_object.cpp
  struct Segment {
    uint64_t vaddr, offset, filesz, memsz;
  };
  struct Reloc {
    uint64_t offset;
    uint32_t type;
    uint64_t symbol_value;  // 0 for RELATIVE64
    int64_t addend;
  };
  std::vector<std::byte> bytes_;
  std::string target_;
  uint32_t mach_ = 0;
  uint64_t image_bytes_ = 0;
  std::vector<Segment> segments_;
  std::vector<Reloc> relocs_;
  std::vector<Kernel> kernels_;
};

// "gfx1100" <-> EF_AMDGPU_MACH; empty / 0 when unknown.
std::string target_of_mach(uint32_t mach);
uint32_t mach_of_target(const std::string& target);

// The emulated GPU's view: given the loaded image at `image` (its ELF header first, as
// CodeObject::load lays it out) and a code entry address relative to the image start, find
// the kernel whose descriptor points there by walking the loaded dynamic symbol table
// (PT_DYNAMIC: DT_SYMTAB, DT_STRTAB, DT_HASH/DT_GNU_HASH). Returns false when none does.
// Never reads outside [image, image + image_size).
bool find_kernel_at(const std::byte* image, uint64_t image_size, uint64_t entry_offset,
                    std::string& name, KernelDescriptor& kd);

}  // namespace hcq::amd
