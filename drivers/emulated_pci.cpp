#include "emulated_pci.hpp"

#include <cstring>
#include <map>

#include "amd/am/discovery.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_emulated_gpu.hpp"
#include "amd/pci.hpp"
#include "amd/targets.hpp"
#include "nv/pci.hpp"
#include "nv/targets.hpp"

namespace hcq {

std::vector<os::EmulatedPciFunction> emulated_pci_functions() {
  using os::PciPort;
  using F = os::EmulatedPciFunction;
  constexpr uint64_t MiB = 1 << 20, GiB = 1ull << 30;
  auto sizes = [](uint64_t from, uint64_t to) {
    std::vector<uint64_t> v;
    for (uint64_t s = from; s <= to; s *= 2) v.push_back(s);
    return v;
  };
  auto function = [](std::string addr, std::string parent, uint16_t vendor, uint16_t device,
                     uint32_t class_code, std::string driver, int group) {
    F f;
    f.address = std::move(addr);
    f.parent = std::move(parent);
    f.vendor = vendor;
    f.device = device;
    f.subsystem_vendor = class_code >> 16 == 3 ? vendor : 0;
    f.class_code = class_code;
    f.driver = std::move(driver);
    f.iommu_group = group;
    f.numa_node = 0;
    return f;
  };
  // Intel parts: Tiger Lake host bridge 9a14, PCIe root port 9a09, Iris Xe 9a49,
  // Thunderbolt 4 root port 9a23; JHL7540 Titan Ridge bridge 15ef (pci.ids).
  auto bridge = [&](std::string addr, std::string parent, uint16_t device, PciPort port,
                    unsigned speed, unsigned width, bool tb, int group) {
    F f = function(std::move(addr), std::move(parent), 0x8086, device, 0x060400, "pcieport", group);
    f.port = port;
    f.link = {speed, width, speed, width};
    f.thunderbolt = tb;
    return f;
  };
  F host = function("0000:00:00.0", "", 0x8086, 0x9a14, 0x060000, "", 0);
  host.port = PciPort::None;
  host.numa_node = -1;

  // The RX 7900 XTX's register BAR reads as a GPU in the middle of a compute dispatch
  // (regs.def's fields): GRBM_STATUS GUI_ACTIVE, CP_BUSY, SPI_BUSY and TA_BUSY set;
  // GRBM_STATUS2 CPC_BUSY and RLC_BUSY set. Every other register reads 0.
  constexpr uint32_t kGrbmStatusBusy = 1u << 31 | 1u << 29 | 1u << 22 | 1u << 14;  // 0xa0404000
  constexpr uint32_t kGrbmStatus2Busy = 1u << 29 | 1u << 26;                        // 0x24000000
  // An RX 7900 XTX (amd::emu::rx7900xtx_identity) at `addr` under `parent`.
  auto navi31 = [](std::string addr, std::string parent, std::string driver, int group) {
    F f = amd::emu::rx7900xtx_identity();
    f.address = std::move(addr);
    f.parent = std::move(parent);
    f.driver = std::move(driver);
    f.iommu_group = group;
    f.numa_node = 0;
    return f;
  };
  F amd = navi31("0000:01:00.0", "0000:00:01.0", "amdgpu", 2);
  amd.bars = {{0, 256 * MiB, true, true, false, {}, {}},
              {2, 2 * MiB, true, true, false, {}, {}},
              {4, 256, false, false, true, {}, {}},
              {5, 1 * MiB, false, false, false,
               {{amd::kGrbmStatus, kGrbmStatusBusy}, {amd::kGrbmStatus2, kGrbmStatus2Busy}},
               {}}};
  amd.resizable_bars = {{0, 256 * MiB, sizes(256 * MiB, 32 * GiB)}};

  // A second RX 7900 XTX, on vfio-pci for hcq to boot itself, its BAR0 resized over all of its
  // 24 GiB of VRAM: the registers say so (RCC_CONFIG_MEMSIZE, MiB) and the IP discovery table
  // sits 64 KiB below the end of VRAM (the real card's table, am_discovery_writer.hpp), so
  // `hcq reg` places the AM registers from it. Every other register reads 0.
  constexpr uint64_t kAmVram = 24 * GiB;
  F bootable = navi31("0000:03:00.0", "0000:00:06.0", "vfio-pci", 8);
  std::map<uint64_t, uint32_t> table;
  {
    const std::vector<std::byte> bytes = amd::emu::gfx1100_discovery_table();
    const uint64_t at = amd::am::discovery_table_offset(kAmVram);
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      uint32_t w = 0;
      std::memcpy(&w, bytes.data() + i, 4);
      if (w) table[at + i] = w;
    }
  }
  bootable.bars = {{0, 32 * GiB, true, true, false, table, {}},
                   {2, 2 * MiB, true, true, false, {}, {}},
                   {5, 1 * MiB, false, false, false, {{0xde3 * 4, uint32_t(kAmVram >> 20)}}, {}}};
  bootable.resizable_bars = {{0, 32 * GiB, sizes(256 * MiB, 32 * GiB)}};

  F igpu = function("0000:00:02.0", "", 0x8086, 0x9a49, 0x030000, "i915", 1);
  igpu.revision = 0x01;
  igpu.port = PciPort::RootComplexEndpoint;
  igpu.bars = {{0, 16 * MiB, true, false, false, {}, {}}, {2, 256 * MiB, true, true, false, {}, {}}};

  const nv::Target& hopper = *nv::find_target("sm_90");
  F nv = function("0000:22:00.0", "0000:21:01.0", nv::kPciVendor, hopper.device_id, 0x030200,
                  "nouveau", 7);
  nv.subsystem_device = 0x16c1;
  nv.revision = 0xa1;
  nv.link = {5, 16, 1, 4};  // Gen5 x16 card behind a Gen3 x4 tunnel, trained at Gen1
  nv.bars = {{0, 16 * MiB, false, false, false,
              {{0, nv::pmc_boot_0(hopper.architecture, hopper.implementation, 0xa1)}},
              {}},
             {1, 256 * MiB, true, true, false, {}, {}},
             {3, 32 * MiB, true, true, false, {}, {}}};
  nv.resizable_bars = {{1, 256 * MiB, sizes(64 * MiB, 128 * GiB)}};

  return {host,
          bridge("0000:00:01.0", "", 0x9a09, PciPort::RootPort, 4, 16, false, 3),
          amd,
          igpu,
          bridge("0000:00:06.0", "", 0x9a09, PciPort::RootPort, 4, 16, false, 9),
          bootable,
          bridge("0000:00:07.0", "", 0x9a23, PciPort::RootPort, 3, 4, true, 4),
          bridge("0000:20:00.0", "0000:00:07.0", 0x15ef, PciPort::UpstreamPort, 3, 4, true, 5),
          bridge("0000:21:01.0", "0000:20:00.0", 0x15ef, PciPort::DownstreamPort, 3, 4, true, 6),
          nv};
}

std::unique_ptr<os::EmulatedPciBus> emulated_pci_system() {
  return std::make_unique<os::EmulatedPciBus>(emulated_pci_functions());
}

}  // namespace hcq
