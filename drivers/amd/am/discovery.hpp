// AMD IP discovery: the binary table the firmware leaves near the top of VRAM, listing every
// IP block of the GPU with its version, instances and register segment base addresses, plus
// the GC (graphics core) configuration and the harvest list. amdgpu reads it before touching
// any IP register (Linux drivers/gpu/drm/amd/amdgpu/amdgpu_discovery.c); so does hcq's AM
// driver.
//
// Format (Linux drivers/gpu/drm/amd/include/discovery.h, little-endian, packed):
//   binary_header       u32 binary_signature 0x28211407, u16 version_major, u16 version_minor,
//                       u16 binary_checksum (16-bit byte sum of bytes [10, binary_size)),
//                       u16 binary_size, then table_info[6] {u16 offset, u16 checksum,
//                       u16 size, u16 padding} indexed IP_DISCOVERY, GC, HARVEST_INFO,
//                       VCN_INFO, MALL_INFO, NPS_INFO. Version 2 (binary_header_v2) puts
//                       u16 num_tables, u16 padding before a table_info[num_tables].
//   ip_discovery_header u32 signature 0x53445049 ("IPDS"), u16 version, u16 size (the whole IP
//                       table), u32 id, u16 num_dies, die_info[16] {u16 die_id, u16 die_offset},
//                       u8 flags (version 4: bit 0 base_addr_64_bit), u8 reserved: 80 bytes.
//   die_header          u16 die_id, u16 num_ips, then num_ips IP entries:
//   ip / ip_v3 / ip_v4  u16 hw_id, u8 instance, u8 num_base_address, u8 major, u8 minor,
//                       u8 revision, u8 (version < 3: harvest in bits 3:0; version >= 3:
//                       sub_revision in bits 3:0, variant in bits 7:4), then num_base_address
//                       u32 base addresses (u64 when base_addr_64_bit).
//   gpu_info_header     u32 table_id 0x4347 ("GC"), u16 version_major, u16 version_minor,
//                       u32 size; gc_info_v1_0..v1_3 and v2_0..v2_1 follow (u32 fields).
//   harvest_table       u32 signature 0x56524148 ("HARV"), u32 version, 32 x {u16 hw_id,
//                       u8 instance, u8 reserved}, ended by hw_id 0.
//   vcn_info            u32 table_id 0x004E4356, u16 major, u16 minor, u32 size_bytes,
//                       u32 num_of_instances, 4 x {u32 instance_num, u32 fuse bits, u32[2]}.
// Checked as amdgpu checks them (amdgpu_discovery_init): the binary signature and checksum,
// and for each table present (offset != 0) its signature or id and its byte-sum checksum over
// the size its own header gives (the harvest table: sizeof(harvest_table), 136 bytes). MALL
// and NPS tables are not checked at init by amdgpu and are not read here. Beyond amdgpu, every
// offset and count is bounded by binary_size, and every IP entry by its table's size.
//
// Thread safety: parse_discovery and the lookups are pure; a Discovery may be read from
// several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hcq::amd::am {

