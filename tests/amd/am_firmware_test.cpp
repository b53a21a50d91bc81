// amdgpu firmware containers: files synthesized here from the amdgpu_ucode.h field layouts
// (Debian ships no AMD firmware in main), plain and zstd-compressed, parsed into the ranges
// the boot uploads; every malformed file an exact error naming the file, field and expectation.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "amd/am/firmware.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/hcq_am_firmware_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A firmware file under construction: little-endian fields at their amdgpu_ucode.h offsets,
// every payload byte a function of its offset so the ranges can be checked by content.
struct File {
  std::vector<uint8_t> b;
  explicit File(size_t size) : b(size) {
    for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  File& u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
    return *this;
  }
  File& u16(size_t at, uint16_t v) {
    b[at] = static_cast<uint8_t>(v);
    b[at + 1] = static_cast<uint8_t>(v >> 8);
    return *this;
  }
  // struct common_firmware_header.
  File& common(uint16_t hmaj, uint16_t hmin, uint16_t ipmaj, uint16_t ipmin,
               uint32_t header_size, uint32_t ucode_offset, uint32_t ucode_size) {
    u32(0, static_cast<uint32_t>(b.size())).u32(4, header_size).u16(8, hmaj).u16(10, hmin);
    u16(12, ipmaj).u16(14, ipmin).u32(16, 0x1234).u32(20, ucode_size).u32(24, ucode_offset);
    return u32(28, 0xdeadbeef);  // crc32: amdgpu never checks it
  }
  std::vector<uint8_t> slice(uint64_t offset, uint64_t size) const {
    return {b.begin() + static_cast<long>(offset), b.begin() + static_cast<long>(offset + size)};
  }
};

// gfx_firmware_header_v2_0 (RS64 PFP/ME/MEC).
File gfx_v2() {
  File f(0x380);
  f.common(2, 0, 11, 0, 60, 0x100, 0x280);
  f.u32(32, 0x25).u32(36, 0x200).u32(40, 0x100).u32(44, 0x80).u32(48, 0x300);
  return f.u32(52, 0x1000).u32(56, 0x2);
}

// gfx_firmware_header_v1_0 (F32): 0x200 bytes of ucode whose last 0x40 are the jump table.
File gfx_v1() {
  File f(0x300);
  f.common(1, 0, 11, 0, 44, 0x100, 0x200);
  return f.u32(32, 0x19).u32(36, 0x70).u32(40, 0x10);
}

// rlc_firmware_header_v2_<minor>, minor 3 or 4.
File rlc_v2(uint16_t minor) {
  File f(0x300);
  f.common(2, minor, 11, 0, minor == 3 ? 204 : 244, 0x100, 0x40);
  f.u32(32, 0x7);
  for (uint32_t i = 36; i < 244; i += 4) f.u32(i, 0);  // the optional parts absent by default
  f.u32(108, 0x11).u32(116, 0x10).u32(120, 0x140);      // save_restore_list_cntl
  f.u32(124, 0x12).u32(132, 0x10).u32(136, 0x150);      // gpm
  f.u32(140, 0x13).u32(148, 0x10).u32(152, 0x160);      // srm
  f.u32(156, 0x40).u32(160, 0x180).u32(164, 0x40).u32(168, 0x1c0);  // iram, dram
  f.u32(172, 0x21).u32(180, 0x20).u32(184, 0x200);      // rlcp
  f.u32(188, 0x22).u32(196, 0x20).u32(200, 0x220);      // rlcv
  if (minor == 4) f.u32(204, 0x10).u32(208, 0x240).u32(228, 0x8).u32(232, 0x250);  // global, se2
  return f;
}

File imu_v1() {
  File f(0x1a0);
  f.common(1, 0, 11, 0, 48, 0x100, 0xa0);
  return f.u32(32, 0x40).u32(36, 0x999).u32(40, 0x60).u32(44, 0x999);  // offsets: not read
}

