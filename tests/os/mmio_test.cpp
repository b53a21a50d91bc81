// os::Mmio register windows: the emulated window hands each access to its handler in order,
// checks bounds and alignment with exact messages; the mapped windows over a sysfs BAR map and a
// VFIO region reach the emulated PCI system's registers; a BAR with a device model is read and
// written through VFIO's pread/pwrite only (aligned dwords); the index/data pairs write the
// sequence Linux writes (amdgpu_device_indirect_rreg/_wreg, amdgpu_device_mm_access) and keep
// each sequence whole when several threads use one pair.
#include "os/mmio.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/vfio.h>
#include <sys/mman.h>

#include <array>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "amd/am/index_pairs.hpp"
#include "core/error.hpp"
#include "emulated_pci.hpp"
#include "os/emulated_kernel.hpp"
#include "os/emulated_vfio.hpp"
#include "os/pci_bar.hpp"
#include "os/vfio.hpp"
#include "common/error_of.hpp"

namespace hcq::os {
namespace {

using testing_support::error_of;
// amdgpu's pairs, the ones hcq uses (their offsets: tests/amd/am_driver_test.cpp).
using amd::am::mm_index_layout;
using amd::am::pcie_index2_layout_nbio_4_3_0;
using amd::am::rsmu_layout_nbio_4_3_0;

// Records every access; reads return 0x1000 + offset.
class Recorder final : public MmioHandler {
 public:
  uint32_t read32(uint64_t off) override {
    log.push_back("r " + hex(off));
    return uint32_t(0x1000 + off);
  }
  void write32(uint64_t off, uint32_t v) override { log.push_back("w " + hex(off) + " " + hex(v)); }
  std::vector<std::string> log;
};

using Log = std::vector<std::string>;

TEST(EmulatedMmio, HandsEachAccessToTheHandlerInOrder) {
  Recorder h;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x100, h);
  EXPECT_EQ(m.size(), 0x100u);
  EXPECT_EQ(m.name(), "BAR5 of 0000:03:00.0");
  m.write32(0x10, 7);
  EXPECT_EQ(m.read32(0x10), 0x1010u);
  std::array<uint32_t, 3> got{};
  m.read(0xf0, got);
  EXPECT_EQ(got, (std::array<uint32_t, 3>{0x10f0, 0x10f4, 0x10f8}));
  const std::array<uint32_t, 2> vals{0xa, 0xb};
  m.write(0xf8, vals);
  m.read(0x0, std::span<uint32_t>{});  // nothing to do, no access
  EXPECT_EQ(h.log, (Log{"w 0x10 0x7", "r 0x10", "r 0xf0", "r 0xf4", "r 0xf8", "w 0xf8 0xa",
                        "w 0xfc 0xb"}));
}

TEST(EmulatedMmio, BoundsAndAlignmentErrorsAreExactAndTouchNothing) {
  Recorder h;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x100, h);
  EXPECT_EQ(error_of<InvalidInput>([&] { m.read32(0x100); }),
            "0x100 is outside BAR5 of 0000:03:00.0 (0x100 bytes)");
  EXPECT_EQ(error_of<InvalidInput>([&] { m.write32(0xffffffffffffffc, 1); }),
            "0xffffffffffffffc is outside BAR5 of 0000:03:00.0 (0x100 bytes)");
  EXPECT_EQ(error_of<InvalidInput>([&] { m.write32(0x2, 1); }),
            "0x2 is not a 32-bit register offset (BAR5 of 0000:03:00.0)");
  std::array<uint32_t, 4> buf{};
  // A range that starts inside and leaves the window fails before its first access.
  EXPECT_EQ(error_of<InvalidInput>([&] { m.read(0xf8, buf); }),
            "[0xf8, +0x10) is outside BAR5 of 0000:03:00.0 (0x100 bytes)");
  EXPECT_EQ(error_of<InvalidInput>([&] { m.write(0x6, std::span<const uint32_t>(buf)); }),
            "0x6 is not a 32-bit register offset (BAR5 of 0000:03:00.0)");
  EXPECT_TRUE(h.log.empty());
}

