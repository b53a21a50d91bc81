#include "usb/emu/pcie_topology.hpp"

#include <linux/pci_regs.h>

#include <algorithm>
#include <cstring>

#include "usb/asm2464_protocol.hpp"

namespace hcq::usb::emu {

namespace {

constexpr uint32_t kHeaderDwords = 0x1000 / 4;
// Bits software may write in the headers (PCI Local Bus Specification 3.0 6.2, PCI-to-PCI
// Bridge Architecture Specification 1.2 3.2): command I/O, memory and bus master enables;
// cache line size; interrupt line. Bridges: primary/secondary/subordinate bus numbers, the
// memory and prefetchable windows (bits 31:20 of base and limit; the low nibbles are their
// read-only type: 64-bit for the prefetchable one), its upper 32 bits, and bridge control's
// parity, SERR and secondary bus reset bits. No I/O window and no expansion ROM: those read 0.
struct Writable {
  uint32_t offset, mask;
};
constexpr Writable kCommonWritable[] = {
    {PCI_COMMAND, PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER},
    {PCI_CACHE_LINE_SIZE, 0xff},
    {PCI_INTERRUPT_LINE, 0xff},
};
constexpr Writable kBridgeWritable[] = {
    {PCI_PRIMARY_BUS, 0x00ffffff},
    {PCI_MEMORY_BASE, 0xfff0fff0},
    {PCI_PREF_MEMORY_BASE, 0xfff0fff0},
    {PCI_PREF_BASE_UPPER32, 0xffffffff},
    {PCI_PREF_LIMIT_UPPER32, 0xffffffff},
    {PCI_INTERRUPT_LINE, 0xff | uint32_t(PCI_BRIDGE_CTL_PARITY | PCI_BRIDGE_CTL_SERR |
                                           PCI_BRIDGE_CTL_BUS_RESET) << 16},
};
constexpr uint64_t kMiB = 1 << 20;

uint32_t byte_mask(uint8_t byte_enables) {
  uint32_t m = 0;
  for (int i = 0; i < 4; i++)
    if (byte_enables >> i & 1) m |= 0xffu << 8 * i;
  return m;
}

}  // namespace

struct EmulatedPcieTopology::Function {
  TopologyFunction where;
  bool bridge = false;
  std::vector<uint32_t> config, writable;  // by dword
  struct Bar {
    int index = -1;
    uint64_t size = 0, address = 0;
    bool is64 = false, io = false;
    uint32_t type_bits = 0;  // bits 3:0 of the BAR register
    int rebar_entry = -1;    // its entry in the Resizable BAR capability
    std::unique_ptr<os::EmulatedBar> memory;
  };
  std::vector<Bar> bars;
  uint32_t rebar = 0;  // offset of the Resizable BAR capability; 0: none
  CompletionStatus config_fault = CompletionStatus::SC;
  unsigned crs_left = 0, reads = 0;

