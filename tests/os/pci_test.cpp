// The PCI layer on the real bus (read only, never mapping a BAR) and on the emulated
// system of drivers/emulated_pci.hpp: enumeration, BAR maps, binding control and VFIO.
#include "os/pci.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "amd/pci.hpp"
#include "common/error_of.hpp"
#include "common/file_size_limit.hpp"
#include "core/error.hpp"
#include "emulated_pci.hpp"
#include "nv/pci.hpp"
#include "nv/targets.hpp"
#include "os/emulated_vfio.hpp"
#include "os/iommufd_abi.hpp"
#include "os/pci_bar.hpp"
#include "os/vfio.hpp"

namespace hcq::os {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t MiB = 1 << 20, GiB = 1ull << 30;

using testing_support::error_of;

// The real OS for reads; fails the test on anything that could touch a device.
class ReadOnlyKernel final : public Kernel {
 public:
  int open(const std::string& p, int) override { return fail("open " + p); }
  int close(int) override { return fail("close"); }
  int ioctl(int, unsigned long, void*) override { return fail("ioctl"); }
  void* mmap(void*, size_t, int, int, int, off_t) override {
    fail("mmap");
    return MAP_FAILED;
  }
  int munmap(void*, size_t) override { return fail("munmap"); }
  ssize_t pread(int, void*, size_t, off_t) override { return fail("pread"); }
  ssize_t pwrite(int, const void*, size_t, off_t) override { return fail("pwrite"); }
  ssize_t read(int, void*, size_t) override { return fail("read"); }
  int eventfd(unsigned, int) override { return fail("eventfd"); }
  int poll(pollfd*, nfds_t, int) override { return fail("poll"); }
  std::optional<std::string> read_file(const std::string& p) override {
    return real_kernel()->read_file(p);
  }
  std::vector<std::string> list_dir(const std::string& p) override {
    return real_kernel()->list_dir(p);
  }
  int write_file(const std::string& p, const std::string&) override { return fail("write " + p); }
  std::string sysfs_root() const override { return "/sys"; }
  bool emulated() const override { return false; }

