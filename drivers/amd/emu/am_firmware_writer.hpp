// Synthesized amdgpu firmware files for the emulated GPU and the tests (issue 17 item 3):
// Debian ships no AMD firmware in main, so the emulated RX 7900 XTX boots from files made
// here. Each has a valid header of its kind, written from the field layouts of Linux
// drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h (common_firmware_header and the per-kind
// headers), independently of the reader (drivers/amd/am/firmware.hpp); the payload bytes are
// a function of their offset (i * 7 + 3), so a range read from them can be checked by
// content. They are not real firmware: nothing runs them.
//
// Thread safety: pure functions of their arguments, and FirmwareImage is a plain value; call
// from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hcq::amd::emu {

// A firmware file under construction: little-endian fields at their amdgpu_ucode.h offsets.
struct FirmwareImage {
  std::vector<uint8_t> bytes;
  // `size` bytes of payload pattern.
  explicit FirmwareImage(size_t size);
  FirmwareImage& u32(size_t at, uint32_t v);
  FirmwareImage& u16(size_t at, uint16_t v);
  // struct common_firmware_header: size_bytes = the file's size, header_size_bytes, header
  // and IP versions, ucode_version 0x1234, ucode_size_bytes, ucode_array_offset_bytes, and a
  // crc32 of 0xdeadbeef (amdgpu never checks it).
  FirmwareImage& common(uint16_t header_major, uint16_t header_minor, uint16_t ip_major,
                        uint16_t ip_minor, uint32_t header_size, uint32_t ucode_offset,
                        uint32_t ucode_size);
  std::vector<uint8_t> slice(uint64_t offset, uint64_t size) const;
};

// One file of each kind, IP versions as gfx1100 names them (GC 11.0, MP0/MP1 13.0, SDMA 6.0).
// gfx_firmware_header_v2_0 (RS64 PFP/ME/MEC): ucode [0x100, +0x200), data [0x300, +0x80),
// ucode_start_addr 0x200001000, 0x380 bytes.
FirmwareImage rs64_gfx_firmware();
// gfx_firmware_header_v1_0 (F32): 0x200 bytes of ucode whose last 0x40 are the jump table.
FirmwareImage f32_gfx_firmware();
// rlc_firmware_header_v2_<minor>, minor 3 or 4: RLC_G, the save/restore lists, IRAM/DRAM,
// RLC_P/V (2.3) or the tap delays (2.4).
FirmwareImage rlc_firmware(uint16_t minor);
// imu_firmware_header_v1_0: IRAM 0x40 bytes then DRAM 0x60.
FirmwareImage imu_firmware();
// psp_firmware_header_v2_<minor>: sOS, SYS_DRV and KDB (2.1: an aux sOS after them).
FirmwareImage sos_firmware(uint16_t minor = 0);
// psp_firmware_header_v2_0 with the components a PSP 13.0.0 bootloader takes (Linux
// psp_v13_0.c: KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV) and the sOS, each
// 0x100 bytes, versions 0x30000 + type (psp_fw_type values of amdgpu_ucode.h).
FirmwareImage sos_firmware_all_components();
// ta_firmware_header_v2_0: ASD and RAS.
FirmwareImage ta_firmware();
// smc_firmware_header_v2_<minor>: 2.1 with two soft PPTables (ids 3 and 4), 2.0 with one.
FirmwareImage smu_firmware(uint16_t minor);
// sdma_firmware_header_v2_0: ctx [0x100, +0x80), ctl [0x180, +0x40).
FirmwareImage sdma_firmware();

// One zstd frame (level 3).
std::vector<uint8_t> zstd_compress(std::span<const uint8_t> bytes);

// The file named `file_name`, one of am::gfx1100_firmware_names(): RS64 PFP/ME/MEC (gfx1100's
// CP runs RS64 firmware: Linux gfx_v11_0.c picks it from the v2 header), RLC 2.3, IMU, the sOS
// with every bootloader component, TA, SMU 2.1, SDMA. InvalidInput for another name:
// "no synthesized gfx1100 firmware named 'x.bin'".
FirmwareImage gfx1100_firmware(std::string_view file_name);

enum class FirmwareCompression { None, Zstd };
// Writes every file of am::gfx1100_firmware_names() into `dir` (which must exist), as
// <name> or <name>.zst; returns the paths written. OsError when a file cannot be written.
std::vector<std::string> write_gfx1100_firmware(const std::string& dir,
                                                FirmwareCompression compression = FirmwareCompression::None);

}  // namespace hcq::amd::emu
