// The shared ELF64 reader: every offset and size libelf relies on is checked here first, so a
// message can say which part of the file is wrong (libelf alone reports "invalid section
// header" or treats a section header table it cannot read as no sections at all).
#include "common/elf.hpp"

#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace hcq::elf {
namespace {

std::string libelf_error() {
  const char* m = elf_errmsg(-1);
  return m ? m : "unknown libelf error";
}

// x rounded up to a multiple of `a` (a power of two), or false if that wraps.
bool align_up(uint64_t x, uint64_t a, uint64_t& out) {
  if (!add_ok(x, a - 1, out)) return false;
  out &= ~(a - 1);
  return true;
}

}  // namespace

File::File(std::span<const std::byte> file, std::string prefix) : prefix_(std::move(prefix)) {
  if (file.empty()) fail("not an ELF file: the input is empty");
  if (file.size() < SELFMAG || std::memcmp(file.data(), ELFMAG, SELFMAG) != 0)
    fail("not an ELF file: it does not start with 7f 45 4c 46");
  if (file.size() < sizeof(Elf64_Ehdr))
    fail("truncated ELF header: the file is " + std::to_string(file.size()) +
         " bytes, an ELF64 header is 64");
  const auto ident = [&](int i) { return std::to_integer<uint8_t>(file[i]); };
  const uint8_t cls = ident(EI_CLASS);
  if (cls != ELFCLASS64)
    fail("ELF class " + std::to_string(cls) + (cls == ELFCLASS32 ? " (ELFCLASS32)" : "") +
         ", expected ELFCLASS64 (2)");
  if (ident(EI_DATA) != ELFDATA2LSB)  // hosts are little-endian too: fields are read as-is
    fail("ELF data encoding " + std::to_string(ident(EI_DATA)) +
         ", expected little-endian (ELFDATA2LSB, 1)");
  if (ident(EI_VERSION) != EV_CURRENT)
    fail("EI_VERSION is " + std::to_string(ident(EI_VERSION)) + ", expected EV_CURRENT (1)");

  copy_.assign(file.begin(), file.end());  // libelf wants a writable buffer
  std::memcpy(&eh_, copy_.data(), sizeof eh_);
}

File::~File() {
  if (elf_) elf_end(elf_);
}

void File::fail(const std::string& what) const { throw InvalidInput(prefix_ + what); }

std::string File::section_label(uint64_t i) const {
  std::string s = "section " + std::to_string(i);
  if (i < secs_.size() && !secs_[i].name.empty()) s += " (" + secs_[i].name + ")";
  return s;
}

void File::read_tables() {
  const uint64_t size = copy_.size();

  // Section count: e_shnum, or with extended numbering (e_shnum 0, a table present) section
  // 0's sh_size.
  uint64_t shnum = eh_.e_shnum;
  if (eh_.e_shnum == 0 && eh_.e_shoff != 0) {
    if (!in_bounds(eh_.e_shoff, sizeof(Elf64_Shdr), size))
      fail("section header table at " + hex(eh_.e_shoff) +
           " runs past the end of the file (" + hex(size) + " bytes)");
    Elf64_Shdr first;
    std::memcpy(&first, copy_.data() + eh_.e_shoff, sizeof first);
    shnum = first.sh_size;
  }
  if (shnum == 0) fail("no section headers (e_shnum is 0)");
  if (eh_.e_shentsize != sizeof(Elf64_Shdr))
    fail("e_shentsize is " + std::to_string(eh_.e_shentsize) + ", expected 64");
  if (shnum > size / sizeof(Elf64_Shdr) ||
      !in_bounds(eh_.e_shoff, shnum * sizeof(Elf64_Shdr), size))
    fail("section header table at " + hex(eh_.e_shoff) + " (" + std::to_string(shnum) +
         " x 64 bytes) runs past the end of the file (" + hex(size) + " bytes)");
  if (eh_.e_phnum) {
    if (eh_.e_phnum == PN_XNUM)
      fail("extended program header numbering (e_phnum PN_XNUM) is not supported");
    if (eh_.e_phentsize != sizeof(Elf64_Phdr))
      fail("e_phentsize is " + std::to_string(eh_.e_phentsize) + ", expected 56");
    if (!in_bounds(eh_.e_phoff, uint64_t{eh_.e_phnum} * sizeof(Elf64_Phdr), size))
      fail("program header table at " + hex(eh_.e_phoff) + " (" + std::to_string(eh_.e_phnum) +
           " x 56 bytes) runs past the end of the file (" + hex(size) + " bytes)");
  }

  // Both tables lie in the file: libelf may read them now (it reads the section header
  // table as it opens the file, and fails without saying why when it cannot).
  static const bool libelf_ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!libelf_ok) fail("libelf: elf_version failed: " + libelf_error());
  elf_ = elf_memory(reinterpret_cast<char*>(copy_.data()), copy_.size());
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF) fail("libelf cannot read it: " + libelf_error());

  size_t libelf_shnum = 0;
  if (elf_getshdrnum(elf_, &libelf_shnum) != 0 || libelf_shnum != shnum)
    fail("libelf cannot read the section header table (" + std::to_string(shnum) +
         " sections): " + libelf_error());
  if (eh_.e_phnum) read_segments(eh_.e_phnum);

  secs_.resize(shnum);
  scns_.resize(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    scns_[i] = elf_getscn(elf_, i);
    if (!scns_[i] || !gelf_getshdr(scns_[i], &secs_[i].h))
      fail("cannot read the header of section " + std::to_string(i) + ": " + libelf_error());
  }

  // Section names, then each section's bytes and alignment.
  uint64_t shstrndx = eh_.e_shstrndx;
  if (shstrndx == SHN_XINDEX) shstrndx = secs_[0].h.sh_link;
  if (shstrndx >= shnum)
    fail("e_shstrndx " + std::to_string(shstrndx) + " is out of range (" +
         std::to_string(shnum) + " sections)");
  const uint32_t names = static_cast<uint32_t>(shstrndx);
  if (secs_[names].h.sh_type != SHT_STRTAB)
    fail("e_shstrndx " + std::to_string(names) + " names a section of type " +
         hex(secs_[names].h.sh_type) + ", expected SHT_STRTAB (3)");
  check_range(names);
  secs_[names].name = string_at(names, secs_[names].h.sh_name, section_label(names));
  for (uint32_t i = 0; i < shnum; ++i) {
    auto& s = secs_[i];
    s.name = string_at(names, s.h.sh_name, section_label(i));
    if (s.has_bytes()) check_range(i);
    const uint64_t a = s.h.sh_addralign;
    if (a & (a - 1)) fail(section_label(i) + ": sh_addralign " + hex(a) + " is not a power of two");
  }
}

