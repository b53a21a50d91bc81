// IP discovery table parser; the format and the checks are described in discovery.hpp.
#include "amd/am/discovery.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "core/error.hpp"
#include "amd/am/index_pairs.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw InvalidInput("IP discovery table: " + what);
}

// Table indices of binary_header.table_list (discovery.h enum table).
enum TableIndex : size_t { kIpDiscovery = 0, kGc, kHarvest, kVcn, kMall, kNps, kTableCount };
constexpr std::array<const char*, kTableCount> kTableNames = {
    "IP_DISCOVERY", "GC", "HARVEST_INFO", "VCN_INFO", "MALL_INFO", "NPS_INFO"};

constexpr size_t kBinaryHeaderFixed = 12;    // signature .. binary_size
constexpr size_t kChecksumStart = 10;        // the binary checksum covers bytes after its field
constexpr size_t kTableInfoSize = 8;
constexpr size_t kIpHeaderSize = 80;         // sizeof(ip_discovery_header), packed
constexpr size_t kMaxDies = 16;
constexpr size_t kDieHeaderSize = 4;
constexpr size_t kIpEntrySize = 8;           // ip / ip_v3 / ip_v4 before the base addresses
constexpr size_t kInfoHeaderSize = 12;       // gpu_info_header, vcn_info_header
constexpr size_t kHarvestTableSize = 8 + 32 * 4;  // sizeof(harvest_table)
constexpr size_t kHarvestEntries = 32;
constexpr size_t kVcnInfoSize = 12 + 4 + 4 * 16 + 16;  // sizeof(vcn_info_v1_0)
constexpr size_t kVcnMaxInstances = 4;

// Reads little-endian fields of the first `limit` bytes (binary_size); every read is bounded
// by the caller's checks, and asserts them again so a missed check cannot read past the end.
class Bytes {
 public:
  Bytes(std::span<const std::byte> b, size_t limit) : b_(b), limit_(limit) {}
  uint8_t u8(size_t off) const { return uint8_t(at(off, 1)[0]); }
  uint16_t u16(size_t off) const {
    auto p = at(off, 2);
    return uint16_t(uint16_t(p[0]) | uint16_t(p[1]) << 8);
  }
  uint32_t u32(size_t off) const { return uint32_t(u16(off)) | uint32_t(u16(off + 2)) << 16; }
  uint64_t u64(size_t off) const { return uint64_t(u32(off)) | uint64_t(u32(off + 4)) << 32; }
  uint16_t sum(size_t off, size_t n) const {
    uint16_t s = 0;
    for (auto v : at(off, n)) s = uint16_t(s + uint8_t(v));
    return s;
  }
  size_t limit() const { return limit_; }

 private:
  std::span<const std::byte> at(size_t off, size_t n) const {
    if (off > limit_ || n > limit_ - off) fail("internal read past binary_size at " + hex(off));
    return b_.subspan(off, n);
  }
  std::span<const std::byte> b_;
  size_t limit_;
};

struct TableInfo {
  uint16_t offset = 0, checksum = 0, size = 0;
};

// A table's bytes [offset, offset + size) must lie inside the binary.
void check_extent(const Bytes& b, const char* table, const char* size_field, size_t offset,
                  uint64_t size) {
  if (offset + size > b.limit())
    fail(std::string(table) + " table at " + hex(offset) + ": " + size_field + " is " +
         std::to_string(size) + ", past binary_size " + std::to_string(b.limit()) +
         " (at most " + std::to_string(b.limit() - offset) + ")");
}

void check_sum(const Bytes& b, const char* table, size_t offset, size_t size,
               uint16_t expected) {
  const uint16_t sum = b.sum(offset, size);
  if (sum != expected)
    fail(std::string(table) + " table checksum: table_info.checksum is " + hex(expected) +
         ", the table's " + std::to_string(size) + " bytes sum to " + hex(sum));
}

// The table header's first field (signature or table id) and fixed-size header must fit.
void check_id(const Bytes& b, const char* table, const char* field, size_t offset,
              size_t header_size, uint32_t expected) {
  check_extent(b, table, "its header size", offset, header_size);
  const uint32_t id = b.u32(offset);
  if (id != expected)
    fail(std::string(table) + " table at " + hex(offset) + ": " + field + " is " + hex(id) +
         ", expected " + hex(expected));
}

