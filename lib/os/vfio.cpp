#include "os/vfio.hpp"

#include <fcntl.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "os/iommufd_abi.hpp"

namespace hcq::os {

void VfioDevice::fail(const std::string& what, int err) const {
  throw OsError(address_ + ": " + what, err);
}

VfioDevice::VfioDevice(std::shared_ptr<Kernel> k, const PciFunction& fn)
    : k_(std::move(k)), address_(fn.address) {
  if (fn.driver != "vfio-pci")
    throw Error(address_ + " is bound to " + (fn.driver.empty() ? "no driver" : fn.driver) +
                ", not vfio-pci (hcq pci " + address_ + " --bind-vfio)");
  // Close what was opened when a later step throws.
  struct Undo {
    VfioDevice* d;
    ~Undo() {
      if (d) d->close_all();
    }
  } undo{this};
  // The kernel names the cdev in sysfs (drivers/vfio/vfio_main.c: vfio-dev/vfioN).
  auto cdev = k_->list_dir(pci_sysfs_dir(address_) + "/vfio-dev");
  if (!cdev.empty()) iommufd_ = std::max(k_->open("/dev/iommu", O_RDWR), -1);
  if (iommufd_ >= 0)
    open_cdev("/dev/vfio/devices/" + cdev.front(), fn.iommu_group);
  else
    open_group(fn.iommu_group);
  vfio_device_info info{};
  info.argsz = sizeof info;
  if (int r = k_->ioctl(device_, VFIO_DEVICE_GET_INFO, &info); r < 0) fail("VFIO_DEVICE_GET_INFO", -r);
  regions_ = info.num_regions;
  undo.d = nullptr;
}

void VfioDevice::open_group(int iommu_group) {
  const std::string group = "/dev/vfio/" + std::to_string(iommu_group);
  container_ = k_->open("/dev/vfio/vfio", O_RDWR);
  if (container_ < 0) fail("open /dev/vfio/vfio (modprobe vfio-pci)", -container_);
  if (int v = k_->ioctl(container_, VFIO_GET_API_VERSION, nullptr); v != VFIO_API_VERSION)
    throw Error(address_ + ": VFIO API version " + std::to_string(v) + ", expected " +
                std::to_string(VFIO_API_VERSION));
  auto type1v2 = reinterpret_cast<void*>(uintptr_t(VFIO_TYPE1v2_IOMMU));
  if (k_->ioctl(container_, VFIO_CHECK_EXTENSION, type1v2) != 1)
    throw Error(address_ + ": the VFIO container has no type1v2 IOMMU");
  group_ = k_->open(group, O_RDWR);
  if (group_ < 0) fail("open " + group + (group_ == -EACCES ? " (needs root or the group's owner)" : ""), -group_);
  vfio_group_status st{sizeof(vfio_group_status), 0};
  if (int r = k_->ioctl(group_, VFIO_GROUP_GET_STATUS, &st); r < 0) fail("VFIO_GROUP_GET_STATUS", -r);
  if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE)) not_viable(iommu_group);
  if (int r = k_->ioctl(group_, VFIO_GROUP_SET_CONTAINER, &container_); r < 0)
    fail("VFIO_GROUP_SET_CONTAINER", -r);
  if (int r = k_->ioctl(container_, VFIO_SET_IOMMU, type1v2); r < 0) fail("VFIO_SET_IOMMU", -r);
  char name[32];
  address_.copy(name, sizeof name - 1);
  name[std::min(address_.size(), sizeof name - 1)] = 0;
  device_ = k_->ioctl(group_, VFIO_GROUP_GET_DEVICE_FD, name);
  if (device_ < 0) fail("VFIO_GROUP_GET_DEVICE_FD", -device_);
}

void VfioDevice::not_viable(int iommu_group) const {
  throw Error(address_ + ": IOMMU group " + std::to_string(iommu_group) +
              " is not viable: bind every function of the group to vfio-pci");
}

void VfioDevice::open_cdev(const std::string& cdev, int iommu_group) {
  using namespace iommufd;
  device_ = k_->open(cdev, O_RDWR);
  if (device_ < 0) fail("open " + cdev, -device_);
  BindIommufd bind{sizeof(BindIommufd), 0, iommufd_, 0};
  // EBUSY: another driver holds a function of the group (iommu_device_claim_dma_owner).
  if (int r = k_->ioctl(device_, VFIO_DEVICE_BIND_IOMMUFD, &bind); r == -EBUSY)
    not_viable(iommu_group);
  else if (r < 0)
    fail("VFIO_DEVICE_BIND_IOMMUFD", -r);
  IoasAlloc alloc{sizeof(IoasAlloc), 0, 0};
  if (int r = k_->ioctl(iommufd_, IOMMU_IOAS_ALLOC, &alloc); r < 0) fail("IOMMU_IOAS_ALLOC", -r);
  ioas_ = alloc.out_ioas_id;
  AttachPt attach{sizeof(AttachPt), 0, ioas_};
  if (int r = k_->ioctl(device_, VFIO_DEVICE_ATTACH_IOMMUFD_PT, &attach); r < 0)
    fail("VFIO_DEVICE_ATTACH_IOMMUFD_PT", -r);
}

