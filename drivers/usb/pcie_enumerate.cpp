#include "usb/pcie_enumerate.hpp"

#include <linux/pci_regs.h>

#include <algorithm>
#include <map>
#include <thread>

namespace hcq::usb {

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t k4GiB = 1ull << 32;
constexpr uint16_t kDecode = PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

std::string range(uint64_t base, uint64_t size) {
  std::string out = "[";  // appended: GCC 12 -O3 -Wrestrict on "literal" + std::string
  out += hex(base);
  out += ", ";
  out += hex(base + size);
  out += ") ";
  out += os::byte_size(size);
  return out;
}

// The two kinds of memory BARs and bridge windows (PCI-to-PCI Bridge Architecture
// Specification 1.2, 3.2.5.8 and 3.2.5.9).
enum class Kind { Memory, Prefetchable };
const char* kind_name(Kind k) { return k == Kind::Memory ? "non-prefetchable" : "prefetchable"; }
Kind kind_of(const PcieBarInfo& b) {
  return b.prefetchable && b.is64 ? Kind::Prefetchable : Kind::Memory;
}

class Enumerator {
 public:
  Enumerator(PcieTransport& t, const EnumerateOptions& o) : t_(t), o_(o) {}

  PcieHierarchy run() {
    check_apertures();
    scan_bus(0, -1, false);
    if (o_.resize_bars) choose_bar_sizes();
    for (Kind k : {Kind::Memory, Kind::Prefetchable}) {
      const PcieAperture& a = aperture(k);
      const uint64_t end = place(-1, k, a.base, false);
      if (end - a.base > a.size)
        throw InvalidInput("PCIe enumeration: the BARs need " + hex(end - a.base) + " bytes of " +
                           kind_name(k) + " memory from " + hex(a.base) + "; the aperture has " +
                           hex(a.size));
      place(-1, k, a.base, true);
    }
    program();
    return std::move(h_);
  }

 private:
  PcieFunctionInfo& fn(int i) { return h_.functions[size_t(i)]; }
  const PcieAperture& aperture(Kind k) const {
    return k == Kind::Memory ? o_.memory : o_.prefetchable;
  }

  void check_apertures() {
    for (Kind k : {Kind::Memory, Kind::Prefetchable}) {
      const PcieAperture& a = aperture(k);
      if (a.base % kMiB || a.size % kMiB || a.base + a.size < a.base)
        throw InvalidInput("PCIe enumeration: the " + std::string(kind_name(k)) + " aperture " +
                           range(a.base, a.size) + " is not 1 MiB aligned (bridge windows are)");
    }
    if (o_.memory.base + o_.memory.size > k4GiB)
      throw InvalidInput("PCIe enumeration: the non-prefetchable aperture " +
                         range(o_.memory.base, o_.memory.size) +
                         " must lie below 4 GiB (a bridge's memory window has 32-bit addresses)");
  }

  // A configuration read, retried while the function answers CRS.
  uint32_t read(Bdf f, uint32_t offset, unsigned size) {
    for (unsigned retries = 0;; retries++) {
      try {
        return t_.config_read(f, offset, size);
      } catch (const PcieError& e) {
        if (e.status() != CompletionStatus::CRS) throw;
        if (retries == o_.crs_retries)
          throw PcieError(RequestKind::ConfigRead, f, offset, CompletionStatus::CRS,
                          "still not ready after " + std::to_string(retries) + " retries");
      }
      if (o_.crs_delay.count()) std::this_thread::sleep_for(o_.crs_delay);
    }
  }
  void write(Bdf f, uint32_t offset, unsigned size, uint32_t value) {
    t_.config_write(f, offset, size, value);
  }

  // ---- 1. the walk ----

