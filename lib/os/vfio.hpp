// A PCI function opened through VFIO (Linux Documentation/driver-api/vfio.rst): through
// iommufd where the kernel offers it (/dev/iommu and the function's cdev
// /dev/vfio/devices/vfioN: bind, an IO address space, attach), else through the
// container/group interface (a type1 IOMMU container with the function's IOMMU group in
// it). Regions (BARs, config space) are described and mapped through the device fd; host
// memory is made visible to the device at an IOVA; the function can be reset. The
// function must be bound to vfio-pci first (pci_bind_vfio).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "os/kernel.hpp"
#include "os/pci.hpp"

namespace hcq::os {

class VfioDevice {
 public:
  // Throws Error/OsError saying what is missing: vfio-pci binding, a viable group (every
  // function of the group on vfio-pci), a type1 IOMMU.
  VfioDevice(std::shared_ptr<Kernel> k, const PciFunction& fn);
  ~VfioDevice();
  VfioDevice(const VfioDevice&) = delete;
  VfioDevice& operator=(const VfioDevice&) = delete;

  struct Region {
    uint32_t index = 0;
    uint64_t size = 0, offset = 0;  // offset: where the region is in the device fd
    bool readable = false, writable = false, mappable = false;
  };
  uint32_t regions() const { return regions_; }
  Region region(uint32_t index) const;
  // Maps a whole mappable region (a memory BAR); unmap with unmap_region.
  void* map_region(uint32_t index);
  void unmap_region(void* p, uint64_t size);
  // One 4-byte pread/pwrite at `offset` in a readable/writable region through the device fd
  // (vfio-pci serves BARs this way too, mappable or not: drivers/vfio/pci/vfio_pci_rdwr.c).
  // OsError naming the region and offset: "0000:03:00.0: read of VFIO region 5 at 0x10:
  // Invalid argument (errno 22)". May be called from several threads at once.
  uint32_t read_region32(const Region& r, uint64_t offset);
  void write_region32(const Region& r, uint64_t offset, uint32_t value);
  // Maps [offset, offset + size) of a mappable region exactly at `at` (page aligned),
  // replacing what is mapped there (MAP_FIXED): the AM driver places VRAM pages at the
  // address a buffer has in its reserved range. Unmap with unmap_region.
  void map_region_at(uint32_t index, uint64_t offset, uint64_t size, void* at);
  // Lets the device read and write [host, host + size) at `iova` (page aligned).
  void map_dma(void* host, uint64_t iova, uint64_t size);
  void unmap_dma(uint64_t iova, uint64_t size);
  // 16-bit reads and writes of config space through the config region (vfio-pci passes some
  // registers through and virtualizes others: drivers/vfio/pci/vfio_pci_config.c).
  uint16_t config16(uint32_t offset);
  void set_config16(uint32_t offset, uint16_t value);
  // Sets Memory Space and Bus Master Enable in the command register. Without Bus Master
  // Enable the device's DMA never reaches memory, and vfio-pci does not set it: it clears it
  // when the last user closes the device (vfio_pci_core_disable: "Stop the device from
  // further DMA"). Call before the device's first DMA.
  void enable_bus_master();
  // Function-level reset (VFIO_DEVICE_RESET).
  void reset();
  // Routes the function's MSI to `eventfd` (VFIO_DEVICE_SET_IRQS, VFIO_PCI_MSI_IRQ_INDEX,
  // DATA_EVENTFD | ACTION_TRIGGER, one vector: Linux include/uapi/linux/vfio.h): each
  // interrupt adds 1 to its counter. False when the function has no MSI vector or VFIO cannot
  // signal it through an eventfd (VFIO_DEVICE_GET_IRQ_INFO); OsError naming the ioctl when
  // VFIO refuses it.
  bool enable_msi(int eventfd);
  // Stops it (DATA_NONE | ACTION_TRIGGER, count 0: vfio-pci disables MSI).
  void disable_msi();
  // The function's PCI address, "0000:03:00.0".
  const std::string& address() const { return address_; }
  // True when opened through iommufd, false through the container/group interface.
  bool iommufd() const { return iommufd_ >= 0; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;
  void open_group(int group);
  void open_cdev(const std::string& cdev, int iommu_group);
  [[noreturn]] void not_viable(int iommu_group) const;
  uint64_t unmap_type1(uint64_t iova, uint64_t size);
  void close_all();
  std::shared_ptr<Kernel> k_;
  std::string address_;
  int container_ = -1, group_ = -1, device_ = -1, iommufd_ = -1;
  uint32_t ioas_ = 0;
  uint32_t regions_ = 0;
};

}  // namespace hcq::os