VfioDevice::~VfioDevice() { close_all(); }

void VfioDevice::close_all() {
  for (int* fd : {&device_, &group_, &container_, &iommufd_})
    if (*fd >= 0) k_->close(std::exchange(*fd, -1));
}

VfioDevice::Region VfioDevice::region(uint32_t index) const {
  vfio_region_info r{};
  r.argsz = sizeof r;
  r.index = index;
  if (int e = k_->ioctl(device_, VFIO_DEVICE_GET_REGION_INFO, &r); e < 0)
    fail("VFIO_DEVICE_GET_REGION_INFO for region " + std::to_string(index), -e);
  return {index, r.size, r.offset, (r.flags & VFIO_REGION_INFO_FLAG_READ) != 0,
          (r.flags & VFIO_REGION_INFO_FLAG_WRITE) != 0, (r.flags & VFIO_REGION_INFO_FLAG_MMAP) != 0};
}

void* VfioDevice::map_region(uint32_t index) {
  Region r = region(index);
  if (!r.mappable || !r.size)
    throw InvalidInput(address_ + ": VFIO region " + std::to_string(index) + " cannot be mapped");
  void* p = k_->mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, device_, off_t(r.offset));
  if (p == MAP_FAILED) fail("mmap of VFIO region " + std::to_string(index), errno);
  return p;
}

void VfioDevice::unmap_region(void* p, uint64_t size) { k_->munmap(p, size); }

uint32_t VfioDevice::read_region32(const Region& r, uint64_t offset) {
  uint32_t v = 0;
  const ssize_t n = k_->pread(device_, &v, sizeof v, off_t(r.offset + offset));
  if (n != sizeof v)
    fail("read of VFIO region " + std::to_string(r.index) + " at " + hex(offset), n < 0 ? int(-n) : EIO);
  return v;
}

void VfioDevice::write_region32(const Region& r, uint64_t offset, uint32_t value) {
  const ssize_t n = k_->pwrite(device_, &value, sizeof value, off_t(r.offset + offset));
  if (n != sizeof value)
    fail("write of VFIO region " + std::to_string(r.index) + " at " + hex(offset), n < 0 ? int(-n) : EIO);
}

void VfioDevice::map_region_at(uint32_t index, uint64_t offset, uint64_t size, void* at) {
  Region r = region(index);
  if (!r.mappable || offset > r.size || size > r.size - offset)
    throw InvalidInput(address_ + ": VFIO region " + std::to_string(index) + " cannot map [" +
                       hex(offset) + ", +" + hex(size) + ") (" + hex(r.size) + " bytes" +
                       (r.mappable ? "" : ", not mappable") + ")");
  void* p = k_->mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, device_,
                     off_t(r.offset + offset));
  if (p == MAP_FAILED) fail("mmap of VFIO region " + std::to_string(index) + " at " +
                            hex(reinterpret_cast<uint64_t>(at)), errno);
  if (p != at) {  // a kernel that ignored MAP_FIXED: the range would not be where asked
    k_->munmap(p, size);
    throw Error(address_ + ": mmap of VFIO region " + std::to_string(index) + " landed at " +
                hex(reinterpret_cast<uint64_t>(p)) + ", not at " +
                hex(reinterpret_cast<uint64_t>(at)));
  }
}

void VfioDevice::map_dma(void* host, uint64_t iova, uint64_t size) {
  const std::string what = " of " + hex(size) + " bytes at IOVA " + hex(iova);
  if (iommufd()) {
    using namespace iommufd;
    IoasMap m{sizeof(IoasMap), kMapFixedIova | kMapReadable | kMapWriteable, ioas_, 0,
              reinterpret_cast<uintptr_t>(host), size, iova};
    if (int r = k_->ioctl(iommufd_, IOMMU_IOAS_MAP, &m); r < 0) fail("IOMMU_IOAS_MAP" + what, -r);
    return;
  }
  vfio_iommu_type1_dma_map m{};
  m.argsz = sizeof m;
  m.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
  m.vaddr = reinterpret_cast<uintptr_t>(host);
  m.iova = iova;
  m.size = size;
  if (int r = k_->ioctl(container_, VFIO_IOMMU_MAP_DMA, &m); r < 0)
    fail("VFIO_IOMMU_MAP_DMA" + what, -r);
}

