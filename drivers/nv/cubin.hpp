// NVIDIA cubins (the ELF64 files nvcc -cubin / ptxas write, e_machine EM_CUDA = 190): the
// kernels with their launch resources and parameter layout (from the .nv.info attribute
// records), the constant banks they use, and the relocations a loader applies.
//
// Loading model. The loader copies the WHOLE FILE into device memory as-is at some base (so a
// kernel's code is at base + code_offset, and the emulated GPU can find the kernel from a
// program address by parsing the ELF at the start of the mapping), zero-fills
// [file size, image_bytes) for the zero-initialised global data nvcc leaves out of the file
// (SHT_NOBITS .nv.global; see Cubin::image_bytes), and patches the copy in place with
// apply_relocations. Every offset below is an offset in that image; sh_addr is 0 in every
// cubin nvcc writes and is not used.
//
// Where the facts come from is documented in cubin.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hcq::nv {

// One kernel parameter (EIATTR_KPARAM_INFO). `offset` is within the parameter block, which
// sits at CubinKernel::param_base in constant bank 0.
struct CubinParam {
  uint32_t ordinal = 0, offset = 0, size = 0;
};

// A constant bank's initial contents: section .nv.constant<bank> (module-wide) or
// .nv.constant<bank>.<kernel>; `offset` is its offset in the file image, `size` its bytes.
struct CubinConstBank {
  uint32_t bank = 0;
  uint64_t offset = 0, size = 0;
};

struct CubinKernel {
  std::string name;
  uint32_t symbol = 0;  // its .symtab index
  // The code: from the kernel's entry (its symbol's value in .text.<name>) to the end of that
  // section, which also holds the non-inlined device functions only this kernel calls.
  uint64_t code_offset = 0, code_size = 0;
  // Registers per thread: EIATTR_REGCOUNT (module .nv.info, keyed by the kernel's symbol),
  // else bits 31:24 of the .text section's sh_info (SHI_REGISTERS). CUDA 13 writes
  // EIATTR_REGCOUNT for every target but leaves sh_info's register field 0 for sm_90 and
  // sm_100, so the attribute comes first.
  uint32_t registers = 0;
  // Named barriers (bar.sync ids) used: EIATTR_NUM_BARRIERS when present, else bits 23:20 of
  // the .text section's sh_flags (SHF_BARRIERS), which CUDA 13 no longer fills in.
  uint32_t barriers = 0;
  // Static shared memory: the size of .nv.shared.<name> (0 when absent). On sm_90 and later
  // nvcc includes the 1 KiB the system reserves at the start of shared memory in it.
  uint32_t shared_bytes = 0;
  // Per-thread local memory (stack) to provide: the largest of the kernel's EIATTR_FRAME_SIZE
  // (its own frame), EIATTR_MIN_STACK_SIZE (frame plus the deepest call chain ptxas could
  // see) and EIATTR_MAX_STACK_SIZE (when present). A recursive kernel may need more; that is
  // the caller's stack-size limit, as with cudaLimitStackSize.
  uint32_t local_bytes = 0;
  // Where the parameter block starts in constant bank 0 (EIATTR_PARAM_CBANK's offset: 0x160
  // on sm_80/sm_89, 0x210 on sm_90, 0x380 on sm_100 with CUDA 13). A kernel with no
  // parameters has no EIATTR_PARAM_CBANK; then it is the size of .nv.constant0.<name>
  // (where a first parameter would go), or 0 when that section is absent too.
  uint32_t param_base = 0;
  // Bytes of parameters (EIATTR_CBANK_PARAM_SIZE, else EIATTR_PARAM_CBANK's size; 0 for none).
  uint32_t param_bytes = 0;
  // Product of EIATTR_MAX_THREADS' x, y, z (from __launch_bounds__ / .maxntid) when present,
  // else 0.
  uint32_t max_threads = 0;
  std::vector<CubinParam> params;      // by ordinal: params[i].ordinal == i
  std::vector<CubinConstBank> banks;   // constant banks other than 0 this kernel may read
                                       // (its own .nv.constantN.<name> and the module-wide
                                       // .nv.constantN), by bank number
};

// A relocation a loader applies: at image offset `offset`, relocation `type` (R_CUDA_*) with
// the value base + target, where `target` is the image offset of the symbol plus the addend.
struct CubinReloc {
  uint64_t offset = 0;
  uint32_t type = 0;
  uint64_t target = 0;
};

struct Cubin {
  uint32_t sm = 0;  // 80, 89, 90, 100 ... from the ELF header flags
  // Bytes the loaded image spans: the file, then each SHT_NOBITS .nv.global* section at the
  // next multiple of its alignment (their symbols' offsets, and so relocation targets, lie
  // there). The loader maps at least this much and zero-fills what lies past the file.
  uint64_t image_bytes = 0;
  // The largest alignment a loaded section asks for (sh_addralign); the base must be a
  // multiple of it (128 for code in the cubins nvcc writes).
  uint64_t base_alignment = 1;
  // Shared memory reserved for the system, module-wide: the size of .nv.shared.reserved.0
  // (0x40 on sm_100 with CUDA 13, 0 or absent before).
  uint32_t reserved_shared_bytes = 0;
  std::vector<CubinKernel> kernels;  // in .symtab order
  std::vector<CubinReloc> relocs;    // what a loader must apply, in file order

  const CubinKernel* find(const std::string& name) const;
  // The kernel whose code contains file offset `offset`, or null.
  const CubinKernel* kernel_at(uint64_t offset) const;
};

// Parse a cubin (ELF64, little-endian, EM_CUDA = 190, EI_ABIVERSION 7 or 8). Throws
// hcq::InvalidInput with a message naming the file part, the offset and what was expected for
// anything malformed: not ELF, wrong class or machine, truncated headers or sections, a
// section, name or symbol out of range, bad .nv.info record lengths, unknown relocation types
// in a loaded section, a kernel with no .text section, inconsistent parameter records.
// Never reads outside `file`.
Cubin parse_cubin(std::span<const std::byte> file);

// Patch `image` (a copy of the file, at least as large as it, laid out as described above) for
// loading at GPU address `base`: every relocation's field gets base + target as its type says
// (R_CUDA_32/64, R_CUDA_G32/G64, the R_CUDA_ABS32/ABS24/ABS16/ABS20 instruction fields and
// their LO/HI halves, R_CUDA_32_LO/HI). Throws hcq::InvalidInput when a field lies outside
// `image` or a value does not fit its field (a 32-bit absolute address of a base above 4 GiB).
void apply_relocations(const Cubin& c, std::span<std::byte> image, uint64_t base);

// "R_CUDA_ABS32_LO_32"; null for a type apply_relocations does not handle.
const char* reloc_name(uint32_t type);

}  // namespace hcq::nv