  void scan_bus(uint8_t bus, int parent, bool only_device_0) {
    for (uint8_t dev = 0; dev < (only_device_0 ? 1 : 32); dev++) {
      for (uint8_t func = 0; func < 8; func++) {
        const Bdf f{bus, dev, func};
        uint32_t ids = 0;
        try {
          ids = read(f, PCI_VENDOR_ID, 4);
        } catch (const PcieError& e) {
          // Nothing there: the request is unsupported (a root port turns it into all ones).
          // A UR the transport explains (link down) is no empty slot.
          if (e.status() != CompletionStatus::UR || !e.detail().empty()) throw;
          ids = 0xffffffff;
        }
        if ((ids & 0xffff) == 0xffff || (ids & 0xffff) == 0) {
          if (func == 0) break;
          continue;
        }
        const uint8_t header = uint8_t(read(f, PCI_HEADER_TYPE, 1));
        probe(f, parent, ids, header);
        if (func == 0 && !(header & 0x80)) break;  // not multi-function
      }
    }
  }

  void probe(Bdf f, int parent, uint32_t ids, uint8_t header) {
    PcieFunctionInfo info;
    info.bdf = f;
    info.parent = parent;
    info.vendor = uint16_t(ids);
    info.device = uint16_t(ids >> 16);
    info.header_type = header & 0x7f;
    const uint32_t class_rev = read(f, PCI_CLASS_REVISION, 4);
    info.revision = uint8_t(class_rev);
    info.class_code = class_rev >> 8;
    info.bridge = info.header_type == PCI_HEADER_TYPE_BRIDGE;
    info.port = port_of(f);
    // Decode off while BARs are sized and moved (Linux __pci_read_base).
    const uint32_t command = read(f, PCI_COMMAND, 2);
    if (command & kDecode) write(f, PCI_COMMAND, 2, command & ~uint32_t(kDecode));
    const int index = int(h_.functions.size());
    h_.functions.push_back(std::move(info));
    if (fn(index).header_type == PCI_HEADER_TYPE_NORMAL) {
      size_bars(index);
      read_rebar(index);
    } else if (fn(index).bridge) {
      number_bridge(index);
    }
  }

  // The Device/Port Type of the PCIe capability (PCIe Base Specification 7.5.3.2), through
  // the capability list at 0x34 (at most 48 entries fit the 192 bytes after the header).
  os::PciPort port_of(Bdf f) {
    if (!(read(f, PCI_STATUS, 2) & PCI_STATUS_CAP_LIST)) return os::PciPort::None;
    uint32_t at = read(f, PCI_CAPABILITY_LIST, 1) & ~3u;
    for (int n = 0; at >= 0x40 && n < 48; n++) {
      const uint32_t header = read(f, at, 2);
      if ((header & 0xff) == PCI_CAP_ID_EXP)
        return os::pci_port_of((read(f, at + PCI_EXP_FLAGS, 2) & PCI_EXP_FLAGS_TYPE) >> 4);
      at = (header >> 8) & ~3u;
    }
    return os::PciPort::None;
  }

  void number_bridge(int index) {
    const Bdf f = fn(index).bdf;
    const unsigned secondary = next_bus_ + 1;
    if (secondary > o_.last_bus)
      throw InvalidInput("PCIe enumeration: bridge " + to_string(f) + " needs bus " +
                         std::to_string(secondary) + ", beyond the last bus " +
                         std::to_string(o_.last_bus));
    next_bus_ = secondary;
    // Subordinate at the last bus while the buses below are scanned, so the bridge passes
    // their requests on; the real one once they are known.
    const uint32_t latency = read(f, PCI_PRIMARY_BUS, 4) & 0xff000000u;
    auto buses = [&](unsigned subordinate) {
      return latency | subordinate << 16 | secondary << 8 | f.bus;
    };
    write(f, PCI_PRIMARY_BUS, 4, buses(o_.last_bus));
    const bool one_device = fn(index).port == os::PciPort::RootPort ||
                            fn(index).port == os::PciPort::DownstreamPort;
    scan_bus(uint8_t(secondary), index, one_device);
    write(f, PCI_PRIMARY_BUS, 4, buses(next_bus_));
    expect(f, PCI_PRIMARY_BUS, buses(next_bus_), "bus numbers");
    fn(index).primary = f.bus;
    fn(index).secondary = uint8_t(secondary);
    fn(index).subordinate = uint8_t(next_bus_);
  }

