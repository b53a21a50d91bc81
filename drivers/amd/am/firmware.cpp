#include "amd/am/firmware.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <memory>

#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

// struct common_firmware_header (amdgpu_ucode.h): every field's byte offset.
constexpr uint64_t kCommonHeaderBytes = 32;
constexpr uint64_t kSizeBytes = 0, kHeaderSizeBytes = 4, kHeaderVersionMajor = 8,
                   kHeaderVersionMinor = 10, kIpVersionMajor = 12, kIpVersionMinor = 14,
                   kUcodeVersion = 16, kUcodeSizeBytes = 20, kUcodeArrayOffsetBytes = 24,
                   kCrc32 = 28;

// psp_fw_bin_desc: fw_type, fw_version, offset_bytes, size_bytes.
constexpr uint64_t kPspBinDescBytes = 16;
// UCODE_MAX_PSP_PACKAGING (amdgpu_ucode.h): the descriptors that fit in the 0x100-byte union
// amdgpu_firmware_header after the common header and the count, times 2 since the sOS 2.1
// header (psp_firmware_header_v2_1) doubled it: 26. amdgpu_psp.c refuses a count at or above
// it (psp_init_sos_microcode, parse_ta_v2_microcode): a file with up to 25 components loads.
constexpr uint32_t kMaxPspPackaging = (0x100 - 32 - 4) / 16 * 2;

struct HeaderVersion {
  uint16_t major, minor;
  const char* layout;     // the amdgpu_ucode.h struct, named in errors
  uint64_t header_bytes;  // its size (PSP/TA: without the descriptors)
};

// The header versions read per kind: what Linux accepts for these IP versions.
//   gfx_v11_0.c: PFP/ME/MEC as RS64 (gfx_firmware_header_v2_0) or F32 (v1_0: ucode and jump
//     table; rs64_enable follows the PFP header's version);
//   amdgpu_rlc.c: RLC 2.0 .. 2.4 (2.5 is GC 12's two-RLC layout);
//   imu_v11_0.c: imu_firmware_header_v1_0; amdgpu_psp.c: sOS 2.0 and 2.1, TA 2.0;
//   smu_v13_0.c: 2.0 and 2.1 (anything else is "Unsupported smu firmware version");
//   amdgpu_sdma.c: SDMA 6 ships sdma_firmware_header_v2_0 (v3.0 is SDMA 7's RS64).
std::vector<HeaderVersion> header_versions(FirmwareKind kind) {
  switch (kind) {
    case FirmwareKind::Pfp:
    case FirmwareKind::Me:
    case FirmwareKind::Mec:
      return {{1, 0, "gfx_firmware_header_v1_0", 44}, {2, 0, "gfx_firmware_header_v2_0", 60}};
    case FirmwareKind::Rlc:
      return {{2, 0, "rlc_firmware_header_v2_0", 104}, {2, 1, "rlc_firmware_header_v2_1", 156},
              {2, 2, "rlc_firmware_header_v2_2", 172}, {2, 3, "rlc_firmware_header_v2_3", 204},
              {2, 4, "rlc_firmware_header_v2_4", 244}};
    case FirmwareKind::Imu: return {{1, 0, "imu_firmware_header_v1_0", 48}};
    case FirmwareKind::Sos:
      return {{2, 0, "psp_firmware_header_v2_0", 36}, {2, 1, "psp_firmware_header_v2_1", 40}};
    case FirmwareKind::Ta: return {{2, 0, "ta_firmware_header_v2_0", 36}};
    case FirmwareKind::Smu:
      return {{2, 0, "smc_firmware_header_v2_0", 44}, {2, 1, "smc_firmware_header_v2_1", 44}};
    case FirmwareKind::Sdma: return {{2, 0, "sdma_firmware_header_v2_0", 64}};
  }
  return {};
}

