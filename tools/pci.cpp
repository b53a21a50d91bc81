#include "pci.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>

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
  if (f.driver == "vfio-pci") return "VFIO";
  const PciSupport* s = support_of(f.vendor);
  if (!s) return "none: hcq has no driver for vendor " + hex_n(f.vendor, 4) + " GPUs";
  for (auto& [driver, path] : s->paths)
    if (f.driver == driver) return path;
  return "none: " + (f.driver.empty() ? std::string("no driver bound") : "bound to " + f.driver) +
         "; " + s->how;
}

std::string bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, u++;
  return std::to_string(b) + " " + units[u];
}

std::string link_text(unsigned speed, unsigned width) {
  return os::pcie_speed(speed) + " x" + std::to_string(width);
}

std::string bar_text(const os::PciBar& b) {
  if (b.io) return "I/O ports at 0x" + hex_n(b.base, 4) + ", " + bytes(b.size);
  return "0x" + hex_n(b.base, 12) + ", " + bytes(b.size) + ", " + (b.is64 ? "64-bit" : "32-bit") +
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
    std::printf("resizable BAR  BAR%d at %s; supports %s to %s\n", r.bar, bytes(r.current).c_str(),
                r.supported.empty() ? "?" : bytes(r.supported.front()).c_str(),
                r.supported.empty() ? "?" : bytes(r.supported.back()).c_str());
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

int cmd_reg(const RegArgs& args) {
  const bool write = args.action == "write";
  if (write && !args.value) throw UsageError("reg: write needs a VALUE");
  if (!write && args.value) throw UsageError("reg: read takes no VALUE");
  const std::string& target = args.target;
  int bar = args.bar.value_or(-1);
  Bus bus;
  os::PciFunction f = os::pci_function(*bus.kernel, args.device);
  if (!f.is_gpu())
    throw InvalidInput(f.address + " is not a GPU (class " + class_of(f.class_code) +
                       "); hcq reg maps GPU register BARs only");
  const PciSupport* s = support_of(f.vendor);
  // A name picks its register's BAR; an offset goes to --bar, else the vendor's register BAR.
  std::string name;
  uint64_t offset = 0;
  const PciSupport::Register* named = nullptr;
  if (s)
    for (auto& r : s->registers)
      if (r.name == target) named = &r;
  if (named) {
    name = named->name;
    offset = named->offset;
    if (bar < 0) bar = named->bar;
  } else {
    if (target.find_first_not_of("0123456789abcdefABCDEFx") != std::string::npos) {
      std::string known;
      if (s)
        for (auto& r : s->registers) known += (known.empty() ? "" : ", ") + r.name;
      throw InvalidInput("unknown register " + target + " for " + f.address +
                         (known.empty() ? " (give an offset)" : " (known: " + known + ")"));
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
    if (bar < 0) bar = s && !s->registers.empty() ? s->registers.front().bar : 0;
    if (s)
      for (auto& r : s->registers)
        if (r.bar == bar && r.offset == offset) name = r.name;
  }
  const std::string where = f.address + " BAR" + std::to_string(bar) + "+" + hex(offset) +
                            (name.empty() ? "" : " " + name);
  uint32_t value = 0;
  if (write) {
    value = *args.value;
    if (!args.force)
      throw InvalidInput("refusing to write " + hex(value) + " to " + where +
                         " without --force (an MMIO write can hang the GPU or the machine)");
  }
  os::PciBarMap map(bus.kernel, f, bar);
  if (write) {
    map.write32(offset, value);
    std::printf("%s <- %s (reads back %s)\n", where.c_str(), hex(value).c_str(),
                hex(map.read32(offset)).c_str());
    return 0;
  }
  value = map.read32(offset);
  std::string about = s && s->describe && !name.empty() ? s->describe(name, value) : "";
  std::printf("%s = %s%s%s\n", where.c_str(), hex(value).c_str(), about.empty() ? "" : "  ",
              about.c_str());
  return 0;
}

}  // namespace hcq::tools
