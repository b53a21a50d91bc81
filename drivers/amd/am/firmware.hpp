// amdgpu firmware containers (/lib/firmware/amdgpu/*.bin, plain or .zst): the common header
// and the variants a gfx1100 boot uploads (PSP sOS and TA, SMU, RLC, IMU, PFP/ME/MEC as RS64
// or F32, SDMA), read and checked as Linux reads them, into the byte ranges the boot hands to the PSP.
//
// Layouts from Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h; where each range starts from
// amdgpu_ucode.c (amdgpu_ucode_init_single_fw), amdgpu_psp.c (psp_init_sos_microcode,
// parse_sos_bin_descriptor, parse_ta_v2_microcode), amdgpu_rlc.c
// (amdgpu_gfx_rlc_init_microcode_v2_*), smu_v13_0.c (smu_v13_0_get_pptable_from_firmware).
//
// What is checked: the file holds the whole header of its version; size_bytes equals the
// file's size (the one check amdgpu_ucode_validate makes); header_size_bytes lies inside the
// file; the header version is one this reader knows for the kind (the exact list is in
// firmware.cpp, kHeaderVersions); the header's IP version matches the one in the file name;
// every range the boot would upload lies inside the file. The crc32 field is kept but not
// checked: amdgpu never verifies it (it is only printed by amdgpu_ucode_print_common_hdr).
//
// Threads: every function here is safe to call from several threads at once; a Firmware is a
// plain value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hcq::amd::am {

enum class FirmwareKind { Pfp, Me, Mec, Rlc, Imu, Sos, Ta, Smu, Sdma };
const char* firmware_kind_name(FirmwareKind kind);  // "pfp", "me", ... "sdma"

// What a firmware file name says: gc_11_0_0_pfp.bin is Pfp for IP 11.0.0.
struct FirmwareName {
  FirmwareKind kind;
  uint32_t ip_major = 0, ip_minor = 0, ip_revision = 0;
};
// Throws hcq::InvalidInput for a name that is none of <gc|psp|smu|sdma>_<maj>_<min>_<rev>[_part].bin
// with the parts above.
FirmwareName parse_firmware_name(std::string_view file_name);

// One range of the file the boot uploads.
struct FirmwarePart {
  std::string name;       // "ucode", "data", "jt", "rlc_g", "rlc_iram", "imu_i", "sos", ...
  uint32_t type = 0;      // PSP: psp_fw_type; TA: ta_fw_type; SMU pptable: its id; else 0
  uint32_t version = 0;   // the part's own firmware version where the header has one
  uint64_t offset = 0;    // from the start of the (decompressed) file
  uint64_t size = 0;
};

struct Firmware {
  std::string path;  // the file read: <dir>/<name> or <dir>/<name>.zst
  FirmwareKind kind = FirmwareKind::Pfp;
  uint16_t header_major = 0, header_minor = 0;
  uint16_t ip_major = 0, ip_minor = 0;
  uint32_t ucode_version = 0;
  uint32_t feature_version = 0;   // ucode_feature_version where the header has one
  uint32_t crc32 = 0;             // as stored; not verified (see above)
  uint64_t ucode_start_addr = 0;  // RS64 PFP/ME/MEC: where the core starts executing
  std::vector<uint8_t> bytes;     // the whole file, decompressed
  std::vector<FirmwarePart> parts;

  // The part named `name`; throws hcq::InvalidInput naming the file when there is none.
  const FirmwarePart& part(std::string_view name) const;
  std::span<const uint8_t> data(const FirmwarePart& p) const {
    return std::span<const uint8_t>(bytes).subspan(p.offset, p.size);
  }
};

// Parses a whole file's bytes as `name` says (kind and IP version); `path` names the file in
// errors. Throws hcq::InvalidInput: "<path>: <field> <found>, expected <expected>".
Firmware parse_firmware(std::vector<uint8_t> bytes, const FirmwareName& name,
                        const std::string& path);

// The files hold at most this much once decompressed (the largest amdgpu file is a few MiB).
inline constexpr size_t kMaxFirmwareBytes = 64u << 20;

// Decompresses one or more zstd frames; throws hcq::InvalidInput naming `path` on a frame
// error or on output past `max_bytes`.
std::vector<uint8_t> zstd_decompress(std::span<const uint8_t> compressed, const std::string& path,
                                     size_t max_bytes = kMaxFirmwareBytes);

inline constexpr const char* kDefaultFirmwareDir = "/lib/firmware/amdgpu";

// Reads <dir>/<file_name>, or <dir>/<file_name>.zst when that is absent (the order Linux's
// firmware loader tries them), and parses it. A missing or unreadable file throws hcq::Error
// naming the paths tried.
Firmware load_firmware(std::string_view file_name, const std::string& dir = kDefaultFirmwareDir);

// The files Linux requests for gfx1100 (GC 11.0.0, MP0/MP1 13.0.0, SDMA 6.0.0), from the
// MODULE_FIRMWARE lines of psp_v13_0.c, smu_v13_0.c, imu_v11_0.c, gfx_v11_0.c and
// sdma_v6_0.c, in the order the boot uses them.
std::vector<std::string> gfx1100_firmware_names();

}  // namespace hcq::amd::am