 private:
  int fail(const std::string& what) {
    ADD_FAILURE() << "PCI enumeration must not " << what;
    return -EPERM;
  }
};

// speed, width, max_speed, max_width, port_max_speed, port_max_width, capable speed and
// width, degraded; empty without a link.
std::vector<unsigned> link_of(const PciFunction& f) {
  if (!f.link) return {};
  const PciLink& l = *f.link;
  return {l.speed, l.width, l.max_speed, l.max_width, l.port_max_speed, l.port_max_width,
          l.capable_speed(), l.capable_width(), l.degraded()};
}

std::string attr(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  in >> s;
  return s;
}

TEST(RealPci, ListsWhatSysfsShowsAndMapsNothing) {
  ReadOnlyKernel k;
  auto fns = pci_functions(k);
  std::vector<std::string> expected;
  const fs::path bus = "/sys/bus/pci/devices";
  if (fs::exists(bus))
    for (auto& e : fs::directory_iterator(bus)) expected.push_back(e.path().filename());
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(fns.size(), expected.size());
  for (size_t i = 0; i < fns.size(); i++) {
    const auto& f = fns[i];
    const fs::path d = bus / expected[i];
    SCOPED_TRACE(f.address);
    EXPECT_EQ(f.address, expected[i]);
    EXPECT_EQ(f.vendor, std::stoul(attr(d / "vendor"), nullptr, 16));
    EXPECT_EQ(f.device, std::stoul(attr(d / "device"), nullptr, 16));
    EXPECT_EQ(f.class_code, std::stoul(attr(d / "class"), nullptr, 16));
    EXPECT_EQ(f.is_gpu(), f.class_code >> 16 == 3);
    std::string driver = fs::is_symlink(d / "driver") ? fs::read_symlink(d / "driver").filename().string() : "";
    EXPECT_EQ(f.driver, driver);
    // Every BAR with a size in the resource file, and only those.
    std::ifstream res(d / "resource");
    std::vector<std::pair<int, uint64_t>> bars, got;
    unsigned long long start, end, flags;
    for (int i = 0; i < 6 && res >> std::hex >> start >> end >> flags; i++)
      if (end > start) bars.push_back({i, end - start + 1});
    for (auto& b : f.bars) got.push_back({b.index, b.size});
    EXPECT_EQ(got, bars);
  }
}

// ---- the emulated system ----

class EmulatedPci : public ::testing::Test {
 protected:
  std::unique_ptr<EmulatedPciBus> bus = emulated_pci_system();
  std::shared_ptr<EmulatedKernel> k = bus->kernel();
  PciFunction fn(const std::string& a) { return pci_function(*k, a); }
};

TEST_F(EmulatedPci, EnumeratesTheGpusBridgesAndLinks) {
  auto fns = pci_functions(*k);
  std::vector<std::string> addrs;
  for (auto& f : fns) addrs.push_back(f.address);
  EXPECT_EQ(addrs, (std::vector<std::string>{"0000:00:00.0", "0000:00:01.0", "0000:00:02.0",
                                              "0000:00:06.0", "0000:00:07.0", "0000:01:00.0",
                                              "0000:03:00.0", "0000:20:00.0",
                                              "0000:21:01.0", "0000:22:00.0"}));
  PciFunction nv = fn("22:00.0");
  EXPECT_EQ(nv.vendor, 0x10de);
  EXPECT_EQ(nv.device, 0x2330);
  EXPECT_EQ(nv.subsystem_vendor, 0x10de);
  EXPECT_EQ(nv.subsystem_device, 0x16c1);
  EXPECT_EQ(nv.revision, 0xa1);
  EXPECT_EQ(nv.class_code, 0x030200u);
  EXPECT_TRUE(nv.is_gpu());
  ASSERT_EQ(nv.bars.size(), 3u);
  EXPECT_EQ(nv.bars[0].index, 0);
  EXPECT_EQ(nv.bars[0].size, 16 * MiB);
  EXPECT_FALSE(nv.bars[0].is64);
  EXPECT_FALSE(nv.bars[0].prefetchable);
  EXPECT_EQ(nv.bars[1].index, 1);
  EXPECT_EQ(nv.bars[1].size, 256 * MiB);
  EXPECT_TRUE(nv.bars[1].is64);
  EXPECT_TRUE(nv.bars[1].prefetchable);
  EXPECT_EQ(nv.bars[2].index, 3);
  ASSERT_EQ(nv.resizable_bars.size(), 1u);
  EXPECT_EQ(nv.resizable_bars[0].bar, 1);
  EXPECT_EQ(nv.resizable_bars[0].current, 256 * MiB);
  ASSERT_EQ(nv.resizable_bars[0].supported.size(), 12u);  // 64 MiB .. 128 GiB
  EXPECT_EQ(nv.resizable_bars[0].supported.front(), 64 * MiB);
  EXPECT_EQ(nv.resizable_bars[0].supported.back(), 128 * GiB);
  EXPECT_EQ(nv.port, PciPort::Endpoint);
  // Trained at Gen1 x4; Gen5 x16 here, Gen3 x4 at the enclosure's downstream port.
  EXPECT_EQ(link_of(nv), (std::vector<unsigned>{1, 4, 5, 16, 3, 4, 3, 4, 1}));
  EXPECT_EQ(nv.driver, "nouveau");
  EXPECT_EQ(nv.iommu_group, 7);
  EXPECT_EQ(nv.numa_node, 0);
  EXPECT_FALSE(nv.thunderbolt);
  EXPECT_EQ(nv.upstream, (std::vector<std::string>{"0000:21:01.0", "0000:20:00.0", "0000:00:07.0"}));

  PciFunction down = fn("0000:21:01.0"), up = fn("0000:20:00.0"), root = fn("0000:00:07.0");
  EXPECT_EQ(down.port, PciPort::DownstreamPort);
  EXPECT_EQ(up.port, PciPort::UpstreamPort);
  EXPECT_EQ(root.port, PciPort::RootPort);
  EXPECT_TRUE(down.thunderbolt && up.thunderbolt && root.thunderbolt);
  EXPECT_FALSE(down.is_gpu());
  EXPECT_EQ(root.upstream, std::vector<std::string>{});

  PciFunction amd = fn("01:00.0");
  EXPECT_EQ(amd.driver, "amdgpu");
  EXPECT_EQ(link_of(amd), (std::vector<unsigned>{4, 16, 4, 16, 4, 16, 4, 16, 0}));
  EXPECT_FALSE(fn("00:01.0").thunderbolt);
  ASSERT_NE(amd.bar(4), nullptr);
  EXPECT_TRUE(amd.bar(4)->io);
  EXPECT_EQ(amd.bar(4)->size, 256u);

  PciFunction igpu = fn("00:02.0");
  EXPECT_EQ(igpu.port, PciPort::RootComplexEndpoint);
  EXPECT_FALSE(igpu.link.has_value());
  PciFunction host = fn("00:00.0");
  EXPECT_EQ(host.port, PciPort::None);
  EXPECT_EQ(host.driver, "");
  EXPECT_EQ(host.numa_node, -1);
}

// An H200 as a VM on the device machine shows it (its sysfs, 2026-11-30): config space up to
// the PCIe capability (power management at 0x40, MSI at 0x48, PCIe at 0x60 with the chain
// cut after it), Gen5 x16 trained at Gen5 x16, 64-bit prefetchable BARs 0, 2 (256 GiB), 4.
TEST(RealConfigSpace, AnH200ReadsAsAGen5x16Endpoint) {
  const uint32_t words[] = {0x233510de, 0x00100546, 0x030200a1, 0, 0x0200000c, 0x00001040,
                            0x0000000c, 0x00001000, 0x0000000c, 0x00001040, 0, 0x18bf10de,
                            0, 0x00000040, 0, 0x000001ff, 0x00134801, 0x00000008, 0x03886005,
                            0, 0, 0, 0, 0, 0x00020010 /* real: 0x0002b010, next cut */, 0x112c8021,
                            0x00005134, 0x00457905, 0x11050000};
  EmulatedPciFunction h200;
  h200.address = "0000:00:06.0";
  h200.vendor = 0x10de;
  h200.device = 0x2335;
  h200.subsystem_vendor = 0x10de;
  h200.subsystem_device = 0x18bf;
  h200.class_code = 0x030200;
  h200.revision = 0xa1;
  h200.bars = {{0, 16 * MiB, true, true, false, {}, {}}, {2, 256 * GiB, true, true, false, {}, {}},
               {4, 32 * MiB, true, true, false, {}, {}}};
  h200.driver = "nvidia";
  h200.config.assign(4096, 0);
  std::memcpy(h200.config.data(), words, sizeof words);
  EmulatedPciBus bus({h200});
  PciFunction f = pci_function(*bus.kernel(), "00:06.0");
  EXPECT_EQ(f.port, PciPort::Endpoint);
  EXPECT_EQ(link_of(f), (std::vector<unsigned>{5, 16, 5, 16, 0, 0, 5, 16, 0}));
  EXPECT_TRUE(f.resizable_bars.empty());
  EXPECT_EQ(f.upstream, std::vector<std::string>{});
  ASSERT_EQ(f.bars.size(), 3u);
  EXPECT_EQ(f.bars[1].size, 256 * GiB);
  EXPECT_TRUE(f.bars[1].is64 && f.bars[1].prefetchable);
  EXPECT_EQ(f.iommu_group, -1);
}

TEST_F(EmulatedPci, UnknownAddressAndNoBusAreReportedPlainly) {
  EXPECT_EQ(error_of<InvalidInput>([&] { fn("0000:99:00.0"); }),
            "no PCI function 0000:99:00.0 (hcq ls --all lists them)");
  EmulatedKernel bare;  // an emulated kernel with no sysfs tree has no PCI bus
  EXPECT_TRUE(pci_functions(bare).empty());
}

TEST(NvPci, BootZeroEncodesTheEmulatedChips) {
  const nv::Target& h100 = *nv::find_target("sm_90");
  EXPECT_EQ(nv::pmc_boot_0(h100.architecture, h100.implementation, 0xa1), 0x180000a1u);
  EXPECT_EQ(nv::describe_pmc_boot_0(0x180000a1), "chip 0x180 (GH100, Hopper), revision a1");
  const nv::Target& a100 = *nv::find_target("sm_80");
  EXPECT_EQ(nv::describe_pmc_boot_0(nv::pmc_boot_0(a100.architecture, a100.implementation, 0xa1)),
            "chip 0x170 (GA100, Ampere), revision a1");
  EXPECT_EQ(nv::describe_pmc_boot_0(0x0b4000a2), "chip 0xb4 (unknown architecture), revision a2");
}

TEST_F(EmulatedPci, BarMapsReadTheEmulatedRegistersWithinBounds) {
  PciFunction nv = fn("22:00.0");
  PciBarMap bar0(k, nv, 0);
  EXPECT_EQ(bar0.size(), 16 * MiB);
  EXPECT_EQ(bar0.read32(0), 0x180000a1u);  // NV_PMC_BOOT_0 of emu:sm_90
  bar0.write32(0x140, 0x1234);
  EXPECT_EQ(bus->bar("0000:22:00.0", 0).read32(0x140), 0x1234u);
  EXPECT_EQ(bar0.read32(16 * MiB - 4), 0u);
  EXPECT_EQ(error_of<InvalidInput>([&] { bar0.read32(16 * MiB); }),
            "0x1000000 is outside BAR0 of 0000:22:00.0 (0x1000000 bytes)");
  EXPECT_EQ(error_of<InvalidInput>([&] { bar0.write32(16 * MiB - 2, 0); }),
            "0xfffffe is not a 32-bit register offset (BAR0 of 0000:22:00.0)");
  EXPECT_EQ(error_of<InvalidInput>([&] { PciBarMap(k, nv, 2); }), "0000:22:00.0 has no BAR2");
  EXPECT_EQ(error_of<InvalidInput>([&] { PciBarMap(k, nv, 0, true); }),
            "BAR0 of 0000:22:00.0 is not prefetchable, so it has no write-combined map");
  EXPECT_EQ(error_of<InvalidInput>([&] { PciBarMap(k, fn("01:00.0"), 4); }),
            "BAR4 of 0000:01:00.0 is an I/O port range; only memory BARs map");
  // A write-combined map of the prefetchable BAR1 sees the same memory.
  PciBarMap wc(k, nv, 1, true);
  wc.write32(0x100, 7);
  EXPECT_EQ(bus->bar("0000:22:00.0", 1).read32(0x100), 7u);
}

// The device side's accesses to an emulated BAR are its memory, not file writes: a process
// file-size limit (RLIMIT_FSIZE, which a test lowers to make a capture fail) does not reach
// them; what they write, a map of the BAR sees; a range that leaves the BAR is refused.
TEST(EmulatedBarMemory, IgnoresTheFileSizeLimitAndRefusesRangesPastItsEnd) {
  os::EmulatedBar bar(1 * MiB, {{0x10, 0x1234u}});
  EXPECT_EQ(bar.read32(0x10), 0x1234u);  // the reset value
  testing_support::FileSizeLimit limit(4096);
  std::string error = "no error";
  try {
    bar.write32(0x8000, 0xcafe0001u);
    const uint32_t words[2] = {0x11111111u, 0x22222222u};
    bar.write(0x9000, std::as_bytes(std::span(words)));
  } catch (const Error& e) {
    error = e.what();
  }
  limit.lift();
  EXPECT_EQ(error, "no error");
  EXPECT_EQ(bar.read32(0x8000), 0xcafe0001u);
  uint32_t back[2] = {};
  bar.read(0x9000, std::as_writable_bytes(std::span(back)));
  EXPECT_EQ(back[0], 0x11111111u);
  EXPECT_EQ(back[1], 0x22222222u);
  void* m = bar.map(nullptr, 4096, PROT_READ, 0x8000);
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_EQ(*static_cast<volatile uint32_t*>(m), 0xcafe0001u);
  ::munmap(m, 4096);
  EXPECT_EQ(error_of<InvalidInput>([&] { bar.read32(1 * MiB); }),
            "emulated BAR: 4 bytes at 0x100000 leave its 0x100000 bytes");
  EXPECT_EQ(error_of<InvalidInput>([&] { bar.write(1 * MiB - 4, std::vector<std::byte>(8)); }),
            "emulated BAR: 8 bytes at 0xffffc leave its 0x100000 bytes");
}

TEST_F(EmulatedPci, MappingWithoutPermissionSaysWhichFile) {
  k->deny("/sys/bus/pci/devices/0000:01:00.0/resource5", EACCES);
  EXPECT_EQ(error_of<OsError>([&] { PciBarMap(k, fn("01:00.0"), 5); }),
            "0000:01:00.0: open /sys/bus/pci/devices/0000:01:00.0/resource5 (mapping a BAR needs "
            "root): Permission denied (errno 13)");
}

TEST_F(EmulatedPci, BindingControlMovesTheFunctionToVfio) {
  k->deny("/sys/bus/pci/drivers/i915/unbind", EACCES);
  EXPECT_EQ(error_of<OsError>([&] { pci_unbind(*k, fn("00:02.0")); }),
            "0000:00:02.0: cannot unbind from i915 (write /sys/bus/pci/drivers/i915/unbind): "
            "Permission denied (errno 13)");
  EXPECT_EQ(fn("00:02.0").driver, "i915");

  // vfio-pci takes a function only through driver_override; a bound one is busy.
  EXPECT_EQ(k->write_file("/sys/bus/pci/drivers/vfio-pci/bind", "0000:01:00.0"), -EBUSY);
  pci_unbind(*k, fn("01:00.0"));
  EXPECT_EQ(fn("01:00.0").driver, "");
  EXPECT_EQ(k->write_file("/sys/bus/pci/drivers/vfio-pci/bind", "0000:01:00.0\n"), -ENODEV);
  pci_set_driver_override(*k, fn("01:00.0"), "vfio-pci");
  EXPECT_EQ(*k->read_file("/sys/bus/pci/devices/0000:01:00.0/driver_override"), "vfio-pci\n");
  pci_bind_vfio(*k, fn("01:00.0"));
  EXPECT_EQ(fn("01:00.0").driver, "vfio-pci");
  pci_bind_vfio(*k, fn("01:00.0"));  // already there: nothing to do

  k->deny("/sys/bus/pci/devices/0000:22:00.0/driver_override", EACCES);
  EXPECT_EQ(error_of<OsError>([&] { pci_bind_vfio(*k, fn("22:00.0")); }),
            "0000:22:00.0: cannot set driver_override to vfio-pci (write "
            "/sys/bus/pci/devices/0000:22:00.0/driver_override): Permission denied (errno 13)");
  EXPECT_EQ(fn("22:00.0").driver, "");  // the unbind before it went through
}

TEST(EmulatedPciNoIommu, VfioCannotTakeAFunctionWithoutAnIommuGroup) {
  auto fns = emulated_pci_functions();
  for (auto& f : fns) f.iommu_group = -1;
  EmulatedPciBus bus(fns);
  auto& k = *bus.kernel();
  EXPECT_EQ(pci_function(k, "22:00.0").iommu_group, -1);
  EXPECT_EQ(error_of<Error>([&] { pci_bind_vfio(k, pci_function(k, "22:00.0")); }),
            "0000:22:00.0: no IOMMU group, so VFIO cannot take it (enable the IOMMU: "
            "intel_iommu=on or amd_iommu=on)");
  EXPECT_EQ(pci_function(k, "22:00.0").driver, "nouveau");
}

// The system with the H100 on vfio-pci, opened through iommufd (true) or, with /dev/iommu
// missing, through the container/group interface (false).
class EmulatedVfioTest : public EmulatedPci, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) k->deny("/dev/iommu", ENOENT);
    pci_bind_vfio(*k, fn("22:00.0"));
  }
};
INSTANTIATE_TEST_SUITE_P(IommufdAndGroup, EmulatedVfioTest, ::testing::Bool());

