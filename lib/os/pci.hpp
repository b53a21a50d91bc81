// The PCI bus as a person bringing up a GPU asks about it: which functions are there, with
// which BARs, resizable BARs, PCIe link, kernel driver, IOMMU group and chain of upstream
// bridges. Enumeration reads through libpci pointed at the kernel's sysfs root, so an
// emulated kernel's tree is read by the same code as /sys. Binding control writes sysfs
// attributes through the kernel boundary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "os/kernel.hpp"

namespace hcq::os {

struct PciBar {
  int index = 0;
  uint64_t base = 0, size = 0;
  bool io = false, is64 = false, prefetchable = false;
};

// One BAR of the Resizable BAR extended capability.
struct PciResizableBar {
  int bar = 0;
  uint64_t current = 0;              // bytes
  std::vector<uint64_t> supported;   // bytes, ascending
};

// Link speeds are PCIe generations: 1 = 2.5 GT/s, 2 = 5, 3 = 8, 4 = 16, 5 = 32, 6 = 64.
struct PciLink {
  unsigned max_speed = 0, max_width = 0;  // this function's Link Capabilities
  unsigned speed = 0, width = 0;          // Link Status: what the link trained to
  // The upstream port's Link Capabilities; 0 when there is no PCIe port above.
  unsigned port_max_speed = 0, port_max_width = 0;

  // What both ends support: the link should have trained to this.
  unsigned capable_speed() const;
  unsigned capable_width() const;
  bool degraded() const { return speed < capable_speed() || width < capable_width(); }
};

// "256 MiB", "2 MiB", "256 B": a BAR's or window's size in the largest binary unit that
// divides it exactly.
std::string byte_size(uint64_t bytes);

// "16 GT/s" for generation 4; "unknown" outside 1..6.
std::string pcie_speed(unsigned generation);

// PCIe Device/Port Type (PCIe Capabilities register); None for conventional PCI.
enum class PciPort { None, Endpoint, LegacyEndpoint, RootPort, UpstreamPort, DownstreamPort,
                     PcieToPciBridge, RootComplexEndpoint, Other };
const char* pci_port_name(PciPort p);
// The port of a PCIe Capabilities register's Device/Port Type field (bits 7:4).
PciPort pci_port_of(unsigned type);

struct PciFunction {
  std::string address;  // "0000:03:00.0"
  uint16_t vendor = 0, device = 0, subsystem_vendor = 0, subsystem_device = 0;
  uint8_t revision = 0;
  uint32_t class_code = 0;  // base class << 16 | subclass << 8 | programming interface
  std::vector<PciBar> bars;  // BARs that decode a range, by index
  std::vector<PciResizableBar> resizable_bars;
  PciPort port = PciPort::None;
  std::optional<PciLink> link;  // PCIe functions with a link
  bool thunderbolt = false;     // part of a Thunderbolt controller (Intel Thunderbolt VSEC)
  std::string driver;           // the bound kernel driver; empty when none
  int iommu_group = -1;         // -1: none (no IOMMU)
  int numa_node = -1;
  std::vector<std::string> upstream;  // bridges up to the root port, nearest first

  bool is_gpu() const { return class_code >> 16 == 0x03; }  // display controller
  const PciBar* bar(int index) const;
};

// Every function the kernel shows, by address; empty where its sysfs root has no PCI bus.
std::vector<PciFunction> pci_functions(Kernel& k);
// One function by address ("0000:03:00.0", or "03:00.0" in domain 0). Throws InvalidInput
// naming the address when there is no such function.
PciFunction pci_function(Kernel& k, const std::string& address);
// "/sys/bus/pci/devices/<address>": where a function's attributes are, through Kernel.
std::string pci_sysfs_dir(const std::string& address);

// Binding control. Each throws OsError naming the function, the driver and the sysfs file
// when the kernel refuses (EACCES: not root; ENODEV: the driver does not take the device).
void pci_unbind(Kernel& k, const PciFunction& fn);  // nothing to do when unbound
void pci_set_driver_override(Kernel& k, const PciFunction& fn, const std::string& driver);
// Unbinds, overrides to vfio-pci and binds: the function is then openable through VFIO.
void pci_bind_vfio(Kernel& k, const PciFunction& fn);

// Names from the PCI ID database users know (pci.ids, as lspci shows them), through libpci's
// pci_lookup_name. udev's hwdb is not asked, so the names are the file's whatever the host.
struct PciNames {
  bool database = false;  // false: no database to ask (pci.ids is not installed)
  std::string vendor;     // "Advanced Micro Devices, Inc. [AMD/ATI]"; empty when not listed
  std::string device;     // "Navi 31 [Radeon RX 7900 XT/7900 XTX]"; empty when not listed
};
// May be called from several threads: the database is loaded once and lookups take turns.
PciNames pci_names(uint16_t vendor, uint16_t device);

}  // namespace hcq::os
