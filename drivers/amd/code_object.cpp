// AMDHSA code objects: read the ELF with the shared reader (common/elf.hpp), find the kernels
// by their descriptor symbols, decode the descriptors, merge the metadata note (metadata.hpp),
// lay the image out with relocations applied, and find a kernel in a loaded image.
//
// Facts used (all public):
// * ELF identification, EM_AMDGPU = 224, ELFOSABI_AMDGPU_HSA = 64, ELFABIVERSION_AMDGPU_HSA_V4..V6
//   = 2..4, EF_AMDGPU_MACH mask 0xff and the MACH values, NT_AMDGPU_METADATA = 32, the relocation
//   numbers: LLVM llvm/include/llvm/BinaryFormat/ELF.h and ELFRelocs/AMDGPU.def. MACH values
//   above 0x47 were checked against the e_flags clang-19 writes.
// * Relocation calculations (ABS64 = S + A, RELATIVE64 = B + A): LLVM docs/AMDGPUUsage.rst.
// * Kernel descriptor layout and kernel_code_properties bits, and the order user SGPRs are
//   initialised in: LLVM llvm/include/llvm/Support/AMDHSAKernelDescriptor.h and AMDGPUUsage.rst
//   ("Initial Kernel Execution State").
// * The metadata note: NT_AMDGPU_METADATA, read in metadata.cpp.
// * ELF hash tables (DT_HASH: System V gABI; DT_GNU_HASH: the GNU hash section format).
#include "amd/code_object.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "amd/metadata.hpp"
#include "common/elf.hpp"
#include "core/error.hpp"

