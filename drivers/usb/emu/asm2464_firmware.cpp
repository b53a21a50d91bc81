#include "usb/emu/asm2464_firmware.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "usb/asm2464_protocol.hpp"

namespace hcq::usb::emu {

using namespace hcq::usb::asm2464;
using os::UsbReply;

namespace {
constexpr uint16_t kSramXdata = 0xF000;  // tinygrad's mock: XDATA 0xF000 shows the SRAM

uint32_t get32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint8_t status_field(CompletionStatus s) {
  switch (s) {
    case CompletionStatus::SC: return 0b000;
    case CompletionStatus::UR: return 0b001;
    case CompletionStatus::CRS: return 0b010;
    case CompletionStatus::CA: return 0b100;
  }
  return 0b001;
}
}  // namespace

EmulatedAsm2464::EmulatedAsm2464(std::shared_ptr<EmulatedPcieTopology> topology)
    : topology_(std::move(topology)), sram_(kSramWindow.size) {
  topology_->set_link_down(true);  // tinygrad: the custom firmware boots with PCIe off
}

os::UsbDeviceDesc EmulatedAsm2464::descriptor() const {
  os::UsbDeviceDesc d;
  d.vendor = 0xADD1;  // tinygrad ops_amd.py USBIface: list_devices(0xADD1, 0x0001) first
  d.product = 0x0001;
  d.manufacturer = "tinygrad";
  d.product_name = "custom ASM2464 firmware (emulated)";
  d.speed = "10000";
  os::UsbInterfaceDesc intf;
  intf.number = 0;
  intf.cls = 0xff;  // vendor specific: no kernel driver binds the custom firmware
  intf.alts = {{0, {{kBulkIn, 2, 1024, 0}, {kBulkOut, 2, 1024, 0}}}};
  d.interfaces = {intf};
  return d;
}

uint8_t EmulatedAsm2464::xdata(uint16_t address) const {
  if (address == kLtssmRegister) return power_ ? training_ltssm_ : 0x00;
  if (address >= kSramXdata) return sram_[address - kSramXdata];
  return xdata_[address];
}

UsbReply EmulatedAsm2464::control(const os::UsbSetup& setup, std::span<uint8_t> data) {
  std::lock_guard lock(mutex_);
  const bool in = setup.request_type & 0x80;
  if ((setup.request_type & 0x60) != 0x40) return UsbReply::stall();  // vendor requests only
  switch (setup.request) {
    case kXdataRead:
      if (!in || data.size() > kXdataChunk) return UsbReply::stall();
      for (size_t i = 0; i < data.size(); ++i) data[i] = xdata(uint16_t(setup.value + i));
      return UsbReply::done(data.size());
    case kXdataWrite:
      if (in) return UsbReply::stall();
      if (setup.value >= kSramXdata)
        sram_[setup.value - kSramXdata] = uint8_t(setup.index);
      else if (setup.value != kLtssmRegister)
        xdata_[setup.value] = uint8_t(setup.index);
      return UsbReply::done(0);
    case kPciePower:
      if (in || setup.value > 1) return UsbReply::stall();
      power_ = setup.value == 1;
      topology_->set_link_down(!power_ || training_ltssm_ != kLtssmL0);
      return UsbReply::done(0);
    case kSramWrite:
      // tinygrad scsi_write: wValue 512-byte units, wIndex bits 7:0 the 16 KiB slot it
      // starts at (ops_amd.py: slot_start=16 for SRAM offset 0x40000).
      if (in || (setup.value & 0x8000) ||
          (setup.index & 0xffu) * 0x4000u + setup.value * 512u > sram_.size())
        return UsbReply::stall();
      stream_ = Stream::Sram;
      stream_address_ = (setup.index & 0xffu) * 0x4000u;
      stream_bytes_ = setup.value * 512u;
      return UsbReply::done(0);
    case kTlp:
      if (!in) return tlp_out(setup, data);
      if (data.size() != 8) return UsbReply::stall();
      std::fill(data.begin(), data.end(), 0);
      if (failing_completions_) {
        --failing_completions_;
        data[7] = failing_return_status_;
        return UsbReply::done(8);
      }
      for (int i = 0; i < 4; ++i) data[i] = uint8_t(cpl_data_ >> (8 * i));
      data[4] = uint8_t(cpl_status_ << 5);
      return UsbReply::done(8);
  }
  return UsbReply::stall();
}

UsbReply EmulatedAsm2464::tlp_out(const os::UsbSetup& setup, std::span<const uint8_t> data) {
  if (data.size() != 12) return UsbReply::stall();
  last_setup_ = setup;
  last_data_.assign(data.begin(), data.end());
  const auto fmt_type = uint8_t(setup.value), byte_enables = uint8_t(setup.value >> 8);
  const uint64_t address = get32(&data[0]) | uint64_t(get32(&data[4])) << 32;
  const uint32_t value = get32(&data[8]);
  switch (TlpMode(setup.index)) {
    case TlpMode::Single: run_tlp(fmt_type, byte_enables, address, value); break;
    case TlpMode::StreamWrite:
    case TlpMode::StreamRead:
      stream_ = TlpMode(setup.index) == TlpMode::StreamWrite ? Stream::Write : Stream::Read;
      stream_address_ = address;
      stream_bytes_ = size_t(value) * 4;  // tinygrad: the dword count
      break;
    default: return UsbReply::stall();
  }
  return UsbReply::done(12);
}

void EmulatedAsm2464::run_tlp(uint8_t fmt_type, uint8_t byte_enables, uint64_t address,
                              uint32_t value) {
  // The enabled bytes as one access of 1, 2 or 4 bytes, as PcieTransport offers them.
  const int first = std::countr_zero(unsigned(byte_enables | 0x10));
  const int size = std::popcount(unsigned(byte_enables & 0xf));
  const bool one_access = byte_enables && (size == 1 || size == 2 || size == 4) &&
                          unsigned(byte_enables >> first) == (1u << size) - 1;
  const bool posted = (fmt_type & 0xDF) == 0x40;  // tinygrad's fast path: memory writes
  cpl_data_ = 0;
  cpl_status_ = 0;
  try {
    if (!one_access) throw PcieError(RequestKind::MemoryRead, address, 4, CompletionStatus::UR);
    const Bdf f{uint8_t(address >> 24), uint8_t(address >> 19 & 0x1f), uint8_t(address >> 16 & 7)};
    const uint32_t offset = uint32_t(address & 0xffc) + uint32_t(first);
    switch (fmt_type) {
      case kConfigRead0:
      case kConfigRead1:
        cpl_data_ = topology_->config_read(f, offset, unsigned(size)) << (8 * first);
        break;
      case kConfigWrite0:
      case kConfigWrite1:
        topology_->config_write(f, offset, unsigned(size), value >> (8 * first));
        break;
      case 0x00:  // memory read, 32-bit address
      case kMemoryRead64: cpl_data_ = topology_->memory_read32(address & ~3ull); break;
      case 0x40:  // memory write, 32-bit address
      case kMemoryWrite64: {
        uint32_t v = value;
        if (byte_enables != 0xf) {  // only the enabled bytes change
          const uint32_t mask = ((1u << (8 * size)) - 1) << (8 * first);
          v = (topology_->memory_read32(address & ~3ull) & ~mask) | (value & mask);
        }
        topology_->memory_write32(address & ~3ull, v);
        break;
      }
      default: cpl_status_ = status_field(CompletionStatus::UR);
    }
  } catch (const PcieError& e) {
    if (posted) ++lost_writes_;  // a posted write that fails is lost silently
    cpl_status_ = status_field(e.status());
  } catch (const InvalidInput&) {
    cpl_status_ = status_field(CompletionStatus::UR);
  }
}

std::optional<UsbReply> EmulatedAsm2464::take_bulk_fault() {
  auto f = bulk_fault_;
  bulk_fault_.reset();
  return f;
}

UsbReply EmulatedAsm2464::bulk_out(uint8_t ep, unsigned /*stream*/,
                                   std::span<const uint8_t> data) {
  std::lock_guard lock(mutex_);
  if (auto f = take_bulk_fault()) return *f;
  if (ep != kBulkOut || data.size() != stream_bytes_) return UsbReply::stall();
  if (stream_ == Stream::Sram) {
    std::copy(data.begin(), data.end(), sram_.begin() + long(stream_address_));
  } else if (stream_ == Stream::Write) {
    try {
      topology_->memory_write(stream_address_, std::as_bytes(data));
    } catch (const PcieError&) {
      ++lost_writes_;
    }
  } else {
    return UsbReply::stall();
  }
  stream_ = Stream::None;
  return UsbReply::done(data.size());
}

UsbReply EmulatedAsm2464::bulk_in(uint8_t ep, unsigned /*stream*/, std::span<uint8_t> data) {
  std::lock_guard lock(mutex_);
  if (auto f = take_bulk_fault()) return *f;
  if (ep != kBulkIn || stream_ != Stream::Read || data.size() != stream_bytes_)
    return UsbReply::stall();
  stream_ = Stream::None;
  try {
    topology_->memory_read(stream_address_, std::as_writable_bytes(data));
  } catch (const PcieError&) {
    return UsbReply::stall();
  }
  return UsbReply::done(data.size());
}

void EmulatedAsm2464::fail_completions(unsigned count, uint8_t return_status) {
  std::lock_guard lock(mutex_);
  failing_completions_ = count;
  failing_return_status_ = return_status;
}

void EmulatedAsm2464::set_link_training_state(uint8_t ltssm) {
  std::lock_guard lock(mutex_);
  training_ltssm_ = ltssm;
}

void EmulatedAsm2464::fail_next_bulk(UsbReply reply) {
  std::lock_guard lock(mutex_);
  bulk_fault_ = reply;
}

bool EmulatedAsm2464::pcie_power() const {
  std::lock_guard lock(mutex_);
  return power_;
}

os::UsbSetup EmulatedAsm2464::last_tlp_setup() const {
  std::lock_guard lock(mutex_);
  return last_setup_;
}

std::vector<uint8_t> EmulatedAsm2464::last_tlp_data() const {
  std::lock_guard lock(mutex_);
  return last_data_;
}

unsigned EmulatedAsm2464::lost_writes() const {
  std::lock_guard lock(mutex_);
  return lost_writes_;
}

std::vector<uint8_t> EmulatedAsm2464::sram(size_t offset, size_t length) const {
  std::lock_guard lock(mutex_);
  return {sram_.begin() + long(offset), sram_.begin() + long(offset + length)};
}

}  // namespace hcq::usb::emu
