// The shared ELF64 reader (drivers/common/elf.hpp) on a small ELF file built here byte by
// byte: what it reads, and the exact error for each part of the file a hostile input can get
// wrong (identification, header tables, section bytes and names, symbol and relocation tables,
// notes). The AMDHSA and cubin loaders' own tests cover it on real files.
#include "common/elf.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hcq::elf {
namespace {

using Bytes = std::vector<std::byte>;

template <class T>
void put(Bytes& b, size_t off, const T& v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
template <class T>
T get(const Bytes& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
Bytes text(const std::string& s) {
  Bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}
template <class T>
void append(Bytes& b, const T& v) {
  b.resize(b.size() + sizeof v);
  std::memcpy(b.data() + b.size() - sizeof v, &v, sizeof v);
}
void pad(Bytes& b, size_t align) { b.resize((b.size() + align - 1) / align * align); }

// Sections of the test file, by index; .shstrtab comes last.
enum : uint32_t { kText = 1, kStrtab, kSymtab, kNote, kRela, kShstrtab, kCount };

struct Sec {
  std::string name;
  uint32_t type;
  Bytes data;
  uint64_t flags = 0, align = 1, entsize = 0;
  uint32_t link = 0, info = 0;
};

// A note with 4-byte padding after the name and the descriptor.
Bytes note(const std::string& name, uint32_t type, const Bytes& desc) {
  Bytes b;
  append(b, Elf64_Nhdr{static_cast<Elf64_Word>(name.size() + 1),
                       static_cast<Elf64_Word>(desc.size()), type});
  Bytes n = text(name);
  n.push_back(std::byte{0});
  b.insert(b.end(), n.begin(), n.end());
  pad(b, 4);
  b.insert(b.end(), desc.begin(), desc.end());
  pad(b, 4);
  return b;
}

struct Built {
  Bytes b;
  size_t shdr[kCount] = {};  // file offset of each section header
  size_t data[kCount] = {};  // file offset of each section's bytes
};

Built build() {
  std::vector<Sec> secs(kCount);
  secs[kText] = {".text", SHT_PROGBITS, Bytes(16, std::byte{0xaa}), SHF_ALLOC | SHF_EXECINSTR, 4};
  secs[kStrtab] = {".strtab", SHT_STRTAB, text(std::string("\0k\0", 3))};
  Bytes syms;
  append(syms, Elf64_Sym{});
  append(syms, Elf64_Sym{1, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, kText, 4, 12});
  secs[kSymtab] = {".symtab", SHT_SYMTAB, syms, 0, 8, sizeof(Elf64_Sym), kStrtab, 1};
  Bytes notes = note("NAME", 7, text("desc!"));
  const Bytes second = note("X", 8, {});
  notes.insert(notes.end(), second.begin(), second.end());
  secs[kNote] = {".note", SHT_NOTE, notes, 0, 4};
  Bytes relas;
  append(relas, Elf64_Rela{8, ELF64_R_INFO(1, 2), -3});
  secs[kRela] = {".rela.text", SHT_RELA, relas, 0, 8, sizeof(Elf64_Rela), kSymtab, kText};
  std::string names(1, '\0');
  std::vector<uint32_t> name_at(kCount, 0);
  for (uint32_t i = 1; i < kCount; ++i) {
    if (i == kShstrtab) continue;
    name_at[i] = static_cast<uint32_t>(names.size());
    names += secs[i].name + '\0';
  }
  name_at[kShstrtab] = static_cast<uint32_t>(names.size());
  names += std::string(".shstrtab") + '\0';
  secs[kShstrtab] = {".shstrtab", SHT_STRTAB, text(names)};

  Built out;
  Bytes& b = out.b;
  b.resize(sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr));
  for (uint32_t i = 1; i < kCount; ++i) {
    pad(b, 8);
    out.data[i] = b.size();
    b.insert(b.end(), secs[i].data.begin(), secs[i].data.end());
  }
  pad(b, 8);
  const size_t shoff = b.size();
  b.resize(shoff + kCount * sizeof(Elf64_Shdr));
  for (uint32_t i = 1; i < kCount; ++i) {
    const Sec& s = secs[i];
    out.shdr[i] = shoff + i * sizeof(Elf64_Shdr);
    put(b, out.shdr[i],
        Elf64_Shdr{name_at[i], s.type, s.flags, 0, out.data[i], s.data.size(), s.link, s.info,
                   s.align, s.entsize});
  }
  out.shdr[0] = shoff;

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = 0x1234;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = kCount;
  eh.e_shstrndx = kShstrtab;
  put(b, 0, eh);
  put(b, sizeof(Elf64_Ehdr),
      Elf64_Phdr{PT_LOAD, PF_R | PF_X, out.data[kText], 0, 0, 16, 32, 4});
  return out;
}

// The message of reading `b` through all of File's readers, or "(read)".
std::string error_of(const Bytes& b) {
  try {
    File f(b, "test: ");
    f.read_tables();
    f.symbols(kSymtab);
    f.relocations(kRela);
    f.notes(kNote);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(read)";
}

size_t field(size_t shdr, size_t member_offset) { return shdr + member_offset; }
#define SHDR(built, i, member) field((built).shdr[i], offsetof(Elf64_Shdr, member))

TEST(ElfReader, ReadsTheTablesSymbolsRelocationsAndNotes) {
  const Built t = build();
  File f(t.b, "test: ");
  EXPECT_EQ(f.header().e_machine, 0x1234);
  f.read_tables();
  ASSERT_EQ(f.segments().size(), 1u);
  EXPECT_EQ(f.segments()[0].p_memsz, 32u);
  ASSERT_EQ(f.sections().size(), kCount);
  EXPECT_EQ(f.sections()[kText].name, ".text");
  EXPECT_EQ(f.section_label(kRela), "section 5 (.rela.text)");
  EXPECT_EQ(f.section_label(0), "section 0");
  EXPECT_EQ(f.section_data(kText).size(), 16u);
  EXPECT_EQ(f.section_data(kText).data(), f.bytes().data() + t.data[kText]);

  const auto syms = f.symbols(kSymtab);
  ASSERT_EQ(syms.size(), 2u);
  EXPECT_EQ(syms[0].name, "");
  EXPECT_EQ(syms[1].name, "k");
  EXPECT_EQ(syms[1].s.st_value, 4u);

  const auto relas = f.relocations(kRela);
  ASSERT_EQ(relas.size(), 1u);
  EXPECT_EQ(relas[0].r_offset, 8u);
  EXPECT_EQ(relas[0].r_addend, -3);

  const auto notes = f.notes(kNote);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].name, "NAME");
  EXPECT_EQ(notes[0].type, 7u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(notes[0].desc.data()), notes[0].desc.size()),
            "desc!");
  EXPECT_EQ(notes[1].offset, 12u + 8 + 8);  // header, "NAME\0" padded to 8, "desc!" to 8
  EXPECT_EQ(notes[1].name, "X");
  EXPECT_EQ(notes[1].desc.size(), 0u);
  EXPECT_EQ(error_of(t.b), "(read)");
}

