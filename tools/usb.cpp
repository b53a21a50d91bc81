#include "usb.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amd/pci.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "json.hpp"
#include "numbers.hpp"
#include "os/usb.hpp"
#include "usage.hpp"
#include "usb/asm2464.hpp"
#include "usb/emu/usb_system.hpp"
#include "usb/pcie_enumerate.hpp"

namespace hcq::tools {
namespace {

// The USB side the commands look at: the real kernel, or with HCQ_EMULATED_USB=1 the emulated
// machine of usb/emu/usb_system.hpp.
struct UsbHost {
  std::unique_ptr<usb::emu::UsbEmulatedSystem> emulated;
  std::shared_ptr<os::Kernel> kernel;
  UsbHost() {
    if (usb::emu::emulated_usb_requested()) {
      emulated = usb::emu::make_usb_emulated_system();
      kernel = emulated->kernel();
    } else {
      kernel = os::real_kernel();
    }
  }
};

// The firmware a bridge runs, by its USB ids (tinygrad/asm2464pd-firmware's test scripts,
// SUPPORTED_CONTROLLERS: add1:0001 custom firmware, 174c:2463 and 174c:2464 stock).
enum class Firmware { Custom, Stock };
std::optional<Firmware> firmware_of(const os::UsbDeviceInfo& d) {
  if (d.vendor == 0xadd1 && d.product == 0x0001) return Firmware::Custom;
  if (d.vendor == 0x174c && (d.product == 0x2463 || d.product == 0x2464)) return Firmware::Stock;
  return std::nullopt;
}

std::string hex4(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}
std::string ids(const os::UsbDeviceInfo& d) { return hex4(d.vendor) + ":" + hex4(d.product); }
std::string device_name(const os::UsbDeviceInfo& d) { return "usb:" + d.port; }

constexpr const char* kStock =
    "ASMedia's stock firmware: hcq cannot drive it (it speaks tinygrad's custom firmware, "
    "add1:0001)";

// An opened bridge with its hierarchy enumerated and the GPU behind it.
struct Bridge {
  os::UsbDeviceInfo info;
  std::unique_ptr<os::UsbDevice> device;
  std::unique_ptr<usb::Asm2464Transport> transport;
  uint8_t ltssm = 0;
  usb::PcieHierarchy hierarchy;
  const usb::PcieFunctionInfo* gpu = nullptr;  // a display controller or processing accelerator

