#include "pci.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "emulated_pci.hpp"
#include "json.hpp"
#include "numbers.hpp"
#include "usage.hpp"
#include "os/pci_bar.hpp"

namespace hcq::tools {
namespace {

// The bus the PCI commands look at: the real one, or with HCQ_EMULATED_PCI=1 the emulated
// system of drivers/emulated_pci.hpp.
struct Bus {
  std::unique_ptr<os::EmulatedPciBus> emulated;
  std::shared_ptr<os::Kernel> kernel;
  Bus() {
    const char* e = std::getenv("HCQ_EMULATED_PCI");
    if (e && std::string(e) == "1") {
      emulated = emulated_pci_system();
      kernel = emulated->kernel();
    } else {
      kernel = os::real_kernel();
    }
  }
};

const PciSupport* support_of(uint16_t vendor) {
  for (auto& d : builtin_drivers())
    if (d.pci.vendor && d.pci.vendor == vendor) return &d.pci;
  return nullptr;
}

std::string hex_n(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

std::string id_of(uint16_t vendor, uint16_t device) {
  return hex_n(vendor, 4) + ":" + hex_n(device, 4);
}

std::string class_of(uint32_t c) { return "0x" + hex_n(c, 6); }

// Which hcq path opens the function: a driver's own, VFIO, or none and why.
std::string open_path(const os::PciFunction& f) {
  if (!f.is_gpu()) return "not a GPU";
  const PciSupport* s = support_of(f.vendor);
  const std::string boot = s && s->boot_name ? s->boot_name(f.address, f.device) : "";
  if (f.driver == "vfio-pci")
    return boot.empty() ? "VFIO" : "VFIO: hcq boots it itself (" + boot + ")";
  if (!s) return "none: hcq has no driver for vendor " + hex_n(f.vendor, 4) + " GPUs";
  if (f.driver.empty() && !boot.empty())
    return "none: no driver bound; hcq boots it itself once it is on vfio-pci (hcq pci " +
           f.address + " --bind-vfio, then " + boot + ")";
  for (auto& [driver, path] : s->paths)
    if (f.driver == driver) return path;
  return "none: " + (f.driver.empty() ? std::string("no driver bound") : "bound to " + f.driver) +
         "; " + s->how;
}

std::string link_text(unsigned speed, unsigned width) {
  return os::pcie_speed(speed) + " x" + std::to_string(width);
}

std::string bar_text(const os::PciBar& b) {
  if (b.io) return "I/O ports at 0x" + hex_n(b.base, 4) + ", " + os::byte_size(b.size);
  return "0x" + hex_n(b.base, 12) + ", " + os::byte_size(b.size) + ", " +
         (b.is64 ? "64-bit" : "32-bit") +
         ", " + (b.prefetchable ? "prefetchable" : "non-prefetchable");
}

// A name from the PCI ID database, null when it has none.
Json name_json(const std::string& name) { return name.empty() ? Json(nullptr) : Json(name); }

// "NVIDIA Corporation GH100[H100 SXM5 80GB]", as lspci names a function.
std::string name_line(const os::PciFunction& f) {
  const os::PciNames n = os::pci_names(f.vendor, f.device);
  if (!n.database) return "unknown (the PCI ID database, pci.ids, is not installed)";
  if (n.vendor.empty()) return "unknown (not in the PCI ID database)";
  return n.device.empty() ? n.vendor + ", device not in the PCI ID database"
                          : n.vendor + " " + n.device;
}

std::map<std::string, os::PciFunction> by_address(const std::vector<os::PciFunction>& all) {
  std::map<std::string, os::PciFunction> m;
  for (auto& f : all) m[f.address] = f;
  return m;
}

Json pci_json(const os::PciFunction& f, const std::map<std::string, os::PciFunction>& all) {
  auto or_null = [](bool present, const auto& v) { return present ? Json(v) : Json(nullptr); };
  Json j{{"address", f.address},
         {"vendor", hex(f.vendor)},
         {"device", hex(f.device)},
         {"subsystem_vendor", hex(f.subsystem_vendor)},
         {"subsystem_device", hex(f.subsystem_device)},
         {"revision", hex(f.revision)},
         {"vendor_name", name_json(os::pci_names(f.vendor, f.device).vendor)},
         {"device_name", name_json(os::pci_names(f.vendor, f.device).device)},
         {"class", class_of(f.class_code)},
         {"gpu", f.is_gpu()},
         {"driver", or_null(!f.driver.empty(), f.driver)},
         {"hcq_path", open_path(f)},
         {"iommu_group", or_null(f.iommu_group >= 0, f.iommu_group)},
         {"numa_node", f.numa_node}};
  Json& bars = j["bars"] = Json::array();
  for (const auto& b : f.bars)
    bars.push_back({{"index", b.index}, {"base", hex(b.base)}, {"size", b.size}, {"io", b.io},
                    {"64bit", b.is64}, {"prefetchable", b.prefetchable}});
  Json& resizable = j["resizable_bars"] = Json::array();
  for (const auto& r : f.resizable_bars)
    resizable.push_back({{"bar", r.bar}, {"current", r.current}, {"supported", r.supported}});
  j["port"] = os::pci_port_name(f.port);
  j["link"] = nullptr;
  if (f.link) {
    const auto& l = *f.link;
    j["link"] = {{"speed", os::pcie_speed(l.speed)},
                 {"width", l.width},
                 {"max_speed", os::pcie_speed(l.max_speed)},
                 {"max_width", l.max_width},
                 {"capable_speed", os::pcie_speed(l.capable_speed())},
                 {"capable_width", l.capable_width()},
                 {"degraded", l.degraded()}};
  }
  j["thunderbolt"] = f.thunderbolt;
  Json& upstream = j["upstream"] = Json::array();
  for (const auto& address : f.upstream) {
    Json u{{"address", address}};
    if (auto it = all.find(address); it != all.end()) {
      u["port"] = os::pci_port_name(it->second.port);
      u["id"] = id_of(it->second.vendor, it->second.device);
      u["thunderbolt"] = it->second.thunderbolt;
    }
    upstream.push_back(u);
  }
  return j;
}

void print_pci(const os::PciFunction& f, const std::map<std::string, os::PciFunction>& all) {
  const PciSupport* s = support_of(f.vendor);
  std::printf("function       %s\n", f.address.c_str());
  std::printf("identity       %s%s%s, subsystem %s, revision %s\n", id_of(f.vendor, f.device).c_str(),
              s ? " " : "", s ? s->vendor_name.c_str() : "",
              id_of(f.subsystem_vendor, f.subsystem_device).c_str(), hex_n(f.revision, 2).c_str());
  std::printf("name           %s\n", name_line(f).c_str());
  std::printf("class          %s (%s)\n", class_of(f.class_code).c_str(),
              f.is_gpu() ? "GPU" : "not a GPU");
  std::printf("driver         %s\n", f.driver.empty() ? "none" : f.driver.c_str());
  std::printf("hcq path       %s\n", open_path(f).c_str());
  std::printf("IOMMU group    %s\n", f.iommu_group < 0 ? "none (no IOMMU: VFIO cannot take it)"
                                                       : std::to_string(f.iommu_group).c_str());
  std::printf("NUMA node      %d\n", f.numa_node);
  for (auto& b : f.bars) std::printf("BAR%d           %s\n", b.index, bar_text(b).c_str());
  if (f.bars.empty()) std::printf("BARs           none\n");
  for (auto& r : f.resizable_bars)
    std::printf("resizable BAR  BAR%d at %s; supports %s to %s\n", r.bar, os::byte_size(r.current).c_str(),
                r.supported.empty() ? "?" : os::byte_size(r.supported.front()).c_str(),
                r.supported.empty() ? "?" : os::byte_size(r.supported.back()).c_str());
  std::printf("PCIe           %s%s\n", os::pci_port_name(f.port), f.thunderbolt ? ", Thunderbolt" : "");
  if (f.link) {
    const auto& l = *f.link;
    std::printf("link           %s; this end supports %s", link_text(l.speed, l.width).c_str(),
                link_text(l.max_speed, l.max_width).c_str());
    if (l.port_max_speed) std::printf(", the upstream port %s", link_text(l.port_max_speed, l.port_max_width).c_str());
    std::printf("\n");
    if (l.degraded())
      std::printf("warning        link degraded: trained at %s, both ends support %s\n",
                  link_text(l.speed, l.width).c_str(),
                  link_text(l.capable_speed(), l.capable_width()).c_str());
  }
  for (size_t i = 0; i < f.upstream.size(); i++) {
    auto it = all.find(f.upstream[i]);
    std::string line = f.upstream[i];
    if (it != all.end()) {
      const auto& u = it->second;
      line += "  " + id_of(u.vendor, u.device) + "  " + os::pci_port_name(u.port);
      if (u.thunderbolt) line += ", Thunderbolt";
      if (u.link) line += ", " + link_text(u.link->speed, u.link->width);
    }
    std::printf("%s %s\n", i ? "              " : "upstream      ", line.c_str());
  }
}

// What --unbind and --bind-vfio take without --force: a display controller (base class
// 0x03) or a processing accelerator (0x12, how some compute GPUs report). Anything else on
// the bus (a host bridge, the bridges a Thunderbolt eGPU hangs from, a NIC, the disk)
// unbound by a mistyped address can take the machine down.
bool gpu_class(const os::PciFunction& f) {
  return f.is_gpu() || f.class_code >> 16 == 0x12;
}

}  // namespace

int cmd_ls_pci(bool all) {
  Bus bus;
  auto fns = os::pci_functions(*bus.kernel);
  std::vector<std::pair<const os::PciFunction*, std::string>> shown;  // with its name
  size_t name_width = 4;
  bool database = true;
  for (auto& f : fns)
    if (all || f.is_gpu()) {
      const os::PciNames n = os::pci_names(f.vendor, f.device);
      database = n.database;
      shown.emplace_back(&f, n.device.empty() ? "-" : n.device);
      name_width = std::max(name_width, shown.back().second.size());
    }
  if (shown.empty()) {
    std::printf("\nno GPU on the PCI bus (%zu functions; hcq ls --all lists them)\n", fns.size());
    return 0;
  }
  std::printf("\n%-13s %-9s  %-8s  %-12s %-*s  %s\n", "PCI FUNCTION", "ID", "CLASS", "DRIVER",
              int(name_width), "NAME", "HCQ PATH");
  for (const auto& [f, name] : shown)
    std::printf("%-13s %-9s  %-8s  %-12s %-*s  %s\n", f->address.c_str(),
                id_of(f->vendor, f->device).c_str(), class_of(f->class_code).c_str(),
                f->driver.empty() ? "-" : f->driver.c_str(), int(name_width), name.c_str(),
                open_path(*f).c_str());
  if (!database) std::printf("(no names: the PCI ID database, pci.ids, is not installed)\n");
  return 0;
}

Json ls_pci_json(bool all) {
  Bus bus;
  Json list = Json::array();
  for (auto& f : os::pci_functions(*bus.kernel))
    if (all || f.is_gpu())
      list.push_back({{"address", f.address},
                      {"vendor", hex(f.vendor)},
                      {"device", hex(f.device)},
                      {"class", class_of(f.class_code)},
                      {"gpu", f.is_gpu()},
                      {"driver", f.driver.empty() ? Json(nullptr) : Json(f.driver)},
                      {"hcq_path", open_path(f)},
                      {"vendor_name", name_json(os::pci_names(f.vendor, f.device).vendor)},
                      {"device_name", name_json(os::pci_names(f.vendor, f.device).device)}});
  return list;
}

int cmd_pci(const PciArgs& args) {
  const std::string& address = args.device;
  const bool unbind = args.unbind, bind_vfio = args.bind_vfio, force = args.force;
  Bus bus;
  os::PciFunction f = os::pci_function(*bus.kernel, address);
  if (unbind || bind_vfio) {
    if (!force && !gpu_class(f))
      throw InvalidInput("refusing to " + std::string(bind_vfio ? "bind to vfio-pci " : "unbind ") +
                         f.address + " (class " + class_of(f.class_code) +
                         ", not a display controller or processing accelerator) without --force");
    if (bind_vfio) os::pci_bind_vfio(*bus.kernel, f);
    else os::pci_unbind(*bus.kernel, f);
    f = os::pci_function(*bus.kernel, address);
  }
  auto all = by_address(os::pci_functions(*bus.kernel));
  if (args.json) std::printf("%s\n", json_line(pci_json(f, all)).c_str());
  else print_pci(f, all);
  return 0;
}

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance, for suggesting a register name close to a mistyped one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) row[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

using Register = PciSupport::Register;

// Names close to `want` (upper case): one contains the other, or a few edits apart.
std::string close_names(const std::string& want, const std::vector<Register>& known) {
  std::string out;
  int n = 0;
  for (auto& r : known)
    if (n < 5 && (r.name.find(want) != std::string::npos || want.find(r.name) != std::string::npos ||
                  edit_distance(want, r.name) <= 3)) {
      out += n++ ? ", " : "";
      out += r.name;
    }
  return out;
}

int list_registers(const RegDevice& f, const std::vector<Register>& known,
                   const std::string& pattern) {
  std::vector<const Register*> shown;
  for (auto& r : known)
    if (r.name.find(upper(pattern)) != std::string::npos) shown.push_back(&r);
  if (known.empty())
    throw InvalidInput("hcq knows no registers of " + f.address + " (vendor " + hex_n(f.vendor, 4) +
                       "); read offsets");
  if (shown.empty())
    throw InvalidInput("no register of " + f.address + " matches '" + pattern + "' (hcq reg " +
                       f.address + " list shows all " + std::to_string(known.size()) + ")");
  // Readable ones by BAR and offset, then the ones refused by name.
  std::stable_sort(shown.begin(), shown.end(), [](const Register* a, const Register* b) {
    if (a->refused.empty() != b->refused.empty()) return a->refused.empty();
    return a->refused.empty() && (a->bar != b->bar ? a->bar < b->bar : a->offset < b->offset);
  });
  size_t width = 8;
  for (auto* r : shown) width = std::max(width, r->name.size());
  std::printf("%-*s  %-12s  %s\n", int(width), "REGISTER", "WHERE", "FIELDS");
  for (auto* r : shown) {
    if (!r->refused.empty()) {
      std::printf("%-*s  %-12s  refused by name: %s\n", int(width), r->name.c_str(), "-",
                  r->refused.c_str());
      continue;
    }
    std::string fields;
    for (auto& fl : r->fields) {
      if (!fields.empty()) fields += ' ';
      fields += fl.name;
    }
    const std::string where = "BAR" + std::to_string(r->bar) + "+" + hex(r->offset);
    std::printf("%-*s  %-12s  %s\n", int(width), r->name.c_str(), where.c_str(),
                fields.empty() ? "-" : fields.c_str());
  }
  return 0;
}

}  // namespace

// Checks the arguments that need no device: usage errors before any device is opened.
void check_reg_args(const RegArgs& args) {
  const bool write = args.action == "write", list = args.action == "list";
  if (!list && args.target.empty())
    throw UsageError("reg: " + args.action + " needs a REGISTER (a name, or an offset with 0x)");
  if (write && !args.value) throw UsageError("reg: write needs a VALUE");
  if (!write && args.value) throw UsageError("reg: " + args.action + " takes no VALUE");
  if (args.count && args.action != "read") throw UsageError("reg: --count is for read");
  if (args.json && args.action != "read") throw UsageError("reg: --json is for read");
}

int cmd_reg(const RegArgs& args) {
  check_reg_args(args);
  Bus bus;
  os::PciFunction f = os::pci_function(*bus.kernel, args.device);
  if (!f.is_gpu())
    throw InvalidInput(f.address + " is not a GPU (class " + class_of(f.class_code) +
                       "); hcq reg maps GPU register BARs only");
  RegDevice d;
  d.address = f.address;
  d.vendor = f.vendor;
  d.device = f.device;
  const PciSupport* s = support_of(f.vendor);
  d.known = s && s->registers ? s->registers(f.device) : std::vector<Register>();
  // Registers the GPU's own tables place (AMD's IP discovery) replace the same names.
  if (s && s->discovered_registers) {
    try {
      add_discovered(d, s->discovered_registers(bus.kernel, f));
    } catch (const Error& e) {
      d.undiscovered = e.what();
    }
  }
  d.open_bar = [&](int bar) -> std::unique_ptr<os::Mmio> {
    return std::make_unique<os::PciBarMap>(bus.kernel, f, bar);
  };
  return reg_on(args, d);
}

void add_discovered(RegDevice& d, std::vector<Register> found) {
  for (Register& r : found) {
    auto same = std::find_if(d.known.begin(), d.known.end(),
                             [&](const Register& k) { return k.name == r.name; });
    if (same != d.known.end()) *same = std::move(r);
    else d.known.push_back(std::move(r));
  }
}

int reg_on(const RegArgs& args, RegDevice& f) {
  const bool write = args.action == "write", list = args.action == "list";
  const std::string& target = args.target;
  int bar = args.bar.value_or(-1);
  const PciSupport* s = support_of(f.vendor);
  const std::vector<Register>& known = f.known;
  const std::string& undiscovered = f.undiscovered;
  if (list) return list_registers(f, known, target);

  // A name (any case) picks its register's BAR; an offset goes to --bar, else the vendor's
  // register BAR.
  std::string name;
  uint64_t offset = 0;
  const Register* named = nullptr;
  for (auto& r : known)
    if (r.name == upper(target)) named = &r;
  if (named) {
    if (!named->refused.empty())
      throw InvalidInput("refusing " + named->name + " on " + f.address + ": " + named->refused +
                         "; hcq does not poke a guessed address");
    name = named->name;
    offset = named->offset;
    if (bar < 0) bar = named->bar;
  } else {
    if (target.find_first_not_of("0123456789abcdefABCDEFx") != std::string::npos) {
      const std::string close = close_names(upper(target), known);
      throw UsageError("unknown register " + target + " for " + f.address +
                       (known.empty() ? " (hcq knows no registers of vendor " + hex_n(f.vendor, 4) +
                                            " GPUs: give an offset)"
                                      : (close.empty() ? "" : " (close: " + close + ")") +
                                            "; 'hcq reg " + f.address + " list' lists the " +
                                            std::to_string(known.size()) + " known") +
                       (undiscovered.empty()
                            ? ""
                            : "; the registers the GPU's IP discovery table places were not read: " +
                                  undiscovered));
    }
    // Offsets are hex by convention (datasheets, headers, this command's own output), so a
    // bare 140 is refused rather than read as decimal; one digit reads the same either way.
    if (target.size() > 1 && !has_hex_prefix(target)) {
      const size_t nz = target.find_first_not_of('0');
      throw UsageError("register offset '" + target + "' needs 0x: register offsets are hex (0x" +
                       target.substr(nz == std::string::npos ? target.size() - 1 : nz) + ")");
    }
    try {
      offset = parse_uint(target, UINT64_MAX, "register offset");
    } catch (const InvalidInput& e) {
      throw UsageError(e.what());
    }
    if (bar < 0) bar = s ? s->register_bar : 0;
  }
  // The register named at an offset of this BAR, if any (refused ones are never named).
  auto at = [&](uint64_t o) -> const Register* {
    for (auto& r : known)
      if (r.refused.empty() && r.bar == bar && r.offset == o) return &r;
    return nullptr;
  };
  auto where = [&](uint64_t o) {
    const Register* r = at(o);
    return f.address + " BAR" + std::to_string(bar) + "+" + hex(o) + (r ? std::string(" ") + r->name : std::string());
  };
  uint32_t value = 0;
  if (write) {
    value = *args.value;
    if (!args.force)
      throw InvalidInput("refusing to write " + hex(value) + " to " + where(offset) +
                         " without --force (an MMIO write can hang the GPU or the machine)");
  }
  const std::unique_ptr<os::Mmio> mapped = f.open_bar(bar);
  os::Mmio& map = *mapped;
  if (write) {
    map.write32(offset, value);
    std::printf("%s <- %s (reads back %s)\n", where(offset).c_str(), hex(value).c_str(),
                hex(map.read32(offset)).c_str());
    return 0;
  }
  const uint64_t count = args.count.value_or(1);
  if (offset < map.size() && offset + 4 * count > map.size())
    throw InvalidInput("--count " + std::to_string(count) + " from " + hex(offset) +
                       " reads past the end of BAR" + std::to_string(bar) + " of " + f.address +
                       " (" + hex(map.size()) + " bytes: at most " +
                       std::to_string((map.size() - offset) / 4) + " dwords from there)");
  for (uint64_t i = 0; i < count; i++) {
    const uint64_t o = offset + 4 * i;
    value = map.read32(o);
    const Register* r = at(o);
    if (args.json) {
      Json fields = Json::object();
      if (r)
        for (auto& fl : r->fields) fields[fl.name] = fl.get(value);
      std::printf("%s\n", json_line({{"address", f.address},
                                     {"bar", bar},
                                     {"offset", hex(o)},
                                     {"name", r ? Json(r->name) : Json(nullptr)},
                                     {"value", hex(value)},
                                     {"fields", fields}})
                              .c_str());
      continue;
    }
    std::string about = r && s->describe ? s->describe(r->name, value) : "";
    std::printf("%s = %s%s%s\n", where(o).c_str(), hex(value).c_str(), about.empty() ? "" : "  ",
                about.c_str());
    if (r)
      for (auto& fl : r->fields) std::printf("  %s = %u\n", fl.name.c_str(), fl.get(value));
  }
  return 0;
}

}  // namespace hcq::tools