void File::read_segments(uint64_t phnum) {
  size_t libelf_phnum = 0;
  if (elf_getphdrnum(elf_, &libelf_phnum) != 0 || libelf_phnum != phnum)
    fail("libelf cannot read the program header table (" + std::to_string(phnum) +
         " entries): " + libelf_error());
  phdrs_.resize(phnum);
  for (uint64_t i = 0; i < phnum; ++i) {
    Elf64_Phdr& ph = phdrs_[i];
    if (!gelf_getphdr(elf_, static_cast<int>(i), &ph))
      fail("cannot read program header " + std::to_string(i) + ": " + libelf_error());
    if (ph.p_filesz && !in_bounds(ph.p_offset, ph.p_filesz, copy_.size()))
      fail("program header " + std::to_string(i) + ": segment at file offset " +
           hex(ph.p_offset) + ", " + hex(ph.p_filesz) +
           " bytes, runs past the end of the file (" + hex(copy_.size()) + " bytes)");
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)  // gABI: never for PT_LOAD
      fail("program header " + std::to_string(i) + ": PT_LOAD p_filesz " + hex(ph.p_filesz) +
           " is larger than p_memsz " + hex(ph.p_memsz));
  }
}

void File::check_range(uint32_t i) const {
  const auto& h = secs_[i].h;
  if (!in_bounds(h.sh_offset, h.sh_size, copy_.size()))
    fail(section_label(i) + " at file offset " + hex(h.sh_offset) + ", " + hex(h.sh_size) +
         " bytes, runs past the end of the file (" + hex(copy_.size()) + " bytes)");
}

std::span<const std::byte> File::section_data(uint32_t i) const {
  const auto& s = secs_.at(i);
  if (!s.has_bytes())
    fail(section_label(i) + ": has no bytes in the file (type " + hex(s.h.sh_type) + ")");
  if (s.h.sh_flags & SHF_COMPRESSED)
    fail(section_label(i) + ": compressed sections (SHF_COMPRESSED) are not supported");
  check_range(i);  // checked by read_tables too; kept next to the read it guards
  if (s.h.sh_size == 0) return {};
  Elf_Data* d = elf_getdata(scns_[i], nullptr);
  if (!d) fail(section_label(i) + ": libelf cannot read its data: " + libelf_error());
  if (d->d_size != s.h.sh_size || (d->d_size && !d->d_buf))
    fail(section_label(i) + ": libelf gives " + hex(d->d_size) +
         " bytes of data, the header says " + hex(s.h.sh_size));
  return {static_cast<const std::byte*>(d->d_buf), d->d_size};
}

std::string File::string_at(uint32_t tab, uint64_t off, const std::string& what) const {
  const auto& t = secs_.at(tab).h;
  if (off >= t.sh_size)
    fail(what + ": name offset " + hex(off) + " is outside " + section_label(tab) + " (" +
         hex(t.sh_size) + " bytes)");
  const auto data = section_data(tab);
  const void* nul = std::memchr(data.data() + off, 0, data.size() - off);
  if (!nul)
    fail(what + ": name at " + hex(off) + " in " + section_label(tab) + " is not NUL-terminated");
  return std::string(reinterpret_cast<const char*>(data.data() + off),
                     static_cast<const std::byte*>(nul) - (data.data() + off));
}

