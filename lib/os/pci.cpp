#include "os/pci.hpp"

#include <linux/pci_regs.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.hpp"

extern "C" {
#include <pci/pci.h>
}

namespace hcq::os {
namespace {

// Resource flags of sysfs `resource` lines (Linux include/linux/ioport.h IORESOURCE_*).
constexpr uint64_t kResIo = 0x100, kResPrefetch = 0x2000, kResMem64 = 0x100000;
// The Intel Thunderbolt vendor-specific capability (Linux drivers/pci/pci.h
// PCI_VSEC_ID_INTEL_TBT; set_pcie_thunderbolt() tests for it).
constexpr uint16_t kIntel = 0x8086, kVsecThunderbolt = 0x1234;

// libpci reports fatal errors through a callback that must not return (its default exits).
// This one throws; the unwind passes through libpci's C frames, which carry unwind tables
// on the platforms hcq builds for.
// PCI_NONRET: the callback type carries the noreturn attribute (clang checks it).
void libpci_error(char* fmt, ...) PCI_NONRET;
void libpci_error(char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw Error(std::string("libpci: ") + buf);
}
void libpci_quiet(char*, ...) {}

struct Access {
  pci_access* a = pci_alloc();
  ~Access() { pci_cleanup(a); }
};

std::string address_of(const pci_dev* d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%d", unsigned(d->domain), d->bus, d->dev,
                d->func);
  return buf;
}

// The PCIe capability (PCI Express Base Specification 7.5.3; Linux pci_regs.h PCI_EXP_*):
// port type from the Capabilities register, link from Link Capabilities / Link Status.
void read_pcie(pci_dev* d, PciFunction& f) {
  pci_cap* cap = pci_find_cap(d, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
  if (!cap) return;
  f.port = pci_port_of((pci_read_word(d, int(cap->addr) + PCI_EXP_FLAGS) & PCI_EXP_FLAGS_TYPE) >> 4);
  if (f.port == PciPort::RootComplexEndpoint) return;  // integrated: no link
  uint32_t lnkcap = pci_read_long(d, int(cap->addr) + PCI_EXP_LNKCAP);
  uint16_t lnksta = pci_read_word(d, int(cap->addr) + PCI_EXP_LNKSTA);
  PciLink l;
  l.max_speed = lnkcap & PCI_EXP_LNKCAP_SLS;
  l.max_width = (lnkcap & PCI_EXP_LNKCAP_MLW) >> 4;
  l.speed = lnksta & PCI_EXP_LNKSTA_CLS;
  l.width = (lnksta & PCI_EXP_LNKSTA_NLW) >> PCI_EXP_LNKSTA_NLW_SHIFT;
  f.link = l;
}

// Resizable BAR (PCIe Base Specification 7.8.6; Linux pci_regs.h PCI_REBAR_*): one
// capability/control pair per BAR; sizes are powers of two from 1 MiB. Capability bits 4..31
// list the supported sizes (bit n: 2^(n-4) MiB), control bits 13:8 the current one.
void read_rebar(pci_dev* d, PciFunction& f) {
  pci_cap* cap = pci_find_cap(d, PCI_EXT_CAP_ID_REBAR, PCI_CAP_EXTENDED);
  if (!cap) return;
  const int base = int(cap->addr);
  uint32_t n = (pci_read_long(d, base + PCI_REBAR_CTRL) & PCI_REBAR_CTRL_NBAR_MASK) >>
               PCI_REBAR_CTRL_NBAR_SHIFT;
  for (uint32_t i = 0; i < n && i < 6; i++) {
    uint32_t c = pci_read_long(d, base + PCI_REBAR_CAP + int(8 * i));
    uint32_t ctl = pci_read_long(d, base + PCI_REBAR_CTRL + int(8 * i));
    PciResizableBar r;
    r.bar = int(ctl & PCI_REBAR_CTRL_BAR_IDX);
    r.current = (1ull << 20) << ((ctl >> PCI_REBAR_CTRL_BAR_SHIFT) & 0x3f);
    for (int bit = 4; bit < 32; bit++)
      if (c & (1u << bit)) r.supported.push_back((1ull << 20) << (bit - 4));
    f.resizable_bars.push_back(std::move(r));
  }
}

bool has_thunderbolt_vsec(pci_dev* d) {
  if (d->vendor_id != kIntel) return false;
  for (pci_cap* c = d->first_cap; c; c = c->next)
    if (c->type == PCI_CAP_EXTENDED && c->id == PCI_EXT_CAP_ID_VNDR &&
        PCI_VNDR_HEADER_ID(pci_read_long(d, int(c->addr) + PCI_VNDR_HEADER)) == kVsecThunderbolt)
      return true;
  return false;
}

// `secondary` is the bus below a bridge (type 1 header), -1 for other functions.
PciFunction read_function(pci_dev* d, int& secondary) {
  pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS |
                       PCI_FILL_BASES | PCI_FILL_SIZES | PCI_FILL_IO_FLAGS | PCI_FILL_CAPS |
                       PCI_FILL_EXT_CAPS | PCI_FILL_NUMA_NODE | PCI_FILL_IOMMU_GROUP |
                       PCI_FILL_DRIVER);
  PciFunction f;
  f.address = address_of(d);
  f.vendor = d->vendor_id;
  f.device = d->device_id;
  f.subsystem_vendor = d->subsys_vendor_id;
  f.subsystem_device = d->subsys_id;
  f.revision = d->rev_id;
  f.class_code = uint32_t(d->device_class) << 8 | d->prog_if;
  for (int i = 0; i < 6; i++) {
    if (!d->size[i]) continue;
    uint64_t fl = d->flags[i];
    f.bars.push_back({i, uint64_t(d->base_addr[i] & ~uint64_t(PCI_ADDR_FLAG_MASK)),
                      uint64_t(d->size[i]), (fl & kResIo) != 0, (fl & kResMem64) != 0,
                      (fl & kResPrefetch) != 0});
  }
  read_pcie(d, f);
  read_rebar(d, f);
  f.thunderbolt = has_thunderbolt_vsec(d);
  if (const char* drv = pci_get_string_property(d, PCI_FILL_DRIVER)) f.driver = drv;
  if (const char* g = pci_get_string_property(d, PCI_FILL_IOMMU_GROUP)) {
    // The name of the directory the iommu_group link points to: a number on any sane kernel.
    const std::string_view name(g);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), f.iommu_group);
    if (name.empty() || ec != std::errc() || end != name.data() + name.size() || f.iommu_group < 0)
      throw Error(pci_sysfs_dir(f.address) + "/iommu_group: '" + std::string(name) +
                  "' is not an IOMMU group number");
  }
  f.numa_node = d->numa_node;
  const bool bridge = (pci_read_byte(d, PCI_HEADER_TYPE) & 0x7f) == PCI_HEADER_TYPE_BRIDGE;
  secondary = bridge ? pci_read_byte(d, PCI_SECONDARY_BUS) : -1;
  return f;
}