TEST_P(EmulatedVfioTest, RegionsMapTheBarsAndResetRestoresRegisters) {
  VfioDevice dev(k, fn("22:00.0"));
  EXPECT_EQ(dev.iommufd(), GetParam());
  EXPECT_EQ(dev.regions(), 9u);
  auto r0 = dev.region(0);
  EXPECT_EQ(r0.size, 16 * MiB);
  EXPECT_EQ(r0.offset, 0u);
  EXPECT_TRUE(r0.readable && r0.writable && r0.mappable);
  auto r1 = dev.region(1);
  EXPECT_EQ(r1.size, 256 * MiB);
  EXPECT_EQ(r1.offset, 1ull << 40);
  EXPECT_EQ(dev.region(2).size, 0u);
  auto cfg = dev.region(7);
  EXPECT_EQ(cfg.size, 4096u);
  EXPECT_FALSE(cfg.mappable);
  EXPECT_EQ(error_of<InvalidInput>([&] { dev.map_region(2); }),
            "0000:22:00.0: VFIO region 2 cannot be mapped");
  EXPECT_EQ(error_of<OsError>([&] { dev.region(9); }),
            "0000:22:00.0: VFIO_DEVICE_GET_REGION_INFO for region 9: Invalid argument (errno 22)");

  auto* regs = static_cast<volatile uint32_t*>(dev.map_region(0));
  EXPECT_EQ(regs[0], 0x180000a1u);
  regs[0x140 / 4] = 5;
  EXPECT_EQ(bus->bar("0000:22:00.0", 0).read32(0x140), 5u);
  dev.reset();
  EXPECT_EQ(regs[0x140 / 4], 0u);
  EXPECT_EQ(regs[0], 0x180000a1u);
  EXPECT_EQ(bus->vfio().resets("0000:22:00.0"), 1);
  dev.unmap_region(const_cast<uint32_t*>(regs), r0.size);
}