void VfioDevice::unmap_dma(uint64_t iova, uint64_t size) {
  uint64_t unmapped = 0;
  if (iommufd()) {
    iommufd::IoasUnmap u{sizeof(iommufd::IoasUnmap), ioas_, iova, size};
    int r = k_->ioctl(iommufd_, iommufd::IOMMU_IOAS_UNMAP, &u);
    if (r < 0 && r != -ENOENT) fail("IOMMU_IOAS_UNMAP at IOVA " + hex(iova), -r);
    unmapped = r < 0 ? 0 : u.length;
  } else {
    unmapped = unmap_type1(iova, size);
  }
  if (unmapped != size)
    throw Error(address_ + ": no DMA mapping of " + hex(size) + " bytes at IOVA " + hex(iova));
}

uint64_t VfioDevice::unmap_type1(uint64_t iova, uint64_t size) {
  vfio_iommu_type1_dma_unmap u{};
  u.argsz = sizeof u;
  u.iova = iova;
  u.size = size;
  if (int r = k_->ioctl(container_, VFIO_IOMMU_UNMAP_DMA, &u); r < 0)
    fail("VFIO_IOMMU_UNMAP_DMA at IOVA " + hex(iova), -r);
  return u.size;
}

uint16_t VfioDevice::config16(uint32_t offset) {
  const uint64_t at = region(VFIO_PCI_CONFIG_REGION_INDEX).offset + offset;
  uint16_t v = 0;
  ssize_t n = k_->pread(device_, &v, sizeof v, off_t(at));
  if (n != sizeof v) fail("config space read at " + hex(offset), n < 0 ? int(-n) : EIO);
  return v;
}

void VfioDevice::set_config16(uint32_t offset, uint16_t value) {
  const uint64_t at = region(VFIO_PCI_CONFIG_REGION_INDEX).offset + offset;
  ssize_t n = k_->pwrite(device_, &value, sizeof value, off_t(at));
  if (n != sizeof value) fail("config space write at " + hex(offset), n < 0 ? int(-n) : EIO);
}

void VfioDevice::enable_bus_master() {
  const uint16_t cmd = config16(PCI_COMMAND);
  const uint16_t want = cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
  if (want != cmd) set_config16(PCI_COMMAND, want);
}

void VfioDevice::reset() {
  if (int r = k_->ioctl(device_, VFIO_DEVICE_RESET, nullptr); r < 0) fail("VFIO_DEVICE_RESET", -r);
}

bool VfioDevice::enable_msi(int eventfd) {
  vfio_irq_info info{};
  info.argsz = sizeof info;
  info.index = VFIO_PCI_MSI_IRQ_INDEX;
  if (int r = k_->ioctl(device_, VFIO_DEVICE_GET_IRQ_INFO, &info); r < 0)
    fail("VFIO_DEVICE_GET_IRQ_INFO (MSI)", -r);
  if (info.count == 0 || !(info.flags & VFIO_IRQ_INFO_EVENTFD)) return false;
  // A vfio_irq_set followed by its data, one __s32 fd (vfio.h: data is a flexible array).
  alignas(vfio_irq_set) unsigned char buf[sizeof(vfio_irq_set) + sizeof(int32_t)] = {};
  auto* set = reinterpret_cast<vfio_irq_set*>(buf);
  set->argsz = sizeof buf;
  set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
  set->index = VFIO_PCI_MSI_IRQ_INDEX;
  set->start = 0;
  set->count = 1;
  const int32_t fd = eventfd;
  std::memcpy(set->data, &fd, sizeof fd);
  if (int r = k_->ioctl(device_, VFIO_DEVICE_SET_IRQS, set); r < 0)
    fail("VFIO_DEVICE_SET_IRQS (MSI eventfd)", -r);
  return true;
}

void VfioDevice::disable_msi() {
  vfio_irq_set set{};
  set.argsz = sizeof set;
  set.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
  set.index = VFIO_PCI_MSI_IRQ_INDEX;
  set.count = 0;
  if (int r = k_->ioctl(device_, VFIO_DEVICE_SET_IRQS, &set); r < 0)
    fail("VFIO_DEVICE_SET_IRQS (MSI off)", -r);
}

}  // namespace hcq::os