std::string full_address(const std::string& a) {
  return std::count(a.begin(), a.end(), ':') == 1 ? "0000:" + a : a;
}

}  // namespace

unsigned PciLink::capable_speed() const {
  return port_max_speed ? std::min(max_speed, port_max_speed) : max_speed;
}
unsigned PciLink::capable_width() const {
  return port_max_width ? std::min(max_width, port_max_width) : max_width;
}

std::string pcie_speed(unsigned g) {
  static const char* names[] = {"2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "64 GT/s"};
  return g >= 1 && g <= 6 ? names[g - 1] : "unknown";
}

PciPort pci_port_of(unsigned type) {
  switch (type) {
    case PCI_EXP_TYPE_ENDPOINT: return PciPort::Endpoint;
    case PCI_EXP_TYPE_LEG_END: return PciPort::LegacyEndpoint;
    case PCI_EXP_TYPE_ROOT_PORT: return PciPort::RootPort;
    case PCI_EXP_TYPE_UPSTREAM: return PciPort::UpstreamPort;
    case PCI_EXP_TYPE_DOWNSTREAM: return PciPort::DownstreamPort;
    case PCI_EXP_TYPE_PCI_BRIDGE: return PciPort::PcieToPciBridge;
    case PCI_EXP_TYPE_RC_END: return PciPort::RootComplexEndpoint;
    default: return PciPort::Other;
  }
}

std::string byte_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (u < 5 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, u++;
  return std::to_string(bytes) + " " + units[u];
}

const char* pci_port_name(PciPort p) {
  switch (p) {
    case PciPort::None: return "conventional PCI (no PCIe capability)";
    case PciPort::Endpoint: return "endpoint";
    case PciPort::LegacyEndpoint: return "legacy endpoint";
    case PciPort::RootPort: return "root port";
    case PciPort::UpstreamPort: return "switch upstream port";
    case PciPort::DownstreamPort: return "switch downstream port";
    case PciPort::PcieToPciBridge: return "PCIe-to-PCI bridge";
    case PciPort::RootComplexEndpoint: return "root complex integrated endpoint";
    case PciPort::Other: break;
  }
  return "other";
}

const PciBar* PciFunction::bar(int index) const {
  for (auto& b : bars)
    if (b.index == index) return &b;
  return nullptr;
}

std::string pci_sysfs_dir(const std::string& address) {
  return "/sys/bus/pci/devices/" + address;
}

std::vector<PciFunction> pci_functions(Kernel& k) {
  const std::string root = k.sysfs_root();
  std::vector<PciFunction> out;
  // libpci treats a missing bus as fatal; no bus is an empty list here.
  if (root.empty() || k.list_dir("/sys/bus/pci/devices").empty()) return out;
  Access acc;
  acc.a->error = libpci_error;
  acc.a->warning = libpci_quiet;
  acc.a->debug = libpci_quiet;
  acc.a->method = PCI_ACCESS_SYS_BUS_PCI;
  std::string path = root + "/bus/pci";
  pci_set_param(acc.a, const_cast<char*>("sysfs.path"), path.data());
  pci_init(acc.a);
  pci_scan_bus(acc.a);
  // The bridge above a function is the one whose secondary bus it sits on (PCI-to-PCI
  // Bridge Architecture Specification 3.2.5.3). (libpci 3.9's PCI_FILL_PARENT finds it from
  // sysfs paths too, but leaks what realpath returns.)
  std::map<std::pair<int, int>, std::string> bridge_of_bus;  // (domain, bus) -> bridge
  for (pci_dev* d = acc.a->devices; d; d = d->next) {
    int secondary = -1;
    out.push_back(read_function(d, secondary));
    if (secondary > 0) bridge_of_bus[{d->domain, secondary}] = out.back().address;
  }
  std::sort(out.begin(), out.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });
  auto parent_of = [&](const std::string& a) -> std::string {
    const size_t colon = a.find(':');  // domains can be wider than 4 digits (VMD)
    auto it = bridge_of_bus.find({std::stoi(a.substr(0, colon), nullptr, 16),
                                  std::stoi(a.substr(colon + 1, 2), nullptr, 16)});
    return it == bridge_of_bus.end() || it->second == a ? "" : it->second;
  };
  for (auto& f : out)
    for (std::string p = parent_of(f.address); !p.empty() && f.upstream.size() < 256;
         p = parent_of(p))
      f.upstream.push_back(p);
  // The link should train to what both ends support: the upstream port's capabilities.
  std::map<std::string, const PciFunction*> by_address;
  for (auto& f : out) by_address[f.address] = &f;
  for (auto& f : out) {
    if (!f.link || f.upstream.empty()) continue;
    const PciFunction* up = by_address[f.upstream.front()];
    if (up && up->link) {
      f.link->port_max_speed = up->link->max_speed;
      f.link->port_max_width = up->link->max_width;
    }
  }
  return out;
}

