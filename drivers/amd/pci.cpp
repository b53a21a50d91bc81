#include "amd/pci.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "amd/am/discovery.hpp"
#include "amd/am/regs.hpp"
#include "amd/packets.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"
#include "os/pci_bar.hpp"

namespace hcq::amd {
namespace {

static_assert(kGrbmStatus == regs::GRBM_STATUS_ALL.address * 4 &&
              kGrbmStatus2 == regs::GRBM_STATUS2_ALL.address * 4);

// Why register `r` cannot be read by name on `t`, empty when its BAR5 byte offset is its
// regs.def address (the CP's dword address) times 4 by a public source:
// - GRBM_STATUS and GRBM_STATUS2 on every target: user space reads them through
//   AMDGPU_INFO_READ_MMR_REG, which takes the MMIO dword offset and checks it against the
//   allow lists of Linux soc15.c (gfx9), soc21.c (gfx11) and soc24.c (gfx12), all listing
//   SOC15_REG_ENTRY(GC, 0, regGRBM_STATUS/regGRBM_STATUS2); Mesa (si_gpu_load.c) and
//   radeontop read them there as 0x8010 and 0x8008 whatever the generation.
// - The compute (SH) registers on gfx90a only: Linux aldebaran_ip_offset.h places GC segment 0
//   at 0x2000, and gfx_v9_4_2.c writes SOC15_REG_OFFSET(GC, 0, regCOMPUTE_PGM_LO) -
//   PACKET3_SET_SH_REG_START as a SET_SH_REG offset: the MMIO dword offset is the CP's address.
//   On gfx942 (a GC per XCC), gfx11 and gfx12 the GC base comes from the GPU's IP discovery
//   table, and no public source ties these registers' MMIO offsets to regs.def's addresses.
std::string refusal(const Target& t, const regs::Reg& r) {
  const std::string_view name = r.name;
  if (name == "GRBM_STATUS" || name == "GRBM_STATUS2" || t.name == "gfx90a") return {};
  return "its BAR5 offset on " + t.name + " is not established from a public source (" +
         t.name + "'s GC register base comes from the GPU's IP discovery table)";
}

}  // namespace

std::vector<PciSupport::Register> discovered_registers(uint16_t device, os::Mmio& regs,
                                                       os::Mmio* vram, bool may_use_mm_index) {
  std::vector<PciSupport::Register> out;
  const Target* t = find_target_by_device_id(device);
  if (!t || t->name != "gfx1100") return out;
  const am::IpSegmentBases bases =
      am::segment_bases(am::read_discovery(regs, vram, may_use_mm_index));
  for (const am::RegDesc& r : am::registers()) {
    PciSupport::Register reg{std::string(r.name), kRegisterBar, 0, {}, {}};
    try {
      reg.offset = am::absolute_dword(r, bases) * 4;
      if (reg.offset + 4 > regs.size())
        reg.refused = "at byte " + hex(reg.offset) + ", past the register BAR (" +
                      hex(regs.size()) + " bytes): reached through the SMN index/data pair";
    } catch (const InvalidInput& e) {
      reg.refused = e.what();
    }
    for (const am::RegField& fl : r.fields)
      reg.fields.push_back({std::string(fl.name), fl.lo, fl.width});
    out.push_back(std::move(reg));
  }
  return out;
}

PciSupport pci_support() {
  PciSupport s;
  s.vendor = kPciVendor;
  s.vendor_name = "AMD";
  s.paths = {{"amdgpu", "KFD (amdgpu, amd:N)"}};
  s.how = "hcq opens AMD GPUs through amdgpu's KFD or vfio-pci";
  s.register_bar = kRegisterBar;
  // gfx1100's registers as the AM boot describes them (am/*.def), at the offsets the GPU's own
  // IP discovery table gives (read through BAR0, or MM_INDEX/MM_DATA when BAR0 is smaller than
  // VRAM). A register past the register BAR is named but refused: hcq reaches it through the
  // SMN index/data pair, which `hcq reg` does not.
  s.discovered_registers = [](std::shared_ptr<os::Kernel> k, const os::PciFunction& f) {
    const Target* t = find_target_by_device_id(f.device);
    if (!t || t->name != "gfx1100") return std::vector<PciSupport::Register>();
    os::PciBarMap regs(k, f, kRegisterBar);
    std::unique_ptr<os::PciBarMap> vram;
    for (const os::PciBar& b : f.bars)
      if (b.index == 0 && !b.io) vram = std::make_unique<os::PciBarMap>(k, f, 0);
    // MM_INDEX/MM_DATA only where no kernel GPU driver uses them (amdgpu does, under its lock).
    const bool own_index = f.driver.empty() || f.driver == "vfio-pci";
    return discovered_registers(f.device, regs, vram.get(), own_index);
  };
  // hcq's own boot (drivers/amd/am, issue 17) knows gfx1100 only.
  s.boot_name = [](const std::string& address, uint16_t device) {
    const Target* t = find_target_by_device_id(device);
    return t && t->name == "gfx1100" ? "am:" + address : std::string();
  };
  s.registers = [](uint16_t device) {
    std::vector<PciSupport::Register> out;
    const Target* t = find_target_by_device_id(device);
    char id[8];
    std::snprintf(id, sizeof id, "%04x", device);
    for (const regs::Reg& r : regs::all()) {
      if (t && !has_gen(r.gens, t->gen)) continue;
      if (std::any_of(out.begin(), out.end(), [&](auto& o) { return o.name == r.name; }))
        continue;  // a register described per generation, unknown generation: listed once
      PciSupport::Register reg{r.name, kRegisterBar, uint64_t(r.address) * 4, {}, {}};
      if (!t) {
        reg.refused = std::string("hcq does not know the generation of AMD device ") + id +
                      " (drivers/amd/targets.cpp)";
      } else {
        reg.refused = refusal(*t, r);
        for (const regs::RegField& f : regs::fields())
          if (r.name == std::string_view(f.reg) && has_gen(f.gens, t->gen))
            reg.fields.push_back({f.name, f.lo, f.width});
      }
      out.push_back(std::move(reg));
    }
    return out;
  };
  return s;
}

}  // namespace hcq::amd
