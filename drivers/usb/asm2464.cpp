#include "usb/asm2464.hpp"

#include <cerrno>
#include <cstring>
#include <thread>

namespace hcq::usb {

using namespace asm2464;

Asm2464Transport::Asm2464Transport(os::UsbDevice& device, Asm2464Options options)
    : device_(device), options_(options) {
  // tinygrad USB3.__init__: claim interface 0, alternate setting 0.
  device_.claim_interface(0);
  device_.set_alt_setting(0, 0);
  wait_for_link();
}

void Asm2464Transport::wait_for_link() {
  // tinygrad CustomASM24Controller.__init__: the firmware boots with PCIe off; power it on
  // unless the LTSSM already reads L0.
  uint8_t ltssm = xdata_read(kLtssmRegister, 1)[0];
  if (ltssm == kLtssmL0) return;
  set_pcie_power(true);
  const auto deadline = std::chrono::steady_clock::now() + options_.link_timeout;
  for (;;) {
    ltssm = xdata_read(kLtssmRegister, 1)[0];
    if (ltssm == kLtssmL0) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(options_.link_poll);
  }
  throw TimeoutError(device_.name() + ": ASM2464 PCIe link not up after " +
                     std::to_string(options_.link_timeout.count()) + " ms (LTSSM " + hex(ltssm) +
                     "; L0 is " + hex(kLtssmL0) + ")");
}

std::vector<DmaWindow> Asm2464Transport::dma_windows() const {
  return {kSramWindow};
}

std::vector<uint8_t> Asm2464Transport::xdata_read(uint16_t address, size_t length) {
  std::lock_guard lock(mutex_);
  std::vector<uint8_t> out(length);
  for (size_t done = 0; done < length; done += kXdataChunk) {
    const auto n = uint16_t(std::min<size_t>(kXdataChunk, length - done));
    device_.control({0xC0, kXdataRead, uint16_t(address + done), 0}, out.data() + done, n,
                    options_.control_timeout_ms);
  }
  return out;
}

void Asm2464Transport::xdata_write(uint16_t address, std::span<const uint8_t> data) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < data.size(); ++i)
    device_.control({0x40, kXdataWrite, uint16_t(address + i), data[i]}, nullptr, 0,
                    options_.control_timeout_ms);
}

void Asm2464Transport::sram_write(std::span<const uint8_t> data) { sram_write(0, data); }

void Asm2464Transport::sram_write(uint64_t offset, std::span<const uint8_t> data) {
  constexpr uint64_t kSlotBytes = 0x4000;
  const DmaWindow sram = kSramWindow;
  if (offset % kSlotBytes)
    throw InvalidInput(device_.name() + ": SRAM write at " + hex(offset) +
                       ": the bridge writes from 16 KiB slots (offset a multiple of 0x4000)");
  // tinygrad scsi_write: the length padded to 512 bytes, wValue its 512-byte units, wIndex the
  // slot | its 16 KiB units << 8, then the bytes on bulk OUT 0x02.
  const uint64_t padded_size = (data.size() + 511) / 512 * 512;
  if (offset > sram.size || padded_size > sram.size - offset)
    throw InvalidInput(device_.name() + ": SRAM write of " + hex(data.size()) + " bytes at " +
                       hex(offset) + ": the SRAM has " + hex(sram.size));
  std::vector<uint8_t> padded(data.begin(), data.end());
  padded.resize(padded_size);
  std::lock_guard lock(mutex_);
  device_.control({0x40, kSramWrite, uint16_t(padded.size() / 512),
                   uint16_t(offset / kSlotBytes | ((padded.size() + 0x3fff) / 0x4000) << 8)},
                  nullptr, 0, options_.control_timeout_ms);
  device_.bulk_out(kBulkOut, padded.data(), padded.size(), options_.stream_timeout_ms);
}

void Asm2464Transport::set_pcie_power(bool on) {
  std::lock_guard lock(mutex_);
  // tinygrad set_pcie_power: control_write(0xF3, value=int(enabled), timeout=10000).
  device_.control({0x40, kPciePower, uint16_t(on ? 1 : 0), 0}, nullptr, 0,
                  int(options_.link_timeout.count()));
}

void Asm2464Transport::send(const TlpRequest& r) {
  device_.control(r.setup, const_cast<uint8_t*>(r.data.data()), uint16_t(r.data.size()),
                  options_.control_timeout_ms);
}