PciFunction pci_function(Kernel& k, const std::string& address) {
  const std::string want = full_address(address);
  for (auto& f : pci_functions(k))
    if (f.address == want) return f;
  throw InvalidInput("no PCI function " + want + " (hcq ls --all lists them)");
}

void pci_unbind(Kernel& k, const PciFunction& fn) {
  if (fn.driver.empty()) return;
  std::string file = "/sys/bus/pci/drivers/" + fn.driver + "/unbind";
  if (int r = k.write_file(file, fn.address); r < 0)
    throw OsError(fn.address + ": cannot unbind from " + fn.driver + " (write " + file + ")", -r);
}

void pci_set_driver_override(Kernel& k, const PciFunction& fn, const std::string& driver) {
  std::string file = pci_sysfs_dir(fn.address) + "/driver_override";
  if (int r = k.write_file(file, driver); r < 0)
    throw OsError(fn.address + ": cannot set driver_override to " + driver + " (write " + file +
                      ")",
                  -r);
}

void pci_bind_vfio(Kernel& k, const PciFunction& fn) {
  if (fn.driver == "vfio-pci") return;
  if (fn.iommu_group < 0)
    throw Error(fn.address + ": no IOMMU group, so VFIO cannot take it (enable the IOMMU: "
                "intel_iommu=on or amd_iommu=on)");
  pci_unbind(k, fn);
  pci_set_driver_override(k, fn, "vfio-pci");
  std::string file = "/sys/bus/pci/drivers/vfio-pci/bind";
  int r = k.write_file(file, fn.address);
  if (r == -ENOENT)
    throw OsError(fn.address + ": cannot bind to vfio-pci: the driver is not loaded "
                  "(modprobe vfio-pci)", ENOENT);
  if (r < 0) throw OsError(fn.address + ": cannot bind to vfio-pci (write " + file + ")", -r);
}

PciNames pci_names(uint16_t vendor, uint16_t device) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  // One libpci context for the process: pci.ids (1.3 MB) is parsed at the first lookup only.
  static Access names;
  static bool configured = false, database = false;
  if (!configured) {
    names.a->error = libpci_error;
    names.a->warning = libpci_quiet;
    names.a->debug = libpci_quiet;
    database = pci_load_name_list(names.a);  // each call reloads: once here
    configured = true;
  }
  PciNames n;
  n.database = database;
  if (!database) return n;
  char buf[256];
  // NO_NUMBERS: NULL for an ID the file lacks, not the ID printed back; NO_HWDB: the file only.
  const int flags = PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB;
  if (const char* v = pci_lookup_name(names.a, buf, sizeof buf, flags | PCI_LOOKUP_VENDOR, vendor))
    n.vendor = v;
  if (const char* d =
          pci_lookup_name(names.a, buf, sizeof buf, flags | PCI_LOOKUP_DEVICE, vendor, device))
    n.device = d;
  return n;
}

}  // namespace hcq::os
