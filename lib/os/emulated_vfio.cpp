#include "os/emulated_vfio.hpp"

#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "os/emulated_pci.hpp"
#include "os/iommufd_abi.hpp"

namespace hcq::os {
namespace {

// vfio-pci places region N at file offset N << 40 of the device fd
// (drivers/vfio/pci/vfio_pci_priv.h VFIO_PCI_OFFSET_SHIFT).
constexpr int kRegionShift = 40;
constexpr uint64_t kPage = 4096;

// /dev/vfio/vfio: every open is a new container (drivers/vfio/container.c).
class ContainerNode final : public EmulatedNode {
 public:
  explicit ContainerNode(EmulatedVfio& v) : v_(v) {}
  struct State {
    int groups = 0;
    bool iommu = false;
  };
  void on_open(int fd) override {
    std::lock_guard lk(v_.mu());
    state_[fd] = {};
  }
  void on_close(int fd) override {
    std::lock_guard lk(v_.mu());
    state_.erase(fd);
  }
  // Called by a group joining this container; false for an fd that is not one.
  bool attach(int fd) {
    std::lock_guard lk(v_.mu());
    auto it = state_.find(fd);
    if (it == state_.end()) return false;
    it->second.groups++;
    return true;
  }
  bool iommu_set(int fd) {
    std::lock_guard lk(v_.mu());
    auto it = state_.find(fd);
    return it != state_.end() && it->second.iommu;
  }
  int ioctl(int fd, unsigned long req, void* arg) override {
    std::unique_lock lk(v_.mu());
    State& s = state_[fd];
    if (req == VFIO_IOMMU_MAP_DMA || req == VFIO_IOMMU_UNMAP_DMA) lk.unlock();  // v_ locks
    switch (req) {
      case VFIO_GET_API_VERSION: return VFIO_API_VERSION;
      case VFIO_CHECK_EXTENSION: {
        auto ext = reinterpret_cast<uintptr_t>(arg);
        return ext == VFIO_TYPE1_IOMMU || ext == VFIO_TYPE1v2_IOMMU ? 1 : 0;
      }
      case VFIO_SET_IOMMU: {
        auto type = reinterpret_cast<uintptr_t>(arg);
        if (!s.groups || s.iommu || (type != VFIO_TYPE1_IOMMU && type != VFIO_TYPE1v2_IOMMU))
          return -EINVAL;
        s.iommu = true;
        return 0;
      }
      case VFIO_IOMMU_MAP_DMA: {
        auto* m = static_cast<vfio_iommu_type1_dma_map*>(arg);
        return s.iommu ? v_.map(m->iova, m->vaddr, m->size) : -EINVAL;
      }
      case VFIO_IOMMU_UNMAP_DMA: {
        auto* u = static_cast<vfio_iommu_type1_dma_unmap*>(arg);
        if (!s.iommu) return -EINVAL;
        u->size = v_.unmap(u->iova, u->size);  // type1 unmaps whole mappings only
        return 0;
      }
      default: return -ENOTTY;
    }
  }

 private:
  EmulatedVfio& v_;
  std::map<int, State> state_;
};

// /dev/iommu: each open is an iommufd context with its IO address spaces
// (drivers/iommu/iommufd/ioas.c).
class IommufdNode final : public EmulatedNode {
 public:
  explicit IommufdNode(EmulatedVfio& v) : v_(v) {}
  bool has_ioas(int fd, uint32_t id) {
    std::lock_guard lk(v_.mu());
    return ioas_[fd].count(id) != 0;
  }
  void on_close(int fd) override {
    std::lock_guard lk(v_.mu());
    ioas_.erase(fd);
  }
  int ioctl(int fd, unsigned long req, void* arg) override {
    using namespace iommufd;
    switch (req) {
      case IOMMU_IOAS_ALLOC: {
        std::lock_guard lk(v_.mu());
        static_cast<IoasAlloc*>(arg)->out_ioas_id = next_id_;
        ioas_[fd].insert(next_id_++);
        return 0;
      }
      case IOMMU_IOAS_MAP: {
        auto* m = static_cast<IoasMap*>(arg);
        if (!has_ioas(fd, m->ioas_id)) return -ENOENT;
        if (!(m->flags & kMapFixedIova)) return -EINVAL;  // IOVA allocation is not emulated
        return v_.map(m->iova, m->user_va, m->length);
      }
      case IOMMU_IOAS_UNMAP: {
        auto* u = static_cast<IoasUnmap*>(arg);
        if (!has_ioas(fd, u->ioas_id)) return -ENOENT;
        u->length = v_.unmap(u->iova, u->length);
        return u->length ? 0 : -ENOENT;
      }
      default: return -ENOTTY;
    }
  }

