// IP discovery: the emulator's writer checked byte by byte against values worked out by hand
// from Linux's discovery.h layout, the parser checked against the writer (round trips), and
// every corruption the parser must refuse, with its exact message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "core/error.hpp"

namespace hcq::amd {
namespace {

using Bytes = std::vector<std::byte>;
namespace hw = am::hw_id;

uint32_t le(const Bytes& b, size_t off, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) v |= uint32_t(uint8_t(b[off + i])) << (8 * i);
  return v;
}
uint16_t u16(const Bytes& b, size_t off) { return uint16_t(le(b, off, 2)); }
uint32_t u32(const Bytes& b, size_t off) { return le(b, off, 4); }
void put16(Bytes& b, size_t off, uint16_t v) {
  b[off] = std::byte(uint8_t(v));
  b[off + 1] = std::byte(uint8_t(v >> 8));
}
void put32(Bytes& b, size_t off, uint32_t v) {
  put16(b, off, uint16_t(v));
  put16(b, off + 2, uint16_t(v >> 16));
}
uint16_t byte_sum(const Bytes& b, size_t from, size_t to) {
  uint16_t s = 0;
  for (size_t i = from; i < to; i++) s = uint16_t(s + uint8_t(b[i]));
  return s;
}
// After corrupting a table's body on purpose, make its checksums right again so the check
// under test is the one that fires. table: index in table_list; size: bytes it covers.
void fix_table_sum(Bytes& b, size_t table, size_t size) {
  const size_t off = u16(b, 12 + 8 * table);
  put16(b, 12 + 8 * table + 2, byte_sum(b, off, off + size));
}
void fix_binary_sum(Bytes& b) { put16(b, 8, byte_sum(b, 10, u16(b, 10))); }

std::string parse_error(const Bytes& b) {
  try {
    am::parse_discovery(b);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(parsed)";
}

// The small table the byte-exact tests work with: one die holding GC 11.0.0 (two bases) and
// SDMA0 6.0.0 (one base, sub_revision 1, variant 2); gc_info_v2_0 with fields 1..17; a
// harvest table listing UVD instance 1.
emu::DiscoveryTableSpec small_spec() {
  emu::DiscoveryTableSpec s;
  s.version_major = 1;
  s.version_minor = 4;
  s.ip_version = 3;
  s.ip_table_id = 0x11223344;
  s.dies = {{{11, 0, 11, 0, 0, 0x00, {0x1260, 0xa000}}, {42, 0, 6, 0, 0, 0x21, {0x1260}}}};
  emu::DiscoveryInfoTable gc{0x4347, 2, 0, {}};
  for (uint32_t i = 1; i <= 17; i++) gc.body.push_back(i);
  s.gc = gc;
  s.harvest_version = 0;
  s.harvested = {{12, 1}};
  return s;
}

// Layout worked out from discovery.h (all packed, little-endian):
//   0x000 binary_header: 12 bytes + table_info[6] x 8 = 60 (0x3c)
//   0x03c IP table: ip_discovery_header 80 bytes -> die_header at 0x8c (4 bytes)
//         0x090 GC entry: 8 + 2 x 4 = 16 bytes; 0x0a0 SDMA0 entry: 8 + 4 = 12; end 0xac
//         size 0xac - 0x3c = 112
//   0x0ac GC table: gpu_info_header 12 + 17 x 4 = 80 bytes; end 0xfc
//   0x0fc harvest table: 8 + 32 x 4 = 136 bytes; end 0x184 = 388 = binary_size
// Checksums (16-bit byte sums), by hand:
//   IP: header "IPDS" 0x49+0x50+0x44+0x53 = 304, version 3, size 112, id 0x44+0x33+0x22+0x11
//       = 170, num_dies 1, die_info[0].die_offset 0x8c = 140: 730; die_header num_ips 2;
//       GC entry 11 + 2 + 11 + (0x60+0x12) + 0xa0 = 298; SDMA0 entry 42 + 1 + 6 + 0x21 +
//       114 = 196; total 1226 = 0x4ca
//   GC: 0x47+0x43 = 138, major 2, size 80, fields 1+..+17 = 153: 373 = 0x175
//   harvest: "HARV" 0x48+0x41+0x52+0x56 = 305, entry 12 + 1: 318 = 0x13e
//   binary (bytes 10..388): binary_size 0x84+0x01 = 133; table_list IP 60 + (0xca+0x04) +
//       112 = 378, GC 172 + (0x75+0x01) + 80 = 370, harvest 252 + (0x3e+0x01) + 136 = 451;
//       the tables 1226 + 373 + 318; total 3249 = 0xcb1
TEST(AmDiscoveryWriter, SmallTableBytesMatchTheLayoutWorkedOutByHand) {
  const Bytes b = emu::write_discovery_table(small_spec());
  ASSERT_EQ(b.size(), 388u);
  EXPECT_EQ(uint8_t(b[0]), 0x07);  // BINARY_SIGNATURE 0x28211407, "0x7, 0x14, 0x21, 0x28"
  EXPECT_EQ(uint8_t(b[1]), 0x14);
  EXPECT_EQ(uint8_t(b[2]), 0x21);
  EXPECT_EQ(uint8_t(b[3]), 0x28);
  EXPECT_EQ(u16(b, 4), 1);
  EXPECT_EQ(u16(b, 6), 4);
  EXPECT_EQ(u16(b, 8), 0xcb1);  // binary_checksum
  EXPECT_EQ(u16(b, 10), 388);   // binary_size
  // table_list: {offset, checksum, size, padding}
  const uint16_t expected_list[6][4] = {{0x3c, 0x4ca, 112, 0}, {0xac, 0x175, 80, 0},
                                        {0xfc, 0x13e, 136, 0}, {0, 0, 0, 0},
                                        {0, 0, 0, 0},          {0, 0, 0, 0}};
  for (size_t t = 0; t < 6; t++)
    for (size_t f = 0; f < 4; f++)
      EXPECT_EQ(u16(b, 12 + 8 * t + 2 * f), expected_list[t][f]) << "table " << t << " field " << f;
  // ip_discovery_header
  EXPECT_EQ(std::memcmp(b.data() + 0x3c, "IPDS", 4), 0);
  EXPECT_EQ(u16(b, 0x40), 3);             // version
  EXPECT_EQ(u16(b, 0x42), 112);           // size
  EXPECT_EQ(u32(b, 0x44), 0x11223344u);   // id
  EXPECT_EQ(u16(b, 0x48), 1);             // num_dies
  EXPECT_EQ(u16(b, 0x4a), 0);             // die_info[0].die_id
  EXPECT_EQ(u16(b, 0x4c), 0x8c);          // die_info[0].die_offset
  EXPECT_EQ(u16(b, 0x4e), 0);             // die_info[1]
  EXPECT_EQ(uint8_t(b[0x8a]), 0);         // base_addr_64_bit clear
  EXPECT_EQ(u16(b, 0x8c), 0);             // die_header.die_id
  EXPECT_EQ(u16(b, 0x8e), 2);             // die_header.num_ips
  // The SDMA0 entry, byte by byte: hw_id 42, instance 0, one base, 6.0.0, 0x21, 0x1260.
  const uint8_t sdma0[12] = {0x2a, 0x00, 0x00, 0x01, 0x06, 0x00, 0x00, 0x21,
                             0x60, 0x12, 0x00, 0x00};
  for (size_t i = 0; i < 12; i++) EXPECT_EQ(uint8_t(b[0xa0 + i]), sdma0[i]) << "byte " << i;
  EXPECT_EQ(u32(b, 0x90 + 8), 0x1260u);   // GC base 0
  EXPECT_EQ(u32(b, 0x90 + 12), 0xa000u);  // GC base 1
  // gpu_info_header and the first field
  EXPECT_EQ(u32(b, 0xac), 0x4347u);
  EXPECT_EQ(u16(b, 0xb0), 2);
  EXPECT_EQ(u16(b, 0xb2), 0);
  EXPECT_EQ(u32(b, 0xb4), 80u);
  EXPECT_EQ(u32(b, 0xb8), 1u);
  EXPECT_EQ(u32(b, 0xf8), 17u);
  // harvest_table
  EXPECT_EQ(std::memcmp(b.data() + 0xfc, "HARV", 4), 0);
  EXPECT_EQ(u32(b, 0x100), 0u);
  EXPECT_EQ(u16(b, 0x104), 12);
  EXPECT_EQ(uint8_t(b[0x106]), 1);
  EXPECT_EQ(u16(b, 0x108), 0);  // the list ends
}

TEST(AmDiscovery, SmallTableRoundTrips) {
  const auto d = am::parse_discovery(emu::write_discovery_table(small_spec()));
  EXPECT_EQ(d.binary_version_major, 1);
  EXPECT_EQ(d.binary_version_minor, 4);
  EXPECT_EQ(d.binary_size, 388);
  EXPECT_EQ(d.ip_table_version, 3);
  EXPECT_EQ(d.ip_table_id, 0x11223344u);
  EXPECT_FALSE(d.base_addr_64_bit);
  ASSERT_EQ(d.ips.size(), 2u);
  EXPECT_EQ(d.ips[1].hw_id, hw::SDMA0);
  EXPECT_EQ(d.ips[1].sub_revision, 1);
  EXPECT_EQ(d.ips[1].variant, 2);
  EXPECT_EQ(d.ips[1].harvest, 0);
  EXPECT_EQ(d.base_addresses(hw::GC), (std::vector<uint64_t>{0x1260, 0xa000}));
  EXPECT_EQ(d.version(hw::SDMA0), (am::IpVersion{6, 0, 0}));
  ASSERT_TRUE(d.gc);
  EXPECT_EQ(d.gc->version_major, 2);
  EXPECT_EQ(d.gc->fields.size(), 17u);
  EXPECT_EQ(d.gc->num_se, 1u);
  EXPECT_EQ(d.gc->num_cu_per_sh, 2u);  // gc_info_v2_0: gc_num_cu_per_sh is the 2nd field
  EXPECT_EQ(d.gc->num_sh_per_se, 3u);
  EXPECT_EQ(d.gc->num_tccs, 5u);
  EXPECT_EQ(d.gc->wave_size, 12u);
  EXPECT_EQ(d.gc->num_packer_per_sc, 17u);
  EXPECT_EQ(d.harvest_version, 0u);
  EXPECT_EQ(d.harvest, (std::vector<am::HarvestEntry>{{12, 1}}));
  EXPECT_TRUE(d.vcn.empty());
}

TEST(AmDiscovery, VersionOneEntriesCarryHarvestBits) {
  auto s = small_spec();
  s.ip_version = 2;
  s.dies[0][1].flags = 0x01;
  const auto d = am::parse_discovery(emu::write_discovery_table(s));
  EXPECT_EQ(d.ips[1].harvest, 1);
  EXPECT_EQ(d.ips[1].variant, 0);
}

TEST(AmDiscovery, VersionFourSixtyFourBitBasesRoundTrip) {
  auto s = small_spec();
  s.ip_version = 4;
  s.base_addr_64_bit = true;
  s.dies[0][0].bases = {0x100001260ull, 0xa000};
  const Bytes b = emu::write_discovery_table(s);
  EXPECT_EQ(uint8_t(b[0x8a]), 1);     // ip_discovery_header flags: base_addr_64_bit
  EXPECT_EQ(u16(b, 0x42), 112 + 12);  // GC entry 8 + 2 x 8, SDMA0 8 + 8
  EXPECT_EQ(u32(b, 0x98), 0x1260u);   // GC base 0, low word
  EXPECT_EQ(u32(b, 0x9c), 1u);        // high word
  const auto d = am::parse_discovery(b);
  EXPECT_TRUE(d.base_addr_64_bit);
  EXPECT_EQ(d.base_addresses(hw::GC), (std::vector<uint64_t>{0x100001260ull, 0xa000}));
  EXPECT_EQ(d.base_addresses(hw::SDMA0), (std::vector<uint64_t>{0x1260}));
}

// The emulated RX 7900 XTX's table: the checksums are those of the table dumped from a real
// RX 7900 XTX (tinygrad test/mockgpu/am/discovery.bin) that the spec reproduces.
TEST(AmDiscoveryWriter, Gfx1100TableHasTheRealTablesChecksums) {
  const Bytes b = emu::gfx1100_discovery_table();
  ASSERT_EQ(b.size(), 1756u);
  EXPECT_EQ(u16(b, 8), 0x7d95);
  const uint16_t expected_list[6][3] = {{0x3c, 0x6df5, 1284}, {0x540, 0x34f, 132},
                                        {0x5c4, 0x131, 136},  {0x64c, 0x14b, 96},
                                        {0x6ac, 0x266, 48},   {0, 0, 0}};
  for (size_t t = 0; t < 6; t++)
    for (size_t f = 0; f < 3; f++)
      EXPECT_EQ(u16(b, 12 + 8 * t + 2 * f), expected_list[t][f]) << "table " << t << " field " << f;
}

TEST(AmDiscovery, Gfx1100TableGivesTheBootsIpVersionsAndBases) {
  // As amdgpu reads it: 10 KiB from 64 KiB below the end of VRAM.
  Bytes vram_tail(am::kDiscoveryTmrSize);
  const Bytes t = emu::gfx1100_discovery_table();
  std::copy(t.begin(), t.end(), vram_tail.begin());
  const auto d = am::parse_discovery(vram_tail);
  EXPECT_EQ(d.ips.size(), 61u);
  EXPECT_EQ(d.ip_table_version, 3);
  EXPECT_EQ(d.version(hw::GC), (am::IpVersion{11, 0, 0}));
  EXPECT_EQ(d.version(hw::MP0), (am::IpVersion{13, 0, 0}));
  EXPECT_EQ(d.version(hw::MP1), (am::IpVersion{13, 0, 0}));
  EXPECT_EQ(d.version(hw::SDMA0), (am::IpVersion{6, 0, 0}));
  EXPECT_EQ(d.version(hw::SDMA1), (am::IpVersion{6, 0, 0}));
  EXPECT_EQ(d.version(hw::NBIO), (am::IpVersion{4, 3, 0}));
  EXPECT_EQ(d.version(hw::OSSSYS), (am::IpVersion{6, 0, 0}));
  EXPECT_EQ(d.version(hw::HDP), (am::IpVersion{6, 0, 0}));
  EXPECT_EQ(d.version(hw::MMHUB), (am::IpVersion{3, 0, 0}));
  EXPECT_EQ(d.version(hw::SMUIO), (am::IpVersion{13, 0, 6}));
  EXPECT_EQ(d.version(hw::DF), (am::IpVersion{4, 2, 0}));
  EXPECT_EQ(d.base_addresses(hw::GC),
            (std::vector<uint64_t>{0x1260, 0xa000, 0x1c000, 0x2402c00}));
  EXPECT_EQ(d.base_addresses(hw::MP1),
            (std::vector<uint64_t>{0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00}));
  EXPECT_EQ(d.base_addresses(hw::NBIO),
            (std::vector<uint64_t>{0x0, 0x14, 0xd20, 0x10400, 0x241b000, 0x4040000}));
  EXPECT_EQ(d.base_addresses(hw::OSSSYS), (std::vector<uint64_t>{0x10a0, 0x240a000}));
  EXPECT_EQ(d.base_addresses(hw::MMHUB), (std::vector<uint64_t>{0x1a000, 0x2408800}));
  EXPECT_EQ(d.base_addresses(hw::UMC, 5),
            (std::vector<uint64_t>{0xe804000, 0xe804400, 0xec00000, 0xec04000}));
  EXPECT_EQ(d.find(hw::VCN, 1).variant, 1);
  ASSERT_TRUE(d.gc);
  EXPECT_EQ(d.gc->version_major, 1);
  EXPECT_EQ(d.gc->version_minor, 2);
  EXPECT_EQ(d.gc->fields.size(), 30u);
  // 6 SEs x 2 SAs x 8 CUs = 96 CUs, wave32, 64 KiB LDS.
  EXPECT_EQ(d.gc->num_se, 6u);
  EXPECT_EQ(d.gc->num_sh_per_se, 2u);
  EXPECT_EQ(d.gc->num_cu_per_sh, 8u);
  EXPECT_EQ(d.gc->num_rb_per_se, 4u);
  EXPECT_EQ(d.gc->num_tccs, 24u);
  EXPECT_EQ(d.gc->wave_size, 32u);
  EXPECT_EQ(d.gc->lds_size, 64u);
  EXPECT_EQ(d.harvest_version, 0u);
  EXPECT_TRUE(d.harvest.empty());
  ASSERT_EQ(d.vcn.size(), 2u);
  EXPECT_EQ(d.vcn[1].instance, 1u);
  EXPECT_EQ(am::hw_id_name(282), "HWID 282");
  EXPECT_EQ(am::hw_id_name(hw::NBIF), "NBIF");
}

TEST(AmDiscovery, TableOffsetIs64KiBBelowTheEndOfVram) {
  EXPECT_EQ(am::discovery_table_offset(24ull << 30), (24ull << 30) - 0x10000);
  try {
    am::discovery_table_offset(0x8000);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "IP discovery: VRAM size 0x8000 is below the 64 KiB the table sits under its end");
  }
}

TEST(AmDiscovery, LookupOfAnAbsentIpNamesItAndTheInstancesThere) {
  const auto d = am::parse_discovery(emu::write_discovery_table(small_spec()));
  try {
    d.find(hw::MP0);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "IP discovery: no MP0 (hw_id 255) instance 0 in the table (no instance at all)");
  }
  try {
    d.base_addresses(hw::GC, 1);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "IP discovery: no GC (hw_id 11) instance 1 in the table (it has instances 0)");
  }
  EXPECT_TRUE(d.has(hw::GC, 0));
  EXPECT_FALSE(d.has(hw::GC, 1));
}