// psp_firmware_header_v2_0: sOS, SYS_DRV and KDB; or 2.1 with an aux sOS after them.
File sos_v2(uint16_t minor = 0) {
  File f(0x400);
  uint32_t descs = minor == 1 ? 40 : 36;
  uint32_t count = minor == 1 ? 4 : 3;
  f.common(2, minor, 13, 0, descs + 16 * count, 0x100, 0x300);
  f.u32(32, count);
  if (minor == 1) f.u32(36, 3);  // psp_aux_fw_bin_index
  uint32_t bins[4][4] = {{1, 0x30001, 0x0, 0x100}, {2, 0x30002, 0x100, 0x80},
                         {3, 0x30003, 0x200, 0x40}, {1, 0x30009, 0x240, 0x40}};
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t j = 0; j < 4; ++j) f.u32(descs + 16 * i + 4 * j, bins[i][j]);
  return f;
}

File ta_v2() {
  File f(0x200);
  f.common(2, 0, 13, 0, 36 + 32, 0x100, 0x100);
  f.u32(32, 2);
  f.u32(36, 1).u32(40, 0x1000001).u32(44, 0x0).u32(48, 0x80);  // ASD
  return f.u32(52, 3).u32(56, 0x1000003).u32(60, 0x80).u32(64, 0x80);  // RAS
}

// smc_firmware_header_v2_1 with two soft PPTables; or 2.0 with one.
File smu_v2(uint16_t minor) {
  File f(0x260);
  f.common(2, minor, 13, 0, 44, 0x100, 0x100);
  f.u32(32, 0);  // ucode_start_addr
  if (minor == 0) return f.u32(36, 0x200).u32(40, 0x60);
  f.u32(36, 2).u32(40, 0x200);
  f.u32(0x200, 3).u32(0x204, 0x218).u32(0x208, 0x20);
  return f.u32(0x20c, 4).u32(0x210, 0x238).u32(0x214, 0x28);
}

File sdma_v2() {
  File f(0x1c0);
  f.common(2, 0, 6, 0, 64, 0x100, 0x80);
  f.u32(32, 0x3c).u32(36, 0x80).u32(40, 0).u32(44, 0);
  return f.u32(48, 0x180).u32(52, 0x40).u32(56, 0).u32(60, 0);
}

Firmware parse(const File& f, const std::string& name) {
  return parse_firmware(f.b, parse_firmware_name(name), "/fw/" + name);
}

void expect_part(const Firmware& fw, const FirmwarePart& p, const std::string& name,
                 uint32_t type, uint32_t version, uint64_t offset, uint64_t size) {
  SCOPED_TRACE(name);
  EXPECT_EQ(p.name, name);
  EXPECT_EQ(p.type, type);
  EXPECT_EQ(p.version, version);
  EXPECT_EQ(p.offset, offset);
  EXPECT_EQ(p.size, size);
  auto span = fw.data(p);
  EXPECT_EQ(std::vector<uint8_t>(span.begin(), span.end()),
            std::vector<uint8_t>(fw.bytes.begin() + static_cast<long>(offset),
                                 fw.bytes.begin() + static_cast<long>(offset + size)));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return std::string("InvalidInput: ") + e.what();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  }
  return "no error";
}

void write(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good());
}