 private:
  EmulatedVfio& v_;
  std::map<int, std::set<uint32_t>> ioas_;
  uint32_t next_id_ = 1;
};

// A device fd: regions are the BARs (mappable) and config space (read/write only). A cdev
// (/dev/vfio/devices/vfioN) answers nothing but VFIO_DEVICE_BIND_IOMMUFD until it is bound
// to an iommufd, as drivers/vfio/device_cdev.c has it.
class DeviceNode final : public EmulatedNode {
 public:
  DeviceNode(EmulatedVfio& v, std::string address, bool cdev)
      : v_(v), address_(std::move(address)), bound_(!cdev) {}
  void on_close(int) override {
    // vfio_pci_core_disable: "Stop the device from further DMA"; its interrupts go too.
    if (bound_) v_.set_command(address_, v_.command(address_) & ~PCI_COMMAND_MASTER);
    if (bound_) v_.set_msi(address_, nullptr);
    if (iommufd_ >= 0) bound_ = false, iommufd_ = -1;
  }
  // Config space (region VFIO_PCI_CONFIG_REGION_INDEX): the function's sysfs config bytes
  // with the command register VFIO users wrote. Writes reach the command register alone; the
  // others are dropped, as the kernel drops writes to read-only registers.
  // A memory BAR's region: its bytes (vfio-pci reads and writes BARs through the fd too,
  // drivers/vfio/pci/vfio_pci_rdwr.c vfio_pci_bar_rw); a BAR with a device model takes only
  // aligned dwords, one handler call each, EINVAL otherwise (a sketch of vfio's rule that an
  // access be naturally aligned, vfio_pci_core_do_io_rw, narrowed to the 32-bit registers
  // the model has).
  ssize_t pread(int, void* buf, size_t size, off_t offset) override {
    if (EmulatedBar* bar = bar_region(offset)) return bar_rw(*bar, offset, buf, size, false);
    std::string cfg;
    if (int r = config(offset, size, cfg); r < 0) return r;
    const uint64_t at = uint64_t(offset) & kInRegion;
    std::memcpy(buf, cfg.data() + at, size);
    return ssize_t(size);
  }
  ssize_t pwrite(int, const void* buf, size_t size, off_t offset) override {
    if (EmulatedBar* bar = bar_region(offset))
      return bar_rw(*bar, offset, const_cast<void*>(buf), size, true);
    std::string cfg;
    if (int r = config(offset, size, cfg); r < 0) return r;
    const uint64_t at = uint64_t(offset) & kInRegion;
    std::memcpy(cfg.data() + at, buf, size);
    if (at < PCI_COMMAND + 2 && at + size > PCI_COMMAND)
      v_.set_command(address_, uint16_t(uint8_t(cfg[PCI_COMMAND]) | uint8_t(cfg[PCI_COMMAND + 1]) << 8));
    return ssize_t(size);
  }
  int ioctl(int, unsigned long req, void* arg) override {
    if (req == iommufd::VFIO_DEVICE_BIND_IOMMUFD) {
      auto* b = static_cast<iommufd::BindIommufd*>(arg);
      iommufd_node_ = std::dynamic_pointer_cast<IommufdNode>(v_.kernel().node_of(b->iommufd));
      if (bound_ || !iommufd_node_) return bound_ ? -EINVAL : -EBADF;
      if (!v_.viable(v_.bus().function(address_)->iommu_group)) return -EBUSY;
      bound_ = true;
      iommufd_ = b->iommufd;
      b->out_devid = 1;
      return 0;
    }
    if (!bound_) return -EINVAL;
    if (req == iommufd::VFIO_DEVICE_ATTACH_IOMMUFD_PT) {
      auto* a = static_cast<iommufd::AttachPt*>(arg);
      return iommufd_ >= 0 && iommufd_node_->has_ioas(iommufd_, a->pt_id) ? 0 : -ENOENT;
    }
    const EmulatedPciFunction* f = v_.bus().function(address_);
    switch (req) {
      case VFIO_DEVICE_GET_INFO: {
        auto* i = static_cast<vfio_device_info*>(arg);
        i->flags = VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET;
        i->num_regions = VFIO_PCI_NUM_REGIONS;
        i->num_irqs = VFIO_PCI_NUM_IRQS;
        return 0;
      }
      case VFIO_DEVICE_GET_REGION_INFO: {
        auto* r = static_cast<vfio_region_info*>(arg);
        if (r->index >= VFIO_PCI_NUM_REGIONS) return -EINVAL;
        r->offset = uint64_t(r->index) << kRegionShift;
        r->size = 0;
        r->flags = 0;
        r->cap_offset = 0;
        if (r->index == VFIO_PCI_CONFIG_REGION_INDEX) {
          r->size = f->port == PciPort::None ? 256 : 4096;
          r->flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
        }
        for (auto& b : f->bars)
          if (uint32_t(b.index) == r->index) {
            r->size = b.size;
            r->flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE |
                       (b.io || b.handler ? 0 : VFIO_REGION_INFO_FLAG_MMAP);
          }
        return 0;
      }
      case VFIO_DEVICE_GET_IRQ_INFO: {
        // Only an MSI vector (when the function has one) and no INTx pin.
        auto* i = static_cast<vfio_irq_info*>(arg);
        if (i->index >= VFIO_PCI_NUM_IRQS) return -EINVAL;
        const bool msi = i->index == VFIO_PCI_MSI_IRQ_INDEX && f->msi;
        i->flags = msi ? VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE : 0;
        i->count = msi ? 1 : 0;
        return 0;
      }
      case VFIO_DEVICE_SET_IRQS: return set_irqs(*static_cast<vfio_irq_set*>(arg), *f);
      case VFIO_DEVICE_RESET:
        v_.bus().reset(address_);
        v_.count_reset(address_);
        return 0;
      default: return -ENOTTY;
    }
  }
  void* mmap(void* addr, size_t length, int prot, int flags, int, off_t offset) override {
    if (!bound_) {
      errno = EINVAL;
      return MAP_FAILED;
    }
    const int index = int(uint64_t(offset) >> kRegionShift);
    const off_t in_region = off_t(uint64_t(offset) & ((1ull << kRegionShift) - 1));
    for (auto& b : v_.bus().function(address_)->bars)
      if (b.index == index && !b.io) return v_.bus().bar(address_, index).map(addr, length, prot, in_region, flags);
    errno = EINVAL;
    return MAP_FAILED;
  }
  int munmap(void* addr, size_t length) override {
    return ::munmap(addr, length) < 0 ? -errno : 0;
  }

