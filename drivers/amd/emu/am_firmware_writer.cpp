#include "amd/emu/am_firmware_writer.hpp"

#include <zstd.h>

#include <array>
#include <cerrno>
#include <fstream>

#include "amd/am/firmware.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

FirmwareImage::FirmwareImage(size_t size) : bytes(size) {
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
}

FirmwareImage& FirmwareImage::u32(size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
  return *this;
}

FirmwareImage& FirmwareImage::u16(size_t at, uint16_t v) {
  bytes[at] = static_cast<uint8_t>(v);
  bytes[at + 1] = static_cast<uint8_t>(v >> 8);
  return *this;
}

// common_firmware_header (amdgpu_ucode.h): size_bytes 0, header_size_bytes 4,
// header_version_major 8, _minor 10, ip_version_major 12, _minor 14, ucode_version 16,
// ucode_size_bytes 20, ucode_array_offset_bytes 24, crc32 28.
FirmwareImage& FirmwareImage::common(uint16_t header_major, uint16_t header_minor,
                                     uint16_t ip_major, uint16_t ip_minor, uint32_t header_size,
                                     uint32_t ucode_offset, uint32_t ucode_size) {
  u32(0, static_cast<uint32_t>(bytes.size())).u32(4, header_size);
  u16(8, header_major).u16(10, header_minor).u16(12, ip_major).u16(14, ip_minor);
  u32(16, 0x1234).u32(20, ucode_size).u32(24, ucode_offset);
  return u32(28, 0xdeadbeef);
}

std::vector<uint8_t> FirmwareImage::slice(uint64_t offset, uint64_t size) const {
  return {bytes.begin() + static_cast<long>(offset),
          bytes.begin() + static_cast<long>(offset + size)};
}

// gfx_firmware_header_v2_0: ucode_feature_version 32, ucode_size_bytes 36, ucode_offset_bytes
// 40, data_size_bytes 44, data_offset_bytes 48, ucode_start_addr_lo 52, _hi 56.
FirmwareImage rs64_gfx_firmware() {
  FirmwareImage f(0x380);
  f.common(2, 0, 11, 0, 60, 0x100, 0x280);
  f.u32(32, 0x25).u32(36, 0x200).u32(40, 0x100).u32(44, 0x80).u32(48, 0x300);
  return f.u32(52, 0x1000).u32(56, 0x2);
}

// gfx_firmware_header_v1_0: ucode_feature_version 32, jt_offset 36, jt_size 40 (dwords).
FirmwareImage f32_gfx_firmware() {
  FirmwareImage f(0x300);
  f.common(1, 0, 11, 0, 44, 0x100, 0x200);
  return f.u32(32, 0x19).u32(36, 0x70).u32(40, 0x10);
}

// rlc_firmware_header_v2_0 .. v2_4 (offsets in the comments of each line).
FirmwareImage rlc_firmware(uint16_t minor) {
  FirmwareImage f(0x300);
  f.common(2, minor, 11, 0, minor == 3 ? 204 : 244, 0x100, 0x40);
  f.u32(32, 0x7);                                      // ucode_feature_version
  for (uint32_t i = 36; i < 244; i += 4) f.u32(i, 0);  // the optional parts absent by default
  f.u32(108, 0x11).u32(116, 0x10).u32(120, 0x140);     // save_restore_list_cntl
  f.u32(124, 0x12).u32(132, 0x10).u32(136, 0x150);     // gpm
  f.u32(140, 0x13).u32(148, 0x10).u32(152, 0x160);     // srm
  f.u32(156, 0x40).u32(160, 0x180).u32(164, 0x40).u32(168, 0x1c0);  // iram, dram
  f.u32(172, 0x21).u32(180, 0x20).u32(184, 0x200);     // rlcp
  f.u32(188, 0x22).u32(196, 0x20).u32(200, 0x220);     // rlcv
  if (minor == 4) f.u32(204, 0x10).u32(208, 0x240).u32(228, 0x8).u32(232, 0x250);  // global, se2
  return f;
}

// imu_firmware_header_v1_0: imu_iram_ucode_size_bytes 32, _offset_bytes 36, imu_dram 40, 44.
FirmwareImage imu_firmware() {
  FirmwareImage f(0x1a0);
  f.common(1, 0, 11, 0, 48, 0x100, 0xa0);
  return f.u32(32, 0x40).u32(36, 0x999).u32(40, 0x60).u32(44, 0x999);  // offsets: not read
}

namespace {

// psp_firmware_header_v2_0/2_1: psp_fw_bin_count 32, (2.1: psp_aux_fw_bin_index 36), then
// psp_fw_bin_desc {fw_type, fw_version, offset_bytes, size_bytes} each.
FirmwareImage psp_v2(uint16_t minor, size_t size, uint32_t ucode_size,
                     const std::vector<std::array<uint32_t, 4>>& bins) {
  FirmwareImage f(size);
  const uint32_t descs = minor == 1 ? 40 : 36;
  const uint32_t count = static_cast<uint32_t>(bins.size());
  f.common(2, minor, 13, 0, descs + 16 * count, 0x100, ucode_size);
  f.u32(32, count);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t j = 0; j < 4; ++j) f.u32(descs + 16 * i + 4 * j, bins[i][j]);
  return f;
}

}  // namespace