namespace hcq::amd {
namespace {

constexpr uint16_t kEmAmdgpu = 224;          // EM_AMDGPU
constexpr uint8_t kOsAbiAmdgpuHsa = 64;      // ELFOSABI_AMDGPU_HSA
constexpr uint8_t kAbiV4 = 2, kAbiV6 = 4;    // ELFABIVERSION_AMDGPU_HSA_V4 .. _V6
constexpr uint32_t kMachMask = 0xff;         // EF_AMDGPU_MACH
constexpr uint32_t kNtAmdgpuMetadata = 32;   // NT_AMDGPU_METADATA
constexpr uint32_t kRelocNone = 0;           // R_AMDGPU_NONE
constexpr uint32_t kRelocAbs64 = 3;          // R_AMDGPU_ABS64
constexpr uint32_t kRelocRelative64 = 13;    // R_AMDGPU_RELATIVE64
constexpr uint64_t kMaxImageBytes = uint64_t{1} << 30;  // our own sanity limit
constexpr uint64_t kPage = 4096;

[[noreturn]] void fail(const std::string& what) {
  throw InvalidInput("AMDGPU code object: " + what);
}

using elf::add_ok;
using elf::in_bounds;

template <class T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // hosts are little-endian, like the code objects
  return v;
}

struct MachName {
  uint32_t mach;
  const char* name;
};
// EF_AMDGPU_MACH values (LLVM BinaryFormat/ELF.h).
constexpr MachName kMachs[] = {
    {0x020, "gfx600"},  {0x021, "gfx601"},  {0x022, "gfx700"},  {0x023, "gfx701"},
    {0x024, "gfx702"},  {0x025, "gfx703"},  {0x026, "gfx704"},  {0x028, "gfx801"},
    {0x029, "gfx802"},  {0x02a, "gfx803"},  {0x02b, "gfx810"},  {0x02c, "gfx900"},
    {0x02d, "gfx902"},  {0x02e, "gfx904"},  {0x02f, "gfx906"},  {0x030, "gfx908"},
    {0x031, "gfx909"},  {0x032, "gfx90c"},  {0x033, "gfx1010"}, {0x034, "gfx1011"},
    {0x035, "gfx1012"}, {0x036, "gfx1030"}, {0x037, "gfx1031"}, {0x038, "gfx1032"},
    {0x039, "gfx1033"}, {0x03a, "gfx602"},  {0x03b, "gfx705"},  {0x03c, "gfx805"},
    {0x03d, "gfx1035"}, {0x03e, "gfx1034"}, {0x03f, "gfx90a"},  {0x040, "gfx940"},
    {0x041, "gfx1100"}, {0x042, "gfx1013"}, {0x043, "gfx1150"}, {0x044, "gfx1103"},
    {0x045, "gfx1036"}, {0x046, "gfx1101"}, {0x047, "gfx1102"}, {0x048, "gfx1200"},
    {0x04a, "gfx1151"}, {0x04b, "gfx941"},  {0x04c, "gfx942"},  {0x04e, "gfx1201"},
    {0x051, "gfx9-generic"},    {0x052, "gfx10-1-generic"}, {0x053, "gfx10-3-generic"},
    {0x054, "gfx11-generic"},   {0x055, "gfx1152"},         {0x059, "gfx12-generic"},
};

// The processor in "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string processor_of(const std::string& triple_target) {
  auto dd = triple_target.find("--");
  std::string p = dd == std::string::npos ? triple_target : triple_target.substr(dd + 2);
  return p.substr(0, p.find(':'));
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string target_of_mach(uint32_t mach) {
  for (auto& m : kMachs)
    if (m.mach == mach) return m.name;
  return {};
}

uint32_t mach_of_target(const std::string& target) {
  const std::string p = processor_of(target);
  for (auto& m : kMachs)
    if (p == m.name) return m.mach;
  return 0;
}

KernelDescriptor KernelDescriptor::decode(const std::byte* b) {
  // Offsets: AMDHSAKernelDescriptor.h (kernel_descriptor_t).
  KernelDescriptor kd;
  kd.group_segment_fixed_size = load_le<uint32_t>(b + 0);
  kd.private_segment_fixed_size = load_le<uint32_t>(b + 4);
  kd.kernarg_size = load_le<uint32_t>(b + 8);
  kd.kernel_code_entry_byte_offset = load_le<int64_t>(b + 16);
  kd.compute_pgm_rsrc3 = load_le<uint32_t>(b + 44);
  kd.compute_pgm_rsrc1 = load_le<uint32_t>(b + 48);
  kd.compute_pgm_rsrc2 = load_le<uint32_t>(b + 52);
  kd.kernel_code_properties = load_le<uint16_t>(b + 56);
  kd.kernarg_preload = load_le<uint16_t>(b + 58);
  return kd;
}

int KernelDescriptor::kernarg_sgpr() const {
  // kernel_code_properties bits and user SGPR order (AMDHSAKernelDescriptor.h, AMDGPUUsage.rst
  // "Initial Kernel Execution State"): private segment buffer (4), dispatch ptr (2), queue
  // ptr (2), kernarg segment ptr (2), ... Only the enabled ones are packed from s0. The index is
  // computed from the order, never from USER_SGPR_COUNT, which gfx11 pads up to 16.
  const uint32_t p = kernel_code_properties;
  if (!(p & (1u << 3))) return -1;
  int idx = 0;
  if (p & (1u << 0)) idx += 4;  // ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER
  if (p & (1u << 1)) idx += 2;  // ENABLE_SGPR_DISPATCH_PTR
  if (p & (1u << 2)) idx += 2;  // ENABLE_SGPR_QUEUE_PTR
  return idx;                   // ENABLE_SGPR_KERNARG_SEGMENT_PTR comes next
}

// ---------------------------------------------------------------------------------------------
// CodeObject::parse, along the file's layers: the ELF and its header, the loaded segments, the
// kernel descriptor symbols, the metadata note, the dynamic relocations.

class CodeObjectParser {
 public:
  explicit CodeObjectParser(std::span<const std::byte> image)
      : file_(image, "AMDGPU code object: ") {}

  CodeObject run() {
    header();
    file_.read_tables();
    find_sections();
    segments();
    kernel_symbols();
    for (const uint32_t i : notes_)
      if (metadata_note(i)) break;  // the first NT_AMDGPU_METADATA note counts
    for (auto& entry : by_symbol_) co_.kernels_.push_back(std::move(entry.second));
    std::sort(co_.kernels_.begin(), co_.kernels_.end(), [](const auto& a, const auto& b) {
      return a.descriptor_offset < b.descriptor_offset;
    });
    for (const uint32_t i : relas_) relocations(i);
    co_.bytes_.assign(file_.bytes().begin(), file_.bytes().end());
    return std::move(co_);
  }

 private:
  using Kernel = CodeObject::Kernel;

  elf::File file_;
  CodeObject co_;
  int dynsym_ = -1, symtab_ = -1;  // the first of each, if any
  std::vector<uint32_t> notes_, relas_;
  std::map<std::string, Kernel> by_symbol_;  // descriptor symbol ("k.kd") -> kernel