TEST(ElfReader, Identification) {
  const Built t = build();
  EXPECT_EQ(error_of({}), "test: not an ELF file: the input is empty");
  EXPECT_EQ(error_of(Bytes(t.b.begin(), t.b.begin() + 3)),
            "test: not an ELF file: it does not start with 7f 45 4c 46");
  EXPECT_EQ(error_of(Bytes(t.b.begin(), t.b.begin() + 63)),
            "test: truncated ELF header: the file is 63 bytes, an ELF64 header is 64");
  Bytes b = t.b;
  b[EI_CLASS] = std::byte{ELFCLASS32};
  EXPECT_EQ(error_of(b), "test: ELF class 1 (ELFCLASS32), expected ELFCLASS64 (2)");
  b = t.b;
  b[EI_DATA] = std::byte{ELFDATA2MSB};
  EXPECT_EQ(error_of(b), "test: ELF data encoding 2, expected little-endian (ELFDATA2LSB, 1)");
  b = t.b;
  b[EI_VERSION] = std::byte{2};
  EXPECT_EQ(error_of(b), "test: EI_VERSION is 2, expected EV_CURRENT (1)");
}

TEST(ElfReader, HeaderTablesLieInTheFile) {
  const Built t = build();
  const std::string size = hex(t.b.size());
  Bytes b = t.b;
  put<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), t.b.size() - 64);
  EXPECT_EQ(error_of(b), "test: section header table at " + hex(t.b.size() - 64) +
                             " (7 x 64 bytes) runs past the end of the file (" + size + " bytes)");
  b = t.b;  // an offset that wraps when the table's size is added
  put<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), ~uint64_t{0} - 63);
  EXPECT_EQ(error_of(b), "test: section header table at 0xffffffffffffffc0 (7 x 64 bytes) runs "
                         "past the end of the file (" + size + " bytes)");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shentsize), 40);
  EXPECT_EQ(error_of(b), "test: e_shentsize is 40, expected 64");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0);
  put<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), 0);
  EXPECT_EQ(error_of(b), "test: no section headers (e_shnum is 0)");
  b = t.b;
  put<uint64_t>(b, offsetof(Elf64_Ehdr, e_phoff), t.b.size() - 8);
  EXPECT_EQ(error_of(b), "test: program header table at " + hex(t.b.size() - 8) +
                             " (1 x 56 bytes) runs past the end of the file (" + size + " bytes)");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_phnum), PN_XNUM);
  EXPECT_EQ(error_of(b), "test: extended program header numbering (e_phnum PN_XNUM) is not supported");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_phentsize), 32);
  EXPECT_EQ(error_of(b), "test: e_phentsize is 32, expected 56");
  b = t.b;
  put<uint64_t>(b, 64 + offsetof(Elf64_Phdr, p_filesz), t.b.size());
  put<uint64_t>(b, 64 + offsetof(Elf64_Phdr, p_memsz), t.b.size());
  EXPECT_EQ(error_of(b), "test: program header 0: segment at file offset " + hex(t.data[kText]) +
                             ", " + size + " bytes, runs past the end of the file (" + size +
                             " bytes)");
  b = t.b;
  put<uint64_t>(b, 64 + offsetof(Elf64_Phdr, p_memsz), 15);
  EXPECT_EQ(error_of(b), "test: program header 0: PT_LOAD p_filesz 0x10 is larger than p_memsz 0xf");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), kCount);
  EXPECT_EQ(error_of(b), "test: e_shstrndx 7 is out of range (7 sections)");
  b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), kText);
  EXPECT_EQ(error_of(b), "test: e_shstrndx 1 names a section of type 0x1, expected SHT_STRTAB (3)");
}

