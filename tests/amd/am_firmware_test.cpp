// amdgpu firmware containers: files synthesized by the emulated GPU's firmware writer from the
// amdgpu_ucode.h field layouts (Debian ships no AMD firmware in main), plain and
// zstd-compressed, the whole gfx1100 set among them, parsed into the ranges
// the boot uploads; every malformed file an exact error naming the file, field and expectation.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "amd/am/firmware.hpp"
#include "amd/emu/am_firmware_writer.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

namespace fs = std::filesystem;
// The files are synthesized by the emulated GPU's writer (amd/emu/am_firmware_writer.hpp).
using File = emu::FirmwareImage;
using emu::zstd_compress;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/hcq_am_firmware_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

Firmware parse(const File& f, const std::string& name) {
  return parse_firmware(f.bytes, parse_firmware_name(name), "/fw/" + name);
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
    Firmware fw = parse(emu::rs64_gfx_firmware(), name);
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
  Firmware fw = parse(emu::f32_gfx_firmware(), "gc_11_0_0_mec.bin");
  EXPECT_EQ(fw.header_major, 1);
  EXPECT_EQ(fw.feature_version, 0x19u);
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "ucode", 0, 0, 0x100, 0x1c0);
  expect_part(fw, fw.parts[1], "jt", 0, 0, 0x2c0, 0x40);
  File f = emu::f32_gfx_firmware();
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
  Firmware fw = parse(emu::rlc_firmware(3), "gc_11_0_0_rlc.bin");
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
  fw = parse(emu::rlc_firmware(4), "gc_11_0_0_rlc.bin");
  ASSERT_EQ(fw.parts.size(), 8u);
  expect_part(fw, fw.parts[5], "rlc_dram", 0, 0, 0x1c0, 0x40);
  expect_part(fw, fw.parts[6], "global_tap_delays", 0, 0, 0x240, 0x10);
  expect_part(fw, fw.parts[7], "se2_tap_delays", 0, 0, 0x250, 0x8);
  EXPECT_EQ(error_of([&] { fw.part("rlc_p"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: no part 'rlc_p' in this rlc firmware");
}

TEST(AmFirmware, ImuIramThenDram) {
  Firmware fw = parse(emu::imu_firmware(), "gc_11_0_0_imu.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "imu_i", 0, 0, 0x100, 0x40);
  expect_part(fw, fw.parts[1], "imu_d", 0, 0, 0x140, 0x60);
}

TEST(AmFirmware, PspComponentsByType) {
  Firmware fw = parse(emu::sos_firmware(), "psp_13_0_0_sos.bin");
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "sos", 1, 0x30001, 0x100, 0x100);
  expect_part(fw, fw.parts[1], "sys_drv", 2, 0x30002, 0x200, 0x80);
  expect_part(fw, fw.parts[2], "kdb", 3, 0x30003, 0x300, 0x40);

  // 2.1: a part without aux sOS takes psp_fw_bin[0, count - psp_aux_fw_bin_index), as Linux's
  // psp_init_sos_microcode counts (here 4 - 1); hcq once took [0, index).
  fw = parse(emu::sos_firmware(1), "psp_13_0_0_sos.bin");
  EXPECT_EQ(fw.header_minor, 1);
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "sos", 1, 0x30001, 0x100, 0x100);
  expect_part(fw, fw.parts[2], "kdb", 3, 0x30003, 0x300, 0x40);
  File three_aux = emu::sos_firmware(1);
  three_aux.u32(36, 3);
  fw = parse(three_aux, "psp_13_0_0_sos.bin");
  ASSERT_EQ(fw.parts.size(), 1u);
  expect_part(fw, fw.parts[0], "sos", 1, 0x30001, 0x100, 0x100);

  fw = parse(emu::ta_firmware(), "psp_13_0_0_ta.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "asd", 1, 0x1000001, 0x100, 0x80);
  expect_part(fw, fw.parts[1], "ras", 3, 0x1000003, 0x180, 0x80);
}

TEST(AmFirmware, SmuUcodeAndPptables) {
  Firmware fw = parse(emu::smu_firmware(1), "smu_13_0_0.bin");
  ASSERT_EQ(fw.parts.size(), 3u);
  expect_part(fw, fw.parts[0], "smc", 0, 0, 0x100, 0x100);
  expect_part(fw, fw.parts[1], "pptable", 3, 0, 0x218, 0x20);
  expect_part(fw, fw.parts[2], "pptable", 4, 0, 0x238, 0x28);
  fw = parse(emu::smu_firmware(0), "smu_13_0_0.bin");
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[1], "pptable", 0, 0, 0x200, 0x60);
}

TEST(AmFirmware, SdmaTwoThreads) {
  Firmware fw = parse(emu::sdma_firmware(), "sdma_6_0_0.bin");
  EXPECT_EQ(fw.feature_version, 0x3cu);
  ASSERT_EQ(fw.parts.size(), 2u);
  expect_part(fw, fw.parts[0], "ctx", 0, 0, 0x100, 0x80);
  expect_part(fw, fw.parts[1], "ctl", 0, 0, 0x180, 0x40);
}

// amdgpu never verifies the crc32 field (amdgpu_ucode_validate compares only the size):
// a file whose crc32 is wrong is read as Linux reads it, the stored value reported.
TEST(AmFirmware, Crc32IsReportedNotVerified) {
  File f = emu::rs64_gfx_firmware();
  f.u32(28, 0);
  EXPECT_EQ(parse(f, "gc_11_0_0_pfp.bin").crc32, 0u);
}

TEST(AmFirmware, LoadsPlainAndZstdFromADirectory) {
  TempDir d;
  File pfp = emu::rs64_gfx_firmware();
  write(d.path / "gc_11_0_0_pfp.bin", pfp.bytes);
  write(d.path / "sdma_6_0_0.bin.zst", zstd_compress(emu::sdma_firmware().bytes));

  Firmware fw = load_firmware("gc_11_0_0_pfp.bin", d.path.string());
  EXPECT_EQ(fw.path, (d.path / "gc_11_0_0_pfp.bin").string());
  EXPECT_EQ(fw.bytes, pfp.bytes);
  EXPECT_EQ(fw.part("ucode").offset, 0x100u);

  fw = load_firmware("sdma_6_0_0.bin", d.path.string() + "/");
  EXPECT_EQ(fw.path, (d.path / "sdma_6_0_0.bin.zst").string());
  EXPECT_EQ(fw.bytes, emu::sdma_firmware().bytes);
  expect_part(fw, fw.part("ctl"), "ctl", 0, 0, 0x180, 0x40);

  // Two concatenated frames are one file, as zstd -d reads them.
  File sdma = emu::sdma_firmware();
  std::vector<uint8_t> two = zstd_compress(sdma.slice(0, 0x100)), second = zstd_compress(sdma.slice(0x100, 0xc0));
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(zstd_decompress(two, "x.zst"), sdma.bytes);

  // The plain file wins when both are there (Linux's loader tries it first).
  write(d.path / "gc_11_0_0_pfp.bin.zst", {1, 2, 3});
  EXPECT_EQ(load_firmware("gc_11_0_0_pfp.bin", d.path.string()).path,
            (d.path / "gc_11_0_0_pfp.bin").string());
}

// The set the emulated RX 7900 XTX boots from: every file Linux requests for gfx1100 loads,
// plain or .zst, with the parts the boot uploads.
TEST(AmFirmware, SynthesizedGfx1100SetLoads) {
  for (auto compression : {emu::FirmwareCompression::None, emu::FirmwareCompression::Zstd}) {
    TempDir d;
    const bool zst = compression == emu::FirmwareCompression::Zstd;
    std::vector<std::string> paths = emu::write_gfx1100_firmware(d.path.string(), compression);
    const std::vector<std::string> names = gfx1100_firmware_names();
    ASSERT_EQ(paths.size(), names.size());
    for (size_t i = 0; i < paths.size(); ++i) {
      const std::string& name = names[i];
      const std::string path = (d.path / name).string() + (zst ? ".zst" : "");
      EXPECT_EQ(paths[i], path);
      Firmware fw = load_firmware(name, d.path.string());
      EXPECT_EQ(fw.path, path);
      EXPECT_EQ(fw.bytes, emu::gfx1100_firmware(name).bytes) << name;
    }
    Firmware sos = load_firmware("psp_13_0_0_sos.bin", d.path.string());
    std::vector<std::string> parts;
    for (const FirmwarePart& p : sos.parts) parts.push_back(p.name);
    EXPECT_EQ(parts, (std::vector<std::string>{"kdb", "spl", "sys_drv", "soc_drv", "intf_drv",
                                               "dbg_drv", "ras_drv", "sos"}));
    expect_part(sos, sos.part("ras_drv"), "ras_drv", 10, 0x3000a, 0x700, 0x100);
    Firmware mec = load_firmware("gc_11_0_0_mec.bin", d.path.string());
    EXPECT_EQ(mec.header_major, 2);  // RS64
    EXPECT_EQ(mec.ucode_start_addr, 0x200001000u);
    EXPECT_EQ(load_firmware("gc_11_0_0_rlc.bin", d.path.string()).header_minor, 3);
    EXPECT_EQ(load_firmware("smu_13_0_0.bin", d.path.string()).parts.size(), 3u);
  }
  EXPECT_EQ(error_of([] { emu::gfx1100_firmware("gc_11_0_3_mec.bin"); }),
            "InvalidInput: no synthesized gfx1100 firmware named 'gc_11_0_3_mec.bin'");
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
  File f = emu::rs64_gfx_firmware();
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
  File f = emu::rs64_gfx_firmware();
  f.u16(8, 3);
  EXPECT_EQ(error_of([&] { parse(f, "gc_11_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_pfp.bin: header version 3.0, expected one of 1.0, 2.0 "
            "for pfp firmware");
  File r = emu::rlc_firmware(4);
  r.u16(10, 5);
  EXPECT_EQ(error_of([&] { parse(r, "gc_11_0_0_rlc.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: header version 2.5, expected one of 2.0, 2.1, "
            "2.2, 2.3, 2.4 for rlc firmware");
  File s = emu::smu_firmware(1);
  s.u16(8, 1).u16(10, 0);
  EXPECT_EQ(error_of([&] { parse(s, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: header version 1.0, expected one of 2.0, 2.1 for "
            "smu firmware");
  // The same bytes are fine as the kind they are and wrong as another.
  EXPECT_EQ(error_of([&] { parse(emu::sdma_firmware(), "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: header version 2.0, expected 1.0 for imu "
            "firmware");
}

TEST(AmFirmware, WrongIpVersion) {
  EXPECT_EQ(error_of([&] { parse(emu::rs64_gfx_firmware(), "gc_12_0_0_pfp.bin"); }),
            "InvalidInput: /fw/gc_12_0_0_pfp.bin: ip_version 11.0, expected 12.0 (from the file "
            "name)");
  File s = emu::sdma_firmware();
  s.u16(14, 2);
  EXPECT_EQ(error_of([&] { parse(s, "sdma_6_0_0.bin"); }),
            "InvalidInput: /fw/sdma_6_0_0.bin: ip_version 6.2, expected 6.0 (from the file name)");
}

TEST(AmFirmware, HeaderSizeOutsideTheFile) {
  File f = emu::imu_firmware();
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
  File s = emu::sos_firmware();
  s.u32(36 + 16 + 8, 0x2c0);  // SYS_DRV's offset_bytes
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: psp_fw_bin[1] (sys_drv) "
            "ucode_array_offset_bytes+offset_bytes+size_bytes is 0x3c0+0x80 (ends at 0x440)" +
                inside);
  s = emu::sos_firmware();
  s.u32(20, 0x301);
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: ucode_array_offset_bytes+ucode_size_bytes is "
            "0x100+0x301 (ends at 0x401)" + inside);

  File g = emu::rs64_gfx_firmware();
  g.u32(48, 0xffffffff);
  EXPECT_EQ(error_of([&] { parse(g, "gc_11_0_0_mec.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_mec.bin: data_offset_bytes+data_size_bytes is "
            "0xffffffff+0x80 (ends at 0x10000007f), expected inside the file (0x380 bytes)");

  File r = emu::rlc_firmware(3);
  r.u32(196, 0x100);
  EXPECT_EQ(error_of([&] { parse(r, "gc_11_0_0_rlc.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_rlc.bin: rlcv_ucode_offset_bytes+rlcv_ucode_size_bytes "
            "is 0x220+0x100 (ends at 0x320), expected inside the file (0x300 bytes)");

  File i = emu::imu_firmware();
  i.u32(40, 0x61);
  EXPECT_EQ(error_of([&] { parse(i, "gc_11_0_0_imu.bin"); }),
            "InvalidInput: /fw/gc_11_0_0_imu.bin: "
            "ucode_array_offset_bytes+imu_iram_ucode_size_bytes+imu_dram_ucode_size_bytes is "
            "0x140+0x61 (ends at 0x1a1), expected inside the file (0x1a0 bytes)");

  File m = emu::smu_firmware(1);
  m.u32(36, 9);
  EXPECT_EQ(error_of([&] { parse(m, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: pptable_entry_offset+pptable_count*12 is "
            "0x200+0x6c (ends at 0x26c), expected inside the file (0x260 bytes)");
  m = emu::smu_firmware(1);
  m.u32(0x214, 0x29);
  EXPECT_EQ(error_of([&] { parse(m, "smu_13_0_0.bin"); }),
            "InvalidInput: /fw/smu_13_0_0.bin: pptable entry 1 (id 4) "
            "ppt_offset_bytes+ppt_size_bytes is 0x238+0x29 (ends at 0x261), expected inside the "
            "file (0x260 bytes)");

  File d = emu::sdma_firmware();
  d.u32(52, 0x41);
  EXPECT_EQ(error_of([&] { parse(d, "sdma_6_0_0.bin"); }),
            "InvalidInput: /fw/sdma_6_0_0.bin: ctl_ucode_offset+ctl_ucode_size_bytes is "
            "0x180+0x41 (ends at 0x1c1), expected inside the file (0x1c0 bytes)");
}

TEST(AmFirmware, PspCounts) {
  // UCODE_MAX_PSP_PACKAGING is 26 since sOS 2.1 (amdgpu_ucode.h): 25 components at most.
  File s = emu::sos_firmware();
  s.u32(32, 26);
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_sos.bin: psp_fw_bin_count is 26, expected at most 25 "
            "(UCODE_MAX_PSP_PACKAGING - 1)");
  s = emu::sos_firmware();
  s.u32(32, 13);  // refused by the older 13-entry bound, which Linux no longer has
  EXPECT_EQ(error_of([&] { parse(s, "psp_13_0_0_sos.bin"); }).find("psp_fw_bin_count is"),
            std::string::npos);
  File t = emu::ta_firmware();
  t.u32(32, 0xffffffff);
  EXPECT_EQ(error_of([&] { parse(t, "psp_13_0_0_ta.bin"); }),
            "InvalidInput: /fw/psp_13_0_0_ta.bin: ta_fw_bin_count is 4294967295, expected at "
            "most 25 (UCODE_MAX_PSP_PACKAGING - 1)");
  s = emu::sos_firmware(1);
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

  std::vector<uint8_t> whole = zstd_compress(emu::smu_firmware(1).bytes);
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
  File s = emu::smu_firmware(1);
  s.u16(10, 7);
  write(p, zstd_compress(s.bytes));
  EXPECT_EQ(error_of([&] { load_firmware("smu_13_0_0.bin", d.path.string()); }),
            "InvalidInput: " + p + ": header version 2.7, expected one of 2.0, 2.1 for smu "
            "firmware");
}

// A small frame that would decompress past the limit (kMaxFirmwareBytes for files) stops there.
TEST(AmFirmware, DecompressedSizeLimit) {
  for (size_t limit : {size_t{1000}, size_t{300000}}) {
    std::vector<uint8_t> zeros(limit + 1);
    std::vector<uint8_t> bomb = zstd_compress(zeros);
    EXPECT_LT(bomb.size(), 100u);
    EXPECT_EQ(error_of([&] { zstd_decompress(bomb, "/fw/x.bin.zst", limit); }),
              "InvalidInput: /fw/x.bin.zst: decompressed size over " + std::to_string(limit) +
                  " bytes, expected at most that");
    zeros.pop_back();
    EXPECT_EQ(zstd_decompress(zstd_compress(zeros), "/fw/x.bin.zst", limit), zeros);
  }
}

}  // namespace
}  // namespace hcq::amd::am
