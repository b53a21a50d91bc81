#include "usb/asm2464_protocol.hpp"

namespace hcq::usb {

namespace asm2464 {

namespace {
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
}  // namespace

TlpRequest tlp_request(uint8_t fmt_type, uint8_t byte_enables, uint64_t address, uint32_t value,
                       TlpMode mode) {
  // tinygrad _f0_out: control_write(0xF0, fmt_type | byte_en << 8, mode & 3,
  // pack('<III', address & 0xFFFFFFFF, address >> 32, value)); bmRequestType 0x40 (vendor, OUT).
  TlpRequest r;
  r.setup = {0x40, kTlp, uint16_t(fmt_type | byte_enables << 8), uint16_t(mode)};
  put32(&r.data[0], uint32_t(address));
  put32(&r.data[4], uint32_t(address >> 32));
  put32(&r.data[8], value);
  return r;
}

uint64_t config_address(Bdf f, uint32_t dword_offset) {
  return uint64_t(f.bus) << 24 | uint64_t(f.device) << 19 | uint64_t(f.function) << 16 |
         (dword_offset & 0xfff);
}

bool completion_status(uint8_t field, CompletionStatus& status) {
  // tinygrad pcie_request's status_map: 0b001 Unsupported Request, 0b010 Config Retry,
  // 0b100 Completer Abort (PCIe Base Specification 2.2.9 gives the same codes).
  switch (field) {
    case 0b000: status = CompletionStatus::SC; return true;
    case 0b001: status = CompletionStatus::UR; return true;
    case 0b010: status = CompletionStatus::CRS; return true;
    case 0b100: status = CompletionStatus::CA; return true;
  }
  return false;
}

TlpCompletion decode_completion(std::span<const uint8_t, 8> in) {
  TlpCompletion c;
  c.return_status = in[7];
  if (!c.answered()) return c;
  const uint8_t field = uint8_t(in[4] >> 5 & 0x7);
  if (!completion_status(field, c.completion.status)) {
    c.completion = {CompletionStatus::CA, std::string("reserved completion status ") + hex(field)};
    return c;
  }
  if (c.completion.status == CompletionStatus::SC)
    c.value = uint32_t(in[0]) | uint32_t(in[1]) << 8 | uint32_t(in[2]) << 16 |
              uint32_t(in[3]) << 24;
  return c;
}

}  // namespace asm2464

}  // namespace hcq::usb