TEST_P(EmulatedVfioTest, DmaMappingsMakeHostMemoryVisibleToTheDevice) {
  VfioDevice dev(k, fn("22:00.0"));
  const std::string map = GetParam() ? "IOMMU_IOAS_MAP" : "VFIO_IOMMU_MAP_DMA";
  void* host = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(host, MAP_FAILED);
  static_cast<uint32_t*>(host)[3] = 0xabcd;
  dev.map_dma(host, 0x100000, 8192);
  auto* seen = static_cast<uint32_t*>(bus->vfio().translate(0x100000 + 12, 4));
  ASSERT_EQ(seen, static_cast<uint32_t*>(host) + 3);
  EXPECT_EQ(*seen, 0xabcdu);
  EXPECT_EQ(bus->vfio().translate(0x100000 + 8190, 4), nullptr);  // runs past the mapping
  EXPECT_EQ(error_of<OsError>([&] { dev.map_dma(host, 0x101000, 4096); }),
            "0000:22:00.0: " + map + " of 0x1000 bytes at IOVA 0x101000: File exists (errno 17)");
  EXPECT_EQ(error_of<OsError>([&] { dev.map_dma(host, 0x200010, 4096); }),
            "0000:22:00.0: " + map + " of 0x1000 bytes at IOVA 0x200010: Invalid argument (errno 22)");
  dev.unmap_dma(0x100000, 8192);
  EXPECT_EQ(bus->vfio().translate(0x100000, 4), nullptr);
  EXPECT_EQ(error_of<Error>([&] { dev.unmap_dma(0x100000, 8192); }),
            "0000:22:00.0: no DMA mapping of 0x2000 bytes at IOVA 0x100000");
  ::munmap(host, 8192);
}