  // ---- 2. BARs and Resizable BAR ----

  // Writes all ones to the BAR (and its upper half) and reads the size back; the BAR keeps
  // what it held before.
  uint64_t size_of(Bdf f, int bar, bool io, bool is64) {
    const uint32_t at = PCI_BASE_ADDRESS_0 + 4 * uint32_t(bar);
    const uint32_t low = read(f, at, 4);
    write(f, at, 4, 0xffffffff);
    uint64_t mask = read(f, at, 4) & (io ? PCI_BASE_ADDRESS_IO_MASK : PCI_BASE_ADDRESS_MEM_MASK);
    write(f, at, 4, low);
    if (is64) {
      const uint32_t high = read(f, at + 4, 4);
      write(f, at + 4, 4, 0xffffffff);
      mask |= uint64_t(read(f, at + 4, 4)) << 32;
      write(f, at + 4, 4, high);
    } else if (mask) {
      // A 32-bit BAR's mask (a 16-bit I/O BAR's: upper half 0) sets the bits above it.
      mask |= io && !(mask >> 16) ? ~0xffffull : ~0xffffffffull;
    }
    // The lowest writable bit is the size the BAR decodes, whatever bits above it are stuck
    // (Linux drivers/pci/probe.c pci_size: "the lowest of them" gives the decode size); no
    // bit sticks: the BAR is not implemented.
    return mask & (~mask + 1);
  }