// Where amdgpu reads the table: DISCOVERY_TMR_OFFSET (64 KiB) below the end of VRAM (VRAM
// size from RCC_CONFIG_MEMSIZE, in MiB), DISCOVERY_TMR_SIZE (10 KiB) bytes
// (amdgpu_discovery.h, amdgpu_discovery_read_binary_from_mem).
inline constexpr uint64_t kDiscoveryTmrOffset = 64 << 10;
inline constexpr uint64_t kDiscoveryTmrSize = 10 << 10;
// The VRAM byte offset of the table on a GPU with vram_size bytes of VRAM; throws
// InvalidInput when VRAM is smaller than 64 KiB.
uint64_t discovery_table_offset(uint64_t vram_size);

}  // namespace hcq::amd::am
namespace hcq::os {
class Mmio;
}
namespace hcq::amd::am {

// A live GPU's VRAM size: RCC_CONFIG_MEMSIZE (the fixed dword 0xde3 of the register BAR, in
// MiB; Linux amdgpu_discovery.c, tinygrad amdev.py). Throws hcq::Error when it reads 0 or all
// ones: "BAR5 of 0000:03:00.0: RCC_CONFIG_MEMSIZE reads 0x0, not a VRAM size in MiB: the GPU
// does not answer (in reset or powered down)".
uint64_t read_vram_size(os::Mmio& regs);
// A live GPU's discovery table (its DISCOVERY_TMR_SIZE bytes, parsed): through `vram` (the
// VRAM BAR) when that reaches the table, else through MM_INDEX/MM_DATA of `regs` as Linux's
// amdgpu_device_vram_access does for VRAM beyond a small BAR — only when `may_use_mm_index`
// (a kernel driver bound to the GPU uses that pair under its own lock): otherwise hcq::Error.
struct Discovery;
Discovery read_discovery(os::Mmio& regs, os::Mmio* vram, bool may_use_mm_index);

inline constexpr uint32_t kBinarySignature = 0x28211407;        // BINARY_SIGNATURE
inline constexpr uint32_t kIpDiscoverySignature = 0x53445049;   // DISCOVERY_TABLE_SIGNATURE
inline constexpr uint32_t kGcTableId = 0x4347;                  // GC_TABLE_ID
inline constexpr uint32_t kHarvestSignature = 0x56524148;       // HARVEST_TABLE_SIGNATURE
inline constexpr uint32_t kVcnInfoTableId = 0x004E4356;         // VCN_INFO_TABLE_ID

// Hardware ids of the IP blocks (Linux drivers/gpu/drm/amd/include/soc15_hw_ip.h).
namespace hw_id {
inline constexpr uint16_t MP1 = 1, THM = 3, SMUIO = 4, FUSE = 5, CLKA = 6, PWR = 10, GC = 11,
                          UVD = 12, VCN = 12, MMHUB = 34, ATHUB = 35, OSSSYS = 40, HDP = 41,
                          SDMA0 = 42, SDMA1 = 43, DF = 46, SDMA2 = 68, SDMA3 = 69, PCIE = 70,
                          LSDMA = 91, NBIF = 108, NBIO = 108, UMC = 150, MP0 = 255, DMU = 271;
}
// The name amdgpu gives a hardware id (its hw_id_names[]), e.g. "GC", "MP0", "NBIF";
// "HWID 282" for an id it does not name.
std::string hw_id_name(uint16_t id);

struct IpVersion {
  uint8_t major = 0, minor = 0, revision = 0;
  bool operator==(const IpVersion&) const = default;
  std::string to_string() const;  // "11.0.0"
};

// One IP entry: an instance of a hardware block on one die.
struct IpBlock {
  uint16_t die = 0;
  uint16_t hw_id = 0;
  uint8_t instance = 0;
  IpVersion version;
  // The entry's last version byte split as its table version defines it: versions 1 and 2
  // give the harvest bits (3:0); versions 3 and 4 give sub_revision (3:0) and variant (7:4),
  // variant 1 meaning harvested (amdgpu_discovery_read_harvest_bit_per_ip).
  uint8_t harvest = 0, sub_revision = 0, variant = 0;
  // Register segment base addresses, in dwords as the registers' offsets are: the GPU's byte
  // address of register R in segment s is (base_addresses[s] + R) * 4. Version-4 tables with
  // base_addr_64_bit give 64-bit values, kept whole (amdgpu keeps bits 29:0).
  std::vector<uint64_t> base_addresses;
};

// The GC table (gc_info_v1_x / v2_x) in amdgpu's terms (amdgpu_discovery_get_gfx_info).
struct GcInfo {
  uint16_t version_major = 0, version_minor = 0;
  uint32_t num_se = 0;
  uint32_t num_cu_per_sh = 0;  // v1: 2 * (gc_num_wgp0_per_sa + gc_num_wgp1_per_sa)
  uint32_t num_sh_per_se = 0;  // v1: gc_num_sa_per_se
  uint32_t num_rb_per_se = 0;
  uint32_t num_tccs = 0;       // v1: gc_num_gl2c
  uint32_t num_gprs = 0, max_gs_threads = 0, gs_table_depth = 0, gsprim_buff_depth = 0,
           parameter_cache_depth = 0, double_offchip_lds_buffer = 0, wave_size = 0,
           max_waves_per_simd = 0, max_scratch_slots_per_cu = 0, lds_size = 0,
           num_sc_per_se = 0, num_packer_per_sc = 0;
  // Every u32 field after gpu_info_header, in the order discovery.h lists them, as many as
  // the table's version defines (v1.0: 19, v1.1: 22, v1.2: 30, v1.3: 38, v2.0: 17, v2.1: 24).
  std::vector<uint32_t> fields;
};

struct HarvestEntry {
  uint16_t hw_id = 0;
  uint8_t instance = 0;
  bool operator==(const HarvestEntry&) const = default;
};

struct VcnInstanceInfo {
  uint32_t instance = 0;
  uint32_t fuse_bits = 0;  // bit 0 av1, 1 vp9, 2 hevc, 3 h264 disabled
};

struct Discovery {
  uint16_t binary_version_major = 0, binary_version_minor = 0;
  uint16_t binary_size = 0;
  uint16_t ip_table_version = 0;  // ip_discovery_header.version: 1 to 4
  uint32_t ip_table_id = 0;
  bool base_addr_64_bit = false;
  std::vector<IpBlock> ips;  // in table order, die by die
  std::optional<GcInfo> gc;
  std::optional<uint32_t> harvest_version;  // present when the table has a harvest table
  std::vector<HarvestEntry> harvest;
  std::vector<VcnInstanceInfo> vcn;

  // The entry for (hw_id, instance) on any die; throws InvalidInput naming the IP, the
  // instance and the instances the table has.
  const IpBlock& find(uint16_t hw_id, uint8_t instance = 0) const;
  const std::vector<uint64_t>& base_addresses(uint16_t hw_id, uint8_t instance = 0) const {
    return find(hw_id, instance).base_addresses;
  }
  IpVersion version(uint16_t hw_id, uint8_t instance = 0) const {
    return find(hw_id, instance).version;
  }
  bool has(uint16_t hw_id, uint8_t instance = 0) const;
};

// Parses a discovery table: `bytes` holds at least binary_size bytes from the table's start
// (the 10 KiB amdgpu reads, or just the table). A corrupt table throws hcq::InvalidInput
// "IP discovery table: " + the structure and field, the value found and what was expected.
Discovery parse_discovery(std::span<const std::byte> bytes);

}  // namespace hcq::amd::am
