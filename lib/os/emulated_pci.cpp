#include "os/emulated_pci.hpp"

#include <fcntl.h>
#include <linux/pci_regs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "os/cleanup.hpp"
#include "os/emulated_vfio.hpp"

namespace hcq::os {

namespace fs = std::filesystem;

// ---- EmulatedBar ----

EmulatedBar::EmulatedBar(uint64_t size, std::map<uint64_t, uint32_t> reset_values,
                         std::shared_ptr<MmioHandler> handler)
    : size_(size), reset_values_(std::move(reset_values)), handler_(std::move(handler)) {}

EmulatedBar::~EmulatedBar() {
  if (memory_) ::munmap(memory_, size_);
  if (fd_ >= 0) ::close(fd_);
}

int EmulatedBar::fd() {
  if (fd_ >= 0) return fd_;
  fd_ = ::memfd_create("hcq-emulated-bar", MFD_CLOEXEC);
  if (fd_ < 0 || ::ftruncate(fd_, off_t(size_)) != 0)
    throw OsError("emulated BAR: memfd of " + hex(size_) + " bytes", errno);
  reset();
  return fd_;
}

std::byte* EmulatedBar::memory(uint64_t offset, uint64_t bytes) {
  if (offset > size_ || bytes > size_ - offset)
    throw InvalidInput("emulated BAR: " + std::to_string(bytes) + " bytes at " + hex(offset) +
                       " leave its " + hex(size_) + " bytes");
  const int f = fd();  // outside the once: making it resets the BAR, which writes here
  std::call_once(mapped_, [&] {
    void* m = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (m == MAP_FAILED) throw OsError("emulated BAR: map of " + hex(size_) + " bytes", errno);
    memory_ = static_cast<std::byte*>(m);
  });
  return memory_ + offset;
}

void* EmulatedBar::map(void* addr, size_t length, int prot, off_t offset, int flags) {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  if (handler_ || offset < 0 || uint64_t(offset) % page || length == 0 ||
      uint64_t(offset) > size_ || length > size_ - uint64_t(offset)) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  return ::mmap(addr, length, prot, MAP_SHARED | (flags & MAP_FIXED), fd(), offset);
}

uint32_t EmulatedBar::read32(uint64_t offset) {
  if (handler_) return handler_->read32(offset);
  uint32_t v = 0;
  std::memcpy(&v, memory(offset, 4), 4);
  return v;
}

void EmulatedBar::write32(uint64_t offset, uint32_t value) {
  if (handler_) return handler_->write32(offset, value);
  std::memcpy(memory(offset, 4), &value, 4);
}

void EmulatedBar::read(uint64_t offset, std::span<std::byte> out) {
  if (handler_) {
    for (size_t i = 0; i < out.size(); i += 4) {
      const uint32_t v = handler_->read32(offset + i);
      std::memcpy(out.data() + i, &v, 4);
    }
    return;
  }
  std::memcpy(out.data(), memory(offset, out.size()), out.size());
}

void EmulatedBar::write(uint64_t offset, std::span<const std::byte> data) {
  if (handler_) {
    for (size_t i = 0; i < data.size(); i += 4) {
      uint32_t v = 0;
      std::memcpy(&v, data.data() + i, 4);
      handler_->write32(offset + i, v);
    }
    return;
  }
  std::memcpy(memory(offset, data.size()), data.data(), data.size());
}

void EmulatedBar::reset() {
  if (handler_) return;  // the model's state is the model's to reset
  // Dropping the pages zeroes the BAR without touching what is not resident.
  if (::fallocate(fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(size_)) != 0)
    throw OsError("emulated BAR reset", errno);
  for (auto& [off, v] : reset_values_) write32(off, v);
}

// ---- the sysfs tree ----

namespace {

// A sysfs resource file mapped with mmap(2), as drivers/pci/pci-sysfs.c serves it.
class BarNode final : public EmulatedNode {
 public:
  explicit BarNode(EmulatedBar& bar) : bar_(bar) {}
  int ioctl(int, unsigned long, void*) override { return -ENOTTY; }
  void* mmap(void* addr, size_t length, int prot, int flags, int, off_t offset) override {
    return bar_.map(addr, length, prot, offset, flags);
  }
  int munmap(void* addr, size_t length) override {
    return ::munmap(addr, length) < 0 ? -errno : 0;
  }

