// What the AM driver needs of the PCI function it drives (issue 18): its registers (BAR5),
// VRAM (BAR0), doorbells (BAR2), bus mastering, DMA to host memory and the MSI. Two
// implementations: VFIO (vfio_function.hpp: BARs mapped, DMA through the IOMMU, MSI through an
// eventfd) and a PcieTransport behind a USB bridge (usb_function.hpp: every access a request,
// DMA only into the bridge's SRAM window, no MSI).
//
// Threads: every member may be called from several threads at once (as os::Mmio and the
// transports allow); enable_msi/disable_msi and set_bus_master are called by one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "amd/am/page_tables.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {

// VRAM through BAR0: physical address = offset in the BAR. read64/write64 (VramAccess, for
// the page tables) and byte ranges. An access outside the BAR, or a 64-bit one not 8-byte
// aligned, throws hcq::Error naming the address (as MappedVram). Byte ranges may start and
// end anywhere: an implementation that moves whole dwords (USB) reads the partly covered
// ones and merges them itself.
class VramPort : public VramAccess {
 public:
  virtual uint64_t size() const = 0;
  virtual void write(uint64_t pa, std::span<const std::byte> data) = 0;  // memcpy or streamed
  virtual void read(uint64_t pa, std::span<std::byte> out) = 0;
  // The CPU's mapping of the whole BAR, or null where the CPU cannot map it (USB bridge).
  virtual std::byte* mapping() const = 0;
};

// Host-side memory the device reaches only as a fixed window (the bridge's SRAM), which the
// CPU reaches through the function (write; read where the bridge can).
struct HostWindow {
  uint64_t device_address = 0, size = 0;
};

class AmFunction {
 public:
  virtual ~AmFunction() = default;
  virtual const std::string& name() const = 0;  // "0000:03:00.0", "usb 2-1 04:00.0"
  virtual os::Mmio& registers() = 0;            // BAR5
  virtual VramPort& vram() = 0;                 // BAR0
  virtual uint64_t doorbell_bytes() const = 0;  // BAR2's size
  // The doorbell's CPU address where BAR2 is mapped, else null: then ring_doorbell.
  virtual volatile uint64_t* doorbell_mapping(uint32_t index) = 0;
  virtual void ring_doorbell(uint32_t index, uint64_t value) = 0;
  virtual void set_bus_master(bool on) = 0;  // PCI_COMMAND master (and memory) bits
  // DMA: any host page at IOVA = its address (VFIO: true), or only host_window().
  virtual bool maps_host_memory() const = 0;
  // Only where maps_host_memory(); else InvalidInput.
  virtual void map_dma(void* host, uint64_t iova, uint64_t size) = 0;
  virtual void unmap_dma(uint64_t iova, uint64_t size) = 0;
  // Maps VRAM [pa, pa + size) for the CPU exactly at `at`, replacing what is there (GpuMemory
  // puts device memory at its GPU address this way); only where vram().mapping() is not null,
  // else InvalidInput.
  virtual void map_vram(void* at, uint64_t pa, uint64_t size) = 0;
  virtual std::optional<HostWindow> host_window() const = 0;
  // [offset, offset + size) of host_window(); InvalidInput where there is none, outside it,
  // or (read) where the CPU cannot read it back.
  virtual void write_host_window(uint64_t offset, std::span<const std::byte> data) = 0;
  virtual void read_host_window(uint64_t offset, std::span<std::byte> out) = 0;
  // The MSI routed to `eventfd`; false where the function has none (the driver then polls).
  virtual bool enable_msi(int eventfd) = 0;
  virtual void disable_msi() = 0;
};

}  // namespace hcq::amd::am
