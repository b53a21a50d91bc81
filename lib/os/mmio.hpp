// Register windows with side effects (issue 17): 32-bit reads and writes at byte offsets in a
// GPU's register BAR, where a read or a write may do something (pop a FIFO, start a request,
// select what the next access reaches). Every access is bounds- and alignment-checked against
// the window and happens exactly once, in program order, as one 32-bit access.
//
// Implementations: MappedMmio over a BAR mapped into the process (volatile accesses), built
// from a sysfs resource map (PciBarMap) or a VFIO region (VfioRegionMmio); VfioRegionRwMmio,
// a VFIO region reached by pread/pwrite of the device fd (open_register_window picks it when
// the region cannot be mapped); EmulatedMmio, which hands each access to a device model's
// MmioHandler as it happens.
//
// On top of any window, IndexDataRegs reaches registers through an index/data pair, as a
// layout describes it (a vendor's pairs are in its driver: amd/am/index_pairs.hpp).
//
// Threads: read32/write32/read/write of a window may be called from several threads at once;
// each access is one 32-bit access (MappedMmio) or one handler call (EmulatedMmio, whose
// handler must then be thread-safe itself). A sequence of accesses is not atomic: an
// index/data pair is two steps, so IndexDataRegs holds a mutex around each sequence. All users
// of one pair must go through the same IndexDataRegs object; a direct write of its index
// register from elsewhere races with it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "os/kernel.hpp"
#include "os/pci.hpp"
#include "os/vfio.hpp"

namespace hcq::os {

class Mmio {
 public:
  virtual ~Mmio() = default;
  // The window's length in bytes.
  virtual uint64_t size() const = 0;
  // What error messages call the window: "BAR5 of 0000:03:00.0".
  virtual const std::string& name() const = 0;

  // Throw InvalidInput for an offset that is not 4-byte aligned or a dword that leaves the
  // window: "0x3 is not a 32-bit register offset (BAR5 of 0000:03:00.0)",
  // "0x80000 is outside BAR5 of 0000:03:00.0 (0x80000 bytes)".
  uint32_t read32(uint64_t offset);
  void write32(uint64_t offset, uint32_t value);
  // Consecutive dwords from `offset`, one access each in ascending order. The whole range is
  // checked before the first access: "[0x7fff8, +0x10) is outside BAR5 of ... (0x80000 bytes)".
  void read(uint64_t offset, std::span<uint32_t> out);
  void write(uint64_t offset, std::span<const uint32_t> values);

 protected:
  // Called after the checks.
  virtual uint32_t do_read32(uint64_t offset) = 0;
  virtual void do_write32(uint64_t offset, uint32_t value) = 0;

 private:
  void check(uint64_t offset, uint64_t bytes) const;
};

// A window over memory that is the device's registers (a mapped BAR). Does not own the map.
class MappedMmio : public Mmio {
 public:
  MappedMmio(std::string name, void* base, uint64_t size) : name_(std::move(name)) {
    attach(base, size);
  }
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

 protected:
  // For windows that map their memory in their own constructor (PciBarMap, VfioRegionMmio).
  explicit MappedMmio(std::string name) : name_(std::move(name)) {}
  void attach(void* base, uint64_t size) {
    base_ = static_cast<volatile uint32_t*>(base);
    size_ = size;
  }
  void* base() const { return const_cast<uint32_t*>(base_); }
  uint32_t do_read32(uint64_t offset) override { return base_[offset / 4]; }
  void do_write32(uint64_t offset, uint32_t value) override { base_[offset / 4] = value; }

 private:
  std::string name_;
  volatile uint32_t* base_ = nullptr;
  uint64_t size_ = 0;
};

// A BAR mapped through VFIO (VfioDevice::map_region; region index = BAR number for vfio-pci),
// unmapped on destruction. The device must outlive the window.
class VfioRegionMmio : public MappedMmio {
 public:
  VfioRegionMmio(VfioDevice& device, int bar);
  ~VfioRegionMmio() override;
  VfioRegionMmio(const VfioRegionMmio&) = delete;
  VfioRegionMmio& operator=(const VfioRegionMmio&) = delete;