TEST(AmDiscoveryCorrupt, BadBinarySignature) {
  Bytes b = emu::write_discovery_table(small_spec());
  b[0] = std::byte{0x08};
  EXPECT_EQ(parse_error(b),
            "IP discovery table: binary_header.binary_signature is 0x28211408, expected "
            "0x28211407");
}

TEST(AmDiscoveryCorrupt, BadBinaryChecksum) {
  Bytes b = emu::write_discovery_table(small_spec());
  b[0xb8] = std::byte{2};  // GC field 0: 1 -> 2
  EXPECT_EQ(parse_error(b),
            "IP discovery table: binary_header.binary_checksum is 0xcb1, bytes 10 to "
            "binary_size 388 sum to 0xcb2");
}

TEST(AmDiscoveryCorrupt, BadTableChecksums) {
  Bytes b = emu::write_discovery_table(small_spec());
  b[0xb8] = std::byte{2};
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: GC table checksum: table_info.checksum is 0x175, the table's "
            "80 bytes sum to 0x176");
  b = emu::write_discovery_table(small_spec());
  b[0xa4] = std::byte{7};  // SDMA0 major 6 -> 7
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: IP_DISCOVERY table checksum: table_info.checksum is 0x4ca, "
            "the table's 112 bytes sum to 0x4cb");
  b = emu::write_discovery_table(small_spec());
  b[0x106] = std::byte{2};  // harvest entry instance 1 -> 2
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: HARVEST_INFO table checksum: table_info.checksum is 0x13e, "
            "the table's 136 bytes sum to 0x13f");
}

