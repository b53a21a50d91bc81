// Writes IP discovery tables byte by byte from Linux's discovery.h layout (see the header).
#include "amd/emu/am_discovery_writer.hpp"

#include <string>

#include "core/error.hpp"

namespace hcq::amd::emu {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw InvalidInput("IP discovery writer: " + what);
}

// A growing little-endian byte buffer with patching at fixed offsets.
class Out {
 public:
  size_t size() const { return b_.size(); }
  void u8(uint8_t v) { b_.push_back(std::byte(v)); }
  void u16(uint16_t v) { u8(uint8_t(v)), u8(uint8_t(v >> 8)); }
  void u32(uint32_t v) { u16(uint16_t(v)), u16(uint16_t(v >> 16)); }
  void u64(uint64_t v) { u32(uint32_t(v)), u32(uint32_t(v >> 32)); }
  void zeros(size_t n) { b_.insert(b_.end(), n, std::byte{0}); }
  void put16(size_t at, uint16_t v) {
    b_[at] = std::byte(uint8_t(v));
    b_[at + 1] = std::byte(uint8_t(v >> 8));
  }
  // The 16-bit sum of bytes [from, to): amdgpu_discovery_calculate_checksum.
  uint16_t byte_sum(size_t from, size_t to) const {
    uint16_t s = 0;
    for (size_t i = from; i < to; i++) s = uint16_t(s + uint8_t(b_[i]));
    return s;
  }
  std::vector<std::byte> take() { return std::move(b_); }

 private:
  std::vector<std::byte> b_;
};

// binary_header (version 1): signature 0, version 4/6, binary_checksum 8, binary_size 10,
// table_list[6] from 12, each {offset, checksum, size, padding}: 60 bytes.
constexpr size_t kTableList = 12;
constexpr size_t kHeaderSize = kTableList + 6 * 8;
enum Table { kIp = 0, kGc = 1, kHarvest = 2, kVcn = 3, kMall = 4 };

// Records table `index` at [start, out.size()) in the table list.
void finish_table(Out& out, int index, size_t start) {
  const size_t entry = kTableList + 8 * size_t(index);
  out.put16(entry, uint16_t(start));
  out.put16(entry + 2, out.byte_sum(start, out.size()));
  out.put16(entry + 4, uint16_t(out.size() - start));
}

void write_ip_table(Out& out, const DiscoveryTableSpec& s) {
  if (s.dies.size() > 16) refuse(std::to_string(s.dies.size()) + " dies, at most 16");
  const size_t start = out.size();
  out.u32(0x53445049);  // DISCOVERY_TABLE_SIGNATURE "IPDS"
  out.u16(s.ip_version);
  const size_t size_at = out.size();
  out.u16(0);  // size, patched below
  out.u32(s.ip_table_id);
  out.u16(uint16_t(s.dies.size()));
  const size_t die_info_at = out.size();
  out.zeros(16 * 4);                       // die_info[16] {die_id, die_offset}
  out.u8(s.base_addr_64_bit ? 1 : 0);      // version 4: bit 0 base_addr_64_bit
  out.u8(0);
  for (size_t d = 0; d < s.dies.size(); d++) {
    out.put16(die_info_at + 4 * d, uint16_t(d));
    out.put16(die_info_at + 4 * d + 2, uint16_t(out.size()));  // from the binary's start
    out.u16(uint16_t(d));                                       // die_header.die_id
    out.u16(uint16_t(s.dies[d].size()));                        // die_header.num_ips
    for (const auto& ip : s.dies[d]) {
      if (ip.bases.size() > 255)
        refuse("IP entry with " + std::to_string(ip.bases.size()) + " base addresses, at most 255");
      out.u16(ip.hw_id);
      out.u8(ip.instance);
      out.u8(uint8_t(ip.bases.size()));
      out.u8(ip.major);
      out.u8(ip.minor);
      out.u8(ip.revision);
      out.u8(ip.flags);
      for (uint64_t base : ip.bases) {
        if (s.base_addr_64_bit)
          out.u64(base);
        else
          out.u32(uint32_t(base));
      }
    }
  }
  if (out.size() - start > 0xffff) refuse("IP table over 65535 bytes");
  out.put16(size_at, uint16_t(out.size() - start));
  finish_table(out, kIp, start);
}