void parse_ip_table(const Bytes& b, const TableInfo& t, Discovery& d) {
  const char* name = "IP_DISCOVERY";
  const size_t off = t.offset;
  check_id(b, name, "ip_discovery_header.signature", off, kIpHeaderSize, kIpDiscoverySignature);
  const uint16_t version = b.u16(off + 4);
  const uint16_t size = b.u16(off + 6);
  if (size < kIpHeaderSize)
    fail("IP_DISCOVERY table at " + hex(off) + ": ip_discovery_header.size is " +
         std::to_string(size) + ", smaller than the 80-byte header");
  check_extent(b, name, "ip_discovery_header.size", off, size);
  check_sum(b, name, off, size, t.checksum);
  if (version < 1 || version > 4)
    fail("ip_discovery_header.version is " + std::to_string(version) + ", expected 1 to 4");
  d.ip_table_version = version;
  d.ip_table_id = b.u32(off + 8);
  const uint16_t num_dies = b.u16(off + 12);
  if (num_dies > kMaxDies)
    fail("ip_discovery_header.num_dies is " + std::to_string(num_dies) + ", at most 16");
  d.base_addr_64_bit = version == 4 && (b.u8(off + 78) & 1);
  const size_t address_size = d.base_addr_64_bit ? 8 : 4;
  const size_t end = off + size;  // the entries must lie in the checksummed bytes

  for (uint16_t i = 0; i < num_dies; i++) {
    const size_t die_offset = b.u16(off + 14 + 4 * i + 2);
    const std::string die = "die " + std::to_string(i);
    if (die_offset < off + kIpHeaderSize || die_offset + kDieHeaderSize > end)
      fail("ip_discovery_header.die_info[" + std::to_string(i) + "].die_offset is " +
           hex(die_offset) + ", outside the IP_DISCOVERY table's entries [" +
           hex(off + kIpHeaderSize) + ", " + hex(end) + ")");
    const uint16_t die_id = b.u16(die_offset);
    if (die_id != i)
      fail(die + ": die_header.die_id is " + std::to_string(die_id) + ", expected " +
           std::to_string(i));
    const uint16_t num_ips = b.u16(die_offset + 2);
    size_t pos = die_offset + kDieHeaderSize;
    for (uint16_t j = 0; j < num_ips; j++) {
      const std::string entry = die + " IP entry " + std::to_string(j) + " of " +
                                std::to_string(num_ips) + " at " + hex(pos);
      if (pos + kIpEntrySize > end)
        fail(entry + ": its 8-byte header runs past the IP_DISCOVERY table's end at " +
             hex(end) + " (die_header.num_ips too large or the table truncated)");
      IpBlock ip;
      ip.die = i;
      ip.hw_id = b.u16(pos);
      ip.instance = b.u8(pos + 2);
      const uint8_t count = b.u8(pos + 3);
      ip.version = {b.u8(pos + 4), b.u8(pos + 5), b.u8(pos + 6)};
      const uint8_t last = b.u8(pos + 7);
      if (version < 3) {
        ip.harvest = last & 0xf;
      } else {
        ip.sub_revision = last & 0xf;
        ip.variant = last >> 4;
      }
      const size_t entry_size = kIpEntrySize + count * address_size;
      if (pos + entry_size > end)
        fail(entry + " (" + hw_id_name(ip.hw_id) + "): num_base_address " +
             std::to_string(count) + " needs " + std::to_string(entry_size) +
             " bytes, past the IP_DISCOVERY table's end at " + hex(end));
      for (size_t k = 0; k < count; k++)
        ip.base_addresses.push_back(d.base_addr_64_bit ? b.u64(pos + 8 + 8 * k)
                                                       : b.u32(pos + 8 + 4 * k));
      d.ips.push_back(std::move(ip));
      pos += entry_size;
    }
  }
}

// The number of u32 fields after gpu_info_header in each GC table version (discovery.h).
size_t gc_field_count(uint16_t major, uint16_t minor) {
  if (major == 1) return minor == 0 ? 19 : minor == 1 ? 22 : minor == 2 ? 30 : 38;
  return minor == 0 ? 17 : 24;
}

