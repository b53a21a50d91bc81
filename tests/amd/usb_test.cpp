// A GPU behind a USB bridge (emu:gfx1100_usb): the KFD topology has no io_link from it to a
// CPU node, the driver reads that and reports the device as unable to reach host memory, and
// the emulated KFD refuses host memory for it as a kernel would.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "amd/emu/kfd.hpp"
#include "amd/kfd_driver.hpp"
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

TEST(UsbGpu, TheDriverReadsTheIoLinks) {
  auto usb = Device::open("emu:gfx1100_usb");
  EXPECT_FALSE(usb->properties().caps.host_reachable);
  EXPECT_FALSE(usb->properties().caps.map_host);
  EXPECT_EQ(usb->properties().description,
            "AMD Radeon RX 7900 XTX (emulated), no host memory access");
  auto pcie = Device::open("emu:gfx1100");
  EXPECT_TRUE(pcie->properties().caps.host_reachable);
  EXPECT_TRUE(pcie->properties().caps.map_host);
  EXPECT_THROW(Device::open("emu:gfx90a_usb"), InvalidInput);  // not one of the USB variants
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
  auto dev = Device::open("emu:gfx1100_usb");
  DeviceDriver& drv = dev->driver();
  try {
    drv.allocate(drv.va_base() + drv.va_size() - 4096, 4096, MemoryKind::Host, false);
    FAIL() << "GTT memory allocated";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOMEM);
    EXPECT_STREQ(e.what(), "emu:gfx1100_usb: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (4096 bytes of host "
                           "memory): Cannot allocate memory (errno 12)");
  }
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(4096, 4096), &std::free);
  try {
    drv.map_user(mem.get(), 4096);
    FAIL() << "userptr memory mapped";
  } catch (const OsError& e) {
    EXPECT_EQ(e.err(), ENOMEM);
    EXPECT_STREQ(e.what(), "emu:gfx1100_usb: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (userptr): Cannot "
                           "allocate memory (errno 12)");
  }
  // VRAM still works, CPU-visible at the GPU address (the BAR).
  Buffer b = dev->allocate(4096);
  EXPECT_EQ(reinterpret_cast<uint64_t>(b.host()), b.va());
}

}  // namespace
}  // namespace hcq::amd