// A device model with an index/data pair at 0x0/0x4 (MM_INDEX/MM_DATA) and one at
// 0x38/0x3c/0x44 (NBIO 4.3.0's PCIE_INDEX2/DATA2/INDEX2_HI with segment 0 at 0): what the
// data register reaches is selected by the index written before. Registers in the indirect
// space read back as written; unwritten ones read as their own address.
class IndexedModel final : public MmioHandler {
 public:
  uint32_t read32(uint64_t off) override {
    std::lock_guard lock(mutex_);
    log.push_back("r " + hex(off));
    switch (off) {
      case 0x4: return mm_index_ & 0x80000000u ? vram_at(mm_vram()) : space_at(mm_index_);
      case 0x3c: return space_at((uint64_t(pcie_hi_) << 32) | pcie_index_);
      case 0x38: return pcie_index_;
      case 0x44: return pcie_hi_;
      default: return regs_[off];
    }
  }
  void write32(uint64_t off, uint32_t v) override {
    std::lock_guard lock(mutex_);
    log.push_back("w " + hex(off) + " " + hex(v));
    switch (off) {
      case 0x0: mm_index_ = v; break;
      case 0x18: mm_index_hi_ = v; break;
      case 0x4:
        if (mm_index_ & 0x80000000u) vram_[mm_vram()] = v;
        else space_[mm_index_] = v;
        break;
      case 0x38: pcie_index_ = v; break;
      case 0x44: pcie_hi_ = v; break;
      case 0x3c: space_[(uint64_t(pcie_hi_) << 32) | pcie_index_] = v; break;
      default: regs_[off] = v;
    }
  }
  Log log;
  std::map<uint64_t, uint32_t> vram_;

 private:
  uint64_t mm_vram() const { return (uint64_t(mm_index_hi_) << 31) | (mm_index_ & 0x7fffffffu); }
  uint32_t space_at(uint64_t a) {
    auto it = space_.find(a);
    return it == space_.end() ? uint32_t(a ^ (a >> 32)) : it->second;
  }
  uint32_t vram_at(uint64_t a) { return vram_.count(a) ? vram_[a] : 0; }
  std::mutex mutex_;
  uint32_t mm_index_ = 0, mm_index_hi_ = 0, pcie_index_ = 0, pcie_hi_ = 0;
  std::map<uint64_t, uint32_t> space_, regs_;
};

// A pair that reaches VRAM selects it with one index bit (address_limit).
TEST(IndexDataRegs, APairReachingVramNeedsOneSelectBit) {
  Recorder h;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x1000, h);
  IndexDataLayout l = mm_index_layout();
  l.address_limit = 0x300;
  EXPECT_EQ(error_of<InvalidInput>([&] { IndexDataRegs(m, l); }),
            "MM_INDEX/MM_DATA: address limit 0x300 cannot select VRAM (a power of two up to "
            "0x80000000)");
  l.address_limit = uint64_t(1) << 32;
  EXPECT_EQ(error_of<InvalidInput>([&] { IndexDataRegs(m, l); }),
            "MM_INDEX/MM_DATA: address limit 0x100000000 cannot select VRAM (a power of two up "
            "to 0x80000000)");
  // A pair selecting VRAM with bit 20: the index takes the low 20 bits, the high index the rest.
  l.address_limit = uint64_t(1) << 20;
  IndexDataRegs low(m, l);
  low.write_vram32(0x345678, 9);
  EXPECT_EQ(h.log, (Log{"w 0x0 0x145678", "w 0x18 0x3", "w 0x4 0x9"}));
}

TEST(IndexDataRegs, RsmuPairReachesFourGiB) {
  Recorder h;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x1000, h);
  IndexDataRegs rsmu(m, rsmu_layout_nbio_4_3_0(0x14));
  EXPECT_EQ(rsmu.read32(0x3b10000), 0x1054u);  // the recorder's value for MM offset 0x54
  EXPECT_EQ(h.log, (Log{"w 0x50 0x3b10000", "r 0x50", "r 0x54"}));
  EXPECT_EQ(error_of<InvalidInput>([&] { rsmu.write32(0x100000000, 1); }),
            "BIF_BX_PF0_RSMU_INDEX/BIF_BX_PF0_RSMU_DATA: address 0x100000000 is beyond the "
            "index's reach (below 0x100000000)");
}