  void size_bars(int index) {
    const Bdf f = fn(index).bdf;
    for (int i = 0; i < 6; i++) {
      const uint32_t reg = read(f, PCI_BASE_ADDRESS_0 + 4 * uint32_t(i), 4);
      PcieBarInfo b;
      b.index = i;
      b.io = reg & PCI_BASE_ADDRESS_SPACE_IO;
      b.is64 = !b.io && (reg & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64;
      b.prefetchable = !b.io && (reg & PCI_BASE_ADDRESS_MEM_PREFETCH);
      if (b.is64 && i == 5)
        throw InvalidInput("PCIe enumeration: BAR5 of " + to_string(f) +
                           " says it is 64-bit, but no BAR follows it");
      b.size = b.size_before = size_of(f, i, b.io, b.is64);
      if (b.size) fn(index).bars.push_back(b);
      if (b.is64) i++;
    }
  }

  // The Resizable BAR extended capability (PCIe Base Specification 7.8.6; Linux pci_regs.h
  // PCI_REBAR_*): capability register bits 31:4 = sizes offered (bit n: 1 MiB << (n - 4)),
  // control bits 2:0 the BAR, 7:5 how many BARs (first entry), 13:8 the size (1 MiB << n).
  // Linux 6.1's pci_regs.h masks only bits 23:4 and 12:8; later versions and the PCIe 6.0
  // layout take the wider fields used here.
  void read_rebar(int index) {
    const Bdf f = fn(index).bdf;
    const uint32_t at = find_extended_capability(f, PCI_EXT_CAP_ID_REBAR);
    if (!at) return;
    const uint32_t entries =
        (read(f, at + PCI_REBAR_CTRL, 4) & PCI_REBAR_CTRL_NBAR_MASK) >> PCI_REBAR_CTRL_NBAR_SHIFT;
    for (uint32_t e = 0; e < entries; e++) {
      const uint32_t cap = read(f, at + PCI_REBAR_CAP + 8 * e, 4);
      const uint32_t ctrl = read(f, at + PCI_REBAR_CTRL + 8 * e, 4);
      os::PciResizableBar r;
      r.bar = int(ctrl & PCI_REBAR_CTRL_BAR_IDX);
      // One entry per BAR ("BAR Index", 7.8.6): a second would describe a BAR the first may
      // already have resized, with sizes it need not offer.
      const auto& seen = fn(index).resizable_bars;
      for (size_t k = 0; k < seen.size(); k++)
        if (seen[k].bar == r.bar)
          throw InvalidInput("PCIe enumeration: " + to_string(f) +
                             ": the Resizable BAR capability names BAR" + std::to_string(r.bar) +
                             " in entries " + std::to_string(k) + " and " + std::to_string(e) +
                             " (one entry per BAR)");
      r.current = kMiB << (ctrl >> PCI_REBAR_CTRL_BAR_SHIFT & 0x3f);
      for (unsigned bit = 4; bit < 32; bit++)
        if (cap >> bit & 1) r.supported.push_back(kMiB << (bit - 4));
      fn(index).resizable_bars.push_back(std::move(r));
      rebar_at_[{index, fn(index).resizable_bars.back().bar}] = at + PCI_REBAR_CTRL + 8 * e;
    }
  }

  uint32_t find_extended_capability(Bdf f, uint16_t id) {
    uint32_t at = 0x100;
    for (int n = 0; at >= 0x100 && at < 0x1000 && n < (0x1000 - 0x100) / 4; n++) {
      const uint32_t header = read(f, at, 4);
      if (header == 0 || header == 0xffffffff) return 0;
      if ((header & 0xffff) == id) return at;
      at = (header >> 20) & ~3u;
    }
    return 0;
  }

  // ---- 3. resizing ----

  PcieBarInfo* bar_of(int index, int bar) {
    for (auto& b : fn(index).bars)
      if (b.index == bar) return &b;
    return nullptr;
  }

  bool fits() {
    for (Kind k : {Kind::Memory, Kind::Prefetchable}) {
      const PcieAperture& a = aperture(k);
      if (place(-1, k, a.base, false) - a.base > a.size) return false;
    }
    return true;
  }

  void choose_bar_sizes() {
    for (int i = 0; i < int(h_.functions.size()); i++) {
      for (auto& r : fn(i).resizable_bars) {
        PcieBarInfo* b = bar_of(i, r.bar);
        if (!b || b->io) continue;
        const uint64_t before = b->size;
        uint64_t chosen = before;
        for (auto s = r.supported.rbegin(); s != r.supported.rend(); ++s) {
          b->size = *s;
          if (fits()) {
            chosen = *s;
            break;
          }
        }
        b->size = chosen;
        // Only a size the capability offers is written (when none fits, the BAR keeps what it
        // decodes, which need not be an offered size).
        const bool offered =
            std::find(r.supported.begin(), r.supported.end(), chosen) != r.supported.end();
        if (chosen != r.current && offered) resize(i, r, *b);
      }
    }
  }

  // Linux rebar.c pci_rebar_set_size: the size field of the BAR's control register, with
  // decode off; then the BAR is sized again to see the change.
  void resize(int index, os::PciResizableBar& r, PcieBarInfo& b) {
    const Bdf f = fn(index).bdf;
    const uint32_t at = rebar_at_[{index, r.bar}];
    const uint32_t ctrl = read(f, at, 4);
    const uint32_t n = uint32_t(__builtin_ctzll(b.size / kMiB));
    write(f, at, 4, (ctrl & ~(0x3fu << PCI_REBAR_CTRL_BAR_SHIFT)) | n << PCI_REBAR_CTRL_BAR_SHIFT);
    const uint64_t now = size_of(f, b.index, b.io, b.is64);
    if (now != b.size)
      throw InvalidInput("PCIe enumeration: BAR" + std::to_string(b.index) + " of " +
                         to_string(f) + " is " + os::byte_size(now) + " after resizing it to " +
                         os::byte_size(b.size) + " (Resizable BAR control " + hex(read(f, at, 4)) +
                         ")");
    r.current = b.size;
  }

  // ---- 4. placement ----

  // What a bridge's window of kind k needs: its size (1 MiB granular) and alignment.
  struct Need {
    uint64_t size = 0, align = kMiB;
  };
  Need need(int bridge, Kind k) {
    Need n;
    const uint64_t end = place(bridge, k, 0, false, &n.align);
    n.size = align_up(end, kMiB);
    return n;
  }

  // Lays out what sits below `parent` (-1: the root bus) from `base`, largest alignment first
  // so power-of-two BARs pack without gaps; returns the end. `commit` records the addresses
  // and windows. `max_align`, when given, receives the largest alignment placed.
  uint64_t place(int parent, Kind k, uint64_t base, bool commit, uint64_t* max_align = nullptr) {
    struct Item {
      uint64_t size, align;
      int function, bar;  // bar -1: a bridge window
    };
    std::vector<Item> items;
    for (int i = 0; i < int(h_.functions.size()); i++) {
      if (fn(i).parent != parent) continue;
      if (fn(i).bridge) {
        const Need n = need(i, k);
        if (n.size) items.push_back({n.size, n.align, i, -1});
        continue;
      }
      for (auto& b : fn(i).bars)
        if (!b.io && kind_of(b) == k) items.push_back({b.size, b.size, i, b.index});
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.align > b.align; });
    uint64_t at = base;
    for (const Item& it : items) {
      at = align_up(at, it.align);
      if (max_align) *max_align = std::max(*max_align, it.align);
      if (commit) {
        if (it.bar < 0) {
          (k == Kind::Memory ? fn(it.function).memory : fn(it.function).prefetchable) = {at, it.size};
          place(it.function, k, at, true);
        } else {
          PcieBarInfo& b = *bar_of(it.function, it.bar);
          b.address = at;
          b.assigned = true;
        }
      }
      at += it.size;
    }
    return at;
  }