TEST(ElfReader, ExtendedSectionNumbering) {
  // gABI: e_shnum 0 and e_shstrndx SHN_XINDEX put both in section 0's sh_size and sh_link.
  const Built t = build();
  Bytes b = t.b;
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0);
  put<uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), SHN_XINDEX);
  put<uint64_t>(b, SHDR(t, 0, sh_size), kCount);
  put<uint32_t>(b, SHDR(t, 0, sh_link), kShstrtab);
  File f(b, "test: ");
  f.read_tables();
  ASSERT_EQ(f.sections().size(), kCount);
  EXPECT_EQ(f.sections()[kNote].name, ".note");
  // A count the file cannot hold.
  put<uint64_t>(b, SHDR(t, 0, sh_size), uint64_t{1} << 60);
  EXPECT_EQ(error_of(b), "test: section header table at " + hex(t.shdr[0]) + " (" +
                             std::to_string(uint64_t{1} << 60) +
                             " x 64 bytes) runs past the end of the file (" + hex(b.size()) +
                             " bytes)");
}

TEST(ElfReader, SectionsLieInTheFileWithTerminatedNames) {
  const Built t = build();
  const std::string size = hex(t.b.size());
  Bytes b = t.b;
  put<uint64_t>(b, SHDR(t, kText, sh_offset), t.b.size() - 8);
  EXPECT_EQ(error_of(b), "test: section 1 (.text) at file offset " + hex(t.b.size() - 8) +
                             ", 0x10 bytes, runs past the end of the file (" + size + " bytes)");
  b = t.b;  // offset + size wraps to a small number
  put<uint64_t>(b, SHDR(t, kText, sh_size), ~uint64_t{0} - 8);
  EXPECT_EQ(error_of(b), "test: section 1 (.text) at file offset " + hex(t.data[kText]) +
                             ", 0xfffffffffffffff7 bytes, runs past the end of the file (" + size +
                             " bytes)");
  b = t.b;  // SHT_NOBITS has no bytes to check
  put<uint32_t>(b, SHDR(t, kText, sh_type), SHT_NOBITS);
  put<uint64_t>(b, SHDR(t, kText, sh_size), ~uint64_t{0});
  EXPECT_EQ(error_of(b), "(read)");
  b = t.b;
  put<uint32_t>(b, SHDR(t, kText, sh_name), 0x1000);
  EXPECT_EQ(error_of(b), "test: section 1: name offset 0x1000 is outside section 6 (.shstrtab) (" +
                             hex(get<uint64_t>(t.b, SHDR(t, kShstrtab, sh_size))) + " bytes)");
  b = t.b;  // the name table's last byte not NUL: the last name runs off its end
  const uint64_t names = get<uint64_t>(t.b, SHDR(t, kShstrtab, sh_size));
  b[t.data[kShstrtab] + names - 1] = std::byte{'!'};
  EXPECT_EQ(error_of(b), "test: section 6: name at " + hex(names - 10) +
                             " in section 6 is not NUL-terminated");
  b = t.b;
  put<uint64_t>(b, SHDR(t, kNote, sh_addralign), 12);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): sh_addralign 0xc is not a power of two");
  b = t.b;
  put<uint64_t>(b, SHDR(t, kText, sh_flags), SHF_ALLOC | SHF_COMPRESSED);
  File f(b, "test: ");
  f.read_tables();
  try {
    f.section_data(kText);
    ADD_FAILURE() << "read a compressed section";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "test: section 1 (.text): compressed sections (SHF_COMPRESSED) are not supported");
  }
}

