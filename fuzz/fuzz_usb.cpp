// libFuzzer target: what hcq parses of a USB-attached GPU (issue 18). The first byte picks:
//   0  the ASM2464's 0xF0 completions (usb::asm2464::decode_completion), 8 bytes each,
//      checked against the layout tinygrad's _f0_in reads;
//   1  sysfs attributes of USB devices (os::list_usb_devices over a sysfs built from the
//      input): every device listed has the bus and device numbers its files hold as plain
//      decimals in usbfs's range, and ids its files hold as plain hex;
//   2  PCIe enumeration (usb::enumerate_pcie) over a hostile hierarchy: up to 8 functions,
//      each a config space (values and writable bits) from the input, with failing
//      completions; enumeration ends (capability loops and out-of-range pointers included)
//      with an hcq::Error or with BARs that are powers of two, naturally aligned, inside
//      their aperture and their bridges' windows, and apart from each other.
// Anything else (another exception, a sanitizer report, a hang) is a finding.
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "os/kernel.hpp"
#include "os/usb.hpp"
#include "usb/asm2464_protocol.hpp"
#include "usb/pcie_enumerate.hpp"

using namespace hcq;

namespace {

// Names the failed check's line, then aborts (a finding).
#define check(ok)                                                        \
  do {                                                                   \
    if (!(ok)) {                                                         \
      std::fprintf(stderr, "fuzz_usb: check failed at line %d: %s\n", __LINE__, #ok); \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

// ---- 0: completions ----

void completions(const uint8_t* data, size_t size) {
  for (size_t at = 0; at + 8 <= size; at += 8) {
    std::array<uint8_t, 8> in;
    std::copy(data + at, data + at + 8, in.begin());
    const auto c = usb::asm2464::decode_completion(in);
    check(c.return_status == in[7]);
    if (in[7]) {
      check(!c.answered() && c.value == 0);
      continue;
    }
    const unsigned field = in[4] >> 5;
    const uint32_t word = uint32_t(in[0]) | uint32_t(in[1]) << 8 | uint32_t(in[2]) << 16 |
                          uint32_t(in[3]) << 24;
    switch (field) {
      case 0: check(c.completion.status == usb::CompletionStatus::SC && c.value == word); break;
      case 1: check(c.completion.status == usb::CompletionStatus::UR && c.value == 0); break;
      case 2: check(c.completion.status == usb::CompletionStatus::CRS && c.value == 0); break;
      case 4: check(c.completion.status == usb::CompletionStatus::CA && c.value == 0); break;
      default:
        check(c.completion.status == usb::CompletionStatus::CA && c.value == 0 &&
              c.completion.detail == "reserved completion status " + hex(field));
    }
    if (field <= 4 && field != 3) check(c.completion.detail.empty());
  }
}

// ---- 1: sysfs ----

// A sysfs holding only /sys/bus/usb/devices: lines "<entry>/<attribute>=<value>".
class FuzzSysfs final : public os::Kernel {
 public:
  explicit FuzzSysfs(std::string_view text) {
    size_t at = 0;
    while (at < text.size()) {
      size_t end = std::min(text.find('\n', at), text.size());
      const std::string_view line = text.substr(at, end - at);
      at = end + 1;
      const size_t slash = line.find('/'), eq = line.find('=');
      if (slash == std::string_view::npos || eq == std::string_view::npos || eq < slash ||
          slash == 0)
        continue;
      const std::string entry(line.substr(0, slash));
      entries.insert(entry);
      files[std::string(kDir) + "/" + entry + "/" + std::string(line.substr(slash + 1, eq - slash - 1))] =
          std::string(line.substr(eq + 1)) + "\n";
    }
  }
  static constexpr const char* kDir = "/sys/bus/usb/devices";
  std::set<std::string> entries;
  std::map<std::string, std::string> files;

  std::optional<std::string> read_file(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> list_dir(const std::string& path) override {
    if (path != kDir) return {};
    return {entries.begin(), entries.end()};
  }
  int open(const std::string&, int) override { return -ENOSYS; }
  int close(int) override { return -ENOSYS; }
  int ioctl(int, unsigned long, void*) override { return -ENOSYS; }
  void* mmap(void*, size_t, int, int, int, off_t) override { return MAP_FAILED; }
  int munmap(void*, size_t) override { return -ENOSYS; }
  ssize_t pread(int, void*, size_t, off_t) override { return -ENOSYS; }
  ssize_t pwrite(int, const void*, size_t, off_t) override { return -ENOSYS; }
  ssize_t read(int, void*, size_t) override { return -ENOSYS; }
  int eventfd(unsigned, int) override { return -ENOSYS; }
  int poll(struct pollfd*, nfds_t, int) override { return -ENOSYS; }
  int write_file(const std::string&, const std::string&) override { return -ENOSYS; }
  std::string sysfs_root() const override { return "/sys"; }
  bool emulated() const override { return true; }
};

// The harness's own strict reading: digits of `base` only, at most `max`.
std::optional<unsigned long> strict(const FuzzSysfs& s, const std::string& entry,
                                    const char* attr, int base, unsigned long max) {
  auto it = s.files.find(std::string(FuzzSysfs::kDir) + "/" + entry + "/" + attr);
  if (it == s.files.end()) return std::nullopt;
  std::string v = it->second;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  while (!v.empty() && v.front() == ' ') v.erase(0, 1);
  if (v.empty()) return std::nullopt;
  unsigned long n = 0;
  for (char ch : v) {
    int d = ch >= '0' && ch <= '9' ? ch - '0'
            : base == 16 && ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : base == 16 && ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                   : -1;
    if (d < 0) return std::nullopt;
    n = n * unsigned(base) + unsigned(d);
    if (n > max) return std::nullopt;
  }
  return n;
}

void sysfs(const uint8_t* data, size_t size) {
  FuzzSysfs s(std::string_view(reinterpret_cast<const char*>(data), size));
  const auto devices = os::list_usb_devices(s);
  std::set<std::string> seen;
  for (size_t i = 0; i < devices.size(); i++) {
    const auto& d = devices[i];
    check(seen.insert(d.port).second && s.entries.count(d.port));
    check(d.port.find(':') == std::string::npos);
    const auto bus = strict(s, d.port, "busnum", 10, 999);
    const auto devnum = strict(s, d.port, "devnum", 10, 127);
    check(bus && devnum && *bus >= 1 && *devnum >= 1);
    check(d.bus == int(*bus) && d.devnum == int(*devnum));
    check(d.vendor == strict(s, d.port, "idVendor", 16, 0xffff).value_or(0));
    check(d.product == strict(s, d.port, "idProduct", 16, 0xffff).value_or(0));
    if (i) {
      const auto& p = devices[i - 1];
      check(p.bus < d.bus || (p.bus == d.bus && p.devnum <= d.devnum));
    }
    for (size_t j = 1; j < d.interfaces.size(); j++)
      check(d.interfaces[j - 1].number <= d.interfaces[j].number);
    check(d.node().size() == std::string("/dev/bus/usb/002/003").size());
    (void)d.name();
  }
  // Every entry with good numbers is listed.
  for (const auto& e : s.entries) {
    if (e.find(':') != std::string::npos) continue;
    const auto bus = strict(s, e, "busnum", 10, 999);
    const auto devnum = strict(s, e, "devnum", 10, 127);
    if (bus && devnum && *bus && *devnum) check(seen.count(e));
  }
}

// ---- 2: enumeration ----

// Up to 8 functions, each given by 4 bytes (bus, device << 3 | function, image, fault);
// images of 0x800 bytes follow: 0x400 bytes of config space (little-endian dwords; beyond
// 0x400 it reads 0) and 0x400 bytes of writable-bit masks. A fault byte's bits 1:0 pick a
// status (none, UR, CRS, CA) for every request to the dword its bits 7:2 give.
class FuzzHierarchy final : public usb::PcieTransport {
 public:
  FuzzHierarchy(const uint8_t* data, size_t size) {
    if (!size) return;
    const size_t count = data[0] % 9;
    const size_t images_at = 1 + 4 * count;
    const size_t images = size > images_at ? std::max<size_t>(1, (size - images_at + 0x7ff) / 0x800) : 1;
    for (size_t i = 0; i < count; i++) {
      auto byte = [&](size_t k) { return 1 + 4 * i + k < size ? data[1 + 4 * i + k] : uint8_t(0); };
      const usb::Bdf f{byte(0), uint8_t(byte(1) >> 3), uint8_t(byte(1) & 7)};
      if (functions_.count(f)) continue;
      Function fn;
      const size_t base = images_at + (byte(2) % images) * 0x800;
      auto dword = [&](size_t at) {
        uint32_t v = 0;
        for (size_t b = 0; b < 4; b++)
          if (at + b < size) v |= uint32_t(data[at + b]) << (8 * b);
        return v;
      };
      for (size_t d = 0; d < 256; d++) {
        fn.value[d] = dword(base + 4 * d);
        fn.writable[d] = dword(base + 0x400 + 4 * d);
      }
      fn.fault_dword = byte(3) >> 2;
      fn.fault = byte(3) & 3;
      functions_[f] = fn;
    }
  }
  std::vector<usb::DmaWindow> dma_windows() const override { return {}; }
  size_t functions() const { return functions_.size(); }
  bool has(usb::Bdf f) const { return functions_.count(f) != 0; }

 protected:
  usb::Completion do_config_read(usb::Bdf f, uint32_t dword_offset, uint8_t,
                                 uint32_t& value) override {
    auto it = functions_.find(f);
    if (it == functions_.end()) return {usb::CompletionStatus::UR, {}};
    if (auto c = fault(it->second, dword_offset)) return *c;
    value = dword_offset < 0x400 ? it->second.value[dword_offset / 4] : 0;
    return usb::Completion::ok();
  }
  usb::Completion do_config_write(usb::Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                                  uint32_t value) override {
    auto it = functions_.find(f);
    if (it == functions_.end()) return {usb::CompletionStatus::UR, {}};
    if (auto c = fault(it->second, dword_offset)) return *c;
    if (dword_offset >= 0x400) return usb::Completion::ok();
    uint32_t mask = 0;
    for (int b = 0; b < 4; b++)
      if (byte_enables >> b & 1) mask |= 0xffu << (8 * b);
    mask &= it->second.writable[dword_offset / 4];
    uint32_t& v = it->second.value[dword_offset / 4];
    v = (v & ~mask) | (value & mask);
    return usb::Completion::ok();
  }
  usb::Completion do_memory_read(uint64_t, std::span<std::byte>) override {
    return {usb::CompletionStatus::UR, "no memory"};
  }
  usb::Completion do_memory_write(uint64_t, std::span<const std::byte>) override {
    return {usb::CompletionStatus::UR, "no memory"};
  }

 private:
  struct Function {
    std::array<uint32_t, 256> value{}, writable{};
    uint32_t fault_dword = 0;
    int fault = 0;
  };
  static std::optional<usb::Completion> fault(const Function& fn, uint32_t dword_offset) {
    if (!fn.fault || dword_offset / 4 != fn.fault_dword) return std::nullopt;
    static constexpr usb::CompletionStatus kStatus[] = {
        usb::CompletionStatus::SC, usb::CompletionStatus::UR, usb::CompletionStatus::CRS,
        usb::CompletionStatus::CA};
    return usb::Completion{kStatus[fn.fault], {}};
  }
  std::map<usb::Bdf, Function> functions_;
};

bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }
bool inside(uint64_t base, uint64_t size, uint64_t outer_base, uint64_t outer_size) {
  return base >= outer_base && size <= outer_size && base - outer_base <= outer_size - size;
}

void enumeration(const uint8_t* data, size_t size) {
  FuzzHierarchy h(data, size);
  usb::EnumerateOptions o;
  o.crs_retries = 3;
  o.crs_delay = std::chrono::microseconds(0);
  usb::PcieHierarchy result;
  try {
    result = usb::enumerate_pcie(h, o);
  } catch (const Error&) {
    return;  // an exact error: InvalidInput, PcieError
  }
  // FUZZ_USB_PRINT=1: what enumeration gave, to read a finding.
  if (std::getenv("FUZZ_USB_PRINT")) std::fputs(result.text().c_str(), stderr);
  check(result.functions.size() <= h.functions());
  std::vector<std::pair<uint64_t, uint64_t>> placed;
  for (const auto& fn : result.functions) {
    check(h.has(fn.bdf));
    check(fn.parent < int(result.functions.size()));
    for (const auto& b : fn.bars) {
      if (!b.assigned) continue;
      const bool pref = b.prefetchable && b.is64;
      const usb::PcieAperture& a = pref ? o.prefetchable : o.memory;
      check(is_power_of_two(b.size) && b.address % b.size == 0);
      check(inside(b.address, b.size, a.base, a.size));
      if (fn.parent >= 0) {
        const auto& parent = result.functions[size_t(fn.parent)];
        const usb::PcieWindow& w = pref ? parent.prefetchable : parent.memory;
        check(inside(b.address, b.size, w.base, w.size));
      }
      placed.push_back({b.address, b.size});
    }
    for (const auto& r : fn.resizable_bars) {
      const auto* b = fn.bar(r.bar);
      if (b && b->size != b->size_before)
        check(std::find(r.supported.begin(), r.supported.end(), b->size) != r.supported.end());
    }
  }
  std::sort(placed.begin(), placed.end());
  for (size_t i = 1; i < placed.size(); i++)
    check(placed[i].first - placed[i - 1].first >= placed[i - 1].second);
  (void)result.text();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: completions(data + 1, size - 1); break;
    case 1: sysfs(data + 1, size - 1); break;
    case 2: enumeration(data + 1, size - 1); break;
  }
  return 0;
}
