// hcq's VFIO layer against a real Linux kernel: run as the init program's test inside a QEMU
// guest (scripts/qemu_vfio_test.sh) whose q35 machine has an emulated Intel IOMMU and QEMU's
// `edu` PCI device. The device is found and bound through hcq's PCI layer, opened with
// os::VfioDevice, its BAR0 mapped, and host memory made visible to it at IOVAs; the device then
// copies host -> device -> host by DMA, and a DMA to an IOVA that was unmapped must be blocked
// by the IOMMU (the data does not arrive; the guest kernel logs the DMAR fault).
//
// The edu device (QEMU docs/specs/edu.rst, hw/misc/edu.c): PCI 1234:11e8, BAR0 1 MiB;
// 0x00 identification 0xRRrr00ed, 0x04 liveness check (reads back the inverse of what was
// written), 0x80 DMA source, 0x88 DMA destination, 0x90 DMA count, 0x98 DMA command (bit 0
// start, cleared when done; bit 1 direction: 1 = edu -> RAM); a 4 KiB buffer at device address
// 0x40000; DMA addresses limited to 28 bits by default.
//
// Each check prints one PASS or FAIL line; the exit status is the number of failures (capped).
#include <linux/pci_regs.h>
#include <sys/klog.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "os/pci.hpp"
#include "os/vfio.hpp"

namespace {

using namespace hcq;
using namespace hcq::os;

constexpr uint16_t kEduVendor = 0x1234, kEduDevice = 0x11e8;
constexpr uint32_t kEduId = 0x010000ed;  // QEMU 7.2's edu: version 1.0
constexpr uint64_t kRegId = 0x00, kRegLiveness = 0x04, kRegDmaSrc = 0x80, kRegDmaDst = 0x88,
                   kRegDmaCount = 0x90, kRegDmaCmd = 0x98;
constexpr uint64_t kDmaStart = 1, kDmaToRam = 2;
constexpr uint64_t kEduBuffer = 0x40000;
// Below the edu device's 28-bit DMA mask.
constexpr uint64_t kIovaSrc = 0x100000, kIovaDst = 0x200000;
constexpr size_t kPage = 4096, kCopy = 2048;

int failures = 0;

bool check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) failures++;
  return ok;
}

struct Edu {
  volatile uint8_t* bar;
  uint32_t read32(uint64_t off) const { return *reinterpret_cast<volatile uint32_t*>(bar + off); }
  void write32(uint64_t off, uint32_t v) const { *reinterpret_cast<volatile uint32_t*>(bar + off) = v; }
  void write64(uint64_t off, uint64_t v) const { *reinterpret_cast<volatile uint64_t*>(bar + off) = v; }

  // Starts one DMA and waits for the device to clear the start bit (edu.c completes a DMA
  // from a 100 ms timer; TCG makes that slower). False when it did not finish in time.
  bool dma(uint64_t src, uint64_t dst, uint64_t count, uint64_t cmd) const {
    write64(kRegDmaSrc, src);
    write64(kRegDmaDst, dst);
    write64(kRegDmaCount, count);
    write64(kRegDmaCmd, cmd | kDmaStart);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read32(kRegDmaCmd) & kDmaStart) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

// The kernel log (syslog(2) SYSLOG_ACTION_READ_ALL), without blocking.
std::string kernel_log() {
  int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  if (size <= 0) return "";
  std::string buf(size_t(size), '\0');
  int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), size);
  buf.resize(n > 0 ? size_t(n) : 0);
  return buf;
}