TEST(IndexDataRegs, PcieIndex2WritesLinuxsSequence) {
  IndexedModel model;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x1000, model);
  IndexDataRegs smn(m, pcie_index2_layout_nbio_4_3_0(0));
  // amdgpu_device_indirect_wreg: index, read index back, data, read data back.
  smn.write32(0x3b10000, 0xdead);
  EXPECT_EQ(model.log, (Log{"w 0x38 0x3b10000", "r 0x38", "w 0x3c 0xdead", "r 0x3c"}));
  model.log.clear();
  // amdgpu_device_indirect_rreg: index, read index back, data.
  EXPECT_EQ(smn.read32(0x3b10000), 0xdeadu);
  EXPECT_EQ(model.log, (Log{"w 0x38 0x3b10000", "r 0x38", "r 0x3c"}));
  model.log.clear();
  // Above 4 GiB the high part goes to PCIE_INDEX2_HI first and is cleared afterwards
  // (amdgpu_device_indirect_rreg_ext).
  EXPECT_EQ(smn.read32(0x1200000040), 0x52u);  // unwritten: 0x40 ^ 0x12
  EXPECT_EQ(model.log, (Log{"w 0x44 0x12", "r 0x44", "w 0x38 0x40", "r 0x38", "r 0x3c",
                            "w 0x44 0x0", "r 0x44"}));
  model.log.clear();
  EXPECT_EQ(error_of<InvalidInput>([&] { smn.read32(0x10000000000); }),
            "PCIE_INDEX2/PCIE_DATA2: address 0x10000000000 is beyond the index's reach (below "
            "0x10000000000)");
  EXPECT_EQ(error_of<InvalidInput>([&] { smn.read_vram32(0); }),
            "PCIE_INDEX2/PCIE_DATA2 does not reach VRAM");
  EXPECT_TRUE(model.log.empty());
}

TEST(IndexDataRegs, MmIndexReachesRegistersAndVram) {
  IndexedModel model;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x1000, model);
  IndexDataRegs mm(m, mm_index_layout());
  mm.write32(0x1a000, 5);
  EXPECT_EQ(mm.read32(0x1a000), 5u);
  EXPECT_EQ(model.log, (Log{"w 0x0 0x1a000", "w 0x4 0x5", "w 0x0 0x1a000", "r 0x4"}));
  model.log.clear();
  // amdgpu_device_mm_access: MM_INDEX = address | 0x80000000, MM_INDEX_HI = address >> 31.
  mm.write_vram32(0x3fe0000004, 0x77);
  EXPECT_EQ(model.log, (Log{"w 0x0 0xe0000004", "w 0x18 0x7f", "w 0x4 0x77"}));
  EXPECT_EQ(model.vram_.at(0x3fe0000004), 0x77u);
  EXPECT_EQ(mm.read_vram32(0x3fe0000004), 0x77u);
  EXPECT_EQ(error_of<InvalidInput>([&] { mm.read32(0x80000000); }),
            "MM_INDEX/MM_DATA: address 0x80000000 is beyond the index's reach (below 0x80000000)");
  EXPECT_EQ(error_of<InvalidInput>([&] { mm.read_vram32(2); }),
            "MM_INDEX/MM_DATA: VRAM address 0x2 is not 4-byte aligned");
  Recorder h;
  EmulatedMmio tiny("BAR5 of 0000:03:00.0", 0x10, h);
  EXPECT_EQ(error_of<InvalidInput>([&] { IndexDataRegs(tiny, pcie_index2_layout_nbio_4_3_0(0)); }),
            "PCIE_INDEX2/PCIE_DATA2: register 0x38 is outside BAR5 of 0000:03:00.0 (0x10 bytes)");
}

