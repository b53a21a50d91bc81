// One reader for the ELF64 files hcq loads: AMDHSA code objects (drivers/amd/code_object.cpp)
// and NVIDIA cubins (drivers/nv/cubin.cpp). It reads with libelf and checks, before libelf
// relies on it, everything it reads from the file (which may be hostile): the identification,
// the header and program header tables inside the file, every section with bytes inside the
// file (offset + size computed without wrapping), string tables NUL-terminated, symbol and
// relocation tables of whole entries, notes inside their section at their alignment. Every
// failure throws hcq::InvalidInput with the caller's prefix ("cubin: ", "AMDGPU code object: ")
// and a message that names the part of the file, its offset and what was expected.
//
// What a format fixes (e_machine, e_type, EI_OSABI, e_flags ...) its loader checks on header().
//
// Facts: the System V gABI (ELF header, section and program headers, symbol tables, note
// layout) as declared in <elf.h>; extended section numbering (e_shnum 0 / SHN_XINDEX: the count
// and string table index in section 0's sh_size and sh_link) from the gABI as well.
//
// Threads: a File is used by one thread at a time; separate Files may be used concurrently
// (libelf keeps no shared state per file; its one-time elf_version call is a function-local
// static).
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

// libelf's handles (<libelf.h> declares them so); kept out of this header.
struct Elf;
struct Elf_Scn;

namespace hcq::elf {

// a + b without wrapping; false on overflow.
inline bool add_ok(uint64_t a, uint64_t b, uint64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

// [off, off + len) lies inside [0, size), computed without wrapping.
inline bool in_bounds(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

struct Section {
  Elf64_Shdr h{};
  std::string name;
  // Has bytes in the file at [sh_offset, sh_offset + sh_size) (checked to lie in it).
  bool has_bytes() const { return h.sh_type != SHT_NOBITS && h.sh_type != SHT_NULL; }
};

struct Symbol {
  Elf64_Sym s{};
  std::string name;
};

struct Note {
  uint64_t offset = 0;  // of its header, in its section
  uint32_t type = 0;
  std::string name;  // without the terminating NUL
  std::span<const std::byte> desc;
};

class File {
 public:
  // Checks the identification (magic, ELFCLASS64, little-endian, EV_CURRENT) and that the
  // 64-byte header is there, and keeps a private copy of the file (libelf reads it in place).
  File(std::span<const std::byte> file, std::string prefix);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  [[noreturn]] void fail(const std::string& what) const;

  const Elf64_Ehdr& header() const { return eh_; }
  std::span<const std::byte> bytes() const { return copy_; }

  // Checks that the program and section header tables lie in the file, then opens the file
  // with libelf (which reads the section header table as it opens) and reads both tables and
  // the section names, checking them as described above. Call once, after checking the
  // header's fixed fields; the readers below need it.
  void read_tables();

  const std::vector<Elf64_Phdr>& segments() const { return phdrs_; }
  const std::vector<Section>& sections() const { return secs_; }
  // "section 5 (.nv.info.k)"; "section 5" while the section has no name.
  std::string section_label(uint64_t i) const;

  // The bytes of section `i` (one with bytes in the file; not SHF_COMPRESSED).
  std::span<const std::byte> section_data(uint32_t i) const;
  // The NUL-terminated string at `off` in string table section `tab`; `what` names the
  // string's owner in a message.
  std::string string_at(uint32_t tab, uint64_t off, const std::string& what) const;
  // The entries of symbol table section `i` (SHT_SYMTAB or SHT_DYNSYM) with their names from
  // the string table its sh_link names; entry 0 included.
  std::vector<Symbol> symbols(uint32_t i) const;
  // The entries of relocation section `i` (SHT_RELA, or SHT_REL with r_addend 0).
  std::vector<Elf64_Rela> relocations(uint32_t i) const;
  // The notes of SHT_NOTE section `i`, each inside the section.
  std::vector<Note> notes(uint32_t i) const;

 private:
  void read_segments(uint64_t phnum);
  void check_range(uint32_t i) const;

  std::vector<std::byte> copy_;  // what libelf reads in place (it outlives elf_)
  std::string prefix_;
  Elf* elf_ = nullptr;
  Elf64_Ehdr eh_{};
  std::vector<Elf64_Phdr> phdrs_;
  std::vector<Section> secs_;
  std::vector<Elf_Scn*> scns_;
};

}  // namespace hcq::elf