std::vector<uint8_t> zstd(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(AmFirmware, NamesLinuxRequestsForGfx1100) {
  std::vector<std::string> names = gfx1100_firmware_names();
  ASSERT_EQ(names.size(), 9u);
  FirmwareKind kinds[] = {FirmwareKind::Sos, FirmwareKind::Ta,  FirmwareKind::Smu,
                          FirmwareKind::Imu, FirmwareKind::Rlc, FirmwareKind::Pfp,
                          FirmwareKind::Me,  FirmwareKind::Mec, FirmwareKind::Sdma};
  uint32_t majors[] = {13, 13, 13, 11, 11, 11, 11, 11, 6};
  for (size_t i = 0; i < names.size(); ++i) {
    FirmwareName n = parse_firmware_name(names[i]);
    EXPECT_EQ(n.kind, kinds[i]) << names[i];
    EXPECT_EQ(n.ip_major, majors[i]) << names[i];
    EXPECT_EQ(n.ip_minor, 0u) << names[i];
    EXPECT_EQ(n.ip_revision, 0u) << names[i];
  }
  FirmwareName n = parse_firmware_name("gc_11_0_3_mec.bin");
  EXPECT_EQ(n.kind, FirmwareKind::Mec);
  EXPECT_EQ(n.ip_revision, 3u);
}

TEST(AmFirmware, UnknownNamesAreRefused) {
  const std::string expected =
      "': expected gc_<maj>_<min>_<rev>_{pfp,me,mec,rlc,imu}.bin, "
      "psp_<maj>_<min>_<rev>_{sos,ta}.bin, smu_<maj>_<min>_<rev>.bin or "
      "sdma_<maj>_<min>_<rev>.bin";
  for (std::string bad : {"gc_11_0_0_mes.bin", "gc_11_0_0_pfp.bin.zst", "psp_13_0_sos.bin",
                          "smu_13_0_0_x.bin", "sdma_6_0_x.bin", "vega10_sos.bin", "",
                          "gc_11_0_0_imu_kicker.bin", "gc_1111_0_0_pfp.bin"}) {
    EXPECT_EQ(error_of([&] { parse_firmware_name(bad); }),
              "InvalidInput: firmware name '" + bad + expected);
  }
}

TEST(AmFirmware, Rs64GfxUcodeAndData) {
  for (std::string name : {"gc_11_0_0_pfp.bin", "gc_11_0_0_me.bin", "gc_11_0_0_mec.bin"}) {
    Firmware fw = parse(gfx_v2(), name);
    EXPECT_EQ(fw.path, "/fw/" + name);
    EXPECT_EQ(fw.header_major, 2);
    EXPECT_EQ(fw.header_minor, 0);
    EXPECT_EQ(fw.ip_major, 11);
    EXPECT_EQ(fw.ucode_version, 0x1234u);
    EXPECT_EQ(fw.feature_version, 0x25u);
    EXPECT_EQ(fw.crc32, 0xdeadbeefu);
    EXPECT_EQ(fw.ucode_start_addr, 0x200001000u);
    ASSERT_EQ(fw.parts.size(), 2u);
    expect_part(fw, fw.parts[0], "ucode", 0, 0, 0x100, 0x200);
    expect_part(fw, fw.parts[1], "data", 0, 0, 0x300, 0x80);
  }
}

TEST(AmFirmware, F32GfxUcodeAndJumpTable) {
  Firmware fw = parse(gfx_v1(), "gc_11_0_0_mec.bin");
  EXPECT_EQ(fw.header_major, 1);
  EXPECT_EQ(fw.feature_version, 0x19u);
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "ucode", 0, 0, 0x100, 0x1c0);
  expect_part(fw, fw.parts[1], "jt", 0, 0, 0x2c0, 0x40);
  File f = gfx_v1();
  f.u32(40, 0x81);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_pfp.bin: jt_size is 129 dwords, expected at most 128 "
            "(ucode_size_bytes / 4)");
  f.u32(40, 0x10).u32(36, 0x81);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_pfp.bin: ucode_array_offset_bytes+jt_offset*4+jt_size*4 "
            "is 0x304+0x40 (ends at 0x344), expected inside the file (0x300 bytes)");
}