TEST(AmDiscoveryCorrupt, BadTableSignatures) {
  Bytes b = emu::write_discovery_table(small_spec());
  b[0x3c] = std::byte{0x48};  // "IPDS" -> "HPDS"
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: IP_DISCOVERY table at 0x3c: ip_discovery_header.signature is "
            "0x53445048, expected 0x53445049");
  b = emu::write_discovery_table(small_spec());
  put32(b, 0xac, 0x4348);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: GC table at 0xac: gpu_info_header.table_id is 0x4348, expected "
            "0x4347");
  b = emu::write_discovery_table(small_spec());
  b[0xfc] = std::byte{0};
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: HARVEST_INFO table at 0xfc: harvest_info_header.signature is "
            "0x56524100, expected 0x56524148");
}

TEST(AmDiscoveryCorrupt, OffsetsPastTheEnd) {
  Bytes b = emu::write_discovery_table(small_spec());
  put16(b, 12 + 8 * 1, 400);  // table_list[GC].offset
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: table_list[GC].offset is 0x190, past binary_size 388");
  b = emu::write_discovery_table(small_spec());
  put16(b, 12 + 8 * 2, 0x150);  // harvest table at 0x150: its 136 bytes end past 388
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: HARVEST_INFO table at 0x150: its header size is 136, past "
            "binary_size 388 (at most 52)");
  b = emu::write_discovery_table(small_spec());
  put32(b, 0xb4, 1000);  // gpu_info_header.size
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: GC table at 0xac: gpu_info_header.size is 1000, past "
            "binary_size 388 (at most 216)");
  b = emu::write_discovery_table(small_spec());
  put16(b, 0x4c, 0x200);  // die_info[0].die_offset
  fix_table_sum(b, 0, 112);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: ip_discovery_header.die_info[0].die_offset is 0x200, outside "
            "the IP_DISCOVERY table's entries [0x8c, 0xac)");
  b = emu::write_discovery_table(small_spec());
  put16(b, 12, 8);  // table_list[IP_DISCOVERY].offset inside the header
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: table_list[IP_DISCOVERY].offset is 0x8, inside the 60-byte "
            "binary_header");
}