TEST(ElfReader, SymbolTables) {
  const Built t = build();
  Bytes b = t.b;
  put<uint64_t>(b, SHDR(t, kSymtab, sh_entsize), 16);
  EXPECT_EQ(error_of(b), "test: section 3 (.symtab): sh_entsize is 16, expected 24");
  b = t.b;
  put<uint64_t>(b, SHDR(t, kSymtab, sh_size), 47);
  EXPECT_EQ(error_of(b), "test: section 3 (.symtab): size 0x2f is not a multiple of 24");
  b = t.b;
  put<uint32_t>(b, SHDR(t, kSymtab, sh_link), kText);
  EXPECT_EQ(error_of(b), "test: section 3 (.symtab): sh_link 1 is not a string table section");
  b = t.b;
  put<uint32_t>(b, SHDR(t, kSymtab, sh_link), 99);
  EXPECT_EQ(error_of(b), "test: section 3 (.symtab): sh_link 99 is not a string table section");
  b = t.b;
  put<uint32_t>(b, t.data[kSymtab] + sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_name), 3);
  EXPECT_EQ(error_of(b),
            "test: symbol 1: name offset 0x3 is outside section 2 (.strtab) (0x3 bytes)");
  b = t.b;
  b[t.data[kStrtab] + 2] = std::byte{'x'};
  EXPECT_EQ(error_of(b), "test: symbol 1: name at 0x1 in section 2 (.strtab) is not NUL-terminated");
}