// Several threads on one pair: each sees its own register's value. Without the pair's lock
// another thread's index write lands between a thread's index and data accesses.
TEST(IndexDataRegs, ConcurrentIndirectAccessesEachGetTheirOwnRegister) {
  IndexedModel model;
  EmulatedMmio m("BAR5 of 0000:03:00.0", 0x1000, model);
  IndexDataRegs smn(m, pcie_index2_layout_nbio_4_3_0(0));
  IndexDataRegs mm(m, mm_index_layout());
  constexpr int kThreads = 8, kRounds = 2000;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const uint64_t reg = 0x100000 + 0x1000 * uint64_t(t) + 4 * uint64_t(i % 16);
        const uint32_t v = uint32_t(t << 24 | i);
        IndexDataRegs& pair = t % 2 ? smn : mm;
        pair.write32(reg, v);
        if (pair.read32(reg) != v) ++wrong[size_t(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(kThreads, 0));
  // 2 pairs x 4 threads x 2000 rounds: writes 4 accesses (PCIE) / 2 (MM), reads 3 / 2.
  EXPECT_EQ(model.log.size(), size_t(4 * kRounds * (4 + 3) + 4 * kRounds * (2 + 2)));
}

class MappedWindows : public ::testing::Test {
 protected:
  std::unique_ptr<EmulatedPciBus> bus = emulated_pci_system();
  std::shared_ptr<EmulatedKernel> k = bus->kernel();
  PciFunction fn(const std::string& a) { return pci_function(*k, a); }
};

TEST_F(MappedWindows, SysfsBarMapIsAnMmioWindow) {
  PciBarMap bar(k, fn("22:00.0"), 0);
  Mmio& m = bar;
  EXPECT_EQ(m.name(), "BAR0 of 0000:22:00.0");
  EXPECT_EQ(m.size(), 16u << 20);
  const std::array<uint32_t, 2> vals{0x11, 0x22};
  m.write(0x140, vals);
  EXPECT_EQ(bus->bar("0000:22:00.0", 0).read32(0x144), 0x22u);
  std::array<uint32_t, 3> got{};
  m.read(0x13c, got);
  EXPECT_EQ(got, (std::array<uint32_t, 3>{0, 0x11, 0x22}));
  EXPECT_EQ(error_of<InvalidInput>([&] { m.read(0xfffffc, got); }),
            "[0xfffffc, +0xc) is outside BAR0 of 0000:22:00.0 (0x1000000 bytes)");
}

TEST_F(MappedWindows, VfioRegionIsAnMmioWindowUnmappedOnDestruction) {
  pci_bind_vfio(*k, fn("22:00.0"));
  VfioDevice dev(k, fn("22:00.0"));
  {
    VfioRegionMmio bar(dev, 0);
    EXPECT_EQ(bar.name(), "BAR0 of 0000:22:00.0");
    EXPECT_EQ(bar.size(), 16u << 20);
    EXPECT_EQ(bar.read32(0), 0x180000a1u);  // NV_PMC_BOOT_0 of emu:sm_90
    bar.write32(0x140, 9);
    EXPECT_EQ(bus->bar("0000:22:00.0", 0).read32(0x140), 9u);
    EXPECT_EQ(error_of<InvalidInput>([&] { bar.write32(16u << 20, 0); }),
              "0x1000000 is outside BAR0 of 0000:22:00.0 (0x1000000 bytes)");
  }
  EXPECT_EQ(error_of<InvalidInput>([&] { VfioRegionMmio(dev, 2); }),
            "0000:22:00.0: VFIO region 2 cannot be mapped");
  EXPECT_EQ(error_of<InvalidInput>([&] { VfioRegionMmio(dev, 7); }),
            "0000:22:00.0: BAR7 does not exist (0 to 5)");
}


// A function whose BAR5 is a device model (EmulatedPciFunction::Bar::handler) behind vfio-pci:
// the region is readable and writable but not mappable, pread/pwrite of aligned dwords call
// the model, and open_register_window picks pread/pwrite for it, a mapping for BAR0.
class HandledBar : public ::testing::Test {
 protected:
  static std::vector<EmulatedPciFunction> functions(std::shared_ptr<Recorder> model, int* resets) {
    EmulatedPciFunction f;
    f.address = "0000:05:00.0";
    f.vendor = 0x1002;
    f.device = 0x744c;
    f.class_code = 0x030000;
    f.driver = "vfio-pci";
    f.iommu_group = 9;
    f.bars = {{0, 64 << 10, true, true, false, {}, {}}, {5, 0x1000, false, false, false, {}, model}};
    f.on_reset = [resets] { ++*resets; };
    return {f};
  }
  std::shared_ptr<Recorder> model = std::make_shared<Recorder>();
  int resets = 0;
  EmulatedPciBus bus{functions(model, &resets)};
  std::shared_ptr<EmulatedKernel> k = bus.kernel();
  PciFunction fn = pci_function(*k, "0000:05:00.0");
};

TEST_F(HandledBar, RegionIsReadWriteNotMappable) {
  VfioDevice dev(k, fn);
  VfioDevice::Region r = dev.region(5);
  EXPECT_EQ(r.size, 0x1000u);
  EXPECT_TRUE(r.readable);
  EXPECT_TRUE(r.writable);
  EXPECT_FALSE(r.mappable);
  EXPECT_TRUE(dev.region(0).mappable);
  EXPECT_EQ(error_of<InvalidInput>([&] { dev.map_region(5); }),
            "0000:05:00.0: VFIO region 5 cannot be mapped");
  // The sysfs resource file refuses too (a map would bypass the model).
  EXPECT_EQ(error_of<OsError>([&] { PciBarMap(k, fn, 5); }),
            "0000:05:00.0: mmap /sys/bus/pci/devices/0000:05:00.0/resource5: Invalid argument "
            "(errno 22)");
  EXPECT_TRUE(model->log.empty());
}

TEST_F(HandledBar, RegisterWindowGoesThroughPreadAndPwrite) {
  VfioDevice dev(k, fn);
  std::unique_ptr<Mmio> regs = open_register_window(dev, 5);
  ASSERT_NE(dynamic_cast<VfioRegionRwMmio*>(regs.get()), nullptr);
  EXPECT_EQ(regs->name(), "BAR5 of 0000:05:00.0");
  EXPECT_EQ(regs->size(), 0x1000u);
  EXPECT_EQ(regs->read32(0x10), 0x1010u);
  regs->write32(0xffc, 0xabcd);
  const std::array<uint32_t, 2> two{1, 2};
  regs->write(0x20, two);
  EXPECT_EQ(model->log, (Log{"r 0x10", "w 0xffc 0xabcd", "w 0x20 0x1", "w 0x24 0x2"}));
  EXPECT_EQ(error_of<InvalidInput>([&] { regs->read32(0x1000); }),
            "0x1000 is outside BAR5 of 0000:05:00.0 (0x1000 bytes)");

  std::unique_ptr<Mmio> vram = open_register_window(dev, 0);
  ASSERT_NE(dynamic_cast<VfioRegionMmio*>(vram.get()), nullptr);
  vram->write32(0x40, 7);
  EXPECT_EQ(bus.bar("0000:05:00.0", 0).read32(0x40), 7u);
  EXPECT_EQ(error_of<InvalidInput>([&] { open_register_window(dev, 6); }),
            "0000:05:00.0: BAR6 does not exist (0 to 5)");
  EXPECT_EQ(error_of<InvalidInput>([&] { VfioRegionRwMmio(dev, 3); }),
            "0000:05:00.0: VFIO region 3 cannot be read and written");
}

TEST_F(HandledBar, OnlyAlignedDwordsReachTheModel) {
  VfioDevice dev(k, fn);
  const VfioDevice::Region r5 = dev.region(5), r0 = dev.region(0);
  EXPECT_EQ(error_of<OsError>([&] { dev.read_region32(r5, 2); }),
            "0000:05:00.0: read of VFIO region 5 at 0x2: Invalid argument (errno 22)");
  EXPECT_EQ(error_of<OsError>([&] { dev.write_region32(r5, 0x1000, 1); }),
            "0000:05:00.0: write of VFIO region 5 at 0x1000: Invalid argument (errno 22)");
  EXPECT_TRUE(model->log.empty());
  // A plain memory BAR takes any alignment, as vfio_pci_bar_rw does.
  dev.write_region32(r0, 0x102, 0x11223344);
  EXPECT_EQ(bus.bar("0000:05:00.0", 0).read32(0x100), 0x33440000u);
  EXPECT_EQ(bus.bar("0000:05:00.0", 0).read32(0x104), 0x1122u);
  EXPECT_EQ(dev.read_region32(r0, 0x102), 0x11223344u);

  // Other sizes through the device fd itself (the container path, as VfioDevice opens it).
  int container = k->open("/dev/vfio/vfio", O_RDWR);
  int group = k->open("/dev/vfio/9", O_RDWR);
  ASSERT_GE(container, 0);
  ASSERT_GE(group, 0);
  ASSERT_EQ(k->ioctl(group, VFIO_GROUP_SET_CONTAINER, &container), 0);
  ASSERT_EQ(k->ioctl(container, VFIO_SET_IOMMU, reinterpret_cast<void*>(uintptr_t(VFIO_TYPE1v2_IOMMU))), 0);
  char name[] = "0000:05:00.0";
  int device = k->ioctl(group, VFIO_GROUP_GET_DEVICE_FD, name);
  ASSERT_GE(device, 0);
  uint64_t eight = 0;
  uint16_t two = 0;
  EXPECT_EQ(k->pread(device, &eight, 8, off_t(r5.offset)), -EINVAL);
  EXPECT_EQ(k->pwrite(device, &two, 2, off_t(r5.offset + 4)), -EINVAL);
  EXPECT_EQ(k->pread(device, &eight, 0, off_t(r5.offset)), -EINVAL);
  EXPECT_EQ(k->pread(device, &eight, 8, off_t(r0.offset + 0x100)), 8);
  EXPECT_EQ(eight, 0x112233440000ull);
  EXPECT_TRUE(model->log.empty());
  for (int fd : {device, group, container}) k->close(fd);
}

TEST_F(HandledBar, ResetCallsTheModelAndKeepsMemory) {
  VfioDevice dev(k, fn);
  bus.bar("0000:05:00.0", 0).write32(0x40, 5);
  dev.reset();
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(bus.vfio().resets("0000:05:00.0"), 1);
  EXPECT_EQ(bus.bar("0000:05:00.0", 0).read32(0x40), 5u);  // on_reset decides; it kept it
}

}  // namespace
}  // namespace hcq::os