void parse_gc_table(const Bytes& b, const TableInfo& t, Discovery& d) {
  const char* name = "GC";
  const size_t off = t.offset;
  check_id(b, name, "gpu_info_header.table_id", off, kInfoHeaderSize, kGcTableId);
  const uint32_t size = b.u32(off + 8);
  check_extent(b, name, "gpu_info_header.size", off, size);
  check_sum(b, name, off, size, t.checksum);
  GcInfo gc;
  gc.version_major = b.u16(off + 4);
  gc.version_minor = b.u16(off + 6);
  if (gc.version_major != 1 && gc.version_major != 2)
    fail("GC table: gpu_info_header.version_major is " + std::to_string(gc.version_major) +
         ", expected 1 or 2 (gc_info_v1_x, gc_info_v2_x)");
  // A minor version newer than discovery.h knows still holds the fields it knows.
  const size_t count = gc_field_count(gc.version_major, gc.version_minor);
  const size_t needed = kInfoHeaderSize + 4 * count;
  if (size < needed)
    fail("GC table: gpu_info_header.size is " + std::to_string(size) + ", gc_info_v" +
         std::to_string(gc.version_major) + "_" + std::to_string(gc.version_minor) +
         " needs " + std::to_string(needed));
  for (size_t i = 0; i < count; i++) gc.fields.push_back(b.u32(off + kInfoHeaderSize + 4 * i));
  const auto& f = gc.fields;
  gc.num_se = f[0];
  gc.num_rb_per_se = f[3];
  gc.num_gprs = f[5];
  gc.max_gs_threads = f[6];
  gc.gs_table_depth = f[7];
  gc.gsprim_buff_depth = f[8];
  gc.parameter_cache_depth = f[9];
  gc.double_offchip_lds_buffer = f[10];
  gc.wave_size = f[11];
  gc.max_waves_per_simd = f[12];
  gc.max_scratch_slots_per_cu = f[13];
  gc.lds_size = f[14];
  gc.num_sc_per_se = f[15];
  if (gc.version_major == 1) {  // gc_info_v1_x: wgp0, wgp1 per SA; gl2c; sa per SE
    gc.num_cu_per_sh = 2 * (f[1] + f[2]);
    gc.num_tccs = f[4];
    gc.num_sh_per_se = f[16];
    gc.num_packer_per_sc = f[17];
  } else {  // gc_info_v2_x: cu per SH, SH per SE, tccs
    gc.num_cu_per_sh = f[1];
    gc.num_sh_per_se = f[2];
    gc.num_tccs = f[4];
    gc.num_packer_per_sc = f[16];
  }
  d.gc = std::move(gc);
}

void parse_harvest_table(const Bytes& b, const TableInfo& t, Discovery& d) {
  const size_t off = t.offset;
  check_id(b, "HARVEST_INFO", "harvest_info_header.signature", off, kHarvestTableSize,
           kHarvestSignature);
  check_sum(b, "HARVEST_INFO", off, kHarvestTableSize, t.checksum);
  d.harvest_version = b.u32(off + 4);
  for (size_t i = 0; i < kHarvestEntries; i++) {
    const size_t e = off + 8 + 4 * i;
    const uint16_t id = b.u16(e);
    if (id == 0) break;  // the list ends at the first empty entry (amdgpu does the same)
    d.harvest.push_back({id, b.u8(e + 2)});
  }
}

void parse_vcn_table(const Bytes& b, const TableInfo& t, Discovery& d) {
  const char* name = "VCN_INFO";
  const size_t off = t.offset;
  check_id(b, name, "vcn_info_header.table_id", off, kInfoHeaderSize, kVcnInfoTableId);
  const uint32_t size = b.u32(off + 8);
  check_extent(b, name, "vcn_info_header.size_bytes", off, size);
  check_sum(b, name, off, size, t.checksum);
  const uint16_t major = b.u16(off + 4);
  if (major != 1)
    fail("VCN_INFO table: vcn_info_header.version_major is " + std::to_string(major) +
         ", expected 1");
  if (size < kVcnInfoSize)
    fail("VCN_INFO table: vcn_info_header.size_bytes is " + std::to_string(size) +
         ", vcn_info_v1_0 needs " + std::to_string(kVcnInfoSize));
  const uint32_t count = b.u32(off + 12);
  if (count > kVcnMaxInstances)
    fail("VCN_INFO table: num_of_instances is " + std::to_string(count) + ", at most 4");
  for (uint32_t i = 0; i < count; i++)
    d.vcn.push_back({b.u32(off + 16 + 16 * i), b.u32(off + 20 + 16 * i)});
}

}  // namespace

uint64_t discovery_table_offset(uint64_t vram_size) {
  if (vram_size < kDiscoveryTmrOffset)
    throw InvalidInput("IP discovery: VRAM size " + hex(vram_size) +
                       " is below the 64 KiB the table sits under its end");
  return vram_size - kDiscoveryTmrOffset;
}