void write_info_table(Out& out, int index, const DiscoveryInfoTable& t) {
  const size_t start = out.size();
  out.u32(t.id);
  out.u16(t.version_major);
  out.u16(t.version_minor);
  out.u32(uint32_t(12 + 4 * t.body.size()));
  for (uint32_t v : t.body) out.u32(v);
  finish_table(out, index, start);
}

void write_harvest_table(Out& out, const DiscoveryTableSpec& s) {
  if (s.harvested.size() > 32)
    refuse(std::to_string(s.harvested.size()) + " harvest entries, at most 32");
  const size_t start = out.size();
  out.u32(0x56524148);  // HARVEST_TABLE_SIGNATURE "HARV"
  out.u32(*s.harvest_version);
  for (const auto& [hw_id, instance] : s.harvested) {
    out.u16(hw_id);
    out.u8(instance);
    out.u8(0);
  }
  out.zeros(4 * (32 - s.harvested.size()));
  finish_table(out, kHarvest, start);
}

}  // namespace

std::vector<std::byte> write_discovery_table(const DiscoveryTableSpec& s) {
  Out out;
  out.u32(0x28211407);  // BINARY_SIGNATURE
  out.u16(s.version_major);
  out.u16(s.version_minor);
  out.u16(0);  // binary_checksum, patched last
  out.u16(0);  // binary_size, patched last
  out.zeros(kHeaderSize - out.size());
  write_ip_table(out, s);
  if (s.gc) write_info_table(out, kGc, *s.gc);
  if (s.harvest_version) write_harvest_table(out, s);
  if (s.vcn) write_info_table(out, kVcn, *s.vcn);
  if (s.mall) write_info_table(out, kMall, *s.mall);
  if (out.size() > 0xffff) refuse("table of " + std::to_string(out.size()) + " bytes, over 65535");
  out.put16(10, uint16_t(out.size()));
  out.put16(8, out.byte_sum(10, out.size()));  // the bytes after binary_checksum
  return out.take();
}