  std::string label(uint32_t i) const { return file_.section_label(i); }

  // What an AMDHSA code object's header fixes (AMDGPUUsage.rst, "ELF Code Object").
  void header() {
    const Elf64_Ehdr& eh = file_.header();
    if (eh.e_ident[EI_OSABI] != kOsAbiAmdgpuHsa)
      fail("ELF OS ABI " + std::to_string(eh.e_ident[EI_OSABI]) + ", expected 64 (AMDGPU HSA)");
    const uint8_t abi = eh.e_ident[EI_ABIVERSION];
    if (abi < kAbiV4 || abi > kAbiV6)
      fail("ELF ABI version " + std::to_string(abi) +
           " is not a supported code object version (expected 2, 3 or 4 for v4, v5, v6)");
    if (eh.e_machine != kEmAmdgpu)
      fail("e_machine " + std::to_string(eh.e_machine) + ", expected 224 (EM_AMDGPU)");
    if (eh.e_type != ET_DYN)
      fail("e_type " + std::to_string(eh.e_type) +
           ", expected 3 (ET_DYN, a linked shared object; link the .o with ld.lld -shared)");
    co_.mach_ = eh.e_flags & kMachMask;
    co_.target_ = target_of_mach(co_.mach_);
    if (co_.target_.empty())
      fail("unknown EF_AMDGPU_MACH " + hex(co_.mach_) + " in e_flags " + hex(eh.e_flags));
  }

  void find_sections() {
    const auto& secs = file_.sections();
    for (uint32_t i = 0; i < secs.size(); ++i) {
      const Elf64_Shdr& sh = secs[i].h;
      switch (sh.sh_type) {
        case SHT_DYNSYM:
          if (dynsym_ < 0) dynsym_ = static_cast<int>(i);
          break;
        case SHT_SYMTAB:
          if (symtab_ < 0) symtab_ = static_cast<int>(i);
          break;
        case SHT_NOTE: notes_.push_back(i); break;
        case SHT_RELA:
          // Only allocated relocation sections (.rela.dyn) are for the loader; non-allocated
          // ones (ld --emit-relocs) describe link-time fixups that are already applied.
          if (sh.sh_flags & SHF_ALLOC) relas_.push_back(i);
          break;
        case SHT_REL:
          if (sh.sh_flags & SHF_ALLOC)
            fail(label(i) + " holds SHT_REL relocations; AMDGPU uses SHT_RELA only");
          break;
        default: break;
      }
    }
  }

  // PT_LOAD segments (inside the file, p_filesz <= p_memsz: checked by the reader) and the
  // image they span.
  void segments() {
    const auto& phdrs = file_.segments();
    uint64_t end = 0;
    for (size_t i = 0; i < phdrs.size(); ++i) {
      const Elf64_Phdr& ph = phdrs[i];
      if (ph.p_type != PT_LOAD) continue;
      uint64_t seg_end;
      if (!add_ok(ph.p_vaddr, ph.p_memsz, seg_end) || seg_end > kMaxImageBytes)
        fail("PT_LOAD segment #" + std::to_string(i) + " at " + hex(ph.p_vaddr) + "+" +
             hex(ph.p_memsz) + " ends beyond the 1 GiB image limit");
      end = std::max(end, seg_end);
      co_.segments_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
    }
    if (co_.segments_.empty()) fail("no PT_LOAD segments");
    co_.image_bytes_ = (end + kPage - 1) / kPage * kPage;
  }

  // File offset of the image range [va, va + len) if a segment's file bytes hold it.
  std::optional<uint64_t> file_offset_of(uint64_t va, uint64_t len) const {
    for (auto& s : co_.segments_)
      if (va >= s.vaddr && in_bounds(va - s.vaddr, len, s.filesz)) return s.offset + (va - s.vaddr);
    return std::nullopt;
  }
  bool in_some_segment(uint64_t va, uint64_t len) const {
    for (auto& s : co_.segments_)
      if (va >= s.vaddr && in_bounds(va - s.vaddr, len, s.memsz)) return true;
    return false;
  }

