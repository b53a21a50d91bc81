// The ASM2464 with tinygrad's custom firmware, emulated as a USB device (issue 18 item 6): a
// UsbFunction in front of an EmulatedPcieTopology, speaking the protocol usb/asm2464.hpp
// describes (tinygrad runtime/support/usb.py, CustomASM24Controller; its mock
// test/mockgpu/usb.py for the XDATA map):
//   - ids add1:0001 (what tinygrad's USBIface matches first), product "custom ASM2464
//     firmware (emulated)" (tinygrad asserts the product starts with "custom");
//   - XDATA, 64 KiB; 0xB450 (LTSSM) reads 0x78 (L0) only while PCIe power is on (0xF3),
//     0xF000-0xFFFF show the start of the SRAM (the mock's DMA window at 0xF000);
//   - the TLP engine: 0xF0 OUT forwards one request to the topology, 0xF0 IN answers its
//     completion, with the completion status the topology's PcieError carries; memory writes
//     are posted (a failed one is lost, counted in lost_writes());
//   - streamed writes (mode 1, bulk OUT 0x02) and reads (mode 2, bulk IN 0x81); a streamed
//     read whose request fails stalls bulk IN 0x81 (the real firmware's answer is not public);
//   - the SRAM (0x80000 bytes), written with 0xF2 and bulk OUT 0x02.
// Faults: the topology's own (fail_memory, retry_config_reads, ...), a return status for the
// next N completions, a link that never trains (an LTSSM value other than L0), and a
// disconnect or stall on the next bulk transfer.
//
// Threads: every member may be called from several threads at once (one lock).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "os/emulated_usb.hpp"
#include "usb/emu/pcie_topology.hpp"

namespace hcq::usb::emu {

class EmulatedAsm2464 final : public os::UsbFunction {
 public:
  explicit EmulatedAsm2464(std::shared_ptr<EmulatedPcieTopology> topology);

  os::UsbDeviceDesc descriptor() const override;
  os::UsbReply control(const os::UsbSetup& setup, std::span<uint8_t> data) override;
  os::UsbReply bulk_out(uint8_t ep, unsigned stream, std::span<const uint8_t> data) override;
  os::UsbReply bulk_in(uint8_t ep, unsigned stream, std::span<uint8_t> data) override;

  // Faults.
  // The next `count` 0xF0 IN answers carry `return_status` (no completion).
  void fail_completions(unsigned count, uint8_t return_status);
  // While powered, the LTSSM register reads `ltssm` instead of L0 (a link that never trains).
  void set_link_training_state(uint8_t ltssm);
  // The next bulk transfer answers with `reply` (disconnect or stall).
  void fail_next_bulk(os::UsbReply reply);

  // What the firmware has seen.
  bool pcie_power() const;
  // The last 0xF0 OUT: its setup packet and data.
  os::UsbSetup last_tlp_setup() const;
  std::vector<uint8_t> last_tlp_data() const;
  unsigned lost_writes() const;
  std::vector<uint8_t> sram(size_t offset, size_t length) const;
  // The SRAM as the device behind the bridge reaches it by DMA (the same bytes 0xF2 writes):
  // valid as long as the firmware; the device's accesses take no lock, as real DMA does not.
  std::span<uint8_t> device_sram() { return sram_; }

 private:
  os::UsbReply tlp_out(const os::UsbSetup& setup, std::span<const uint8_t> data);
  void run_tlp(uint8_t fmt_type, uint8_t byte_enables, uint64_t address, uint32_t value);
  uint8_t xdata(uint16_t address) const;
  std::optional<os::UsbReply> take_bulk_fault();

  std::shared_ptr<EmulatedPcieTopology> topology_;
  mutable std::mutex mutex_;
  std::vector<uint8_t> xdata_ = std::vector<uint8_t>(0x10000);
  std::vector<uint8_t> sram_;
  bool power_ = false;
  uint8_t training_ltssm_ = 0x78;
  // The last completion: data, status field, return status.
  uint32_t cpl_data_ = 0;
  uint8_t cpl_status_ = 0;
  unsigned failing_completions_ = 0;
  uint8_t failing_return_status_ = 0;
  std::optional<os::UsbReply> bulk_fault_;
  os::UsbSetup last_setup_{};
  std::vector<uint8_t> last_data_;
  unsigned lost_writes_ = 0;
  // A stream armed by 0xF0 mode 1/2 or 0xF2: where its bytes go and how many remain.
  enum class Stream { None, Write, Read, Sram } stream_ = Stream::None;
  uint64_t stream_address_ = 0;
  size_t stream_bytes_ = 0;
};

}  // namespace hcq::usb::emu
