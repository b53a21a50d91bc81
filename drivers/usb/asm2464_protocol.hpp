// The ASM2464 custom firmware's protocol (tinygrad runtime/support/usb.py,
// CustomASM24Controller): request numbers, registers, TLP Fmt/Type bytes and the 0xF0 request
// layout, shared by the transport (usb/asm2464.hpp, which describes the protocol) and the
// emulated firmware (usb/emu/asm2464_firmware.hpp). Pure functions: any thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "os/usb.hpp"
#include "usb/pcie_transport.hpp"

namespace hcq::usb {

// The ASM2464 vendor requests (tinygrad runtime/support/usb.py).
namespace asm2464 {
constexpr uint8_t kTlp = 0xF0, kXdataRead = 0xE4, kXdataWrite = 0xE5, kSramWrite = 0xF2,
                  kPciePower = 0xF3;
constexpr uint8_t kBulkOut = 0x02, kBulkIn = 0x81;
constexpr uint16_t kLtssmRegister = 0xB450;
constexpr uint8_t kLtssmL0 = 0x78;
constexpr unsigned kXdataChunk = 0xFF;  // bytes per 0xE4 request
// The SRAM as the device reaches it (tinygrad USBPCIDevice: 0x80000 bytes at 0x200000).
constexpr DmaWindow kSramWindow{0x200000, 0x80000};
// Fmt/Type bytes.
constexpr uint8_t kConfigRead0 = 0x04, kConfigRead1 = 0x05, kConfigWrite0 = 0x44,
                  kConfigWrite1 = 0x45, kMemoryRead64 = 0x20, kMemoryWrite64 = 0x60;
enum class TlpMode : uint16_t { Single = 0, StreamWrite = 1, StreamRead = 2 };

// The 0xF0 OUT request for one TLP: its setup packet and its 12 data bytes.
struct TlpRequest {
  os::UsbSetup setup;
  std::array<uint8_t, 12> data{};
};
TlpRequest tlp_request(uint8_t fmt_type, uint8_t byte_enables, uint64_t address, uint32_t value,
                       TlpMode mode = TlpMode::Single);
// The configuration address of a function's dword (tinygrad pcie_cfg_req).
uint64_t config_address(Bdf f, uint32_t dword_offset);
// A completion status field (byte 4 bits 7:5) as a CompletionStatus; false for a reserved one.
bool completion_status(uint8_t field, CompletionStatus& status);
// The 8 bytes of a 0xF0 IN (tinygrad _f0_in): u32 data, byte 4 bits 7:5 the completion status,
// byte 7 the firmware's return status (non-zero: no completion came; the caller retries).
struct TlpCompletion {
  uint8_t return_status = 0;
  Completion completion;  // a reserved status field: CA, detail "reserved completion status 0x3"
  uint32_t value = 0;     // the data; 0 unless the completion is successful
  bool answered() const { return return_status == 0; }
};
TlpCompletion decode_completion(std::span<const uint8_t, 8> in);
}  // namespace asm2464

}  // namespace hcq::usb