 private:
  VfioDevice& device_;
};

// A BAR read and written through the VFIO device fd, one 4-byte pread/pwrite per access
// (drivers/vfio/pci/vfio_pci_rdwr.c serves every BAR this way): slower than a mapping (a
// system call each), for a region VFIO will not map. The device must outlive the window.
class VfioRegionRwMmio : public Mmio {
 public:
  // InvalidInput for a BAR outside 0..5 or a region that cannot be read and written:
  // "0000:03:00.0: VFIO region 5 cannot be read and written".
  VfioRegionRwMmio(VfioDevice& device, int bar);
  uint64_t size() const override { return region_.size; }
  const std::string& name() const override { return name_; }

 protected:
  uint32_t do_read32(uint64_t offset) override;
  void do_write32(uint64_t offset, uint32_t value) override;

 private:
  VfioDevice& device_;
  std::string name_;
  VfioDevice::Region region_;
};

// The register window of a BAR of a function opened through VFIO: a mapping (VfioRegionMmio)
// when VFIO offers one, else pread/pwrite (VfioRegionRwMmio).
std::unique_ptr<Mmio> open_register_window(VfioDevice& device, int bar);

// A device model's side of an emulated window: called once per access, in order, with the
// checked byte offset.
class MmioHandler {
 public:
  virtual ~MmioHandler() = default;
  virtual uint32_t read32(uint64_t offset) = 0;
  virtual void write32(uint64_t offset, uint32_t value) = 0;
};

// A window whose accesses go to a handler; the handler must outlive the window.
class EmulatedMmio : public Mmio {
 public:
  EmulatedMmio(std::string name, uint64_t size, MmioHandler& handler)
      : name_(std::move(name)), size_(size), handler_(handler) {}
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

 protected:
  uint32_t do_read32(uint64_t offset) override { return handler_.read32(offset); }
  void do_write32(uint64_t offset, uint32_t value) override { handler_.write32(offset, value); }

 private:
  std::string name_;
  uint64_t size_;
  MmioHandler& handler_;
};

// Where an index/data pair sits in a window (byte offsets) and how an address is written.
struct IndexDataLayout {
  std::string name;  // for error messages: "PCIE_INDEX2/PCIE_DATA2"
  uint64_t index = 0, data = 0;
  // Addresses read32/write32 accept: [0, address_limit).
  uint64_t address_limit = uint64_t(1) << 32;
  // Optional high index register taking address bits 32 and up (index_hi = 0: none). Written
  // only when those bits are not zero, and cleared again afterwards.
  uint64_t index_hi = 0;
  // Read the index back after writing it, before the data access (posts the write; Linux does
  // it for PCIE_INDEX2, amdgpu_device_indirect_rreg).
  bool read_back_index = false;
  // Read the data register back after a data write (Linux amdgpu_device_indirect_wreg).
  bool read_back_data = false;
  // A pair that also reaches VRAM (read_vram32/write_vram32): the index takes the address's
  // bits below address_limit (a power of two) with the address_limit bit set, which selects
  // VRAM, and vram_index_hi takes the address from that bit up.
  uint64_t vram_index_hi = 0;
  bool reaches_vram = false;
};

class IndexDataRegs {
 public:
  // Checks that the registers are inside the window, and that a pair reaching VRAM selects it
  // with one bit of a 32-bit index (address_limit a power of two up to 2^31).
  IndexDataRegs(Mmio& mmio, IndexDataLayout layout);
  // One address through the pair, under the pair's lock. InvalidInput for an address at or
  // above the layout's limit: "MM_INDEX/MM_DATA: address 0x80000000 is beyond the index's
  // reach (below 0x80000000)".
  uint32_t read32(uint64_t address);
  void write32(uint64_t address, uint32_t value);
  // VRAM at `address`, for a pair that reaches it (IndexDataLayout::reaches_vram).
  // InvalidInput for another pair or an unaligned address.
  uint32_t read_vram32(uint64_t address);
  void write_vram32(uint64_t address, uint32_t value);
  const IndexDataLayout& layout() const { return layout_; }

 private:
  void select(uint64_t index_value);
  void unselect_hi(uint64_t index_value);
  void select_vram(uint64_t address);  // mutex_ held
  Mmio& mmio_;
  IndexDataLayout layout_;
  std::mutex mutex_;
};

}  // namespace hcq::os