  uint16_t command() const { return uint16_t(config[PCI_COMMAND / 4]); }
  uint8_t secondary() const { return uint8_t(config[PCI_PRIMARY_BUS / 4] >> 8); }
  uint8_t subordinate() const { return uint8_t(config[PCI_PRIMARY_BUS / 4] >> 16); }
  // The bridge's windows as its registers hold them; base > limit: closed.
  bool in_windows(uint64_t address, uint64_t bytes) const {
    const uint32_t mem = config[PCI_MEMORY_BASE / 4], pref = config[PCI_PREF_MEMORY_BASE / 4];
    const uint64_t mem_base = uint64_t(mem & 0xfff0) << 16;
    const uint64_t mem_limit = (uint64_t(mem >> 16 & 0xfff0) << 16) | (kMiB - 1);
    const uint64_t pref_base =
        (uint64_t(pref & 0xfff0) << 16) | uint64_t(config[PCI_PREF_BASE_UPPER32 / 4]) << 32;
    const uint64_t pref_limit = (uint64_t(pref >> 16 & 0xfff0) << 16) | (kMiB - 1) |
                                uint64_t(config[PCI_PREF_LIMIT_UPPER32 / 4]) << 32;
    auto inside = [&](uint64_t base, uint64_t limit) {
      return base <= limit && address >= base && address + bytes - 1 <= limit;
    };
    return inside(mem_base, mem_limit) || inside(pref_base, pref_limit);
  }
  Bar* bar_at_dword(uint32_t dword, bool& upper) {
    for (auto& b : bars) {
      if (dword == PCI_BASE_ADDRESS_0 / 4 + uint32_t(b.index)) return upper = false, &b;
      if (b.is64 && dword == PCI_BASE_ADDRESS_0 / 4 + uint32_t(b.index) + 1) return upper = true, &b;
    }
    return nullptr;
  }
  uint32_t read(uint32_t dword) {
    bool upper = false;
    if (!bridge && dword >= PCI_BASE_ADDRESS_0 / 4 && dword <= PCI_BASE_ADDRESS_5 / 4) {
      Bar* b = bar_at_dword(dword, upper);
      if (!b) return 0;
      return upper ? uint32_t(b->address >> 32) : uint32_t(b->address) | b->type_bits;
    }
    return config[dword];
  }
  void write(uint32_t dword, uint32_t value) {
    bool upper = false;
    if (!bridge && dword >= PCI_BASE_ADDRESS_0 / 4 && dword <= PCI_BASE_ADDRESS_5 / 4) {
      // The bits below the BAR's size read 0 whatever is written: how software sizes it.
      if (Bar* b = bar_at_dword(dword, upper)) {
        const uint64_t keep = ~(b->size - 1);
        if (upper)
          b->address = (b->address & 0xffffffffull) | (uint64_t(value) << 32 & keep);
        else
          b->address = (b->address & ~0xffffffffull) | (value & keep & (b->io ? ~3u : ~15u));
      }
      return;
    }
    // Resizable BAR: header, then a capability and a control register per BAR.
    const uint32_t entries = rebar ? (config[rebar / 4 + 2] & PCI_REBAR_CTRL_NBAR_MASK) >>
                                         PCI_REBAR_CTRL_NBAR_SHIFT
                                   : 0;
    if (entries && dword >= rebar / 4 + 2 && dword <= rebar / 4 + 2 * entries &&
        (dword - rebar / 4) % 2 == 0) {
      resize((dword - rebar / 4 - 2) / 2, value);
      return;
    }
    config[dword] = (config[dword] & ~writable[dword]) | (value & writable[dword]);
  }
  // A write of Resizable BAR control register `entry`: bits 13:8 select the size (1 MiB << n;
  // PCIe Base Specification 7.8.6.3), taken when the capability register offers it; the BAR's
  // address bits below the new size then read 0.
  void resize(uint32_t entry, uint32_t value) {
    const uint32_t at = rebar / 4 + 2 + 2 * entry;
    const uint32_t supported = config[at - 1];
    const uint32_t n = value >> PCI_REBAR_CTRL_BAR_SHIFT & 0x3f;
    if (n > 27 || !(supported >> (4 + n) & 1)) return;
    config[at] = (config[at] & ~0x3f00u) | n << PCI_REBAR_CTRL_BAR_SHIFT;
    for (auto& b : bars)
      if (b.rebar_entry == int(entry)) {
        b.size = kMiB << n;
        b.address &= ~(b.size - 1);
      }
  }
};

EmulatedPcieTopology::EmulatedPcieTopology(std::vector<TopologyFunction> functions,
                                           std::vector<DmaWindow> dma_windows)
    : dma_windows_(std::move(dma_windows)) {
  for (size_t i = 0; i < functions.size(); i++) {
    auto f = std::make_unique<Function>();
    f->where = std::move(functions[i]);
    const os::EmulatedPciFunction& d = f->where.description;
    const std::string name = "emulated PCIe function " + std::to_string(i) + " (" +
                             hex(d.vendor) + ":" + hex(d.device) + ")";
    const int parent = f->where.parent;
    if (parent >= int(i) || (parent >= 0 && !functions_[size_t(parent)]->bridge))
      throw InvalidInput(name + ": its parent " + std::to_string(parent) +
                         " is not a bridge listed before it");
    if (f->where.device > 31 || f->where.function > 7)
      throw InvalidInput(name + ": device " + std::to_string(f->where.device) + " function " +
                         std::to_string(f->where.function) + " (at most 31 and 7)");
    if (find_child(parent, f->where.device, f->where.function))
      throw InvalidInput(name + ": two functions at device " + std::to_string(f->where.device) +
                         " function " + std::to_string(f->where.function));
    f->bridge = d.class_code >> 8 == 0x0604;

    // The header and capabilities as the emulated PCI bus builds them, at reset: decode off,
    // bus numbers 0, windows closed (base above limit).
    std::vector<uint8_t> bytes = os::emulated_config_space(d, 0, 0);
    bytes.resize(0x1000);
    f->config.assign(kHeaderDwords, 0);
    std::memcpy(f->config.data(), bytes.data(), 0x1000);
    f->config[PCI_COMMAND / 4] &= 0xffff0000u;
    f->writable.assign(kHeaderDwords, 0);
    for (auto w : kCommonWritable) f->writable[w.offset / 4] |= w.mask << 8 * (w.offset % 4);
    if (f->bridge) {
      for (auto w : kBridgeWritable) f->writable[w.offset / 4] |= w.mask;
      f->config[PCI_MEMORY_BASE / 4] = 0x0000fff0;
      f->config[PCI_PREF_MEMORY_BASE / 4] = 0x0000fff0 | PCI_PREF_RANGE_TYPE_64 << 16 |
                                            PCI_PREF_RANGE_TYPE_64;
    }
    if (!d.bars.empty() && f->bridge) throw InvalidInput(name + ": a bridge here has no BARs");

    // Find the Resizable BAR capability in the extended capability list.
    for (uint32_t at = 0x100; at && at < 0x1000;) {
      const uint32_t header = f->config[at / 4];
      if ((header & 0xffff) == PCI_EXT_CAP_ID_REBAR) {
        f->rebar = at;
        break;
      }
      at = header >> 20;
    }
    for (const auto& b : d.bars) {
      Function::Bar bar;
      bar.index = b.index;
      bar.size = b.size;
      bar.io = b.io;
      bar.is64 = b.is64 && !b.io;
      bar.type_bits = b.io ? PCI_BASE_ADDRESS_SPACE_IO
                           : (bar.is64 ? PCI_BASE_ADDRESS_MEM_TYPE_64 : 0) |
                                 (b.prefetchable ? PCI_BASE_ADDRESS_MEM_PREFETCH : 0);
      if (b.index < 0 || b.index + (bar.is64 ? 1 : 0) > 5 || !b.size || (b.size & (b.size - 1)))
        throw InvalidInput(name + ": BAR" + std::to_string(b.index) + " of " + hex(b.size) +
                           " bytes does not fit the header");
      uint64_t largest = b.size;
      for (size_t e = 0; e < d.resizable_bars.size(); e++)
        if (d.resizable_bars[e].bar == b.index) {
          bar.rebar_entry = int(e);
          bar.size = d.resizable_bars[e].current;
          for (uint64_t s : d.resizable_bars[e].supported) largest = std::max(largest, s);
        }
      bar.memory = std::make_unique<os::EmulatedBar>(largest, b.registers, b.handler);
      f->bars.push_back(std::move(bar));
    }
    functions_.push_back(std::move(f));
  }
  // Function 0 of a device with several functions says so (header type bit 7).
  for (auto& f : functions_)
    for (auto& g : functions_)
      if (g->where.parent == f->where.parent && g->where.device == f->where.device &&
          g->where.function != 0)
        f->config[PCI_HEADER_TYPE / 4] |= 0x80u << 16;
}

EmulatedPcieTopology::~EmulatedPcieTopology() = default;

EmulatedPcieTopology::Function& EmulatedPcieTopology::at(size_t function) const {
  if (function >= functions_.size())
    throw InvalidInput("emulated PCIe topology: no function " + std::to_string(function) + " (" +
                       std::to_string(functions_.size()) + " functions)");
  return *functions_[function];
}

uint32_t EmulatedPcieTopology::config32(size_t function, uint32_t offset) const {
  std::lock_guard lock(mutex_);
  return at(function).read(offset / 4 % kHeaderDwords);
}

os::EmulatedBar& EmulatedPcieTopology::bar(size_t function, int index) {
  std::lock_guard lock(mutex_);
  for (auto& b : at(function).bars)
    if (b.index == index) return *b.memory;
  throw InvalidInput("emulated PCIe function " + std::to_string(function) + " has no BAR" +
                     std::to_string(index));
}

unsigned EmulatedPcieTopology::config_reads(size_t function) const {
  std::lock_guard lock(mutex_);
  return at(function).reads;
}

void EmulatedPcieTopology::fail_memory(uint64_t address, CompletionStatus status) {
  std::lock_guard lock(mutex_);
  memory_faults_.emplace_back(address, status);
}

void EmulatedPcieTopology::fail_config(size_t function, CompletionStatus status) {
  std::lock_guard lock(mutex_);
  at(function).config_fault = status;
}

void EmulatedPcieTopology::retry_config_reads(size_t function, unsigned count) {
  std::lock_guard lock(mutex_);
  at(function).crs_left = count;
}

void EmulatedPcieTopology::set_link_down(bool down) {
  std::lock_guard lock(mutex_);
  link_down_ = down;
}

EmulatedPcieTopology::Function* EmulatedPcieTopology::find_child(int parent, uint8_t device,
                                                                 uint8_t function) {
  for (auto& f : functions_)
    if (f->where.parent == parent && f->where.device == device && f->where.function == function)
      return f.get();
  return nullptr;
}

// Bus 0 is the root bus; a bridge passes a request for bus B on when B lies in its
// secondary..subordinate range, as a type 0 request on its secondary bus itself.
EmulatedPcieTopology::Function* EmulatedPcieTopology::route_config(Bdf f) {
  int parent = -1;
  uint8_t bus = 0;
  while (bus != f.bus) {
    Function* next = nullptr;
    for (size_t i = 0; i < functions_.size() && !next; i++) {
      Function& b = *functions_[i];
      if (b.where.parent == parent && b.bridge && b.secondary() > bus &&
          b.secondary() <= f.bus && f.bus <= b.subordinate()) {
        next = &b;
        parent = int(i);
      }
    }
    if (!next) return nullptr;
    bus = next->secondary();
  }
  return find_child(parent, f.device, f.function);
}

Completion EmulatedPcieTopology::do_config_read(Bdf f, uint32_t dword_offset, uint8_t,
                                                uint32_t& value) {
  std::lock_guard lock(mutex_);
  if (link_down_) return {CompletionStatus::UR, "link down"};
  Function* fn = route_config(f);
  if (!fn) return {CompletionStatus::UR, {}};
  fn->reads++;
  if (fn->crs_left) {
    fn->crs_left--;
    return {CompletionStatus::CRS, {}};
  }
  if (fn->config_fault != CompletionStatus::SC) return {fn->config_fault, {}};
  value = fn->read(dword_offset / 4);
  return Completion::ok();
}

Completion EmulatedPcieTopology::do_config_write(Bdf f, uint32_t dword_offset,
                                                 uint8_t byte_enables, uint32_t value) {
  std::lock_guard lock(mutex_);
  if (link_down_) return {CompletionStatus::UR, "link down"};
  Function* fn = route_config(f);
  if (!fn) return {CompletionStatus::UR, {}};
  if (fn->config_fault != CompletionStatus::SC) return {fn->config_fault, {}};
  const uint32_t dword = dword_offset / 4, enabled = byte_mask(byte_enables);
  fn->write(dword, (fn->read(dword) & ~enabled) | (value & enabled));
  return Completion::ok();
}

std::optional<EmulatedPcieTopology::Hit> EmulatedPcieTopology::route_memory_below(
    int parent, uint64_t address, uint64_t bytes) {
  for (auto& f : functions_) {
    if (f->where.parent != parent || !(f->command() & PCI_COMMAND_MEMORY)) continue;
    if (f->bridge) {
      if (f->in_windows(address, bytes))
        return route_memory_below(int(&f - functions_.data()), address, bytes);
      continue;
    }
    for (auto& b : f->bars)
      if (!b.io && address >= b.address && address - b.address < b.size &&
          b.size - (address - b.address) >= bytes)
        return Hit{f.get(), b.index, address - b.address};
  }
  return std::nullopt;
}

std::optional<EmulatedPcieTopology::Hit> EmulatedPcieTopology::route_memory(uint64_t address,
                                                                            uint64_t bytes) {
  return route_memory_below(-1, address, bytes);
}

std::optional<Completion> EmulatedPcieTopology::memory_fault(uint64_t address,
                                                             uint64_t bytes) const {
  if (link_down_) return Completion{CompletionStatus::UR, "link down"};
  for (auto& [at, status] : memory_faults_)
    if (at >= address && at - address < bytes) return Completion{status, {}};
  return std::nullopt;
}

Completion EmulatedPcieTopology::reach(uint64_t address, uint64_t bytes, os::EmulatedBar*& bar,
                                       uint64_t& offset) {
  if (auto fault = memory_fault(address, bytes)) return *fault;
  auto hit = route_memory(address, bytes);
  if (!hit) return {CompletionStatus::UR, {}};
  for (auto& b : hit->function->bars)
    if (b.index == hit->bar) bar = b.memory.get();
  offset = hit->offset;
  return Completion::ok();
}

Completion EmulatedPcieTopology::do_memory_read(uint64_t address, std::span<std::byte> out) {
  std::lock_guard lock(mutex_);
  os::EmulatedBar* bar = nullptr;
  uint64_t offset = 0;
  if (Completion c = reach(address, out.size(), bar, offset); c.status != CompletionStatus::SC)
    return c;
  bar->read(offset, out);
  return Completion::ok();
}

Completion EmulatedPcieTopology::do_memory_write(uint64_t address,
                                                 std::span<const std::byte> data) {
  std::lock_guard lock(mutex_);
  os::EmulatedBar* bar = nullptr;
  uint64_t offset = 0;
  if (Completion c = reach(address, data.size(), bar, offset); c.status != CompletionStatus::SC)
    return c;
  bar->write(offset, data);
  return Completion::ok();
}

std::vector<TopologyFunction> asm2464_topology(const os::EmulatedPciFunction& gpu) {
  auto bridge = [](uint16_t vendor, uint16_t device, os::PciPort port, int parent) {
    TopologyFunction t;
    t.description.vendor = vendor;
    t.description.device = device;
    t.description.class_code = 0x060400;
    t.description.port = port;
    t.description.link = {4, 4, 4, 4};  // ASM2464: PCIe 4.0 x4
    t.parent = parent;
    return t;
  };
  TopologyFunction card{gpu, 3, 0, 0};
  TopologyFunction audio;
  audio.description.vendor = 0x1002;
  audio.description.device = 0xab30;
  audio.description.class_code = 0x040300;  // multimedia, HD Audio
  audio.description.bars = {{0, 16 * 1024, false, false, false, {}, {}}};
  audio.parent = 3;
  audio.function = 1;
  return {bridge(0x1b21, 0x2464, os::PciPort::UpstreamPort, -1),
          bridge(0x1b21, 0x2464, os::PciPort::DownstreamPort, 0),
          bridge(0x1002, 0x1478, os::PciPort::UpstreamPort, 1),
          bridge(0x1002, 0x1479, os::PciPort::DownstreamPort, 2),
          card,
          audio};
}

DmaWindow asm2464_sram_window() { return asm2464::kSramWindow; }

}  // namespace hcq::usb::emu