 private:
  EmulatedBar& bar_;
};

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

std::string hex_attr(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x\n", digits, v);
  return buf;
}

void link(const fs::path& target, const fs::path& at) {
  fs::create_symlink(fs::relative(target, at.parent_path()), at);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The bus number of "DDDD:BB:SS.F"; the domain may be wider than 4 digits (VMD).
unsigned bus_of(const std::string& address) {
  const size_t colon = address.find(':');
  if (colon != std::string::npos && address.size() > colon + 3 && address[colon + 3] == ':') {
    unsigned bus = 0;
    const char* at = address.data() + colon + 1;
    auto [end, ec] = std::from_chars(at, at + 2, bus, 16);
    if (ec == std::errc() && end == at + 2) return bus;
  }
  throw InvalidInput("emulated PCI bus: '" + address + "' is not a PCI address (0000:03:00.0)");
}

}  // namespace

std::vector<uint8_t> emulated_config_space(const EmulatedPciFunction& f, unsigned secondary,
                                           unsigned subordinate) {
  if (!f.config.empty()) return f.config;
  const bool pcie = f.port != PciPort::None;
  std::vector<uint8_t> c(pcie ? 4096 : 256, 0);
  auto put16 = [&](size_t at, uint32_t v) { c[at] = uint8_t(v), c[at + 1] = uint8_t(v >> 8); };
  auto put32 = [&](size_t at, uint32_t v) { put16(at, v & 0xffff), put16(at + 2, v >> 16); };
  const bool bridge = f.class_code >> 8 == 0x0604;
  put16(PCI_VENDOR_ID, f.vendor);
  put16(PCI_DEVICE_ID, f.device);
  put16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
  put16(PCI_STATUS, pcie ? PCI_STATUS_CAP_LIST : 0);
  put32(PCI_CLASS_REVISION, f.class_code << 8 | f.revision);
  c[PCI_HEADER_TYPE] = bridge ? PCI_HEADER_TYPE_BRIDGE : PCI_HEADER_TYPE_NORMAL;
  if (bridge) {
    c[PCI_SECONDARY_BUS] = uint8_t(secondary);
    c[PCI_SUBORDINATE_BUS] = uint8_t(subordinate);
  } else {
    put16(PCI_SUBSYSTEM_VENDOR_ID, f.subsystem_vendor);
    put16(PCI_SUBSYSTEM_ID, f.subsystem_device);
  }
  if (!pcie) return c;
  constexpr size_t cap = 0x40;
  c[PCI_CAPABILITY_LIST] = cap;
  c[cap + PCI_CAP_LIST_ID] = PCI_CAP_ID_EXP;
  const unsigned type[] = {0, PCI_EXP_TYPE_ENDPOINT, PCI_EXP_TYPE_LEG_END,
                           PCI_EXP_TYPE_ROOT_PORT, PCI_EXP_TYPE_UPSTREAM,
                           PCI_EXP_TYPE_DOWNSTREAM, PCI_EXP_TYPE_PCI_BRIDGE,
                           PCI_EXP_TYPE_RC_END, 0xf};
  put16(cap + PCI_EXP_FLAGS, 2 | type[int(f.port)] << 4);  // capability version 2
  put32(cap + PCI_EXP_LNKCAP, f.link.max_speed | f.link.max_width << 4);
  put16(cap + PCI_EXP_LNKSTA, f.link.speed | f.link.width << PCI_EXP_LNKSTA_NLW_SHIFT);

  // Extended capability header: ID 15:0, version 19:16, next 31:20.
  size_t at = 0x100;
  auto ext = [&](uint32_t id, size_t len, bool last) {
    put32(at, id | 1u << 16 | uint32_t(last ? 0 : at + len) << 20);
    size_t here = at;
    at += len;
    return here;
  };
  const bool tb = f.thunderbolt;
  if (!f.resizable_bars.empty()) {
    size_t r = ext(PCI_EXT_CAP_ID_REBAR, 4 + 8 * f.resizable_bars.size(), !tb);
    for (size_t i = 0; i < f.resizable_bars.size(); i++) {
      const auto& rb = f.resizable_bars[i];
      uint32_t sizes = 0, current = 0;
      for (uint64_t s : rb.supported) sizes |= 1u << (4 + __builtin_ctzll(s >> 20));
      current = uint32_t(__builtin_ctzll(rb.current >> 20));
      uint32_t ctl = uint32_t(rb.bar) | current << PCI_REBAR_CTRL_BAR_SHIFT;
      if (i == 0) ctl |= uint32_t(f.resizable_bars.size()) << PCI_REBAR_CTRL_NBAR_SHIFT;
      put32(r + PCI_REBAR_CAP + 8 * i, sizes);
      put32(r + PCI_REBAR_CTRL + 8 * i, ctl);
    }
  }
  if (tb) {
    size_t v = ext(PCI_EXT_CAP_ID_VNDR, 0x10, true);
    put32(v + PCI_VNDR_HEADER, 0x1234 | 1u << 16 | 0x10u << 20);  // Intel Thunderbolt VSEC
  }
  return c;
}

namespace {

// A sysfs `resource` line per BAR and the ROM (drivers/pci/pci-sysfs.c resource_show:
// start, end, flags), plus the four bridge windows on bridges; addresses are invented.
std::string resource_file(const EmulatedPciFunction& f, uint64_t next_base) {
  uint64_t next_io = 0x3000 + (next_base >> 20 & 0xf000);
  uint64_t next32 = 0xc0000000 + (next_base >> 8 & 0x3f000000);
  std::string out;
  char line[80];
  const bool bridge = f.class_code >> 8 == 0x0604;
  for (int i = 0; i < 7 + (bridge ? 4 : 0); i++) {
    uint64_t start = 0, end = 0, flags = 0;
    for (auto& b : f.bars) {
      if (b.index != i || !b.size) continue;
      uint64_t& next = b.io ? next_io : b.is64 ? next_base : next32;
      next = (next + b.size - 1) / b.size * b.size;
      start = next;
      end = start + b.size - 1;
      next += b.size;
      // IORESOURCE_IO/MEM/PREFETCH/MEM_64 (include/linux/ioport.h) with the BAR's own low bits.
      flags = b.io ? 0x101 : 0x200 | (b.prefetchable ? 0x2008 : 0) | (b.is64 ? 0x100004 : 0);
    }
    std::snprintf(line, sizeof line, "0x%016llx 0x%016llx 0x%016llx\n",
                  static_cast<unsigned long long>(start), static_cast<unsigned long long>(end),
                  static_cast<unsigned long long>(flags));
    out += line;
  }
  return out;
}

}  // namespace

EmulatedPciBus::EmulatedPciBus(std::vector<EmulatedPciFunction> functions)
    : kernel_(std::make_shared<EmulatedKernel>()), functions_(std::move(functions)) {
  for (auto& f : functions_) bus_of(f.address);  // a bad address throws before the tree
  tree_ = std::make_unique<TempTree>("sysfs");
  dir_ = tree_->path();
  fs::create_directories(dir_ + "/bus/pci/devices");
  fs::create_directories(dir_ + "/kernel/iommu_groups");
  vfio_ = std::make_unique<EmulatedVfio>(*this, *kernel_);
  std::vector<std::string> drivers = {"vfio-pci"};
  for (auto& f : functions_)
    if (!f.driver.empty()) drivers.push_back(f.driver);
  for (auto& d : drivers) {
    fs::create_directories(dir_ + "/bus/pci/drivers/" + d);
    for (const char* attr : {"bind", "unbind"}) write_text(dir_ + "/bus/pci/drivers/" + d + "/" + attr, "");
    std::string p = "/sys/bus/pci/drivers/" + d;
    kernel_->on_write(p + "/bind", [this, d](const std::string& a) { return bind(d, trim(a)); });
    kernel_->on_write(p + "/unbind", [this, d](const std::string& a) { return unbind(d, trim(a)); });
  }
  for (auto& f : functions_) write_function(f);
  kernel_->mount_sysfs(dir_);
}

EmulatedPciBus::~EmulatedPciBus() {
  kernel_->mount_sysfs("");
  tree_.reset();
}

void EmulatedPciBus::write_function(const EmulatedPciFunction& f) {
  // The device directory nests under its bridges, as /sys/devices/pci0000:00/... does.
  std::vector<std::string> chain = {f.address};
  for (const EmulatedPciFunction* p = function(f.parent); p; p = function(p->parent))
    chain.insert(chain.begin(), p->address);
  fs::path dev = dir_ + "/devices/pci" + chain.front().substr(0, 7);
  for (auto& a : chain) dev /= a;
  fs::create_directories(dev);
  link(dev, dir_ + "/bus/pci/devices/" + f.address);

  unsigned secondary = 0, subordinate = 0;
  for (auto& g : functions_) {
    for (const EmulatedPciFunction* p = &g; p; p = function(p->parent)) {
      if (p->parent != f.address) continue;
      unsigned b = bus_of(g.address);  // g is below f; a direct child when p is g
      if (p == &g && (!secondary || b < secondary)) secondary = b;
      subordinate = std::max(subordinate, b);
      break;
    }
  }
  auto cfg = emulated_config_space(f, secondary, subordinate);
  std::ofstream(dev / "config", std::ios::binary)
      .write(reinterpret_cast<const char*>(cfg.data()), std::streamsize(cfg.size()));
  write_text(dev / "vendor", hex_attr(f.vendor, 4));
  write_text(dev / "device", hex_attr(f.device, 4));
  write_text(dev / "subsystem_vendor", hex_attr(f.subsystem_vendor, 4));
  write_text(dev / "subsystem_device", hex_attr(f.subsystem_device, 4));
  write_text(dev / "class", hex_attr(f.class_code, 6));
  write_text(dev / "revision", hex_attr(f.revision, 2));
  write_text(dev / "irq", "0\n");
  write_text(dev / "numa_node", std::to_string(f.numa_node) + "\n");
  write_text(dev / "driver_override", "(null)\n");
  write_text(dev / "resource", resource_file(f, 0x6000000000ull + (uint64_t(bus_of(f.address)) << 32)));

  const std::string sys = pci_sysfs_dir(f.address);
  for (auto& b : f.bars) {
    auto& bar = bars_[{f.address, b.index}];
    bar = std::make_unique<EmulatedBar>(b.size, b.registers, b.handler);
    std::string name = "resource" + std::to_string(b.index);
    write_text(dev / name, "");
    kernel_->add_node(sys + "/" + name, std::make_shared<BarNode>(*bar));
    if (b.prefetchable) {  // the kernel offers write-combined maps of prefetchable BARs only
      write_text(dev / (name + "_wc"), "");
      kernel_->add_node(sys + "/" + name + "_wc", std::make_shared<BarNode>(*bar));
    }
  }
  kernel_->on_write(sys + "/driver_override", [this, a = f.address](const std::string& v) {
    std::string d = trim(v);
    overrides_[a] = d;
    write_text(dir_ + "/bus/pci/devices/" + a + "/driver_override", (d.empty() ? "(null)" : d) + "\n");
    return 0;
  });
  if (f.iommu_group >= 0) {
    fs::path g = dir_ + "/kernel/iommu_groups/" + std::to_string(f.iommu_group);
    fs::create_directories(g / "devices");
    link(dev, g / "devices" / f.address);
    link(g, dev / "iommu_group");
  }
  if (!f.driver.empty()) set_driver(f.address, f.driver);
}

const EmulatedPciFunction* EmulatedPciBus::function(const std::string& address) const {
  for (auto& f : functions_)
    if (f.address == address) return &f;
  return nullptr;
}

std::vector<std::string> EmulatedPciBus::group_members(int group) const {
  std::vector<std::string> out;
  for (auto& f : functions_)
    if (f.iommu_group == group) out.push_back(f.address);
  return out;
}

EmulatedBar& EmulatedPciBus::bar(const std::string& address, int index) {
  auto it = bars_.find({address, index});
  if (it == bars_.end())
    throw InvalidInput("emulated PCI bus: " + address + " has no BAR" + std::to_string(index));
  return *it->second;
}

void EmulatedPciBus::reset(const std::string& address) {
  if (const EmulatedPciFunction* f = function(address); f && f->on_reset) return f->on_reset();
  for (auto& [key, bar] : bars_)
    if (key.first == address) bar->reset();
}

void EmulatedPciBus::set_driver(const std::string& address, const std::string& driver) {
  for (auto& f : functions_)
    if (f.address == address) f.driver = driver;
  fs::path at = dir_ + "/bus/pci/devices/" + address + "/driver";
  std::error_code ec;
  fs::remove(at, ec);
  fs::path dev = fs::canonical(at.parent_path());
  if (driver.empty()) {
    fs::remove_all(dev / "vfio-dev", ec);
    return;
  }
  link(fs::canonical(dir_ + "/bus/pci/drivers/" + driver), dev / "driver");
  if (driver == "vfio-pci") {  // the device cdev, as vfio_device_add() names it in sysfs
    const EmulatedPciFunction* f = function(address);
    int n = vfio_->add_device(address, f->iommu_group);
    fs::create_directories(dev / "vfio-dev" / ("vfio" + std::to_string(n)));
  }
}

// drivers/base/bus.c bind_store/unbind_store: unbind needs the device on that driver
// (ENODEV); bind needs it free (EBUSY) and matching the driver, which for vfio-pci (no ID
// table) means a driver_override naming it (ENODEV otherwise).
int EmulatedPciBus::unbind(const std::string& driver, const std::string& address) {
  const EmulatedPciFunction* f = function(address);
  if (!f || f->driver != driver) return -ENODEV;
  set_driver(address, "");
  return 0;
}

int EmulatedPciBus::bind(const std::string& driver, const std::string& address) {
  const EmulatedPciFunction* f = function(address);
  if (!f) return -ENODEV;
  if (!f->driver.empty()) return -EBUSY;
  if (overrides_[address] != driver) return -ENODEV;
  if (driver == "vfio-pci" && f->iommu_group < 0)
    return -EINVAL;  // vfio-pci's probe refuses a device without an IOMMU group
  set_driver(address, driver);
  return 0;
}

}  // namespace hcq::os
