// The USB bridge commands (issue 18 item 7): `hcq usb ls`, `hcq usb bench` and `hcq reg` on
// usb:<bus>-<port> devices, through an ASMedia ASM2464 running tinygrad's custom firmware
// (usb/asm2464.hpp). HCQ_EMULATED_USB=1 points them at the emulated machine of
// usb/emu/usb_system.hpp (one bridge on port 2-1 with the register-level RX 7900 XTX).
#pragma once

#include <string>

#include "pci.hpp"

namespace hcq::tools {

// Every USB device that is an ASM2464 bridge: port, ids, firmware kind (add1:0001 is tinygrad's
// custom firmware; 174c:2463 or 174c:2464 is ASMedia's stock firmware, which hcq cannot drive),
// and for the custom firmware the PCIe link state (XDATA 0xB450; 0x78 is L0) and the GPU
// behind it with its BARs after enumeration. Exit 1 when a bridge could not be opened.
int cmd_usb_ls(bool json);

// The bridge's speed on its GPU: TLP round trips (a configuration read, a 32-bit memory read)
// and streamed VRAM reads and writes (16 MiB; the write puts back the bytes the read got),
// medians over rounds. `device` empty: the only custom-firmware bridge.
int cmd_usb_bench(const std::string& device, bool json);

// hcq reg usb:<bus>-<port> ...: the registers of the GPU behind the bridge, placed as for a
// PCI function (AMD: from its IP discovery table), read and written with TLPs.
int cmd_reg_usb(const RegArgs& args);

}  // namespace hcq::tools
