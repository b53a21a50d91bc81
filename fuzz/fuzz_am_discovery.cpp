// libFuzzer target: the AMD IP discovery parser (amd/am/discovery.hpp) on arbitrary bytes.
// Parsing either throws InvalidInput or yields a table whose counts stay inside the format's
// limits and whose contents, written again by the emulator's independent writer
// (amd/emu/am_discovery_writer.hpp), parse to the same IP entries, GC fields, harvest list
// and VCN instances.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "core/error.hpp"

using namespace hcq::amd;

namespace {

bool same_ips(const am::Discovery& a, const am::Discovery& b) {
  if (a.ips.size() != b.ips.size()) return false;
  for (size_t i = 0; i < a.ips.size(); i++) {
    const auto &x = a.ips[i], &y = b.ips[i];
    if (x.die != y.die || x.hw_id != y.hw_id || x.instance != y.instance ||
        !(x.version == y.version) || x.harvest != y.harvest || x.variant != y.variant ||
        x.sub_revision != y.sub_revision || x.base_addresses != y.base_addresses)
      return false;
  }
  return true;
}

size_t rd(const std::vector<std::byte>& b, size_t off, size_t n) {
  size_t v = 0;
  for (size_t i = 0; i < n && off + i < b.size(); i++) v |= size_t(uint8_t(b[off + i])) << (8 * i);
  return v;
}
void wr16(std::vector<std::byte>& b, size_t off, size_t v) {
  if (off + 2 > b.size()) return;
  b[off] = std::byte(uint8_t(v));
  b[off + 1] = std::byte(uint8_t(v >> 8));
}
uint16_t byte_sum(const std::vector<std::byte>& b, size_t off, size_t n) {
  uint16_t s = 0;
  for (size_t i = off; i < off + n && i < b.size(); i++) s = uint16_t(s + uint8_t(b[i]));
  return s;
}

// The table checksums (IP, GC, harvest, VCN), then the binary checksum, as the parser sums.
std::vector<std::byte> with_checksums(const uint8_t* data, size_t size) {
  std::vector<std::byte> b(reinterpret_cast<const std::byte*>(data),
                           reinterpret_cast<const std::byte*>(data) + size);
  if (size < 60) return b;
  for (size_t t = 0; t < 4; t++) {
    const size_t off = rd(b, 12 + 8 * t, 2);
    if (off == 0) continue;
    const size_t n = t == 0 ? rd(b, off + 6, 2) : t == 2 ? 136 : rd(b, off + 8, 4);
    wr16(b, 12 + 8 * t + 2, byte_sum(b, off, n));
  }
  const size_t binary_size = rd(b, 10, 2);
  if (binary_size >= 10) wr16(b, 8, byte_sum(b, 10, binary_size - 10));
  return b;
}

int check(std::span<const std::byte> bytes) {
  const size_t size = bytes.size();
  am::Discovery d;
  try {
    d = am::parse_discovery(bytes);
  } catch (const hcq::InvalidInput&) {
    return 0;
  }
  if (d.binary_size > size || d.ip_table_version < 1 || d.ip_table_version > 4 ||
      (d.base_addr_64_bit && d.ip_table_version != 4) || d.harvest.size() > 32 ||
      d.vcn.size() > 4 || (d.gc && d.gc->fields.size() < 17))
    std::abort();
  // Each die's entries lie inside the IP table, itself inside binary_size: their bytes are
  // bounded by it.
  size_t entry_bytes = 0;
  for (const auto& ip : d.ips) {
    if (ip.die >= 16) std::abort();
    entry_bytes += 8 + ip.base_addresses.size() * (d.base_addr_64_bit ? 8 : 4);
  }
  // Dies may share entries (two die_info pointing at one die): then the rewrite below would
  // hold them twice and may not fit the format's 16-bit sizes.
  if (60 + 80 + 16 * 4 + entry_bytes + 12 + 38 * 4 + 136 + 96 > 0xffff) return 0;

  emu::DiscoveryTableSpec s;
  s.ip_version = d.ip_table_version;
  s.ip_table_id = d.ip_table_id;
  s.base_addr_64_bit = d.base_addr_64_bit;
  uint16_t dies = 0;
  for (const auto& ip : d.ips) dies = std::max<uint16_t>(dies, uint16_t(ip.die + 1));
  s.dies.resize(dies);
  for (const auto& ip : d.ips)
    s.dies[ip.die].push_back({ip.hw_id, ip.instance, ip.version.major, ip.version.minor,
                              ip.version.revision,
                              uint8_t(d.ip_table_version < 3 ? ip.harvest
                                                             : ip.sub_revision | ip.variant << 4),
                              ip.base_addresses});
  if (d.gc) s.gc = emu::DiscoveryInfoTable{0x4347, d.gc->version_major, d.gc->version_minor,
                                           d.gc->fields};
  if (d.harvest_version) {
    s.harvest_version = d.harvest_version;
    for (const auto& h : d.harvest) s.harvested.push_back({h.hw_id, h.instance});
  }
  if (!d.vcn.empty()) {
    emu::DiscoveryInfoTable vcn{0x004E4356, 1, 0, {uint32_t(d.vcn.size())}};
    for (const auto& v : d.vcn) vcn.body.insert(vcn.body.end(), {v.instance, v.fuse_bits, 0, 0});
    vcn.body.resize(21, 0);
    s.vcn = vcn;
  }
  const auto again = am::parse_discovery(emu::write_discovery_table(s));  // must not throw
  if (!same_ips(d, again) || again.ip_table_version != d.ip_table_version ||
      again.gc.has_value() != d.gc.has_value() ||
      (d.gc && again.gc->fields != d.gc->fields) || again.harvest != d.harvest ||
      again.vcn.size() != d.vcn.size())
    std::abort();
  for (const auto& ip : d.ips) (void)d.find(ip.hw_id, ip.instance);  // every entry is found
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  check(with_checksums(data, size));
  return 0;
}
