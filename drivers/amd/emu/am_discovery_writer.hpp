// The emulated GPU's IP discovery table: the bytes the firmware of a real GPU leaves
// DISCOVERY_TMR_OFFSET (64 KiB) below the end of VRAM, written here from the format in Linux
// drivers/gpu/drm/amd/include/discovery.h (binary_header, ip_discovery_header, die_header,
// ip_v3/ip_v4, gpu_info_header, harvest_table), independently of the driver's parser
// (drivers/amd/am/discovery.hpp): the two share no code, so a test checks one against the
// other and both against bytes worked out by hand.
//
// Thread safety: pure functions of their arguments; call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace hcq::amd::emu {

// One ip_v3 / ip_v4 entry (the version-1 `ip` entry has the same bytes, its last byte being
// the harvest bits).
struct DiscoveryIpEntry {
  uint16_t hw_id = 0;
  uint8_t instance = 0;
  uint8_t major = 0, minor = 0, revision = 0;
  uint8_t flags = 0;  // sub_revision (3:0) and variant (7:4); harvest (3:0) in version 1 and 2
  std::vector<uint64_t> bases;  // written as u32, or u64 when the table says base_addr_64_bit
};

// A table that starts with gpu_info_header's layout (u32 id, u16 major, u16 minor, u32 size):
// GC, VCN_INFO and MALL_INFO. `body` is the u32 fields after the header; size is computed.
struct DiscoveryInfoTable {
  uint32_t id = 0;
  uint16_t version_major = 0, version_minor = 0;
  std::vector<uint32_t> body;
};

struct DiscoveryTableSpec {
  uint16_t version_major = 1, version_minor = 4;  // binary_header (version 1 layout)
  uint16_t ip_version = 3;                         // ip_discovery_header.version
  uint32_t ip_table_id = 0;                        // ip_discovery_header.id
  bool base_addr_64_bit = false;                   // version 4 only
  std::vector<std::vector<DiscoveryIpEntry>> dies;  // die i's entries; at most 16 dies
  std::optional<DiscoveryInfoTable> gc;
  std::optional<uint32_t> harvest_version;  // a harvest table when set
  std::vector<std::pair<uint16_t, uint8_t>> harvested;  // (hw_id, instance), at most 32
  std::optional<DiscoveryInfoTable> vcn, mall;
};

// The table's bytes (binary_size of them): the binary_header, then the IP, GC, harvest, VCN
// and MALL tables back to back in that order, with every checksum filled in. Throws
// hcq::InvalidInput when the spec does not fit the format (over 16 dies, over 32 harvest
// entries, over 255 base addresses, over 65535 bytes).
std::vector<std::byte> write_discovery_table(const DiscoveryTableSpec& spec);

// The RX 7900 XTX's table (GC 11.0.0, Navi 31): IP entries, GC, harvest, VCN and MALL tables
// as an RX 7900 XTX's firmware writes them (source in am_discovery_writer.cpp).
DiscoveryTableSpec gfx1100_discovery_spec();
std::vector<std::byte> gfx1100_discovery_table();

}  // namespace hcq::amd::emu