// enum psp_fw_type and enum ta_fw_type (amdgpu_ucode.h), by value.
const char* psp_fw_type_name(uint32_t type) {
  static const char* const names[] = {"unknown",  "sos",      "sys_drv",  "kdb",     "toc",
                                      "spl",      "rl",       "soc_drv",  "intf_drv", "dbg_drv",
                                      "ras_drv",  "ipkeymgr_drv", "spdm_drv"};
  return type < std::size(names) ? names[type] : "unknown";
}
const char* ta_fw_type_name(uint32_t type) {
  static const char* const names[] = {"unknown", "asd", "xgmi", "ras", "hdcp", "dtm", "rap",
                                      "securedisplay"};
  return type < std::size(names) ? names[type] : "unknown";
}

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Reads the little-endian fields of one file, every read inside it, and raises the errors.
class Reader {
 public:
  Reader(const std::vector<uint8_t>& bytes, const std::string& path)
      : bytes_(bytes), path_(path) {}

  uint64_t size() const { return bytes_.size(); }

  [[noreturn]] void fail(const std::string& field, const std::string& found,
                         const std::string& expected) const {
    throw InvalidInput(path_ + ": " + field + " " + found + ", expected " + expected);
  }

  void need(uint64_t bytes, const std::string& what) const {
    if (size() < bytes)
      fail("file is", std::to_string(size()) + " bytes",
           "at least " + std::to_string(bytes) + " (" + what + ")");
  }

  uint32_t u32(uint64_t at) const {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | bytes_.at(at + i);
    return v;
  }
  uint16_t u16(uint64_t at) const {
    return static_cast<uint16_t>(bytes_.at(at) | (bytes_.at(at + 1) << 8));
  }

  // A range the boot uploads: `fields` names the header fields it comes from.
  void in_file(uint64_t offset, uint64_t bytes, const std::string& fields) const {
    uint64_t end = offset + bytes;  // both below 2^33: no overflow
    if (end > size())
      fail(fields, "is " + hex(offset) + "+" + hex(bytes) + " (ends at " + hex(end) + ")",
           "inside the file (" + hex(size()) + " bytes)");
  }

 private:
  const std::vector<uint8_t>& bytes_;
  const std::string& path_;
};

struct Parser {
  Reader r;
  Firmware& fw;

  // A part at `offset` for `size` bytes, checked against the file.
  void add(std::string name, uint64_t offset, uint64_t size, const std::string& fields,
           uint32_t type = 0, uint32_t version = 0) {
    r.in_file(offset, size, fields);
    fw.parts.push_back({std::move(name), type, version, offset, size});
  }

  uint64_t ucode_array() const { return r.u32(kUcodeArrayOffsetBytes); }

  // gfx_firmware_header_v2_0 (RS64): ucode from ucode_array_offset_bytes for the v2 header's
  // ucode_size_bytes; the data (stack) part from data_offset_bytes (amdgpu_ucode.c,
  // AMDGPU_UCODE_ID_CP_RS64_*).
  void gfx_rs64() {
    fw.feature_version = r.u32(32);
    fw.ucode_start_addr = r.u32(52) | (uint64_t{r.u32(56)} << 32);
    add("ucode", ucode_array(), r.u32(36), "ucode_array_offset_bytes+ucode_size_bytes (v2)");
    add("data", r.u32(48), r.u32(44), "data_offset_bytes+data_size_bytes");
  }

  // gfx_firmware_header_v1_0 (F32): the code is the common ucode less its jump table of
  // jt_size dwords at dword jt_offset (amdgpu_ucode.c, AMDGPU_UCODE_ID_CP_MEC1 and _JT).
  void gfx_f32() {
    fw.feature_version = r.u32(32);
    uint64_t ucode_size = r.u32(kUcodeSizeBytes), jt_bytes = uint64_t{r.u32(40)} * 4;
    if (jt_bytes > ucode_size)
      r.fail("jt_size", "is " + std::to_string(jt_bytes / 4) + " dwords",
             "at most " + std::to_string(ucode_size / 4) + " (ucode_size_bytes / 4)");
    add("ucode", ucode_array(), ucode_size - jt_bytes,
        "ucode_array_offset_bytes+ucode_size_bytes-jt_size*4");
    add("jt", ucode_array() + uint64_t{r.u32(36)} * 4, jt_bytes,
        "ucode_array_offset_bytes+jt_offset*4+jt_size*4");
  }