Completion Asm2464Transport::tlp(uint8_t fmt_type, uint8_t byte_enables, uint64_t address,
                                 uint32_t& value, bool posted, const std::string& what) {
  std::lock_guard lock(mutex_);
  uint8_t ret_status = 0;
  for (unsigned attempt = 0; attempt <= options_.retries; ++attempt) {
    if (attempt) std::this_thread::sleep_for(options_.retry_delay);
    send(tlp_request(fmt_type, byte_enables, address, value));
    if (posted) return Completion::ok();
    // tinygrad _f0_in: 8 bytes; u32 data, status in byte 4 bits 7:5, return status byte 7.
    uint8_t in[8] = {};
    device_.control({0xC0, kTlp, 0, 0}, in, sizeof in, options_.control_timeout_ms);
    ret_status = in[7];
    if (ret_status != 0) continue;  // no completion came: tinygrad sends the TLP again
    CompletionStatus status;
    const uint8_t field = uint8_t(in[4] >> 5 & 0x7);
    if (!completion_status(field, status))
      return {CompletionStatus::CA, std::string("reserved completion status ") + hex(field)};
    if (status == CompletionStatus::SC)
      value = uint32_t(in[0]) | uint32_t(in[1]) << 8 | uint32_t(in[2]) << 16 |
              uint32_t(in[3]) << 24;
    return {status, {}};
  }
  throw Error(device_.name() + ": " + what + ": the ASM2464 answered return status " +
              hex(ret_status) + " " + std::to_string(options_.retries + 1) +
              " times (no completion)");
}

namespace {
std::string config_what(RequestKind kind, Bdf f, uint32_t dword_offset) {
  return std::string(to_string(kind)) + " " + to_string(f) + " +" + hex(dword_offset);
}
}  // namespace

Completion Asm2464Transport::do_config_read(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                                            uint32_t& value) {
  // Type 0 for bus 0 (the bridge's own port), type 1 beyond (tinygrad: int(bus > 0)).
  const uint8_t fmt = f.bus ? kConfigRead1 : kConfigRead0;
  value = 0;
  return tlp(fmt, byte_enables, config_address(f, dword_offset), value, false,
             config_what(RequestKind::ConfigRead, f, dword_offset));
}

Completion Asm2464Transport::do_config_write(Bdf f, uint32_t dword_offset, uint8_t byte_enables,
                                             uint32_t value) {
  // Configuration writes are non-posted: tinygrad reads their completion.
  const uint8_t fmt = f.bus ? kConfigWrite1 : kConfigWrite0;
  return tlp(fmt, byte_enables, config_address(f, dword_offset), value, false,
             config_what(RequestKind::ConfigWrite, f, dword_offset));
}

Completion Asm2464Transport::do_memory_read(uint64_t address, std::span<std::byte> out) {
  if (out.size() == 4) {
    uint32_t value = 0;
    Completion c = tlp(kMemoryRead64, 0xF, address, value, false,
                       std::string("memory read ") + hex(address) + " (4 bytes)");
    if (c.status == CompletionStatus::SC) std::memcpy(out.data(), &value, 4);
    return c;
  }
  // tinygrad pcie_mem_read: 0xF0 mode 2 with the dword count, then the bytes on bulk IN 0x81.
  std::lock_guard lock(mutex_);
  for (size_t done = 0; done < out.size(); done += options_.stream_chunk) {
    const size_t n = std::min(options_.stream_chunk, out.size() - done);
    send(tlp_request(kMemoryRead64, 0xF, address + done, uint32_t(n / 4), TlpMode::StreamRead));
    try {
      device_.bulk_in(kBulkIn, out.data() + done, n, options_.stream_timeout_ms);
    } catch (const OsError& e) {
      // The emulated firmware stalls a stream whose TLP fails; the real firmware's answer is
      // not public.
      if (e.err() != EPIPE) throw;
      device_.clear_halt(kBulkIn);
      return {CompletionStatus::UR, "the bridge stalled the stream on bulk IN 0x81"};
    }
  }
  return Completion::ok();
}

Completion Asm2464Transport::do_memory_write(uint64_t address, std::span<const std::byte> data) {
  if (data.size() == 4) {
    uint32_t value;
    std::memcpy(&value, data.data(), 4);
    return tlp(kMemoryWrite64, 0xF, address, value, true, {});
  }
  // tinygrad pcie_mem_write: 0xF0 mode 1 with the dword count, then the bytes on bulk OUT 0x02.
  std::lock_guard lock(mutex_);
  for (size_t done = 0; done < data.size(); done += options_.stream_chunk) {
    const size_t n = std::min(options_.stream_chunk, data.size() - done);
    send(tlp_request(kMemoryWrite64, 0xF, address + done, uint32_t(n / 4),
                     TlpMode::StreamWrite));
    device_.bulk_out(kBulkOut, data.data() + done, n, options_.stream_timeout_ms);
  }
  return Completion::ok();
}

}  // namespace hcq::usb