  std::string gpu_name() const { return device_name(info) + " " + usb::to_string(gpu->bdf); }
  const usb::PcieBarInfo& bar(int index) const {
    const usb::PcieBarInfo* b = gpu->bar(index);
    if (!b || !b->assigned)
      throw InvalidInput(gpu_name() + " has no memory BAR" + std::to_string(index));
    return *b;
  }
};

std::unique_ptr<Bridge> open_bridge(UsbHost& host, const os::UsbDeviceInfo& info) {
  auto b = std::make_unique<Bridge>();
  b->info = info;
  b->device = std::make_unique<os::UsbDevice>(host.kernel, info);
  b->transport = std::make_unique<usb::Asm2464Transport>(*b->device);
  b->ltssm = b->transport->xdata_read(usb::asm2464::kLtssmRegister, 1)[0];
  b->hierarchy = usb::enumerate_pcie(*b->transport);
  for (const auto& f : b->hierarchy.functions) {
    const unsigned base_class = f.class_code >> 16;
    if (!f.bridge && (base_class == 0x03 || base_class == 0x12)) {
      b->gpu = &f;
      break;
    }
  }
  return b;
}

// The bridge `name` ("usb:2-1") names: a custom-firmware ASM2464, else an exact error.
os::UsbDeviceInfo find_bridge(UsbHost& host, const std::string& name) {
  const std::string port = name.rfind("usb:", 0) == 0 ? name.substr(4) : std::string();
  const bool well_formed = !port.empty() &&
                           port.find_first_not_of("0123456789-.") == std::string::npos &&
                           port.find('-') != std::string::npos;
  if (!well_formed)
    throw UsageError("'" + name + "' is not a USB device name (usb:<bus>-<port>, e.g. usb:2-1)");
  for (const auto& d : os::list_usb_devices(*host.kernel)) {
    if (d.port != port) continue;
    const auto fw = firmware_of(d);
    if (!fw)
      throw InvalidInput(name + " (" + ids(d) + ") is not an ASM2464 bridge (hcq usb ls lists "
                         "them)");
    if (*fw == Firmware::Stock) throw InvalidInput(name + " (" + ids(d) + ") runs " + kStock);
    return d;
  }
  throw InvalidInput("no USB device at " + name + " (hcq usb ls lists the ASM2464 bridges)");
}

std::unique_ptr<Bridge> open_gpu(UsbHost& host, const std::string& name) {
  auto b = open_bridge(host, find_bridge(host, name));
  if (!b->gpu)
    throw InvalidInput(name + ": no GPU behind the bridge (PCIe enumeration found:\n" +
                       b->hierarchy.text() + ")");
  return b;
}

std::string bar_text(const usb::PcieBarInfo& b) {
  std::string out = "BAR" + std::to_string(b.index) + " ";
  if (b.io) return out + "I/O " + os::byte_size(b.size) + ", not assigned";
  out += "[" + hex(b.address) + ", " + hex(b.address + b.size) + ") " + os::byte_size(b.size) +
         (b.is64 ? ", 64-bit" : ", 32-bit") + (b.prefetchable ? ", prefetchable" : ", non-prefetchable");
  if (b.size != b.size_before) out += " (resized from " + os::byte_size(b.size_before) + ")";
  return out;
}

std::string ltssm_text(uint8_t ltssm) {
  return ltssm == usb::asm2464::kLtssmL0 ? "L0 (LTSSM " + hex(ltssm) + ")"
                                         : "not L0 (LTSSM " + hex(ltssm) + "; L0 is 0x78)";
}

Json gpu_json(const usb::PcieFunctionInfo& f) {
  Json bars = Json::array();
  for (const auto& b : f.bars)
    bars.push_back({{"index", b.index},
                    {"address", b.assigned ? Json(hex(b.address)) : Json(nullptr)},
                    {"size", b.size},
                    {"io", b.io},
                    {"is64", b.is64},
                    {"prefetchable", b.prefetchable},
                    {"resized_from", b.size != b.size_before ? Json(b.size_before) : Json(nullptr)}});
  char cls[8];
  std::snprintf(cls, sizeof cls, "%06x", f.class_code);
  return {{"address", usb::to_string(f.bdf)},
          {"vendor", hex4(f.vendor)},
          {"device", hex4(f.device)},
          {"class", cls},
          {"bars", bars}};
}

}  // namespace

int cmd_usb_ls(bool json) {
  UsbHost host;
  Json out = Json::array();
  int rc = 0;
  bool any = false;
  for (const auto& d : os::list_usb_devices(*host.kernel)) {
    const auto fw = firmware_of(d);
    if (!fw) continue;
    any = true;
    Json j = {{"device", device_name(d)},
              {"port", d.port},
              {"bus", d.bus},
              {"devnum", d.devnum},
              {"vendor", hex4(d.vendor)},
              {"product", hex4(d.product)},
              {"product_name", d.product_name},
              {"speed", d.speed},
              {"firmware", *fw == Firmware::Custom ? "custom" : "stock"}};
    std::string text = device_name(d) + "  " + ids(d) + "  " +
                       (d.product_name.empty() ? "-" : d.product_name) + "  " + d.speed + " Mb/s\n";
    if (*fw == Firmware::Stock) {
      text += "  firmware  " + std::string(kStock) + "\n";
      j["error"] = nullptr;
    } else {
      text += "  firmware  tinygrad's custom firmware\n";
      try {
        auto b = open_bridge(host, d);
        text += "  PCIe link " + ltssm_text(b->ltssm) + "\n";
        j["ltssm"] = hex(b->ltssm);
        j["link_up"] = b->ltssm == usb::asm2464::kLtssmL0;
        if (b->gpu) {
          char cls[8];
          std::snprintf(cls, sizeof cls, "%06x", b->gpu->class_code);
          text += "  GPU       " + usb::to_string(b->gpu->bdf) + "  " + hex4(b->gpu->vendor) + ":" +
                  hex4(b->gpu->device) + "  class " + cls + "\n";
          for (const auto& bar : b->gpu->bars) text += "    " + bar_text(bar) + "\n";
          j["gpu"] = gpu_json(*b->gpu);
        } else {
          text += "  GPU       none behind the bridge\n";
          j["gpu"] = nullptr;
        }
        j["error"] = nullptr;
      } catch (const Error& e) {
        text += "  error     " + std::string(e.what()) + "\n";
        j["error"] = e.what();
        rc = 1;
      }
    }
    if (!json) std::printf("%s", text.c_str());
    out.push_back(j);
  }
  if (json) std::printf("%s\n", json_line({{"bridges", out}}).c_str());
  else if (!any) std::printf("no ASM2464 bridge on USB\n");
  return rc;
}

namespace {

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_usb_bench(const std::string& device, bool json) {
  UsbHost host;
  std::string name = device;
  if (name.empty()) {
    std::vector<std::string> custom;
    for (const auto& d : os::list_usb_devices(*host.kernel))
      if (firmware_of(d) == Firmware::Custom) custom.push_back(device_name(d));
    if (custom.empty())
      throw InvalidInput("no ASM2464 bridge with tinygrad's custom firmware (add1:0001) on USB");
    if (custom.size() > 1) {
      std::string all;
      for (auto& c : custom) all += (all.empty() ? "" : ", ") + c;
      throw UsageError("usb bench: several bridges (" + all + "); name one");
    }
    name = custom[0];
  }
  auto b = open_gpu(host, name);
  usb::PcieTransport& t = *b->transport;
  const usb::PcieBarInfo& vram = b->bar(0);
  constexpr int kRoundTrips = 200, kRounds = 5;
  constexpr size_t kStream = 16 << 20;
  if (vram.size < kStream)
    throw InvalidInput(b->gpu_name() + ": BAR0 (" + os::byte_size(vram.size) +
                       ") is smaller than the 16 MiB streams");
  std::vector<double> config, read32, stream_read, stream_write;
  for (int i = 0; i < kRoundTrips; i++) {
    config.push_back(seconds([&] { t.config_read(b->gpu->bdf, 0, 4); }));
    read32.push_back(seconds([&] { t.memory_read32(vram.address); }));
  }
  // The write puts back what the read got: VRAM is left as it was.
  std::vector<std::byte> bytes(kStream);
  for (int i = 0; i < kRounds; i++) {
    stream_read.push_back(seconds([&] { t.memory_read(vram.address, bytes); }));
    stream_write.push_back(seconds([&] { t.memory_write(vram.address, bytes); }));
  }
  const double config_us = median(config) * 1e6, read32_us = median(read32) * 1e6;
  const double read_mbs = kStream / median(stream_read) / 1e6;
  const double write_mbs = kStream / median(stream_write) / 1e6;
  if (json) {
    std::printf("%s\n", json_line({{"device", b->gpu_name()},
                                   {"config_read_us", config_us},
                                   {"memory_read32_us", read32_us},
                                   {"stream_read_mb_s", read_mbs},
                                   {"stream_write_mb_s", write_mbs},
                                   {"round_trips", kRoundTrips},
                                   {"stream_bytes", kStream},
                                   {"rounds", kRounds}})
                            .c_str());
    return 0;
  }
  std::printf("%s (%s:%s), medians of %d round trips and %d rounds of 16 MiB at BAR0:\n",
              b->gpu_name().c_str(), hex4(b->gpu->vendor).c_str(), hex4(b->gpu->device).c_str(),
              kRoundTrips, kRounds);
  std::printf("  config read round trip     %10.1f us\n", config_us);
  std::printf("  memory read32 round trip   %10.1f us\n", read32_us);
  std::printf("  stream read  16 MiB        %10.1f MB/s\n", read_mbs);
  std::printf("  stream write 16 MiB        %10.1f MB/s\n", write_mbs);
  return 0;
}

int cmd_reg_usb(const RegArgs& args) {
  check_reg_args(args);
  UsbHost host;
  auto b = open_gpu(host, args.device);
  RegDevice d;
  d.address = b->gpu_name();
  d.vendor = b->gpu->vendor;
  d.device = b->gpu->device;
  const PciSupport* s = nullptr;
  for (auto& drv : builtin_drivers())
    if (drv.pci.vendor && drv.pci.vendor == d.vendor) s = &drv.pci;
  d.known = s && s->registers ? s->registers(d.device) : std::vector<PciSupport::Register>();
  auto window = [&](int index) {
    const usb::PcieBarInfo& bar = b->bar(index);
    return std::make_unique<usb::TransportMmio>(*b->transport, bar.address, bar.size,
                                                "BAR" + std::to_string(index) + " of " +
                                                    b->gpu_name());
  };
  // The registers the GPU's discovery table places, read with TLPs; no kernel driver shares
  // the GPU behind the bridge, so hcq may use MM_INDEX/MM_DATA.
  if (d.vendor == amd::kPciVendor) {
    try {
      auto regs = window(amd::kRegisterBar);
      std::unique_ptr<usb::TransportMmio> vram;
      if (b->gpu->bar(0) && b->gpu->bar(0)->assigned) vram = window(0);
      add_discovered(d, amd::discovered_registers(d.device, *regs, vram.get(), true));
    } catch (const Error& e) {
      d.undiscovered = e.what();
    }
  }
  d.open_bar = [&](int index) -> std::unique_ptr<os::Mmio> { return window(index); };
  return reg_on(args, d);
}

}  // namespace hcq::tools