// vfio-pci does not set Bus Master Enable, and clears it when the device is closed
// (vfio_pci_core_disable): without enable_bus_master a device's DMA never reaches memory, as
// tests/qemu/vfio_edu_test saw in a real kernel.
TEST_P(EmulatedVfioTest, BusMasteringIsOffUntilEnabledAndOffAgainAfterClose) {
  const std::string a = "0000:22:00.0";
  {
    VfioDevice dev(k, fn("22:00.0"));
    EXPECT_FALSE(bus->vfio().bus_master(a));
    EXPECT_EQ(dev.config16(PCI_VENDOR_ID), 0x10de);
    EXPECT_EQ(dev.config16(PCI_DEVICE_ID), 0x2330);
    EXPECT_EQ(dev.config16(PCI_COMMAND), PCI_COMMAND_MEMORY);
    dev.enable_bus_master();
    EXPECT_TRUE(bus->vfio().bus_master(a));
    EXPECT_EQ(dev.config16(PCI_COMMAND), PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    dev.set_config16(PCI_VENDOR_ID, 0x1234);  // read-only: dropped
    EXPECT_EQ(dev.config16(PCI_VENDOR_ID), 0x10de);
    EXPECT_EQ(error_of<OsError>([&] { dev.config16(4095); }),
              "0000:22:00.0: config space read at 0xfff: Invalid argument (errno 22)");
  }
  EXPECT_FALSE(bus->vfio().bus_master(a));
  VfioDevice again(k, fn("22:00.0"));
  EXPECT_EQ(again.config16(PCI_COMMAND), PCI_COMMAND_MEMORY);
}

TEST_F(EmulatedPci, AVfioCdevAnswersOnlyOnceBoundToAnIommufd) {
  pci_bind_vfio(*k, fn("22:00.0"));
  // vfio0 is the RX 7900 XTX at 03:00.0, on vfio-pci from the start.
  EXPECT_EQ(k->list_dir("/sys/bus/pci/devices/0000:22:00.0/vfio-dev"),
            std::vector<std::string>{"vfio1"});
  int dev = k->open("/dev/vfio/devices/vfio1", O_RDWR);
  ASSERT_GE(dev, 0);
  vfio_device_info info{};
  info.argsz = sizeof info;
  EXPECT_EQ(k->ioctl(dev, VFIO_DEVICE_GET_INFO, &info), -EINVAL);
  iommufd::BindIommufd bind{sizeof bind, 0, dev, 0};  // not an iommufd
  EXPECT_EQ(k->ioctl(dev, iommufd::VFIO_DEVICE_BIND_IOMMUFD, &bind), -EBADF);
  bind.iommufd = k->open("/dev/iommu", O_RDWR);
  EXPECT_EQ(k->ioctl(dev, iommufd::VFIO_DEVICE_BIND_IOMMUFD, &bind), 0);
  EXPECT_EQ(k->ioctl(dev, VFIO_DEVICE_GET_INFO, &info), 0);
  EXPECT_EQ(info.num_regions, 9u);
  iommufd::AttachPt attach{sizeof attach, 0, 99};  // no such IO address space
  EXPECT_EQ(k->ioctl(dev, iommufd::VFIO_DEVICE_ATTACH_IOMMUFD_PT, &attach), -ENOENT);
  k->close(dev);
  k->close(bind.iommufd);
  pci_unbind(*k, fn("22:00.0"));
  EXPECT_TRUE(k->list_dir("/sys/bus/pci/devices/0000:22:00.0/vfio-dev").empty());
}

TEST_F(EmulatedPci, VfioSaysWhatIsMissing) {
  EXPECT_EQ(error_of<Error>([&] { VfioDevice(k, fn("22:00.0")); }),
            "0000:22:00.0 is bound to nouveau, not vfio-pci (hcq pci 0000:22:00.0 --bind-vfio)");
  // A group is viable only when every function in it is on vfio-pci (or on none).
  auto fns = emulated_pci_functions();
  EmulatedPciFunction audio;
  audio.address = "0000:22:00.1";
  audio.parent = "0000:21:01.0";
  audio.vendor = 0x10de;
  audio.device = 0x22a3;
  audio.class_code = 0x040300;
  audio.driver = "snd_hda_intel";
  audio.iommu_group = 7;
  fns.push_back(audio);
  for (bool iommufd : {true, false}) {
    EmulatedPciBus shared(fns);
    auto& sk = *shared.kernel();
    if (!iommufd) sk.deny("/dev/iommu", ENOENT);
    pci_bind_vfio(sk, pci_function(sk, "22:00.0"));
    EXPECT_EQ(error_of<Error>([&] { VfioDevice(shared.kernel(), pci_function(sk, "22:00.0")); }),
              "0000:22:00.0: IOMMU group 7 is not viable: bind every function of the group to "
              "vfio-pci");
    pci_unbind(sk, pci_function(sk, "22:00.1"));
    VfioDevice ok(shared.kernel(), pci_function(sk, "22:00.0"));
    EXPECT_EQ(ok.iommufd(), iommufd);
    EXPECT_EQ(ok.region(0).size, 16 * MiB);
  }
}

// Odd sysfs contents end as a message naming the file and the value, never as a silent 0
// (atoi) or the name of a std function.
TEST(EmulatedPciOddSysfs, AnIommuGroupThatIsNotANumberIsNamed) {
  auto bus = emulated_pci_system();
  auto& k = *bus->kernel();
  const fs::path dev = fs::canonical(k.sysfs_root() + "/bus/pci/devices/0000:22:00.0");
  const fs::path group = k.sysfs_root() + "/kernel/iommu_groups/seven";
  fs::create_directories(group);
  fs::remove(dev / "iommu_group");
  fs::create_symlink(fs::relative(group, dev), dev / "iommu_group");  // libpci reads it relative
  EXPECT_EQ(error_of<Error>([&] { pci_functions(k); }),
            "/sys/bus/pci/devices/0000:22:00.0/iommu_group: 'seven' is not an IOMMU group number");
}

TEST(EmulatedPciOddSysfs, AnAddressWithoutABusIsRefused) {
  auto fns = emulated_pci_functions();
  fns[0].address = "0000";
  EXPECT_EQ(error_of<InvalidInput>([&] { EmulatedPciBus bus(fns); }),
            "emulated PCI bus: '0000' is not a PCI address (0000:03:00.0)");
}

// hcq reg's AMD registers are regs.def's, at 4 x the CP's dword address in BAR5 where a public
// source establishes it for the GPU's generation, and refused by name elsewhere.
const PciSupport::Register& reg_named(const std::vector<PciSupport::Register>& regs,
                                      const std::string& name) {
  for (auto& r : regs)
    if (r.name == name) return r;
  throw Error("no register " + name);
}

std::vector<std::string> field_names(const PciSupport::Register& r) {
  std::vector<std::string> names;
  for (auto& f : r.fields) names.push_back(f.name);
  return names;
}

const PciSupport::Register::Field& field_named(const PciSupport::Register& r,
                                               const std::string& name) {
  for (auto& f : r.fields)
    if (f.name == name) return f;
  throw std::runtime_error(r.name + " has no field " + name);
}

TEST(AmdPciRegisters, ComeFromRegsDefPerGeneration) {
  const PciSupport s = amd::pci_support();
  const auto mi210 = s.registers(0x740f), mi300 = s.registers(0x74a1), navi31 = s.registers(0x744c);
  // gfx90a: GC segment 0 at 0x2000 (aldebaran_ip_offset.h): every register readable.
  for (auto& r : mi210) EXPECT_EQ(r.refused, "") << r.name;
  EXPECT_EQ(reg_named(mi210, "COMPUTE_PGM_LO").offset, 0xb830u);
  EXPECT_EQ(reg_named(mi210, "COMPUTE_PGM_RSRC3").offset, 0x2e2du * 4);  // gfx9's address
  EXPECT_EQ(reg_named(mi210, "GRBM_STATUS").bar, 5);
  EXPECT_EQ(reg_named(mi210, "GRBM_STATUS").offset, 0x8010u);
  // Every field of Linux gc_9_4_2_sh_mask.h GRBM_STATUS__*, in bit order.
  EXPECT_EQ(field_names(reg_named(mi210, "GRBM_STATUS")),
            (std::vector<std::string>{"ME0PIPE0_CMDFIFO_AVAIL",
                                      "ME0PIPE0_CF_RQ_PENDING",
                                      "ME0PIPE0_PF_RQ_PENDING",
                                      "GDS_DMA_RQ_PENDING",
                                      "DB_CLEAN",
                                      "CB_CLEAN",
                                      "TA_BUSY",
                                      "GDS_BUSY",
                                      "WD_BUSY_NO_DMA",
                                      "VGT_BUSY",
                                      "IA_BUSY_NO_DMA",
                                      "IA_BUSY",
                                      "SX_BUSY",
                                      "WD_BUSY",
                                      "SPI_BUSY",
                                      "BCI_BUSY",
                                      "SC_BUSY",
                                      "PA_BUSY",
                                      "DB_BUSY",
                                      "CP_COHERENCY_BUSY",
                                      "CP_BUSY",
                                      "CB_BUSY",
                                      "GUI_ACTIVE"}));
  // gfx942 and gfx11: the GRBM status registers only.
  EXPECT_EQ(reg_named(mi300, "GRBM_STATUS2").refused, "");
  EXPECT_EQ(reg_named(mi300, "COMPUTE_PGM_LO").refused,
            "its BAR5 offset on gfx942 is not established from a public source (gfx942's GC "
            "register base comes from the GPU's IP discovery table)");
  EXPECT_EQ(reg_named(navi31, "GRBM_STATUS").offset, 0x8010u);
  EXPECT_NE(reg_named(navi31, "COMPUTE_USER_DATA_0").refused, "");
  const auto& status = reg_named(navi31, "GRBM_STATUS");
  EXPECT_EQ(field_named(status, "GE_BUSY").get(0x00200000), 1u);
  EXPECT_EQ(field_named(status, "GUI_ACTIVE").get(0x7fffffff), 0u);
  EXPECT_EQ(field_named(status, "SDMA_RQ_PENDING").lo, 6);  // gfx11 and gfx12 only
  EXPECT_THROW(field_named(reg_named(mi210, "GRBM_STATUS"), "SDMA_RQ_PENDING"), std::runtime_error);
  // GRBM_STATUS2.RLC_BUSY: bit 24 on gfx9 only; bit 26 from gfx10.3 on, where bit 24 is
  // SDMA2_RQ_PENDING on gfx10.3 (Linux gc_9_4_3 and gc_10_3_0/gc_11_0_0/gc_12_0_0 sh_mask.h
  // GRBM_STATUS2__RLC_BUSY__SHIFT 0x18 / 0x1a).
  EXPECT_EQ(field_named(reg_named(mi210, "GRBM_STATUS2"), "RLC_BUSY").lo, 24);
  EXPECT_EQ(field_named(reg_named(navi31, "GRBM_STATUS2"), "RLC_BUSY").lo, 26);
  EXPECT_EQ(field_named(reg_named(navi31, "GRBM_STATUS2"), "RLC_BUSY").get(1u << 24), 0u);
  EXPECT_EQ(field_named(reg_named(s.registers(0x7550), "GRBM_STATUS2"), "RLC_BUSY").lo,
            26);  // gfx1201
  // A device hcq has no target for: every name known once, none readable by name.
  const auto unknown = s.registers(0x1234);
  EXPECT_EQ(unknown.size(), navi31.size());
  for (auto& r : unknown)
    EXPECT_EQ(r.refused, "hcq does not know the generation of AMD device 1234 "
                         "(drivers/amd/targets.cpp)");
}

// pci_names may be called from several threads (its header says so): eight threads looking up
// at once, the first lookup loading the database among them, all get what one thread gets.
TEST(PciNames, EightThreadsAtOnceGetTheSameNames) {
  std::vector<PciNames> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); i++)
    threads.emplace_back([&got, i] {
      for (int k = 0; k < 100; k++) got[i] = pci_names(0x1002, 0x744c);
    });
  for (auto& t : threads) t.join();
  const PciNames one = pci_names(0x1002, 0x744c);
  for (const auto& n : got) {
    EXPECT_EQ(n.database, one.database);
    EXPECT_EQ(n.vendor, one.vendor);
    EXPECT_EQ(n.device, one.device);
  }
  if (one.database) {  // Debian's pci.ids lists the RX 7900 XTX's vendor; an unknown ID is empty
    EXPECT_FALSE(one.vendor.empty());
    const PciNames none = pci_names(0x1002, 0xfffe);
    EXPECT_EQ(none.vendor, one.vendor);
    EXPECT_EQ(none.device, "");
  }
}

}  // namespace
}  // namespace hcq::os