TEST(ElfReader, RelocationTables) {
  const Built t = build();
  Bytes b = t.b;
  put<uint64_t>(b, SHDR(t, kRela, sh_entsize), 16);
  EXPECT_EQ(error_of(b), "test: section 5 (.rela.text): sh_entsize is 16, expected 24");
  b = t.b;
  put<uint64_t>(b, SHDR(t, kRela, sh_size), 20);
  EXPECT_EQ(error_of(b), "test: section 5 (.rela.text): size 0x14 is not a multiple of 24");
  b = t.b;  // SHT_REL: 16-byte entries, addend 0
  put<uint32_t>(b, SHDR(t, kRela, sh_type), SHT_REL);
  put<uint64_t>(b, SHDR(t, kRela, sh_entsize), 16);
  put<uint64_t>(b, SHDR(t, kRela, sh_size), 16);
  File f(b, "test: ");
  f.read_tables();
  const auto rels = f.relocations(kRela);
  ASSERT_EQ(rels.size(), 1u);
  EXPECT_EQ(rels[0].r_offset, 8u);
  EXPECT_EQ(rels[0].r_info, ELF64_R_INFO(1, 2));
  EXPECT_EQ(rels[0].r_addend, 0);
}

TEST(ElfReader, NotesLieInTheirSectionAtTheirAlignment) {
  const Built t = build();
  const size_t n0 = t.data[kNote], n1 = n0 + 28;
  Bytes b = t.b;
  put<uint64_t>(b, SHDR(t, kNote, sh_size), 28 + 11);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x1c is truncated (11 bytes left, a "
                         "note header is 12)");
  b = t.b;
  put<uint32_t>(b, n1 + offsetof(Elf64_Nhdr, n_namesz), 5);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x1c: name of 5 bytes runs past the "
                         "section (4 bytes left)");
  b = t.b;
  put<uint32_t>(b, n1 + offsetof(Elf64_Nhdr, n_namesz), 0xffffffffu);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x1c: name of 4294967295 bytes runs "
                         "past the section (4 bytes left)");
  b = t.b;
  put<uint32_t>(b, n0 + offsetof(Elf64_Nhdr, n_descsz), 25);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x0: descriptor of 25 bytes runs past "
                         "the section (0x2c bytes)");
  b = t.b;
  put<uint32_t>(b, n0 + offsetof(Elf64_Nhdr, n_descsz), 0xfffffff0u);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x0: descriptor of 4294967280 bytes "
                         "runs past the section (0x2c bytes)");
  b = t.b;
  b[n0 + 12 + 4] = std::byte{'!'};
  EXPECT_EQ(error_of(b), "test: section 4 (.note): note at +0x0: name is not NUL-terminated");
  b = t.b;
  put<uint64_t>(b, SHDR(t, kNote, sh_addralign), 2);
  EXPECT_EQ(error_of(b), "test: section 4 (.note): sh_addralign 0x2, expected 4 or 8 for a note "
                         "section");
  b = t.b;  // 8-byte alignment: "NAME\0" ends at 17, the descriptor starts at 24
  put<uint64_t>(b, SHDR(t, kNote, sh_addralign), 8);
  put<uint32_t>(b, n0 + offsetof(Elf64_Nhdr, n_descsz), 4);
  put<uint64_t>(b, SHDR(t, kNote, sh_size), 28);
  File f(b, "test: ");
  f.read_tables();
  const auto notes = f.notes(kNote);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].desc.data(), f.bytes().data() + n0 + 24);
}

}  // namespace
}  // namespace hcq::elf