TEST(AmDiscoveryCorrupt, CountsTooLarge) {
  Bytes b = emu::write_discovery_table(small_spec());
  put16(b, 0x8e, 3);  // die_header.num_ips 2 -> 3
  fix_table_sum(b, 0, 112);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: die 0 IP entry 2 of 3 at 0xac: its 8-byte header runs past "
            "the IP_DISCOVERY table's end at 0xac (die_header.num_ips too large or the table "
            "truncated)");
  b = emu::write_discovery_table(small_spec());
  put16(b, 0x48, 17);  // num_dies
  fix_table_sum(b, 0, 112);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b), "IP discovery table: ip_discovery_header.num_dies is 17, at most 16");
  b = emu::write_discovery_table(small_spec());
  put16(b, 0x8c, 1);  // die_header.die_id
  fix_table_sum(b, 0, 112);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b), "IP discovery table: die 0: die_header.die_id is 1, expected 0");
}

TEST(AmDiscoveryCorrupt, TruncatedEntryAndTable) {
  Bytes b = emu::write_discovery_table(small_spec());
  b[0xa3] = std::byte{2};  // SDMA0 num_base_address 1 -> 2: 16 bytes from 0xa0 pass 0xac
  fix_table_sum(b, 0, 112);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: die 0 IP entry 1 of 2 at 0xa0 (SDMA0): num_base_address 2 "
            "needs 16 bytes, past the IP_DISCOVERY table's end at 0xac");
  b = emu::write_discovery_table(small_spec());
  b.resize(200);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: binary_header.binary_size is 388, past the 200 bytes given");
  b.resize(5);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: 5 bytes, shorter than the 12-byte binary_header");
  b = emu::write_discovery_table(small_spec());
  put16(b, 0xb0, 3);  // GC table version 3.0
  fix_table_sum(b, 1, 80);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: GC table: gpu_info_header.version_major is 3, expected 1 or 2 "
            "(gc_info_v1_x, gc_info_v2_x)");
  b = emu::write_discovery_table(small_spec());
  put16(b, 0xb0, 1);  // gc_info_v1_0 needs 19 fields, the table has 17
  fix_table_sum(b, 1, 80);
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: GC table: gpu_info_header.size is 80, gc_info_v1_0 needs 88");
}