// The kernel log line saying the IOMMU blocked a DMA write to `iova` (Linux
// drivers/iommu/intel/dmar.c dmar_fault_do_one: "[DMA Write NO_PASID] Request device
// [bb:dd.f] fault addr 0x... [fault reason 0x..] ..."); empty when there is none yet. The
// fault arrives through an interrupt, so this polls for up to `wait`.
std::string dmar_write_fault(uint64_t iova, std::chrono::milliseconds wait) {
  const std::string addr = "fault addr " + hex(iova) + " ";
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string log = kernel_log();
    for (size_t at = 0, end; at < log.size(); at = end + 1) {
      end = log.find('\n', at);
      if (end == std::string::npos) end = log.size();
      std::string line = log.substr(at, end - at);
      if (line.find("DMAR: [DMA Write") != std::string::npos && line.find(addr) != std::string::npos)
        return line;
    }
    if (std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void* host_page() {
  void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw OsError("mmap of a host page", errno);
  return p;
}

void run() {
  auto k = real_kernel();
  std::string address;
  for (auto& f : pci_functions(*k))
    if (f.vendor == kEduVendor && f.device == kEduDevice) address = f.address;
  if (!check(!address.empty(), "hcq's PCI layer finds the edu device 1234:11e8")) return;
  PciFunction fn = pci_function(*k, address);
  std::printf("     %s: driver '%s', IOMMU group %d\n", address.c_str(), fn.driver.c_str(),
              fn.iommu_group);
  if (!check(fn.iommu_group >= 0, address + " is in an IOMMU group")) return;

  pci_bind_vfio(*k, fn);
  fn = pci_function(*k, address);
  if (!check(fn.driver == "vfio-pci", "pci_bind_vfio binds " + address + " to vfio-pci (driver now '" +
                                          fn.driver + "')"))
    return;

  VfioDevice dev(k, fn);
  check(!dev.iommufd(), "VfioDevice opens it through the container/group interface (this kernel has no iommufd)");
  VfioDevice::Region r0 = dev.region(0);
  check(r0.size == 1 << 20 && r0.mappable, "BAR0 is a mappable 1 MiB region (size " + hex(r0.size) + ")");
  Edu edu{static_cast<volatile uint8_t*>(dev.map_region(0))};
  const uint32_t id = edu.read32(kRegId);
  check(id == kEduId, "BAR0 id register through map_region reads " + hex(id) + ", expected " + hex(kEduId));
  edu.write32(kRegLiveness, 0x12345678);
  const uint32_t live = edu.read32(kRegLiveness);
  check(live == ~0x12345678u, "liveness register: wrote 0x12345678, read back " + hex(live) +
                                  ", expected " + hex(~0x12345678u));

  // vfio-pci does not turn bus mastering on; without it the edu device's DMA never reaches
  // memory (seen here before VfioDevice had enable_bus_master).
  const uint16_t before = dev.config16(PCI_COMMAND);
  check(!(before & PCI_COMMAND_MASTER), "vfio-pci leaves Bus Master Enable off (command register " +
                                            hex(before) + ")");
  dev.enable_bus_master();
  const uint16_t after = dev.config16(PCI_COMMAND);
  check((after & PCI_COMMAND_MASTER) && (after & PCI_COMMAND_MEMORY),
        "enable_bus_master sets Bus Master and Memory Space Enable through the config region "
        "(command register " + hex(after) + ")");
  auto* src = static_cast<uint8_t*>(host_page());
  auto* dst = static_cast<uint8_t*>(host_page());
  for (size_t i = 0; i < kPage; i++) src[i] = uint8_t(i * 13 + 5);
  std::memset(dst, 0, kPage);
  dev.map_dma(src, kIovaSrc, kPage);
  dev.map_dma(dst, kIovaDst, kPage);
  const bool in = edu.dma(kIovaSrc, kEduBuffer, kCopy, 0);
  const bool out = edu.dma(kEduBuffer, kIovaDst, kCopy, kDmaToRam);
  check(in && out, "the edu device completes DMA host -> device and device -> host");
  size_t same = 0;
  while (same < kCopy && dst[same] == src[same]) same++;
  check(same == kCopy, "DMA through map_dma IOVAs: " + std::to_string(same) + " of " +
                           std::to_string(kCopy) + " bytes arrived intact");

  dev.unmap_dma(kIovaDst, kPage);
  std::memset(dst, 0, kPage);
  check(dmar_write_fault(kIovaDst, std::chrono::milliseconds(0)).empty(),
        "no DMAR fault at " + hex(kIovaDst) + " in the kernel log before the blocked DMA");
  check(edu.dma(kEduBuffer, kIovaDst, kCopy, kDmaToRam),
        "the edu device completes its DMA to the unmapped IOVA " + hex(kIovaDst) + " (device side)");
  size_t zero = 0;
  while (zero < kPage && dst[zero] == 0) zero++;
  check(zero == kPage, "after unmap_dma the DMA is blocked: the host page is untouched (" +
                           std::to_string(zero) + " of " + std::to_string(kPage) + " bytes still 0)");
  std::string fault = dmar_write_fault(kIovaDst, std::chrono::seconds(5));
  check(!fault.empty(), "the guest kernel logs the IOMMU fault for IOVA " + hex(kIovaDst) +
                            (fault.empty() ? "" : ": " + fault));
  dev.unmap_dma(kIovaSrc, kPage);
  dev.unmap_region(const_cast<uint8_t*>(edu.bar), r0.size);
}

}  // namespace

int main() {
  try {
    run();
  } catch (const std::exception& e) {
    check(false, std::string("unexpected error: ") + e.what());
  }
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures > 100 ? 100 : failures;
}