std::vector<Symbol> File::symbols(uint32_t i) const {
  const auto& h = secs_.at(i).h;
  if (h.sh_type != SHT_SYMTAB && h.sh_type != SHT_DYNSYM)
    fail(section_label(i) + ": type " + hex(h.sh_type) + " is not a symbol table");
  if (h.sh_entsize != sizeof(Elf64_Sym))
    fail(section_label(i) + ": sh_entsize is " + std::to_string(h.sh_entsize) + ", expected 24");
  if (h.sh_size % sizeof(Elf64_Sym))
    fail(section_label(i) + ": size " + hex(h.sh_size) + " is not a multiple of 24");
  if (h.sh_link >= secs_.size() || secs_[h.sh_link].h.sh_type != SHT_STRTAB)
    fail(section_label(i) + ": sh_link " + std::to_string(h.sh_link) +
         " is not a string table section");
  const auto data = section_data(i);
  const uint64_t n = data.size() / sizeof(Elf64_Sym);
  std::vector<Symbol> out(n);
  for (uint64_t j = 0; j < n; ++j) {
    std::memcpy(&out[j].s, data.data() + j * sizeof(Elf64_Sym), sizeof(Elf64_Sym));
    out[j].name = string_at(h.sh_link, out[j].s.st_name, "symbol " + std::to_string(j));
  }
  return out;
}

std::vector<Elf64_Rela> File::relocations(uint32_t i) const {
  const auto& h = secs_.at(i).h;
  const bool rela = h.sh_type == SHT_RELA;
  if (!rela && h.sh_type != SHT_REL)
    fail(section_label(i) + ": type " + hex(h.sh_type) + " is not a relocation section");
  const uint64_t entsize = rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
  if (h.sh_entsize != entsize)
    fail(section_label(i) + ": sh_entsize is " + std::to_string(h.sh_entsize) + ", expected " +
         std::to_string(entsize));
  if (h.sh_size % entsize)
    fail(section_label(i) + ": size " + hex(h.sh_size) + " is not a multiple of " +
         std::to_string(entsize));
  const auto data = section_data(i);
  std::vector<Elf64_Rela> out(data.size() / entsize);
  for (uint64_t j = 0; j < out.size(); ++j) {
    const std::byte* p = data.data() + j * entsize;
    if (rela) {
      std::memcpy(&out[j], p, sizeof(Elf64_Rela));
    } else {
      Elf64_Rel r;
      std::memcpy(&r, p, sizeof r);
      out[j] = {r.r_offset, r.r_info, 0};
    }
  }
  return out;
}

std::vector<Note> File::notes(uint32_t i) const {
  const auto& h = secs_.at(i).h;
  if (h.sh_type != SHT_NOTE)
    fail(section_label(i) + ": type " + hex(h.sh_type) + " is not a note section");
  // gABI: name and descriptor are padded to 4 bytes (8 in a section aligned to 8, as libelf
  // reads ELF_T_NHDR8).
  if (h.sh_addralign != 4 && h.sh_addralign != 8)
    fail(section_label(i) + ": sh_addralign " + hex(h.sh_addralign) +
         ", expected 4 or 8 for a note section");
  const uint64_t align = h.sh_addralign;
  const auto data = section_data(i);
  const uint64_t size = data.size();
  std::vector<Note> out;
  uint64_t pos = 0;
  while (pos < size) {
    const std::string where = section_label(i) + ": note at +" + hex(pos);
    if (size - pos < sizeof(Elf64_Nhdr))
      fail(where + " is truncated (" + std::to_string(size - pos) +
           " bytes left, a note header is 12)");
    Elf64_Nhdr nh;
    std::memcpy(&nh, data.data() + pos, sizeof nh);
    const uint64_t name_at = pos + sizeof nh;
    if (nh.n_namesz > size - name_at)
      fail(where + ": name of " + std::to_string(nh.n_namesz) + " bytes runs past the section (" +
           std::to_string(size - name_at) + " bytes left)");
    const char* name = reinterpret_cast<const char*>(data.data() + name_at);
    if (nh.n_namesz && name[nh.n_namesz - 1] != '\0')
      fail(where + ": name is not NUL-terminated");
    uint64_t desc_at = 0, next = 0;
    if (!align_up(name_at + nh.n_namesz, align, desc_at) || desc_at > size ||
        nh.n_descsz > size - desc_at)
      fail(where + ": descriptor of " + std::to_string(nh.n_descsz) +
           " bytes runs past the section (" + hex(size) + " bytes)");
    Note n;
    n.offset = pos;
    n.type = nh.n_type;
    n.name.assign(name, nh.n_namesz ? nh.n_namesz - 1 : 0);
    n.desc = data.subspan(desc_at, nh.n_descsz);
    out.push_back(std::move(n));
    // The last note's padding may be left out at the end of the section.
    if (!align_up(desc_at + nh.n_descsz, align, next)) break;
    pos = next;
  }
  return out;
}

}  // namespace hcq::elf