std::string hw_id_name(uint16_t id) {
  // amdgpu_discovery.c hw_id_names[], ids from soc15_hw_ip.h.
  static constexpr std::pair<uint16_t, const char*> kNames[] = {
      {1, "MP1"},        {2, "MP2"},          {3, "THM"},        {4, "SMUIO"},
      {5, "FUSE"},       {6, "CLKA"},         {10, "PWR"},       {11, "GC"},
      {12, "UVD"},       {13, "AUDIO_AZ"},    {14, "ACP"},       {15, "DCI"},
      {16, "DCO"},       {17, "XDMA"},        {18, "DCEAZ"},     {19, "SDPMUX"},
      {20, "NTB"},       {21, "VPE"},         {24, "IOHC"},      {28, "L2IMU"},
      {32, "VCE"},       {34, "MMHUB"},       {35, "ATHUB"},     {36, "DBGU_NBIO"},
      {37, "DFX"},       {38, "DBGU0"},       {39, "DBGU1"},     {40, "OSSSYS"},
      {41, "HDP"},       {42, "SDMA0"},       {43, "SDMA1"},     {44, "ISP"},
      {45, "DBGU_IO"},   {46, "DF"},          {47, "CLKB"},      {48, "FCH"},
      {49, "DFX_DAP"},   {50, "L1IMU_PCIE"},  {51, "L1IMU_NBIF"}, {52, "L1IMU_IOAGR"},
      {53, "L1IMU3"},    {54, "L1IMU4"},      {55, "L1IMU5"},    {56, "L1IMU6"},
      {57, "L1IMU7"},    {58, "L1IMU8"},      {59, "L1IMU9"},    {60, "L1IMU10"},
      {61, "L1IMU11"},   {62, "L1IMU12"},     {63, "L1IMU13"},   {64, "L1IMU14"},
      {65, "L1IMU15"},   {66, "WAFLC"},       {67, "FCH_USB_PD"}, {68, "SDMA2"},
      {69, "SDMA3"},     {70, "PCIE"},        {80, "PCS"},       {89, "DDCL"},
      {90, "SST"},       {91, "LSDMA"},       {100, "IOAGR"},    {108, "NBIF"},
      {124, "IOAPIC"},   {128, "SYSTEMHUB"},  {144, "NTBCCP"},   {150, "UMC"},
      {168, "SATA"},     {170, "USB"},        {176, "CCXSEC"},   {200, "XGMI"},
      {216, "XGBE"},     {255, "MP0"},        {271, "DMU"},      {272, "DIO"},
      {274, "DAZ"},
  };
  for (const auto& [n, s] : kNames)
    if (n == id) return s;
  return "HWID " + std::to_string(id);
}

std::string IpVersion::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(revision);
}

bool Discovery::has(uint16_t hw, uint8_t instance) const {
  return std::any_of(ips.begin(), ips.end(),
                     [&](const IpBlock& ip) { return ip.hw_id == hw && ip.instance == instance; });
}

const IpBlock& Discovery::find(uint16_t hw, uint8_t instance) const {
  std::string instances;
  for (const auto& ip : ips) {
    if (ip.hw_id != hw) continue;
    if (ip.instance == instance) return ip;
    instances += (instances.empty() ? "" : ", ") + std::to_string(ip.instance);
  }
  const std::string what = "IP discovery: no " + hw_id_name(hw) + " (hw_id " +
                           std::to_string(hw) + ") instance " + std::to_string(instance) +
                           " in the table";
  throw InvalidInput(what + (instances.empty() ? std::string(" (no instance at all)")
                                               : " (it has instances " + instances + ")"));
}