  // RLC 2.x (amdgpu_rlc.c): RLC_G from the common header; then each minor's parts, offsets
  // from the file's start, registered only when their size is not zero. 2.3 adds RLC_P/V and
  // 2.4 the tap delays, but 2.4 does not read 2.3's fields.
  void rlc(uint16_t minor) {
    fw.feature_version = r.u32(32);
    add("rlc_g", ucode_array(), r.u32(kUcodeSizeBytes),
        "ucode_array_offset_bytes+ucode_size_bytes");
    auto optional = [&](const char* name, uint64_t size_at, uint64_t offset_at,
                        const std::string& fields, uint32_t version = 0) {
      if (uint32_t size = r.u32(size_at)) add(name, r.u32(offset_at), size, fields, 0, version);
    };
    if (minor >= 1) {
      optional("save_restore_list_cntl", 116, 120,
               "save_restore_list_cntl_offset_bytes+save_restore_list_cntl_size_bytes",
               r.u32(108));
      optional("save_restore_list_gpm", 132, 136,
               "save_restore_list_gpm_offset_bytes+save_restore_list_gpm_size_bytes", r.u32(124));
      optional("save_restore_list_srm", 148, 152,
               "save_restore_list_srm_offset_bytes+save_restore_list_srm_size_bytes", r.u32(140));
    }
    if (minor >= 2) {
      optional("rlc_iram", 156, 160, "rlc_iram_ucode_offset_bytes+rlc_iram_ucode_size_bytes");
      optional("rlc_dram", 164, 168, "rlc_dram_ucode_offset_bytes+rlc_dram_ucode_size_bytes");
    }
    if (minor == 3) {
      optional("rlc_p", 180, 184, "rlcp_ucode_offset_bytes+rlcp_ucode_size_bytes", r.u32(172));
      optional("rlc_v", 196, 200, "rlcv_ucode_offset_bytes+rlcv_ucode_size_bytes", r.u32(188));
    }
    if (minor == 4) {
      optional("global_tap_delays", 204, 208,
               "global_tap_delays_ucode_offset_bytes+global_tap_delays_ucode_size_bytes");
      const char* const se[] = {"se0", "se1", "se2", "se3"};
      for (uint64_t i = 0; i < 4; ++i) {
        std::string name = std::string(se[i]) + "_tap_delays";
        optional(name.c_str(), 212 + 8 * i, 216 + 8 * i,
                 name + "_ucode_offset_bytes+" + name + "_ucode_size_bytes");
      }
    }
  }

  // IMU 1.0 (amdgpu_ucode.c, AMDGPU_UCODE_ID_IMU_I/D): IRAM from ucode_array_offset_bytes,
  // DRAM right after it; the header's own offset fields are not what amdgpu reads.
  void imu() {
    uint64_t iram = r.u32(32), dram = r.u32(40);
    add("imu_i", ucode_array(), iram, "ucode_array_offset_bytes+imu_iram_ucode_size_bytes");
    add("imu_d", ucode_array() + iram, dram,
        "ucode_array_offset_bytes+imu_iram_ucode_size_bytes+imu_dram_ucode_size_bytes");
  }