 private:
  static constexpr uint64_t kInRegion = (1ull << kRegionShift) - 1;
  // VFIO_DEVICE_SET_IRQS for the MSI vector (vfio_pci_set_msi_trigger): DATA_NONE with count
  // 0 turns it off; DATA_EVENTFD with one fd (-1: off) routes it there. Other indexes and
  // actions are EINVAL; an fd that is not an eventfd of this kernel EBADF.
  int set_irqs(const vfio_irq_set& s, const EmulatedPciFunction& f) {
    if (s.index != VFIO_PCI_MSI_IRQ_INDEX || !f.msi || !(s.flags & VFIO_IRQ_SET_ACTION_TRIGGER))
      return -EINVAL;
    if ((s.flags & VFIO_IRQ_SET_DATA_NONE) && s.count == 0) {
      v_.set_msi(address_, nullptr);
      return 0;
    }
    if (!(s.flags & VFIO_IRQ_SET_DATA_EVENTFD) || s.start != 0 || s.count != 1 ||
        s.argsz < sizeof s + sizeof(int32_t))
      return -EINVAL;
    int32_t fd;
    std::memcpy(&fd, s.data, sizeof fd);
    if (fd < 0) {
      v_.set_msi(address_, nullptr);
      return 0;
    }
    auto eventfd = std::dynamic_pointer_cast<EmulatedEventfd>(v_.kernel().node_of(fd));
    if (!eventfd) return -EBADF;
    v_.set_msi(address_, std::move(eventfd));
    return 0;
  }
  // The memory BAR whose region `offset` lies in; null for config space, I/O BARs, other
  // regions, or before the device is bound.
  EmulatedBar* bar_region(off_t offset) {
    const uint64_t index = uint64_t(offset) >> kRegionShift;
    if (!bound_) return nullptr;
    for (auto& b : v_.bus().function(address_)->bars)
      if (uint64_t(b.index) == index && !b.io) return &v_.bus().bar(address_, b.index);
    return nullptr;
  }
  // The bytes moved or -EINVAL (outside the BAR; not an aligned dword on a handled BAR).
  static ssize_t bar_rw(EmulatedBar& bar, off_t offset, void* buf, size_t size, bool write) {
    const uint64_t at = uint64_t(offset) & kInRegion;
    if (size == 0 || at >= bar.size() || size > bar.size() - at) return -EINVAL;
    if (bar.handled() && (size != 4 || at % 4)) return -EINVAL;
    auto* bytes = static_cast<uint8_t*>(buf);
    // Whole dwords where aligned, single bytes around them (a plain BAR is memory).
    for (uint64_t i = 0; i < size;) {
      const uint64_t a = at + i;
      if (a % 4 == 0 && size - i >= 4) {
        uint32_t v;
        if (write) {
          std::memcpy(&v, bytes + i, 4);
          bar.write32(a, v);
        } else {
          v = bar.read32(a);
          std::memcpy(bytes + i, &v, 4);
        }
        i += 4;
        continue;
      }
      uint32_t v = bar.read32(a & ~uint64_t(3));
      const unsigned shift = unsigned(a % 4) * 8;
      if (write) {
        v = (v & ~(0xffu << shift)) | uint32_t(bytes[i]) << shift;
        bar.write32(a & ~uint64_t(3), v);
      } else {
        bytes[i] = uint8_t(v >> shift);
      }
      ++i;
    }
    return ssize_t(size);
  }
  // The config space bytes for an access of `size` at device fd `offset`: 0, or -EINVAL
  // outside config space or before the device is bound.
  int config(off_t offset, size_t size, std::string& cfg) {
    if (!bound_ || uint64_t(offset) >> kRegionShift != VFIO_PCI_CONFIG_REGION_INDEX) return -EINVAL;
    auto bytes = v_.kernel().read_file(pci_sysfs_dir(address_) + "/config");
    const uint64_t at = uint64_t(offset) & kInRegion;
    if (!bytes || at + size > bytes->size()) return -EINVAL;
    cfg = std::move(*bytes);
    const uint16_t cmd = v_.command(address_);
    cfg[PCI_COMMAND] = char(cmd & 0xff);
    cfg[PCI_COMMAND + 1] = char(cmd >> 8);
    return 0;
  }
  EmulatedVfio& v_;
  std::string address_;
  bool bound_;
  int iommufd_ = -1;
  std::shared_ptr<IommufdNode> iommufd_node_;
};

// /dev/vfio/<group>.
class GroupNode final : public EmulatedNode {
 public:
  GroupNode(EmulatedVfio& v, int group) : v_(v), group_(group) {}
  // Closing the group leaves its container, so the next user can set one again
  // (drivers/vfio/group.c vfio_group_fops_release).
  void on_close(int) override {
    container_ = -1;
    container_node_.reset();
  }
  int ioctl(int, unsigned long req, void* arg) override {
    switch (req) {
      case VFIO_GROUP_GET_STATUS: {
        auto* s = static_cast<vfio_group_status*>(arg);
        s->flags = (viable() ? VFIO_GROUP_FLAGS_VIABLE : 0) |
                   (container_ >= 0 ? VFIO_GROUP_FLAGS_CONTAINER_SET : 0);
        return 0;
      }
      case VFIO_GROUP_SET_CONTAINER: {
        int fd = *static_cast<int*>(arg);
        auto c = std::dynamic_pointer_cast<ContainerNode>(v_.kernel().node_of(fd));
        if (container_ >= 0) return -EBUSY;
        if (!viable()) return -EPERM;
        if (!c || !c->attach(fd)) return -EBADF;
        container_ = fd;
        container_node_ = c;
        return 0;
      }
      case VFIO_GROUP_GET_DEVICE_FD: {
        std::string name = static_cast<const char*>(arg);
        if (container_ < 0 || !container_node_->iommu_set(container_)) return -EINVAL;
        bool member = false;
        for (auto& a : v_.bus().group_members(group_)) member |= a == name;
        const EmulatedPciFunction* f = v_.bus().function(name);
        if (!member || !f || f->driver != "vfio-pci") return -ENODEV;
        return v_.kernel().open_node(std::make_shared<DeviceNode>(v_, name, false));
      }
      default: return -ENOTTY;
    }
  }