  // ---- 5. programming ----

  // Reads a register back after writing it: every write is checked.
  void expect(Bdf f, uint32_t offset, uint32_t value, const char* what) {
    const uint32_t got = read(f, offset, 4);
    if (got != value)
      throw InvalidInput("PCIe enumeration: " + to_string(f) + " " + what + " (+" + hex(offset) +
                         ") read " + hex(got) + " after writing " + hex(value));
  }

  void program() {
    for (auto& info : h_.functions) {
      const Bdf f = info.bdf;
      if (info.bridge) {
        // Memory base/limit: address bits 31:20 in bits 15:4 of each half; a closed window
        // has its base above its limit (Linux pci_setup_bridge_mmio writes 0x0000fff0).
        uint32_t mem = 0x0000fff0;
        if (info.memory.size)
          mem = uint32_t(info.memory.base >> 16 & 0xfff0) |
                uint32_t((info.memory.base + info.memory.size - 1) >> 16 & 0xfff0) << 16;
        write(f, PCI_MEMORY_BASE, 4, mem);
        expect(f, PCI_MEMORY_BASE, mem, "memory window");
        const uint32_t type = read(f, PCI_PREF_MEMORY_BASE, 4) & 0x000f000f;
        uint32_t pref = 0x0000fff0, upper_base = 0, upper_limit = 0;
        if (info.prefetchable.size) {
          const uint64_t last = info.prefetchable.base + info.prefetchable.size - 1;
          if ((type & 0xf) != PCI_PREF_RANGE_TYPE_64 && last >= k4GiB)
            throw InvalidInput("PCIe enumeration: bridge " + to_string(f) +
                               " has a 32-bit prefetchable window; it cannot reach " +
                               range(info.prefetchable.base, info.prefetchable.size));
          pref = uint32_t(info.prefetchable.base >> 16 & 0xfff0) | uint32_t(last >> 16 & 0xfff0) << 16;
          upper_base = uint32_t(info.prefetchable.base >> 32);
          upper_limit = uint32_t(last >> 32);
        }
        write(f, PCI_PREF_MEMORY_BASE, 4, pref);
        expect(f, PCI_PREF_MEMORY_BASE, pref | type, "prefetchable window");
        if ((type & 0xf) == PCI_PREF_RANGE_TYPE_64) {
          write(f, PCI_PREF_BASE_UPPER32, 4, upper_base);
          write(f, PCI_PREF_LIMIT_UPPER32, 4, upper_limit);
          expect(f, PCI_PREF_BASE_UPPER32, upper_base, "prefetchable window base, upper half");
          expect(f, PCI_PREF_LIMIT_UPPER32, upper_limit, "prefetchable window limit, upper half");
        }
      }
      bool memory_bars = false;
      for (auto& b : info.bars) {
        if (!b.assigned) continue;
        memory_bars = true;
        const uint32_t at = PCI_BASE_ADDRESS_0 + 4 * uint32_t(b.index);
        const uint32_t type = read(f, at, 4) & 0xf;
        write(f, at, 4, uint32_t(b.address));
        expect(f, at, uint32_t(b.address) | type, ("BAR" + std::to_string(b.index)).c_str());
        if (b.is64) {
          write(f, at + 4, 4, uint32_t(b.address >> 32));
          expect(f, at + 4, uint32_t(b.address >> 32),
                 ("BAR" + std::to_string(b.index) + " upper half").c_str());
        }
      }
      if (info.bridge || memory_bars) {
        const uint32_t command = read(f, PCI_COMMAND, 2);
        const uint32_t on = (command & ~uint32_t(PCI_COMMAND_IO)) | PCI_COMMAND_MEMORY |
                            PCI_COMMAND_MASTER;
        write(f, PCI_COMMAND, 2, on);
        if ((read(f, PCI_COMMAND, 2) & kDecode) != (on & kDecode))
          throw InvalidInput("PCIe enumeration: " + to_string(f) +
                             " did not turn memory decode and bus mastering on (command " +
                             hex(read(f, PCI_COMMAND, 2)) + ")");
      }
    }
  }

