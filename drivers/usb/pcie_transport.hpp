// PCIe over a USB bridge (issue 18): a transport under os::Mmio. Behind an ASMedia ASM2464
// over USB 3 no kernel sees the PCIe hierarchy; hcq builds every request itself and the bridge
// turns it into a TLP (tinygrad runtime/support/usb.py, pcie_request). PcieTransport is what
// every such transport offers: configuration reads and writes of one dword with byte enables,
// memory reads and writes (one dword, or a streamed byte range), and the windows of PCI
// address space the device may DMA into (the bridge's SRAM). Implementations: the emulated
// hierarchy (usb/emu/pcie_topology.hpp) and the ASM2464 bridge (usb/asm2464.hpp).
//
// Threads: every member may be called from several threads at once; each request is one
// request, completed before the call returns (implementations serialise as they need).
// TransportMmio inherits that, as os::Mmio requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::usb {

// Bus, device, function: a function's routing ID (PCIe Base Specification 2.2.4.2).
struct Bdf {
  uint8_t bus = 0, device = 0, function = 0;
  friend bool operator==(const Bdf&, const Bdf&) = default;
  friend auto operator<=>(const Bdf&, const Bdf&) = default;
};
// "04:00.0", as lspci writes a function without its domain.
std::string to_string(const Bdf& f);

// A completion's status (PCIe Base Specification 2.2.9, Cpl Status field): successful
// completion, unsupported request, configuration request retry status, completer abort.
enum class CompletionStatus { SC, UR, CRS, CA };
// "unsupported request (UR)".
const char* to_string(CompletionStatus s);

enum class RequestKind { ConfigRead, ConfigWrite, MemoryRead, MemoryWrite };
// "config read", "memory write".
const char* to_string(RequestKind k);

// What an implementation answers for one request: its status, and why, where the transport
// knows more than the status says ("link down").
struct Completion {
  CompletionStatus status = CompletionStatus::SC;
  std::string detail;
  static Completion ok() { return {}; }
};

// A request that did not complete successfully. what(): "config read 01:00.0 +0x10:
// unsupported request (UR)", "memory read 0x10000000 (4 bytes): completer abort (CA): link
// down" (the detail, where there is one, last).
class PcieError : public Error {
 public:
  // A configuration request.
  PcieError(RequestKind kind, Bdf function, uint32_t offset, CompletionStatus status,
            std::string detail = {});
  // A memory request.
  PcieError(RequestKind kind, uint64_t address, uint64_t bytes, CompletionStatus status,
            std::string detail = {});
  RequestKind kind() const { return kind_; }
  CompletionStatus status() const { return status_; }
  Bdf function() const { return function_; }  // configuration requests
  uint32_t offset() const { return offset_; }  // configuration requests
  uint64_t address() const { return address_; }  // memory requests
  const std::string& detail() const { return detail_; }

 private:
  RequestKind kind_;
  Bdf function_{};
  uint32_t offset_ = 0;
  uint64_t address_ = 0;
  CompletionStatus status_;
  std::string detail_;
};

// A range of PCI address space the device may write and read as DMA (the bridge's SRAM:
// tinygrad's USBPCIDevice hands out 0x80000 bytes at PCI address 0x200000).
struct DmaWindow {
  uint64_t pci_address = 0, size = 0;
  friend bool operator==(const DmaWindow&, const DmaWindow&) = default;
};

class PcieTransport {
 public:
  virtual ~PcieTransport() = default;

  // Configuration space (4 KiB per function): `size` 1, 2 or 4 bytes at an offset aligned to
  // it; the request is one dword with byte enables for those bytes. InvalidInput for another
  // size, a misaligned offset or one beyond 0xfff: "config read 01:00.0 +0x11: 2 bytes must
  // be 2-byte aligned". PcieError when the completion is not successful.
  uint32_t config_read(Bdf f, uint32_t offset, unsigned size);
  void config_write(Bdf f, uint32_t offset, unsigned size, uint32_t value);

  // Memory space: a 4-byte aligned dword, or a range of whole dwords at a 4-byte aligned
  // address (streamed; an implementation splits it as its transport needs). InvalidInput for
  // a misaligned address or length, PcieError for a failed completion. An empty range makes
  // no request.
  uint32_t memory_read32(uint64_t address);
  void memory_write32(uint64_t address, uint32_t value);
  void memory_read(uint64_t address, std::span<std::byte> out);
  void memory_write(uint64_t address, std::span<const std::byte> data);

  // Where the device may DMA; empty when the transport offers none.
  virtual std::vector<DmaWindow> dma_windows() const = 0;

 protected:
  // One configuration request for the dword at `dword_offset` (a multiple of 4);
  // `byte_enables` bits 0-3 select its bytes (PCIe Base Specification 2.2.5, First DW BE).
  // A read returns the whole dword in `value`; a write changes only the enabled bytes.
  virtual Completion do_config_read(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                                    uint32_t& value) = 0;
  virtual Completion do_config_write(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                                     uint32_t value) = 0;
  // Checked ranges: address and size multiples of 4, size at least 4.
  virtual Completion do_memory_read(uint64_t address, std::span<std::byte> out) = 0;
  virtual Completion do_memory_write(uint64_t address, std::span<const std::byte> data) = 0;
};

// os::Mmio over a transport at a BAR's PCI address: every register access is one memory
// request, so the drivers that take an os::Mmio (the AM driver) run unchanged over USB. The
// transport must outlive the window.
class TransportMmio : public os::Mmio {
 public:
  // `name` for error messages: "BAR5 of usb 04:00.0".
  TransportMmio(PcieTransport& transport, uint64_t pci_address, uint64_t size, std::string name)
      : transport_(transport), base_(pci_address), size_(size), name_(std::move(name)) {}
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  uint64_t pci_address() const { return base_; }

 protected:
  uint32_t do_read32(uint64_t offset) override { return transport_.memory_read32(base_ + offset); }
  void do_write32(uint64_t offset, uint32_t value) override {
    transport_.memory_write32(base_ + offset, value);
  }

 private:
  PcieTransport& transport_;
  uint64_t base_, size_;
  std::string name_;
};

}  // namespace hcq::usb