Discovery parse_discovery(std::span<const std::byte> bytes) {
  if (bytes.size() < kBinaryHeaderFixed)
    fail(std::to_string(bytes.size()) + " bytes, shorter than the 12-byte binary_header");
  const Bytes head(bytes, kBinaryHeaderFixed);
  const uint32_t signature = head.u32(0);
  if (signature != kBinarySignature)
    fail("binary_header.binary_signature is " + hex(signature) + ", expected " +
         hex(kBinarySignature));
  Discovery d;
  d.binary_version_major = head.u16(4);
  d.binary_version_minor = head.u16(6);
  const uint16_t checksum = head.u16(8);
  d.binary_size = head.u16(10);

  // binary_header_v2 carries its own table count; version 1 always has six entries.
  const bool v2 = d.binary_version_major == 2;
  size_t list_offset = kBinaryHeaderFixed;
  size_t table_count = kTableCount;
  if (v2) {
    if (d.binary_size < kBinaryHeaderFixed + 4)
      fail("binary_header.binary_size is " + std::to_string(d.binary_size) +
           ", shorter than binary_header_v2's 16 bytes");
    list_offset = 16;
  }
  if (d.binary_size > bytes.size())
    fail("binary_header.binary_size is " + std::to_string(d.binary_size) + ", past the " +
         std::to_string(bytes.size()) + " bytes given");
  const Bytes b(bytes, d.binary_size);
  if (v2) {
    table_count = b.u16(12);
    if (list_offset + table_count * kTableInfoSize > d.binary_size)
      fail("binary_header_v2.num_tables is " + std::to_string(table_count) + ": " +
           std::to_string(table_count) + " table_info entries run past binary_size " +
           std::to_string(d.binary_size));
  }
  const size_t header_size = list_offset + table_count * kTableInfoSize;
  if (d.binary_size < header_size)
    fail("binary_header.binary_size is " + std::to_string(d.binary_size) +
         ", shorter than the " + std::to_string(header_size) + "-byte binary_header");
  const uint16_t sum = b.sum(kChecksumStart, d.binary_size - kChecksumStart);
  if (sum != checksum)
    fail("binary_header.binary_checksum is " + hex(checksum) + ", bytes " +
         std::to_string(kChecksumStart) + " to binary_size " + std::to_string(d.binary_size) +
         " sum to " + hex(sum));

  std::array<TableInfo, kTableCount> tables{};
  for (size_t i = 0; i < std::min(table_count, size_t(kTableCount)); i++) {
    const size_t e = list_offset + i * kTableInfoSize;
    tables[i] = {b.u16(e), b.u16(e + 2), b.u16(e + 4)};
    if (tables[i].offset != 0 && tables[i].offset < header_size)
      fail("table_list[" + std::string(kTableNames[i]) + "].offset is " +
           hex(tables[i].offset) + ", inside the " + std::to_string(header_size) +
           "-byte binary_header");
    if (tables[i].offset >= d.binary_size)
      fail("table_list[" + std::string(kTableNames[i]) + "].offset is " +
           hex(tables[i].offset) + ", past binary_size " + std::to_string(d.binary_size));
  }
  if (tables[kIpDiscovery].offset == 0) fail("table_list[IP_DISCOVERY].offset is 0: no IP table");
  parse_ip_table(b, tables[kIpDiscovery], d);
  if (tables[kGc].offset) parse_gc_table(b, tables[kGc], d);
  if (tables[kHarvest].offset) parse_harvest_table(b, tables[kHarvest], d);
  if (tables[kVcn].offset) parse_vcn_table(b, tables[kVcn], d);
  return d;
}

uint64_t read_vram_size(os::Mmio& regs) {
  constexpr uint64_t kMemsize = 0xde3 * 4;  // RCC_CONFIG_MEMSIZE (nbio_4_3_0.def, AM_ABS_REG)
  const uint32_t mib = regs.read32(kMemsize);
  if (mib == 0 || mib == 0xffffffff)
    throw Error(regs.name() + ": RCC_CONFIG_MEMSIZE reads " + hex(mib) +
                ", not a VRAM size in MiB: the GPU does not answer (in reset or powered down)");
  return uint64_t(mib) << 20;
}

Discovery read_discovery(os::Mmio& regs, os::Mmio* vram, bool may_use_mm_index) {
  const uint64_t at = discovery_table_offset(read_vram_size(regs));
  std::vector<uint32_t> words(kDiscoveryTmrSize / 4);
  if (vram && vram->size() >= at + kDiscoveryTmrSize) {
    vram->read(at, words);
  } else if (!may_use_mm_index) {
    throw Error(regs.name() + ": the IP discovery table at VRAM " + hex(at) + " is beyond " +
                (vram ? vram->name() + " (" + hex(vram->size()) + " bytes)" : "the VRAM BAR") +
                ", and MM_INDEX/MM_DATA belong to the kernel driver bound to the GPU");
  } else {
    os::IndexDataRegs mm(regs, mm_index_layout());
    for (size_t i = 0; i < words.size(); i++) words[i] = mm.read_vram32(at + 4 * i);
  }
  return parse_discovery(std::as_bytes(std::span<const uint32_t>(words)));
}

}  // namespace hcq::amd::am