  PcieTransport& t_;
  const EnumerateOptions& o_;
  PcieHierarchy h_;
  unsigned next_bus_ = 0;
  std::map<std::pair<int, int>, uint32_t> rebar_at_;  // (function, BAR) -> control register
};

}  // namespace

const PcieBarInfo* PcieFunctionInfo::bar(int index) const {
  for (auto& b : bars)
    if (b.index == index) return &b;
  return nullptr;
}

const PcieFunctionInfo* PcieHierarchy::find(Bdf f) const {
  for (auto& info : functions)
    if (info.bdf == f) return &info;
  return nullptr;
}

std::string PcieHierarchy::text() const {
  std::string out;
  char buf[64];
  for (auto& info : functions) {
    int depth = 0;
    for (int p = info.parent; p >= 0; p = functions[size_t(p)].parent) depth++;
    const std::string indent(2 * size_t(depth), ' ');
    std::snprintf(buf, sizeof buf, "%04x:%04x class %06x", info.vendor, info.device,
                  info.class_code);
    out += indent + to_string(info.bdf) + " " + buf + ", " + os::pci_port_name(info.port);
    if (info.bridge) {
      std::snprintf(buf, sizeof buf, "buses %02x/%02x-%02x", info.primary, info.secondary,
                    info.subordinate);
      out += std::string(": ") + buf;
      auto window = [&](const char* name, const PcieWindow& w) {
        out += std::string(", ") + name + " " + (w.size ? range(w.base, w.size) : "closed");
      };
      window("memory", info.memory);
      window("prefetchable", info.prefetchable);
    }
    out += "\n";
    for (auto& b : info.bars) {
      out += indent + "  BAR" + std::to_string(b.index) + " ";
      if (b.io) {
        out += "I/O " + os::byte_size(b.size) + ", not assigned (no I/O space over this transport)\n";
        continue;
      }
      out += range(b.address, b.size) + ", " + (b.is64 ? "64-bit" : "32-bit") + ", " +
             (b.prefetchable ? "prefetchable" : "non-prefetchable");
      if (b.size != b.size_before) out += " (resized from " + os::byte_size(b.size_before) + ")";
      out += "\n";
    }
  }
  return out;
}

PcieHierarchy enumerate_pcie(PcieTransport& transport, const EnumerateOptions& options) {
  return Enumerator(transport, options).run();
}

}  // namespace hcq::usb