  // Kernels: "<name>.kd" STT_OBJECT symbols. .dynsym first (what a loader sees; it survives
  // stripping), else .symtab.
  void kernel_symbols() {
    const int table = dynsym_ >= 0 ? dynsym_ : symtab_;
    if (table < 0) fail("no symbol table (.dynsym or .symtab)");
    const std::vector<elf::Symbol> syms = file_.symbols(static_cast<uint32_t>(table));
    for (size_t i = 1; i < syms.size(); ++i) {
      const Elf64_Sym& s = syms[i].s;
      const std::string& sym = syms[i].name;
      if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT) continue;
      if (sym.size() <= 3 || !sym.ends_with(".kd")) continue;
      if (s.st_shndx == SHN_UNDEF) fail("kernel descriptor symbol '" + sym + "' is undefined");
      if (s.st_size != KernelDescriptor::kBytes)
        fail("kernel descriptor symbol '" + sym + "' has size " + std::to_string(s.st_size) +
             ", expected 64");
      const auto off = file_offset_of(s.st_value, KernelDescriptor::kBytes);
      if (!off)
        fail("kernel descriptor '" + sym + "' at " + hex(s.st_value) +
             " is outside the file's loaded segments");
      Kernel k;
      k.name = sym.substr(0, sym.size() - 3);
      k.descriptor_offset = s.st_value;
      k.kd = KernelDescriptor::decode(file_.bytes().data() + *off);
      const uint64_t entry = s.st_value + static_cast<uint64_t>(k.kd.kernel_code_entry_byte_offset);
      if (!in_some_segment(entry, 4))
        fail("kernel '" + k.name + "' code entry " + hex(entry) + " (descriptor " +
             hex(s.st_value) + " + " + std::to_string(k.kd.kernel_code_entry_byte_offset) +
             ") is outside the image");
      if (entry % 256)
        fail("kernel '" + k.name + "' code entry " + hex(entry) +
             " is not 256-byte aligned (COMPUTE_PGM_LO takes address >> 8)");
      k.kernarg_size = k.kd.kernarg_size;
      k.lds_bytes = k.kd.group_segment_fixed_size;
      k.scratch_bytes = k.kd.private_segment_fixed_size;
      k.wave_size = k.kd.wave32() ? 32 : 64;
      by_symbol_.emplace(sym, std::move(k));
    }
    if (by_symbol_.empty()) fail("no kernels (no '<name>.kd' descriptor symbols)");
  }

  // The metadata note of section `i`, merged into the kernels; false when the section has
  // none. Without one, the kernels keep what their descriptors say, with no argument list.
  bool metadata_note(uint32_t i) {
    for (const elf::Note& n : file_.notes(i)) {
      if (n.name != "AMDGPU" || n.type != kNtAmdgpuMetadata) continue;
      const Metadata md = parse_metadata(n.desc);
      if (!md.target.empty() && processor_of(md.target) != co_.target_)
        fail("metadata amdhsa.target '" + md.target + "' does not match e_flags target " +
             co_.target_);
      for (const KernelMetadata& km : md.kernels) merge(km);
      return true;
    }
    return false;
  }

  void merge(const KernelMetadata& km) {
    auto it = by_symbol_.find(km.symbol);
    if (it == by_symbol_.end())
      fail("metadata describes kernel '" + km.name + "' but there is no descriptor symbol '" +
           km.symbol + "'");
    Kernel& k = it->second;
    k.name = km.name;
    if (km.kernarg_size) k.kernarg_size = *km.kernarg_size;
    if (km.kernarg_align) k.kernarg_align = *km.kernarg_align;
    if (km.wave_size) k.wave_size = *km.wave_size;
    if (km.lds) k.lds_bytes = *km.lds;
    if (km.scratch) k.scratch_bytes = *km.scratch;
    if (k.kernarg_align == 0 || (k.kernarg_align & (k.kernarg_align - 1)))
      fail("kernel '" + k.name + "' .kernarg_segment_align " + std::to_string(k.kernarg_align) +
           " is not a power of two");
    if (k.wave_size != 32 && k.wave_size != 64)
      fail("kernel '" + k.name + "' .wavefront_size " + std::to_string(k.wave_size) +
           ", expected 32 or 64");
    for (auto& a : km.args)
      if (!in_bounds(a.offset, a.size, k.kernarg_size))
        fail("kernel '" + k.name + "' argument at offset " + std::to_string(a.offset) +
             " size " + std::to_string(a.size) + " is outside its " +
             std::to_string(k.kernarg_size) + "-byte kernarg segment");
    k.args = km.args;
  }