 private:
  bool viable() const { return v_.viable(group_); }
  EmulatedVfio& v_;
  int group_;
  int container_ = -1;
  std::shared_ptr<ContainerNode> container_node_;
};

}  // namespace

EmulatedVfio::EmulatedVfio(EmulatedPciBus& bus, EmulatedKernel& kernel)
    : bus_(bus), kernel_(kernel) {
  kernel_.add_node("/dev/vfio/vfio", std::make_shared<ContainerNode>(*this));
  kernel_.add_node("/dev/iommu", std::make_shared<IommufdNode>(*this));
}

int EmulatedVfio::add_device(const std::string& address, int group) {
  int n;
  bool new_group;
  {
    std::lock_guard lk(mu_);
    new_group = groups_.insert(group).second;
    auto [it, added] = cdevs_.try_emplace(address, int(cdevs_.size()));
    n = it->second;
    if (!added) return n;
  }
  if (new_group)
    kernel_.add_node("/dev/vfio/" + std::to_string(group), std::make_shared<GroupNode>(*this, group));
  kernel_.add_node("/dev/vfio/devices/vfio" + std::to_string(n),
                   std::make_shared<DeviceNode>(*this, address, true));
  return n;
}

bool EmulatedVfio::viable(int group) const {
  for (auto& a : bus_.group_members(group)) {
    const std::string& d = bus_.function(a)->driver;
    if (!d.empty() && d != "vfio-pci") return false;
  }
  return true;
}

int EmulatedVfio::map(uint64_t iova, uint64_t vaddr, uint64_t size) {
  if (!size || (iova | vaddr | size) % kPage || iova + size < iova) return -EINVAL;
  std::lock_guard lk(mu_);
  auto next = dma_.lower_bound(iova);
  if (next != dma_.end() && next->first < iova + size) return -EEXIST;
  if (next != dma_.begin() && std::prev(next)->first + std::prev(next)->second.size > iova)
    return -EEXIST;
  dma_[iova] = {vaddr, size};
  return 0;
}

uint64_t EmulatedVfio::unmap(uint64_t iova, uint64_t size) {
  std::lock_guard lk(mu_);
  auto it = dma_.find(iova);
  if (it == dma_.end() || it->second.size != size) return 0;
  dma_.erase(it);
  return size;
}

void* EmulatedVfio::translate(uint64_t iova, uint64_t size) const {
  std::lock_guard lk(mu_);
  auto it = dma_.upper_bound(iova);
  if (it == dma_.begin()) return nullptr;
  --it;
  if (iova + size > it->first + it->second.size || iova + size < iova) return nullptr;
  return reinterpret_cast<void*>(it->second.vaddr + (iova - it->first));
}

uint16_t EmulatedVfio::command(const std::string& address) const {
  {
    std::lock_guard lk(mu_);
    auto it = command_.find(address);
    if (it != command_.end()) return it->second;
  }
  // Not yet written through VFIO: as the function came to vfio-pci, bus mastering off.
  auto cfg = kernel_.read_file(pci_sysfs_dir(address) + "/config");
  if (!cfg || cfg->size() < PCI_COMMAND + 2) return 0;
  const uint16_t cmd = uint16_t(uint8_t((*cfg)[PCI_COMMAND]) | uint8_t((*cfg)[PCI_COMMAND + 1]) << 8);
  return cmd & ~PCI_COMMAND_MASTER;
}

void EmulatedVfio::set_command(const std::string& address, uint16_t value) {
  std::lock_guard lk(mu_);
  command_[address] = value;
}

bool EmulatedVfio::bus_master(const std::string& address) const {
  return (command(address) & PCI_COMMAND_MASTER) != 0;
}

void EmulatedVfio::set_msi(const std::string& address, std::shared_ptr<EmulatedEventfd> eventfd) {
  std::shared_ptr<EmulatedEventfd> old;
  {
    std::lock_guard lk(mu_);
    auto& slot = msi_[address];
    old = std::exchange(slot, eventfd);
  }
  if (old && old != eventfd) old->set_on_wait(nullptr);
  if (eventfd)
    if (const EmulatedPciFunction* f = bus_.function(address)) eventfd->set_on_wait(f->on_interrupt_wait);
}

bool EmulatedVfio::interrupt(const std::string& address) {
  std::shared_ptr<EmulatedEventfd> eventfd;
  {
    std::lock_guard lk(mu_);
    auto it = msi_.find(address);
    if (it == msi_.end() || !it->second) return false;
    eventfd = it->second;
  }
  if (!bus_master(address)) return false;
  eventfd->signal();
  return true;
}

int EmulatedVfio::resets(const std::string& address) const {
  std::lock_guard lk(mu_);
  auto it = resets_.find(address);
  return it == resets_.end() ? 0 : it->second;
}

void EmulatedVfio::count_reset(const std::string& address) {
  std::lock_guard lk(mu_);
  resets_[address]++;
}

}  // namespace hcq::os
