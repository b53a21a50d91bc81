// PCIe through an ASMedia ASM2464 USB-to-PCIe bridge running tinygrad's custom firmware
// (issue 18 item 2): a PcieTransport over an os::UsbDevice. The protocol, all vendor requests
// on endpoint 0 and the bulk endpoints, as tinygrad runtime/support/usb.py
// (CustomASM24Controller) speaks it:
//
//   0xF0 OUT  issue a TLP: wValue = fmt_type | byte_enables << 8, wIndex = mode (0: one
//             request, 1: streamed write, 2: streamed read), data = <u32 address low, u32
//             address high, u32 value> (for a stream: the dword count)
//   0xF0 IN   the completion of the last non-posted TLP, 8 bytes: u32 data, byte 4 bits 7:5
//             completion status (0b001 UR, 0b010 CRS, 0b100 CA), byte 7 the firmware's return
//             status (non-zero: no completion; tinygrad retries up to 10 times, 1 ms apart)
//   bulk OUT 0x02 / bulk IN 0x81   the data of a streamed write / read
//   0xE4 IN   XDATA read (wValue = address, at most 0xFF bytes a request)
//   0xE5 OUT  XDATA write of one byte (wValue = address, wIndex = the byte)
//   0xF2 OUT  SRAM write (wValue = 512-byte units, wIndex = slot | 16 KiB units << 8, a slot
//             being 16 KiB of SRAM), data on bulk OUT 0x02
//   0xF3 OUT  PCIe power (wValue 1 on, 0 off)
//   XDATA 0xB450  the PCIe LTSSM state; 0x78 is L0 (link up)
//
// fmt_type is a TLP header's Fmt and Type bytes (PCIe Base Specification 2.2.1): 0x04 / 0x05
// configuration read type 0 / 1, 0x44 / 0x45 writes, 0x20 / 0x60 memory read / write with a
// 64-bit address (4 DW header), as tinygrad sends them. Configuration addresses are
// bus << 24 | device << 19 | function << 16 | offset (tinygrad pcie_cfg_req). Memory writes are
// posted: no completion is read.
//
// Threads: every member may be called from several threads at once; one lock makes each
// request (a TLP and its completion, a stream, an XDATA access) one exchange on the device.
// The UsbDevice must outlive the transport and not be used by anyone else meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "os/usb.hpp"
#include "usb/asm2464_protocol.hpp"
#include "usb/pcie_transport.hpp"

namespace hcq::usb {


struct Asm2464Options {
  int control_timeout_ms = 5000;  // tinygrad: 5000 for 0xF0
  int stream_timeout_ms = 30000;  // tinygrad: 30000 for a streamed read
  unsigned retries = 10;          // tinygrad pcie_request cnt=10
  std::chrono::microseconds retry_delay{1000};
  std::chrono::milliseconds link_timeout{10000};  // tinygrad set_pcie_power timeout 10000 ms
  std::chrono::milliseconds link_poll{10};
  size_t stream_chunk = 1 << 20;  // bytes per streamed request (tinygrad's bulk buffer: 4 MiB)
};

class Asm2464Transport final : public PcieTransport {
 public:
  // Claims interface 0 (alternate setting 0, as tinygrad), then reads the LTSSM state; unless
  // the link is in L0 it powers PCIe on and polls until L0. TimeoutError naming the last LTSSM
  // value when it never comes: "usb 2-1 (add1:0001): ASM2464 PCIe link not up after 10000 ms
  // (LTSSM 0x11; L0 is 0x78)".
  explicit Asm2464Transport(os::UsbDevice& device, Asm2464Options options = {});

  // The SRAM window (0x80000 bytes at PCI address 0x200000).
  std::vector<DmaWindow> dma_windows() const override;

  // The bridge's XDATA (its 8051's 64 KiB data space).
  std::vector<uint8_t> xdata_read(uint16_t address, size_t length);
  void xdata_write(uint16_t address, std::span<const uint8_t> data);
  // Writes `data` to the SRAM from its start (slot 0), padded to 512 bytes.
  void sram_write(std::span<const uint8_t> data);
  // Writes `data` at `offset` in the SRAM, padded with zeros to 512 bytes. The request names
  // its start as a slot of 16 KiB (tinygrad ops_amd.py writes its second 256 KiB bounce window,
  // SRAM offset 0x40000, as slot_start=16), so `offset` must be a multiple of 0x4000:
  // InvalidInput otherwise, or when the padded data runs past the SRAM.
  void sram_write(uint64_t offset, std::span<const uint8_t> data);
  void set_pcie_power(bool on);

 protected:
  Completion do_config_read(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                            uint32_t& value) override;
  Completion do_config_write(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                             uint32_t value) override;
  Completion do_memory_read(uint64_t address, std::span<std::byte> out) override;
  Completion do_memory_write(uint64_t address, std::span<const std::byte> data) override;

 private:
  // One TLP and, unless posted, its completion (retried on a non-zero return status);
  // `what` names the request in the error for exhausted retries.
  Completion tlp(uint8_t fmt_type, uint8_t byte_enables, uint64_t address, uint32_t& value,
                 bool posted, const std::string& what);
  void send(const asm2464::TlpRequest& r);
  void wait_for_link();

  os::UsbDevice& device_;
  Asm2464Options options_;
  std::mutex mutex_;
};

}  // namespace hcq::usb