  // The dynamic relocations of allocated SHT_RELA section `i`.
  void relocations(uint32_t i) {
    const Elf64_Shdr& sh = file_.sections()[i].h;
    std::optional<std::vector<elf::Symbol>> syms;  // read at the first R_AMDGPU_ABS64
    for (const Elf64_Rela& r : file_.relocations(i)) {
      const uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
      const uint64_t symi = ELF64_R_SYM(r.r_info);
      CodeObject::Reloc rel{r.r_offset, type, 0, r.r_addend};
      if (type == kRelocNone) continue;
      if (type != kRelocRelative64 && type != kRelocAbs64)
        fail("unsupported relocation type " + std::to_string(type) + " at " + hex(r.r_offset) +
             " (only R_AMDGPU_NONE, R_AMDGPU_ABS64 and R_AMDGPU_RELATIVE64 are loaded)");
      if (!in_some_segment(r.r_offset, 8))
        fail("relocation at " + hex(r.r_offset) + " is outside the loaded segments");
      if (type == kRelocAbs64) {
        if (!syms) {
          const auto& secs = file_.sections();
          if (sh.sh_link >= secs.size() ||
              (secs[sh.sh_link].h.sh_type != SHT_DYNSYM && secs[sh.sh_link].h.sh_type != SHT_SYMTAB))
            fail(label(i) + " does not link to a symbol table (sh_link " +
                 std::to_string(sh.sh_link) + ")");
          syms = file_.symbols(sh.sh_link);
        }
        if (symi == 0 || symi >= syms->size())
          fail("R_AMDGPU_ABS64 at " + hex(r.r_offset) + " names symbol #" +
               std::to_string(symi) + ", which does not exist");
        const elf::Symbol& s = (*syms)[symi];
        if (s.s.st_shndx == SHN_UNDEF)
          fail("R_AMDGPU_ABS64 at " + hex(r.r_offset) + " refers to undefined symbol '" +
               s.name + "' (link with --no-undefined)");
        rel.symbol_value = s.s.st_value;
      }
      co_.relocs_.push_back(rel);
    }
  }
};

CodeObject CodeObject::parse(std::span<const std::byte> image) {
  return CodeObjectParser(image).run();
}

void CodeObject::load(void* dst, uint64_t base_va) const {
  auto* out = static_cast<std::byte*>(dst);
  std::memset(out, 0, image_bytes_);
  for (auto& s : segments_) {
    // Checked in parse(); kept as a guard since this writes device memory.
    if (!in_bounds(s.vaddr, s.memsz, image_bytes_) || !in_bounds(s.offset, s.filesz, bytes_.size()))
      fail("segment at " + hex(s.vaddr) + " does not fit the image");
    std::memcpy(out + s.vaddr, bytes_.data() + s.offset, s.filesz);
  }
  for (auto& r : relocs_) {
    if (!in_bounds(r.offset, 8, image_bytes_))
      fail("relocation at " + hex(r.offset) + " does not fit the image");
    uint64_t v = base_va + static_cast<uint64_t>(r.addend);  // RELATIVE64: B + A
    if (r.type == kRelocAbs64) v += r.symbol_value;         // ABS64: S + A, S = B + st_value
    std::memcpy(out + r.offset, &v, 8);
  }
}

// ---------------------------------------------------------------------------------------------
// find_kernel_at: only plain, bounds-checked struct reads of the loaded image.

namespace {

class ImageReader {
 public:
  ImageReader(const std::byte* p, uint64_t n) : p_(p), n_(n) {}
  template <class T>
  bool read(uint64_t off, T& out) const {
    if (!in_bounds(off, sizeof(T), n_)) return false;
    std::memcpy(&out, p_ + off, sizeof(T));
    return true;
  }
  // A NUL-terminated string starting at `off` and ending before `limit`.
  bool str(uint64_t off, uint64_t limit, std::string& out) const {
    limit = std::min(limit, n_);
    if (off >= limit) return false;
    const void* z = std::memchr(p_ + off, 0, limit - off);
    if (!z) return false;
    out.assign(reinterpret_cast<const char*>(p_ + off), static_cast<const std::byte*>(z) - (p_ + off));
    return true;
  }
  uint64_t size() const { return n_; }
  const std::byte* data() const { return p_; }