FirmwareImage sos_firmware(uint16_t minor) {
  std::vector<std::array<uint32_t, 4>> bins = {
      {1, 0x30001, 0x0, 0x100}, {2, 0x30002, 0x100, 0x80}, {3, 0x30003, 0x200, 0x40}};
  if (minor == 1) bins.push_back({1, 0x30009, 0x240, 0x40});
  FirmwareImage f = psp_v2(minor, 0x400, 0x300, bins);
  if (minor == 1) f.u32(36, 1);  // psp_aux_fw_bin_index: the last one is the aux sOS
  return f;
}

FirmwareImage sos_firmware_all_components() {
  // enum psp_fw_type (amdgpu_ucode.h): SOS 1, SYS_DRV 2, KDB 3, SPL 5, SOC_DRV 7, INTF_DRV 8,
  // DBG_DRV 9, RAS_DRV 10.
  const uint32_t types[] = {3, 5, 2, 7, 8, 9, 10, 1};
  std::vector<std::array<uint32_t, 4>> bins;
  for (uint32_t i = 0; i < 8; ++i) bins.push_back({types[i], 0x30000 + types[i], 0x100 * i, 0x100});
  return psp_v2(0, 0x900, 0x800, bins);
}

// ta_firmware_header_v2_0: ta_fw_bin_count 32, then the same descriptors (ta_fw_type).
FirmwareImage ta_firmware() {
  FirmwareImage f(0x200);
  f.common(2, 0, 13, 0, 36 + 32, 0x100, 0x100);
  f.u32(32, 2);
  f.u32(36, 1).u32(40, 0x1000001).u32(44, 0x0).u32(48, 0x80);         // ASD
  return f.u32(52, 3).u32(56, 0x1000003).u32(60, 0x80).u32(64, 0x80);  // RAS
}

// smc_firmware_header_v2_0: ucode_start_addr 32, ppt_offset_bytes 36, ppt_size_bytes 40;
// v2_1: pptable_count 36, pptable_entry_offset 40, entries {id, offset, size}.
FirmwareImage smu_firmware(uint16_t minor) {
  FirmwareImage f(0x260);
  f.common(2, minor, 13, 0, 44, 0x100, 0x100);
  f.u32(32, 0);
  if (minor == 0) return f.u32(36, 0x200).u32(40, 0x60);
  f.u32(36, 2).u32(40, 0x200);
  f.u32(0x200, 3).u32(0x204, 0x218).u32(0x208, 0x20);
  return f.u32(0x20c, 4).u32(0x210, 0x238).u32(0x214, 0x28);
}

// sdma_firmware_header_v2_0: ucode_feature_version 32, ctx_ucode_size_bytes 36, ctx_jt_offset
// 40, ctx_jt_size 44, ctl_ucode_offset 48, ctl_ucode_size_bytes 52, ctl_jt_offset 56, _size 60.
FirmwareImage sdma_firmware() {
  FirmwareImage f(0x1c0);
  f.common(2, 0, 6, 0, 64, 0x100, 0x80);
  f.u32(32, 0x3c).u32(36, 0x80).u32(40, 0).u32(44, 0);
  return f.u32(48, 0x180).u32(52, 0x40).u32(56, 0).u32(60, 0);
}

std::vector<uint8_t> zstd_compress(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n)) throw Error(std::string("zstd compression: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

FirmwareImage gfx1100_firmware(std::string_view file_name) {
  using K = am::FirmwareKind;
  bool known = false;
  for (const std::string& n : am::gfx1100_firmware_names()) known |= n == file_name;
  if (!known) throw InvalidInput("no synthesized gfx1100 firmware named '" + std::string(file_name) + "'");
  switch (am::parse_firmware_name(file_name).kind) {
    case K::Pfp:
    case K::Me:
    case K::Mec: return rs64_gfx_firmware();
    case K::Rlc: return rlc_firmware(3);
    case K::Imu: return imu_firmware();
    case K::Sos: return sos_firmware_all_components();
    case K::Ta: return ta_firmware();
    case K::Smu: return smu_firmware(1);
    case K::Sdma: return sdma_firmware();
  }
  throw InvalidInput("no synthesized gfx1100 firmware named '" + std::string(file_name) + "'");
}

std::vector<std::string> write_gfx1100_firmware(const std::string& dir, FirmwareCompression compression) {
  std::vector<std::string> paths;
  for (const std::string& name : am::gfx1100_firmware_names()) {
    std::vector<uint8_t> bytes = gfx1100_firmware(name).bytes;
    std::string path = dir + "/" + name;
    if (compression == FirmwareCompression::Zstd) {
      bytes = zstd_compress(bytes);
      path += ".zst";
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw OsError("writing synthesized firmware " + path, errno ? errno : EIO);
    paths.push_back(std::move(path));
  }
  return paths;
}

}  // namespace hcq::amd::emu