  // PSP sOS 2.x and TA 2.0 (amdgpu_psp.c): psp_fw_bin descriptors, each component at
  // ucode_array_offset_bytes + offset_bytes. sOS 2.1: a part that loads no aux sOS takes
  // psp_fw_bin[0, count - psp_aux_fw_bin_index) (psp_init_sos_microcode; MP0 13.0.6-class
  // parts take [index, count) instead). An index past the count is refused here (Linux's
  // count would wrap).
  void psp_bins(bool ta, uint16_t minor, const HeaderVersion& layout) {
    const char* count_field = ta ? "ta_fw_bin_count" : "psp_fw_bin_count";
    const char* bin_field = ta ? "ta_fw_bin" : "psp_fw_bin";
    uint32_t count = r.u32(32);
    if (count >= kMaxPspPackaging)
      r.fail(count_field, "is " + std::to_string(count),
             "at most " + std::to_string(kMaxPspPackaging - 1) + " (UCODE_MAX_PSP_PACKAGING - 1)");
    uint64_t first = layout.header_bytes;
    r.need(first + count * kPspBinDescBytes, std::string(layout.layout) + " with " +
                                                 std::to_string(count) + " " + bin_field +
                                                 " entries");
    uint32_t used = count;
    if (!ta && minor == 1) {
      uint32_t aux = r.u32(36);
      if (aux > count)
        r.fail("psp_aux_fw_bin_index", "is " + std::to_string(aux),
               "at most " + std::to_string(count) + " (psp_fw_bin_count)");
      used = count - aux;
    }
    for (uint32_t i = 0; i < used; ++i) {
      uint64_t at = first + i * kPspBinDescBytes;
      uint32_t type = r.u32(at), version = r.u32(at + 4);
      const char* name = ta ? ta_fw_type_name(type) : psp_fw_type_name(type);
      add_bin(name, ucode_array() + r.u32(at + 8), r.u32(at + 12), type, version, i, bin_field);
    }
  }
  void add_bin(const char* name, uint64_t offset, uint64_t size, uint32_t type,
               uint32_t version, uint32_t index, const char* bin_field) {
    add(name, offset, size,
        std::string(bin_field) + "[" + std::to_string(index) + "] (" + name +
            ") ucode_array_offset_bytes+offset_bytes+size_bytes",
        type, version);
  }

  // SMU 2.x (smu_v13_0.c): the SMC ucode from the common header; 2.0 one soft PPTable at
  // ppt_offset_bytes, 2.1 a table of smc_soft_pptable_entry {id, offset, size} at
  // pptable_entry_offset; offsets from the file's start.
  void smu(uint16_t minor) {
    add("smc", ucode_array(), r.u32(kUcodeSizeBytes), "ucode_array_offset_bytes+ucode_size_bytes");
    if (minor == 0) {
      if (uint32_t size = r.u32(40)) add("pptable", r.u32(36), size, "ppt_offset_bytes+ppt_size_bytes");
      return;
    }
    uint64_t count = r.u32(36), entries = r.u32(40);
    r.in_file(entries, count * 12, "pptable_entry_offset+pptable_count*12");
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t at = entries + i * 12;
      uint32_t id = r.u32(at);
      add("pptable", r.u32(at + 4), r.u32(at + 8),
          "pptable entry " + std::to_string(i) + " (id " + std::to_string(id) +
              ") ppt_offset_bytes+ppt_size_bytes",
          id);
    }
  }

  // SDMA 2.0 (amdgpu_ucode.c, AMDGPU_UCODE_ID_SDMA_UCODE_TH0/TH1): the context thread's
  // ucode from ucode_array_offset_bytes, the control thread's from ctl_ucode_offset.
  void sdma() {
    fw.feature_version = r.u32(32);
    add("ctx", ucode_array(), r.u32(36), "ucode_array_offset_bytes+ctx_ucode_size_bytes");
    add("ctl", r.u32(48), r.u32(52), "ctl_ucode_offset+ctl_ucode_size_bytes");
  }
};

struct NamePattern {
  const char* prefix;
  const char* part;  // after the IP version; "" for none
  FirmwareKind kind;
};
constexpr NamePattern kNames[] = {
    {"gc", "pfp", FirmwareKind::Pfp}, {"gc", "me", FirmwareKind::Me},
    {"gc", "mec", FirmwareKind::Mec}, {"gc", "rlc", FirmwareKind::Rlc},
    {"gc", "imu", FirmwareKind::Imu}, {"psp", "sos", FirmwareKind::Sos},
    {"psp", "ta", FirmwareKind::Ta},  {"smu", "", FirmwareKind::Smu},
    {"sdma", "", FirmwareKind::Sdma},
};