// The RX 7900 XTX's table. Every value below is read from a discovery table dumped from an
// RX 7900 XTX, published in tinygrad as test/mockgpu/am/discovery.bin (commit 1833634887,
// January 2025): binary_header 1.4, IP table version 3 with id 0x62ffbe5e, one die with 61
// entries in the order listed, 32-bit bases; gc_info_v1_2; an empty harvest table (version
// 0); vcn_info_v1_0 with two instances; mall_info_v1_0. hw_ids 282 and 286 have no name in
// Linux's soc15_hw_ip.h. None is a guess; they were checked against that file by writing this
// spec and comparing all 1756 bytes.
DiscoveryTableSpec gfx1100_discovery_spec() {
  DiscoveryTableSpec s;
  s.version_major = 1;
  s.version_minor = 4;
  s.ip_version = 3;
  s.ip_table_id = 0x62ffbe5e;
  // {hw_id, instance, major, minor, revision, sub_revision | variant << 4, bases}
  s.dies.push_back({
      {35, 0, 3, 0, 0, 0x00, {0xc00, 0x2408c00}},    // ATHUB 3.0.0
      {6, 0, 13, 0, 0, 0x00, {0x16c00, 0x2401800}},  // CLKA 13.0.0, then 13.0.5 x6
      {6, 1, 13, 0, 5, 0x00, {0xc000400, 0xc021000}},
      {6, 2, 13, 0, 5, 0x00, {0xc800400, 0xc821000}},
      {6, 3, 13, 0, 5, 0x00, {0xd000400, 0xd021000}},
      {6, 4, 13, 0, 5, 0x00, {0xd800400, 0xd821000}},
      {6, 5, 13, 0, 5, 0x00, {0xe000400, 0xe021000}},
      {6, 6, 13, 0, 5, 0x00, {0xe800400, 0xe821000}},
      {36, 0, 3, 0, 0, 0x00, {0x1c0, 0x2409000}},  // DBGU_NBIO
      {46, 0, 4, 2, 0, 0x00, {0x7000, 0xc00000, 0x240b800, 0x7c00000, 0x12400000}},  // DF 4.2.0
      {46, 1, 4, 2, 1, 0x00, {0xc000000, 0xc021800, 0xc022000, 0xc2c0000, 0xc300000}},
      {46, 2, 4, 2, 1, 0x00, {0xc800000, 0xc821800, 0xc822000, 0xcac0000, 0xcb00000}},
      {46, 3, 4, 2, 1, 0x00, {0xd000000, 0xd021800, 0xd022000, 0xd2c0000, 0xd300000}},
      {46, 4, 4, 2, 1, 0x00, {0xd800000, 0xd821800, 0xd822000, 0xdac0000, 0xdb00000}},
      {46, 5, 4, 2, 1, 0x00, {0xe000000, 0xe021800, 0xe022000, 0xe2c0000, 0xe300000}},
      {46, 6, 4, 2, 1, 0x00, {0xe800000, 0xe821800, 0xe822000, 0xeac0000, 0xeb00000}},
      {37, 0, 5, 0, 0, 0x00, {0x580, 0x2409400}},             // DFX
      {49, 0, 2, 0, 0, 0x00, {0x5a0, 0xb80000, 0x240c400}},   // DFX_DAP
      {272, 0, 127, 127, 63, 0x00, {0x2404000}},              // DIO
      {271, 0, 3, 2, 0, 0x00, {0x12, 0xc0, 0x34c0, 0x9000, 0x2403c00}},  // DMU (DCN 3.2.0)
      {5, 0, 13, 0, 0, 0x00, {0x17400, 0x2401400}},  // FUSE 13.0.0, then 13.0.5 x6
      {5, 1, 13, 0, 5, 0x00, {0xc002c00, 0xc020600}},
      {5, 2, 13, 0, 5, 0x00, {0xc802c00, 0xc820600}},
      {5, 3, 13, 0, 5, 0x00, {0xd002c00, 0xd020600}},
      {5, 4, 13, 0, 5, 0x00, {0xd802c00, 0xd820600}},
      {5, 5, 13, 0, 5, 0x00, {0xe002c00, 0xe020600}},
      {5, 6, 13, 0, 5, 0x00, {0xe802c00, 0xe820600}},
      {11, 0, 11, 0, 0, 0x00, {0x1260, 0xa000, 0x1c000, 0x2402c00}},  // GC 11.0.0
      {274, 0, 127, 127, 63, 0x00, {0x4c0000, 0x2404800}},            // DAZ
      {41, 0, 6, 0, 0, 0x00, {0xf20, 0x240a400}},                     // HDP 6.0.0
      {91, 0, 6, 0, 0, 0x00, {0x11400, 0x2456800}},                   // LSDMA 6.0.0
      {34, 0, 3, 0, 0, 0x00, {0x1a000, 0x2408800}},                   // MMHUB 3.0.0
      {255, 0, 13, 0, 0, 0x00, {0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00}},  // MP0
      {1, 0, 13, 0, 0, 0x00, {0x16000, 0xdc0000, 0xe00000, 0xe40000, 0x243fc00}},    // MP1
      {108, 0, 4, 3, 0, 0x00, {0x0, 0x14, 0xd20, 0x10400, 0x241b000, 0x4040000}},   // NBIF
      {40, 0, 6, 0, 0, 0x00, {0x10a0, 0x240a000}},                                  // OSSSYS
      {70, 0, 7, 4, 0, 0x00, {0x0, 0x14, 0xd20, 0x10400, 0x241b000, 0x4040000}},    // PCIE
      {80, 0, 4, 1, 0, 0x00, {0x2414000, 0x4680000}},                 // PCS
      {10, 0, 9, 0, 0, 0x00, {}},                                     // PWR, no registers
      {42, 0, 6, 0, 0, 0x00, {0x1260, 0xa000, 0x1c000, 0x2402c00}},   // SDMA0 6.0.0 (GC's)
      {43, 0, 6, 0, 0, 0x00, {0x1260, 0xa000, 0x1c000, 0x2402c00}},   // SDMA1 6.0.0
      {282, 0, 13, 0, 0, 0x00, {0xbc0000}},                           // hw_id 282, unnamed
      {4, 0, 13, 0, 6, 0x00, {0x16800, 0x16a00, 0x2401000, 0x3440000}},  // SMUIO 13.0.6
      {128, 0, 2, 3, 0, 0x00, {0xea0, 0x500000, 0x2420000}},          // SYSTEMHUB
      {3, 0, 13, 0, 3, 0x00, {0x16600, 0x2400c00}},  // THM 13.0.3, then 13.0.5 x6
      {3, 1, 13, 0, 5, 0x00, {0xc003400, 0xc020200}},
      {3, 2, 13, 0, 5, 0x00, {0xc803400, 0xc820200}},
      {3, 3, 13, 0, 5, 0x00, {0xd003400, 0xd020200}},
      {3, 4, 13, 0, 5, 0x00, {0xd803400, 0xd820200}},
      {3, 5, 13, 0, 5, 0x00, {0xe003400, 0xe020200}},
      {3, 6, 13, 0, 5, 0x00, {0xe803400, 0xe820200}},
      {150, 0, 8, 10, 0, 0x00, {0xc004000, 0xc004400, 0xc400000, 0xc404000}},  // UMC 8.10 x6
      {150, 1, 8, 10, 0, 0x00, {0xc804000, 0xc804400, 0xcc00000, 0xcc04000}},
      {150, 2, 8, 10, 0, 0x00, {0xd004000, 0xd004400, 0xd400000, 0xd404000}},
      {150, 3, 8, 10, 0, 0x00, {0xd804000, 0xd804400, 0xdc00000, 0xdc04000}},
      {150, 4, 8, 10, 0, 0x00, {0xe004000, 0xe004400, 0xe400000, 0xe404000}},
      {150, 5, 8, 10, 0, 0x00, {0xe804000, 0xe804400, 0xec00000, 0xec04000}},
      {170, 0, 4, 12, 0, 0x00, {0x242a800, 0x5b00000}},  // USB
      {12, 0, 4, 0, 0, 0x00, {0x7800, 0x7e00}},          // UVD/VCN 4.0.0
      {12, 1, 4, 0, 1, 0x10, {0x7b00, 0x12000}},         // VCN 4.0.1, variant 1
      {286, 0, 4, 0, 0, 0x00, {0x2403000, 0x2445000}},   // hw_id 286, unnamed
  });
  // gc_info_v1_2: 6 SEs, 4 + 0 WGPs per SA (8 CUs), 4 RBs per SE, 24 GL2C, 1536 GPRs, ...,
  // wave 32, 16 waves per SIMD, LDS 64, 2 SAs per SE: 96 CUs, as the RX 7900 XTX has.
  s.gc = DiscoveryInfoTable{0x4347, 1, 2,
                            {6, 4, 0, 4, 24, 1536, 32, 32, 1792, 256, 0, 32, 16, 32, 64, 1, 2,
                             4, 4, 8, 24, 96, 2, 32, 1, 32, 16, 4, 64, 6144}};
  s.harvest_version = 0;
  // vcn_info_v1_0: two instances, no codec fused off; 4 instance slots and 4 reserved words.
  s.vcn = DiscoveryInfoTable{0x004E4356, 1, 0, {2, 0, 0, 0, 0, 1, 0, 0, 0}};
  s.vcn->body.resize(21, 0);
  // mall_info_v1_0: mall_size_per_m 16 MiB, m_s_present 0, m_half_use 0, m_mall_config
  // 0xfff, reserved[5].
  s.mall = DiscoveryInfoTable{0x4C4C414D, 1, 0, {0x01000000, 0, 0, 0xfff, 0, 0, 0, 0, 0}};
  return s;
}

std::vector<std::byte> gfx1100_discovery_table() {
  return write_discovery_table(gfx1100_discovery_spec());
}

}  // namespace hcq::amd::emu