TEST(AmDiscovery, BinaryHeaderVersionTwoListsItsOwnTableCount) {
  // binary_header_v2: the same 12 bytes, then num_tables and padding, then table_info[]:
  // move the v1 table list 4 bytes on and give it one entry (IP_DISCOVERY only).
  Bytes v1 = emu::write_discovery_table(small_spec());
  const size_t ip = u16(v1, 12), ip_size = u16(v1, 16);
  Bytes b(16 + 8 + ip_size);
  std::memcpy(b.data(), v1.data(), 12);
  put16(b, 4, 2);
  put16(b, 10, uint16_t(b.size()));
  put16(b, 12, 1);  // num_tables
  put16(b, 16, 24);  // table_info[0].offset
  put16(b, 18, u16(v1, 14));
  put16(b, 20, uint16_t(ip_size));
  std::memcpy(b.data() + 24, v1.data() + ip, ip_size);
  put16(b, 24 + 0x4c - 0x3c, uint16_t(24 + 0x8c - 0x3c));  // die_offset moves with the table
  put16(b, 18, byte_sum(b, 24, 24 + ip_size));
  fix_binary_sum(b);
  const auto d = am::parse_discovery(b);
  EXPECT_EQ(d.binary_version_major, 2);
  EXPECT_EQ(d.ips.size(), 2u);
  EXPECT_FALSE(d.gc);
  put16(b, 12, 40);  // num_tables past the end
  fix_binary_sum(b);
  EXPECT_EQ(parse_error(b),
            "IP discovery table: binary_header_v2.num_tables is 40: 40 table_info entries run "
            "past binary_size " + std::to_string(b.size()));
}

}  // namespace
}  // namespace hcq::amd