bool parse_number(std::string_view s, uint32_t& out) {
  if (s.empty() || s.size() > 3) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Reads a whole file; false when it does not exist.
bool read_whole_file(const std::string& path, std::vector<uint8_t>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw OsError("reading firmware " + path, errno);
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw OsError("reading firmware " + path, errno);
  if (!S_ISREG(st.st_mode)) throw InvalidInput(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxFirmwareBytes)
    throw InvalidInput(path + ": file is " + std::to_string(st.st_size) +
                       " bytes, expected at most " + std::to_string(kMaxFirmwareBytes));
  out.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw OsError("reading firmware " + path, errno);
    if (n == 0) throw InvalidInput(path + ": file shrank while being read");
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

const char* firmware_kind_name(FirmwareKind kind) {
  switch (kind) {
    case FirmwareKind::Pfp: return "pfp";
    case FirmwareKind::Me: return "me";
    case FirmwareKind::Mec: return "mec";
    case FirmwareKind::Rlc: return "rlc";
    case FirmwareKind::Imu: return "imu";
    case FirmwareKind::Sos: return "sos";
    case FirmwareKind::Ta: return "ta";
    case FirmwareKind::Smu: return "smu";
    case FirmwareKind::Sdma: return "sdma";
  }
  return "?";
}

FirmwareName parse_firmware_name(std::string_view file_name) {
  auto bad = [&]() -> InvalidInput {
    return InvalidInput("firmware name '" + std::string(file_name) +
                        "': expected gc_<maj>_<min>_<rev>_{pfp,me,mec,rlc,imu}.bin, "
                        "psp_<maj>_<min>_<rev>_{sos,ta}.bin, smu_<maj>_<min>_<rev>.bin or "
                        "sdma_<maj>_<min>_<rev>.bin");
  };
  std::string_view s = file_name;
  if (s.size() < 4 || s.substr(s.size() - 4) != ".bin") throw bad();
  s.remove_suffix(4);
  std::vector<std::string_view> tokens;
  for (size_t at = 0;;) {
    size_t next = s.find('_', at);
    tokens.push_back(s.substr(at, next == std::string_view::npos ? next : next - at));
    if (next == std::string_view::npos) break;
    at = next + 1;
  }
  if (tokens.size() != 4 && tokens.size() != 5) throw bad();
  FirmwareName name{};
  if (!parse_number(tokens[1], name.ip_major) || !parse_number(tokens[2], name.ip_minor) ||
      !parse_number(tokens[3], name.ip_revision))
    throw bad();
  std::string_view part = tokens.size() == 5 ? tokens[4] : std::string_view();
  for (auto& p : kNames) {
    if (tokens[0] == p.prefix && part == p.part) {
      name.kind = p.kind;
      return name;
    }
  }
  throw bad();
}

const FirmwarePart& Firmware::part(std::string_view name) const {
  for (auto& p : parts)
    if (p.name == name) return p;
  throw InvalidInput(path + ": no part '" + std::string(name) + "' in this " +
                     firmware_kind_name(kind) + " firmware");
}

Firmware parse_firmware(std::vector<uint8_t> bytes, const FirmwareName& name,
                        const std::string& path) {
  Firmware fw;
  fw.path = path;
  fw.kind = name.kind;
  fw.bytes = std::move(bytes);
  Parser p{Reader(fw.bytes, fw.path), fw};
  Reader& r = p.r;

  r.need(kCommonHeaderBytes, "common_firmware_header");
  // amdgpu_ucode_validate: the one check Linux makes on every file.
  if (r.u32(kSizeBytes) != r.size())
    r.fail("size_bytes", "is " + std::to_string(r.u32(kSizeBytes)),
           std::to_string(r.size()) + " (the file's size)");
  fw.header_major = r.u16(kHeaderVersionMajor);
  fw.header_minor = r.u16(kHeaderVersionMinor);
  fw.ip_major = r.u16(kIpVersionMajor);
  fw.ip_minor = r.u16(kIpVersionMinor);
  fw.ucode_version = r.u32(kUcodeVersion);
  fw.crc32 = r.u32(kCrc32);

  auto versions = header_versions(name.kind);
  const HeaderVersion* layout = nullptr;
  std::string known;
  for (auto& v : versions) {
    if (v.major == fw.header_major && v.minor == fw.header_minor) layout = &v;
    known += (known.empty() ? "" : ", ") + version_text(v.major, v.minor);
  }
  if (!layout)
    r.fail("header version", version_text(fw.header_major, fw.header_minor),
           (versions.size() > 1 ? "one of " : "") + known + " for " +
               firmware_kind_name(name.kind) + " firmware");
  r.need(layout->header_bytes, layout->layout);
  uint32_t header_size = r.u32(kHeaderSizeBytes);
  if (header_size < kCommonHeaderBytes || header_size > r.size())
    r.fail("header_size_bytes", "is " + std::to_string(header_size),
           "32 (the common header) to " + std::to_string(r.size()) + " (the file's size)");
  if (fw.ip_major != name.ip_major || fw.ip_minor != name.ip_minor)
    r.fail("ip_version", version_text(fw.ip_major, fw.ip_minor),
           version_text(name.ip_major, name.ip_minor) + " (from the file name)");
  r.in_file(p.ucode_array(), r.u32(kUcodeSizeBytes), "ucode_array_offset_bytes+ucode_size_bytes");

  switch (name.kind) {
    case FirmwareKind::Pfp:
    case FirmwareKind::Me:
    case FirmwareKind::Mec: fw.header_major == 1 ? p.gfx_f32() : p.gfx_rs64(); break;
    case FirmwareKind::Rlc: p.rlc(fw.header_minor); break;
    case FirmwareKind::Imu: p.imu(); break;
    case FirmwareKind::Sos: p.psp_bins(false, fw.header_minor, *layout); break;
    case FirmwareKind::Ta: p.psp_bins(true, fw.header_minor, *layout); break;
    case FirmwareKind::Smu: p.smu(fw.header_minor); break;
    case FirmwareKind::Sdma: p.sdma(); break;
  }
  return fw;
}

std::vector<uint8_t> zstd_decompress(std::span<const uint8_t> compressed, const std::string& path,
                                     size_t max_bytes) {
  // One context per thread, reset for each file: creating one costs more than a small file.
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(),
                                                                      ZSTD_freeDCtx);
  if (!ctx) throw Error(path + ": zstd: cannot create a decompression context");
  ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_only);
  std::vector<uint8_t> out;
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  size_t left = 1;  // nonzero while a frame is open (or none has started)
  bool out_full = false;
  while (in.pos < in.size || out_full) {
    // Grow by what zstd can emit at once, but never more than one byte past the limit: that
    // byte tells "exactly the limit" from "more".
    size_t have = out.size();
    size_t room = std::min(std::max(have, ZSTD_DStreamOutSize()), max_bytes + 1 - have);
    out.resize(have + room);
    ZSTD_outBuffer o{out.data() + have, room, 0};
    left = ZSTD_decompressStream(ctx.get(), &o, &in);
    out.resize(have + o.pos);
    if (ZSTD_isError(left))
      throw InvalidInput(path + ": zstd frame error: " + std::string(ZSTD_getErrorName(left)));
    if (out.size() > max_bytes)
      throw InvalidInput(path + ": decompressed size over " + std::to_string(max_bytes) +
                         " bytes, expected at most that");
    out_full = o.pos == o.size;
  }
  if (left != 0)
    throw InvalidInput(path + ": zstd data ends inside a frame after " +
                       std::to_string(compressed.size()) + " bytes, expected a complete frame");
  return out;
}

Firmware load_firmware(std::string_view file_name, const std::string& dir) {
  FirmwareName name = parse_firmware_name(file_name);
  std::string base = dir;
  if (!base.empty() && base.back() != '/') base += '/';
  base += file_name;
  std::vector<uint8_t> bytes;
  if (read_whole_file(base, bytes)) return parse_firmware(std::move(bytes), name, base);
  std::string zst = base + ".zst";
  if (!read_whole_file(zst, bytes))
    throw Error("firmware " + base + ": not found (nor " + zst + ")");
  return parse_firmware(zstd_decompress(bytes, zst), name, zst);
}

std::vector<std::string> gfx1100_firmware_names() {
  return {"psp_13_0_0_sos.bin", "psp_13_0_0_ta.bin",  "smu_13_0_0.bin",
          "gc_11_0_0_imu.bin",  "gc_11_0_0_rlc.bin",  "gc_11_0_0_pfp.bin",
          "gc_11_0_0_me.bin",   "gc_11_0_0_mec.bin",  "sdma_6_0_0.bin"};
}

}  // namespace hcq::amd::am