 private:
  const std::byte* p_;
  uint64_t n_;
};

// Number of dynamic symbols from a GNU hash table at `gh`: one past the highest symbol index
// any bucket chain reaches (the chain's last entry has bit 0 set).
bool gnu_hash_count(const ImageReader& img, uint64_t gh, uint64_t& count) {
  uint32_t nbuckets, symoffset, bloom_size, bloom_shift;
  if (!img.read(gh, nbuckets) || !img.read(gh + 4, symoffset) || !img.read(gh + 8, bloom_size) ||
      !img.read(gh + 12, bloom_shift))
    return false;
  const uint64_t buckets = gh + 16 + uint64_t{bloom_size} * 8;
  if (!in_bounds(buckets, uint64_t{nbuckets} * 4, img.size())) return false;
  uint32_t max_idx = 0;
  for (uint32_t b = 0; b < nbuckets; ++b) {
    uint32_t v;
    if (!img.read(buckets + uint64_t{b} * 4, v)) return false;
    max_idx = std::max(max_idx, v);
  }
  if (max_idx < symoffset) {  // every bucket empty
    count = symoffset;
    return true;
  }
  const uint64_t chains = buckets + uint64_t{nbuckets} * 4;
  for (uint64_t i = max_idx;; ++i) {
    uint32_t h;
    if (!img.read(chains + (i - symoffset) * 4, h)) return false;
    if (h & 1) {
      count = i + 1;
      return true;
    }
  }
}

}  // namespace

bool find_kernel_at(const std::byte* image, uint64_t image_size, uint64_t entry_offset,
                    std::string& name, KernelDescriptor& kd) {
  if (!image) return false;
  const ImageReader img(image, image_size);
  Elf64_Ehdr eh;
  if (!img.read(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != kEmAmdgpu ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return false;

  // PT_DYNAMIC, read where it was loaded (p_vaddr). The program headers themselves are in the
  // first PT_LOAD, which lld maps at vaddr == file offset == 0.
  uint64_t dyn = 0, dyn_size = 0;
  bool have_dyn = false;
  for (uint32_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!img.read(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), ph)) return false;
    if (ph.p_type == PT_DYNAMIC) {
      dyn = ph.p_vaddr;
      dyn_size = ph.p_memsz;
      have_dyn = true;
      break;
    }
  }
  if (!have_dyn) return false;

  uint64_t symtab = 0, strtab = 0, strsz = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0;
  bool have_sym = false, have_str = false;
  for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn_size; off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    if (!img.read(dyn + off, d)) return false;
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_SYMTAB: symtab = d.d_un.d_ptr; have_sym = true; break;
      case DT_STRTAB: strtab = d.d_un.d_ptr; have_str = true; break;
      case DT_STRSZ: strsz = d.d_un.d_val; break;
      case DT_SYMENT: syment = d.d_un.d_val; break;
      case DT_HASH: hash = d.d_un.d_ptr; break;
      case DT_GNU_HASH: gnu_hash = d.d_un.d_ptr; break;
      default: break;
    }
  }
  if (!have_sym || !have_str || syment < sizeof(Elf64_Sym)) return false;

  // Symbol count: DT_HASH's nchain, else derived from DT_GNU_HASH.
  uint64_t count = 0;
  uint32_t nchain;
  if (hash && img.read(hash + 4, nchain))
    count = nchain;
  else if (!gnu_hash || !gnu_hash_count(img, gnu_hash, count))
    return false;
  if (count > image_size / syment) return false;  // cannot all be in the image

  uint64_t str_end;
  if (!add_ok(strtab, strsz, str_end)) return false;
  uint64_t sym_off;
  for (uint64_t i = 1; i < count; ++i) {
    Elf64_Sym s;
    if (!add_ok(symtab, i * syment, sym_off) || !img.read(sym_off, s)) return false;
    if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_size != KernelDescriptor::kBytes ||
        s.st_shndx == SHN_UNDEF || !in_bounds(s.st_value, KernelDescriptor::kBytes, image_size))
      continue;
    const KernelDescriptor d = KernelDescriptor::decode(image + s.st_value);
    if (s.st_value + static_cast<uint64_t>(d.kernel_code_entry_byte_offset) != entry_offset)
      continue;
    std::string n;
    uint64_t name_off;
    if (!add_ok(strtab, s.st_name, name_off) || !img.str(name_off, str_end, n)) continue;
    if (n.size() <= 3 || n.compare(n.size() - 3, 3, ".kd") != 0) continue;
    name = n.substr(0, n.size() - 3);
    kd = d;
    return true;
  }
  return false;
}

}  // namespace hcq::amd
