// How hcq sees a GPU behind a USB bridge. emu:gfx1100_usb is the AM driver over the emulated
// ASM2464 (the CPU maps none of the GPU's memory; the GPU reaches only the bridge's SRAM
// window). Under KFD such a GPU has no io_link from it to a CPU node: the driver reads that
// and reports the device as unable to reach host memory, and the emulated KFD refuses host
// memory for it as a kernel would.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "amd/emu/kfd.hpp"
#include "amd/kfd/kfd_driver.hpp"
#include "amd/targets.hpp"
#include "core/hcq.hpp"
#include "os/emulated_kernel.hpp"

namespace hcq::amd {
namespace {

const std::string kNodes = "/sys/devices/virtual/kfd/kfd/topology/nodes/";

TEST(UsbGpu, TheTopologyHasNoIoLinkToTheCpu) {
  const Target& t = *find_target("gfx1100");
  auto linked = emu::make_emulated_system(t);
  EXPECT_EQ(linked->list_dir(kNodes + "1/io_links"), std::vector<std::string>{"0"});
  auto props = linked->read_file(kNodes + "1/io_links/0/properties");
  ASSERT_TRUE(props);
  EXPECT_NE(props->find("\nnode_from 1\nnode_to 0\n"), std::string::npos) << *props;
  auto usb = emu::make_emulated_system(t, {.host_link = false});
  EXPECT_TRUE(usb->list_dir(kNodes + "1/io_links").empty());
  EXPECT_TRUE(usb->list_dir(kNodes + "0/io_links").empty());
}

// A KFD GPU with no io_link to the CPU, as a USB-attached one would show.
std::unique_ptr<DeviceDriver> kfd_gpu_without_host_link() {
  return open_kfd_device(emu::make_emulated_system(*find_target("gfx1100"), {.host_link = false}),
                         0, "emu:kfd_usb");
}

TEST(UsbGpu, TheDriverReadsTheIoLinks) {
  auto usb = kfd_gpu_without_host_link();
  EXPECT_FALSE(usb->properties().caps.host_reachable);
  EXPECT_FALSE(usb->properties().caps.map_host);
  EXPECT_EQ(usb->properties().description,
            "AMD Radeon RX 7900 XTX (emulated), no host memory access");
  auto pcie = Device::open("emu:gfx1100");
  EXPECT_TRUE(pcie->properties().caps.host_reachable);
  EXPECT_TRUE(pcie->properties().caps.map_host);
}

// emu:gfx1100_usb: booted by hcq behind the emulated bridge. The CPU maps none of its memory;
// it reaches host memory only in the bridge's SRAM window (512 KiB at PCIe address 0x200000).
TEST(UsbGpu, TheEmulatedUsbGpuIsTheAmDriverBehindTheBridge) {
  auto usb = Device::open("emu:gfx1100_usb");
  const Capabilities& caps = usb->properties().caps;
  EXPECT_FALSE(caps.cpu_maps_memory);
  EXPECT_TRUE(caps.host_reachable);
  EXPECT_FALSE(caps.map_host);
  EXPECT_EQ(caps.host_window_bytes, 0x80000u);
  EXPECT_EQ(usb->properties().arch, "gfx1100");
  Buffer b = usb->allocate(4096);
  EXPECT_EQ(b.host(), nullptr);  // device memory has no CPU mapping
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7};
  usb->copy_in(b, 3, in.data(), in.size());
  std::vector<uint8_t> out(in.size());
  usb->copy_out(out.data(), b, 3, out.size());
  EXPECT_EQ(out, in);
  EXPECT_THROW(Device::open("emu:gfx90a_usb"), InvalidInput);  // only gfx1100 sits behind it
}

// Only a link to a CPU node counts: one to another GPU node (XGMI, type 11) does not reach
// the host; beside the PCIe link to node 0, the GPU does.
TEST(UsbGpu, OnlyALinkToACpuNodeReachesTheHost) {
  for (bool pcie : {false, true}) {
    auto k = std::static_pointer_cast<os::EmulatedKernel>(
        emu::make_emulated_system(*find_target("gfx1100"), {.host_link = pcie}));
    k->add_file(kNodes + "2/gpu_id", "4242\n");  // no properties file: not a GPU hcq opens
    k->add_file(kNodes + "1/io_links/" + (pcie ? "1" : "0") + "/properties",
                "type 11\nnode_from 1\nnode_to 2\n");
    auto drv = open_kfd_device(k, 0, "emu:test");
    EXPECT_EQ(drv->properties().caps.host_reachable, pcie);
  }
}

// GTT and userptr memory: ENOMEM from the emulated KFD, as from a kernel whose GTT pool for
// this GPU is empty.
TEST(UsbGpu, TheKfdRefusesHostMemoryWithENOMEM) {
  auto dev = kfd_gpu_without_host_link();
  DeviceDriver& drv = *dev;
  try {
    drv.allocate(drv.va_base() + drv.va_size() - 4096, 4096, MemoryKind::Host, false);
    FAIL() << "GTT memory allocated";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOMEM);
    EXPECT_STREQ(e.what(), "emu:kfd_usb: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (4096 bytes of host "
                           "memory): Cannot allocate memory (errno 12)");
  }
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(4096, 4096), &std::free);
  try {
    drv.map_user(mem.get(), 4096);
    FAIL() << "userptr memory mapped";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOMEM);
    EXPECT_STREQ(e.what(), "emu:kfd_usb: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (userptr): Cannot "
                           "allocate memory (errno 12)");
  }
  // VRAM still works, CPU-visible at the GPU address (the BAR).
  const Allocation b = drv.allocate(drv.va_base(), 4096, MemoryKind::Device, false);
  EXPECT_EQ(reinterpret_cast<uint64_t>(b.host), b.va);
  drv.free(b);
}

}  // namespace
}  // namespace hcq::amd