TEST(AmFirmware, RlcPartsPerMinorVersion) {
  Firmware fw = parse(rlc_v2(3), "gc_11_0_0_rlc.bin");
  EXPECT_EQ(fw.feature_version, 7u);
  ASSERT_EQ(fw.parts.size(), 8u);
  expect_part(fw, fw.parts[0], "rlc_g", 0, 0, 0x100, 0x40);
  expect_part(fw, fw.parts[1], "save_restore_list_cntl", 0, 0x11, 0x140, 0x10);
  expect_part(fw, fw.parts[2], "save_restore_list_gpm", 0, 0x12, 0x150, 0x10);
  expect_part(fw, fw.parts[3], "save_restore_list_srm", 0, 0x13, 0x160, 0x10);
  expect_part(fw, fw.parts[4], "rlc_iram", 0, 0, 0x180, 0x40);
  expect_part(fw, fw.parts[5], "rlc_dram", 0, 0, 0x1c0, 0x40);
  expect_part(fw, fw.parts[6], "rlc_p", 0, 0x21, 0x200, 0x20);
  expect_part(fw, fw.parts[7], "rlc_v", 0, 0x22, 0x220, 0x20);
  EXPECT_EQ(&fw.part("rlc_dram"), &fw.parts[5]);

  // 2.4 adds the tap delays (only those with a size) and, as amdgpu_rlc.c, skips RLC_P/V.
  fw = parse(rlc_v2(4), "gc_11_0_0_rlc.bin");
  ASSERT_EQ(fw.parts.size(), 8u);
  expect_part(fw, fw.parts[5], "rlc_dram", 0, 0, 0x1c0, 0x40);
  expect_part(fw, fw.parts[6], "global_tap_delays", 0, 0, 0x240, 0x10);
  expect_part(fw, fw.parts[7], "se2_tap_delays", 0, 0, 0x250, 0x8);
  EXPECT_EQ(error_of([&] { fw.part("rlc_p"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: no part 'rlc_p' in this rlc firmware");
}

TEST(AmFirmware, ImuIramThenDram) {
  Firmware fw = parse(imu_v1(), "gc_11_0_0_imu.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "imu_i", 0, 0, 0x100, 0x40);
  expect_part(fw, fw.parts[1], "imu_d", 0, 0, 0x140, 0x60);
}

TEST(AmFirmware, PspComponentsByType) {
  Firmware fw = parse(sos_v2(), "psp_13_0_0_sos.bin");
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "sos", 1, 0x30001, 0x100, 0x100);
  expect_part(fw, fw.parts[1], "sys_drv", 2, 0x30002, 0x200, 0x80);
  expect_part(fw, fw.parts[2], "kdb", 3, 0x30003, 0x300, 0x40);

  // 2.1: the components from psp_aux_fw_bin_index on (the aux sOS) are not this part's.
  fw = parse(sos_v2(1), "psp_13_0_0_sos.bin");
  EXPECT_EQ(fw.header_minor, 1);
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "sos", 1, 0x30001, 0x100, 0x100);
  expect_part(fw, fw.parts[2], "kdb", 3, 0x30003, 0x300, 0x40);

  fw = parse(ta_v2(), "psp_13_0_0_ta.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "asd", 1, 0x1000001, 0x100, 0x80);
  expect_part(fw, fw.parts[1], "ras", 3, 0x1000003, 0x180, 0x80);
}

TEST(AmFirmware, SmuUcodeAndPptables) {
  Firmware fw = parse(smu_v2(1), "smu_13_0_0.bin");
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "smc", 0, 0, 0x100, 0x100);
  expect_part(fw, fw.parts[1], "pptable", 3, 0, 0x218, 0x20);
  expect_part(fw, fw.parts[2], "pptable", 4, 0, 0x238, 0x28);
  fw = parse(smu_v2(0), "smu_13_0_0.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[1], "pptable", 0, 0, 0x200, 0x60);
}

TEST(AmFirmware, SdmaTwoThreads) {
  Firmware fw = parse(sdma_v2(), "sdma_6_0_0.bin");
  EXPECT_EQ(fw.feature_version, 0x3cu);
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "ctx", 0, 0, 0x100, 0x80);
  expect_part(fw, fw.parts[1], "ctl", 0, 0, 0x180, 0x40);
}

// amdgpu never verifies the crc32 field (amdgpu_ucode_validate compares only the size):
// a file whose crc32 is wrong is read as Linux reads it, the stored value reported.
TEST(AmFirmware, Crc32IsReportedNotVerified) {
  File f = gfx_v2();
  f.u32(28, 0);
  EXPECT_EQ(parse(f, "gc_11_0_0_pfp.bin").crc32, 0u);
}

TEST(AmFirmware, LoadsPlainAndZstdFromADirectory) {
  TempDir d;
  File pfp = gfx_v2();
  write(d.path / "gc_11_0_0_pfp.bin", pfp.b);
  write(d.path / "sdma_6_0_0.bin.zst", zstd(sdma_v2().b));

  Firmware fw = load_firmware("gc_11_0_0_pfp.bin", d.path.string());
  EXPECT_EQ(fw.path, (d.path / "gc_11_0_0_pfp.bin").string());
  EXPECT_EQ(fw.bytes, pfp.b);
  EXPECT_EQ(fw.part("ucode").offset, 0x100u);

  fw = load_firmware("sdma_6_0_0.bin", d.path.string() + "/");
  EXPECT_EQ(fw.path, (d.path / "sdma_6_0_0.bin.zst").string());
  EXPECT_EQ(fw.bytes, sdma_v2().b);
  expect_part(fw, fw.part("ctl"), "ctl", 0, 0, 0x180, 0x40);

  // Two concatenated frames are one file, as zstd -d reads them.
  File sdma = sdma_v2();
  std::vector<uint8_t> two = zstd(sdma.slice(0, 0x100)), second = zstd(sdma.slice(0x100, 0xc0));
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(zstd_decompress(two, "x.zst"), sdma.b);

  // The plain file wins when both are there (Linux's loader tries it first).
  write(d.path / "gc_11_0_0_pfp.bin.zst", {1, 2, 3});
  EXPECT_EQ(load_firmware("gc_11_0_0_pfp.bin", d.path.string()).path,
            (d.path / "gc_11_0_0_pfp.bin").string());
}

TEST(AmFirmware, MissingFile) {
  TempDir d;
  std::string p = (d.path / "gc_11_0_0_mec.bin").string();
  EXPECT_EQ(error_of([&] { load_firmware("gc_11_0_0_mec.bin", d.path.string()); }),
            "Error: firmware " + p + ": not found (nor " + p + ".zst)");
}

TEST(AmFirmware, TruncatedFiles) {
  TempDir d;
  std::string p = (d.path / "gc_11_0_0_pfp.bin").string();
  File f = gfx_v2();
  write(p, f.slice(0, 10));
  EXPECT_EQ(error_of([&] { load_firmware("gc_11_0_0_pfp.bin", d.path.string()); }),
            "InvalidInput: " + p +
                ": file is 10 bytes, expected at least 32 (common_firmware_header)");
  // Cut short after the header: size_bytes still says the whole file.
  write(p, f.slice(0, 0x300));
  EXPECT_EQ(error_of([&] { load_firmware("gc_11_0_0_pfp.bin", d.path.string()); }),
            "InvalidInput: " + p + ": size_bytes is 896, expected 768 (the file's size)");
  // A file whose size_bytes agrees but which ends inside its header.
  File shortened(40);
  shortened.common(2, 0, 11, 0, 40, 32, 8);
  EXPECT_EQ(error_of([&] { parse(shortened, "gc_11_0_0_me.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_me.bin: file is 40 bytes, expected at least 60 "
            "(gfx_firmware_header_v2_0)");
  // The descriptors of a PSP file past its end.
  File sos(0x60);
  sos.common(2, 0, 13, 0, 0x60, 0x60, 0);
  sos.u32(32, 5);
  EXPECT_EQ(error_of([&] { parse(sos, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: file is 96 bytes, expected at least 116 "
            "(psp_firmware_header_v2_0 with 5 psp_fw_bin entries)");
}

TEST(AmFirmware, UnsupportedHeaderVersions) {
  File f = gfx_v2();
  f.u16(8, 3);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_pfp.bin: header version 3.0, expected one of 1.0, 2.0 "
            "for pfp firmware");
  File r = rlc_v2(4);
  r.u16(10, 5);
  EXPECT_EQ(error_of([&] { parse(r, "gc_11_0_0_rlc.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: header version 2.5, expected one of 2.0, 2.1, "
            "2.2, 2.3, 2.4 for rlc firmware");
  File s = smu_v2(1);
  s.u16(8, 1).u16(10, 0);
  EXPECT_EQ(error_of([&] { parse(s, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: header version 1.0, expected one of 2.0, 2.1 for "
            "smu firmware");
  // The same bytes are fine as the kind they are and wrong as another.
  EXPECT_EQ(error_of([&] { parse(sdma_v2(), "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: header version 2.0, expected 1.0 for imu "
            "firmware");
}

TEST(AmFirmware, WrongIpVersion) {
  EXPECT_EQ(error_of([&] { parse(gfx_v2(), "gc_12_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_12_0_0_pfp.bin: ip_version 11.0, expected 12.0 (from the file "
            "name)");
  File s = sdma_v2();
  s.u16(14, 2);
  EXPECT_EQ(error_of([&] { parse(s, "sdma_6_0_0.bin"); }),
            "InvalidInput: /fw/sdma_6_0_0.bin: ip_version 6.2, expected 6.0 (from the file name)");
}

TEST(AmFirmware, HeaderSizeOutsideTheFile) {
  File f = imu_v1();
  f.u32(4, 0x1a1);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: header_size_bytes is 417, expected 32 (the "
            "common header) to 416 (the file's size)");
  f.u32(4, 8);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: header_size_bytes is 8, expected 32 (the "
            "common header) to 416 (the file's size)");
}

TEST(AmFirmware, RangesPastTheEnd) {
  const std::string inside = ", expected inside the file (0x400 bytes)";
  File s = sos_v2();
  s.u32(36 + 16 + 8, 0x2c0);  // SYS_DRV's offset_bytes
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: psp_fw_bin[1] (sys_drv) "
            "ucode_array_offset_bytes+offset_bytes+size_bytes is 0x3c0+0x80 (ends at 0x440)" +
                inside);
  s = sos_v2();
  s.u32(20, 0x301);
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: ucode_array_offset_bytes+ucode_size_bytes is "
            "0x100+0x301 (ends at 0x401)" + inside);

  File g = gfx_v2();
  g.u32(48, 0xffffffff);
  EXPECT_EQ(error_of([&] { parse(g, "gc_11_0_0_mec.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_mec.bin: data_offset_bytes+data_size_bytes is "
            "0xffffffff+0x80 (ends at 0x10000007f), expected inside the file (0x380 bytes)");

  File r = rlc_v2(3);
  r.u32(196, 0x100);
  EXPECT_EQ(error_of([&] { parse(r, "gc_11_0_0_rlc.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: rlcv_ucode_offset_bytes+rlcv_ucode_size_bytes "
            "is 0x220+0x100 (ends at 0x320), expected inside the file (0x300 bytes)");

  File i = imu_v1();
  i.u32(40, 0x61);
  EXPECT_EQ(error_of([&] { parse(i, "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: "
            "ucode_array_offset_bytes+imu_iram_ucode_size_bytes+imu_dram_ucode_size_bytes is "
            "0x140+0x61 (ends at 0x1a1), expected inside the file (0x1a0 bytes)");

  File m = smu_v2(1);
  m.u32(36, 9);
  EXPECT_EQ(error_of([&] { parse(m, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: pptable_entry_offset+pptable_count*12 is "
            "0x200+0x6c (ends at 0x26c), expected inside the file (0x260 bytes)");
  m = smu_v2(1);
  m.u32(0x214, 0x29);
  EXPECT_EQ(error_of([&] { parse(m, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: pptable entry 1 (id 4) "
            "ppt_offset_bytes+ppt_size_bytes is 0x238+0x29 (ends at 0x261), expected inside the "
            "file (0x260 bytes)");

  File d = sdma_v2();
  d.u32(52, 0x41);
  EXPECT_EQ(error_of([&] { parse(d, "sdma_6_0_0.bin"); }),
            "InvalidInput: /fw/sdma_6_0_0.bin: ctl_ucode_offset+ctl_ucode_size_bytes is "
            "0x180+0x41 (ends at 0x1c1), expected inside the file (0x1c0 bytes)");
}

TEST(AmFirmware, PspCounts) {
  File s = sos_v2();
  s.u32(32, 13);
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: psp_fw_bin_count is 13, expected at most 12 "
            "(UCODE_MAX_PSP_PACKAGING - 1)");
  File t = ta_v2();
  t.u32(32, 0xffffffff);
  EXPECT_EQ(error_of([&] { parse(t, "psp_13_0_0_ta.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_ta.bin: ta_fw_bin_count is 4294967295, expected at "
            "most 12 (UCODE_MAX_PSP_PACKAGING - 1)");
  s = sos_v2(1);
  s.u32(36, 5);
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: psp_aux_fw_bin_index is 5, expected at most "
            "4 (psp_fw_bin_count)");
}

TEST(AmFirmware, BadZstdData) {
  TempDir d;
  std::string p = (d.path / "smu_13_0_0.bin.zst").string();
  write(p, {'n', 'o', 't', ' ', 'z', 's', 't', 'd'});
  EXPECT_EQ(error_of([&] { load_firmware("smu_13_0_0.bin", d.path.string()); }),
            "InvalidInput: " + p + ": zstd frame error: Unknown frame descriptor");

  std::vector<uint8_t> whole = zstd(smu_v2(1).b);
  std::vector<uint8_t> cut(whole.begin(), whole.end() - 3);
  write(p, cut);
  EXPECT_EQ(error_of([&] { load_firmware("smu_13_0_0.bin", d.path.string()); }),
            "InvalidInput: " + p + ": zstd data ends inside a frame after " +
                std::to_string(cut.size()) + " bytes, expected a complete frame");

  write(p, {});
  EXPECT_EQ(error_of([&] { load_firmware("smu_13_0_0.bin", d.path.string()); }),
            "InvalidInput: " + p +
                ": zstd data ends inside a frame after 0 bytes, expected a complete frame");

  // A frame that decompresses to a valid container with the wrong version is reported
  // against the .zst path.
  File s = smu_v2(1);
  s.u16(10, 7);
  write(p, zstd(s.b));
  EXPECT_EQ(error_of([&] { load_firmware("smu_13_0_0.bin", d.path.string()); }),
            "InvalidInput: " + p + ": header version 2.7, expected one of 2.0, 2.1 for smu "
            "firmware");
}

// A small frame that would decompress past the limit (kMaxFirmwareBytes for files) stops there.
TEST(AmFirmware, DecompressedSizeLimit) {
  for (size_t limit : {size_t{1000}, size_t{300000}}) {
    std::vector<uint8_t> zeros(limit + 1);
    std::vector<uint8_t> bomb = zstd(zeros);
    EXPECT_LT(bomb.size(), 100u);
    EXPECT_EQ(error_of([&] { zstd_decompress(bomb, "/fw/x.bin.zst", limit); }),
              "InvalidInput: /fw/x.bin.zst: decompressed size over " + std::to_string(limit) +
                  " bytes, expected at most that");
    zeros.pop_back();
    EXPECT_EQ(zstd_decompress(zstd(zeros), "/fw/x.bin.zst", limit), zeros);
  }
}

}  // namespace
}  // namespace hcq::amd::am
