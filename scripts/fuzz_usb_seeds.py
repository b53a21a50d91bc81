#!/usr/bin/env python3
# Seeds for fuzz/fuzz_usb.cpp (its input layout): a few completions, the sysfs of an ASM2464
# on port 2-1, and a hierarchy of one downstream port with an RX 7900 XTX-like GPU behind it.
import struct
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)

# Mode 0: completions (u32 data, byte 4 status << 5, byte 7 return status).
(out / "completions").write_bytes(bytes([0]) + struct.pack("<IBBBB", 0x744C1002, 0, 0, 0, 0) +
                                  struct.pack("<IBBBB", 0, 1 << 5, 0, 0, 0) +
                                  struct.pack("<IBBBB", 0, 0, 0, 0, 1))

# Mode 1: sysfs lines "<entry>/<attribute>=<value>".
(out / "sysfs").write_bytes(bytes([1]) + b"".join(line.encode() + b"\n" for line in [
    "usb2/busnum=2", "usb2/devnum=1", "usb2/idVendor=1d6b", "usb2/idProduct=0003",
    "2-1/busnum=2", "2-1/devnum=3", "2-1/idVendor=add1", "2-1/idProduct=0001",
    "2-1/speed=5000", "2-1/bConfigurationValue=1", "2-1:1.0/bInterfaceNumber=00",
    "2-1:1.0/bAlternateSetting= 0", "2-1:1.0/bInterfaceClass=08", "2-1:1.0/uevent=DRIVER=uas"]))


def image(values, writable):
    v = bytearray(0x400)
    w = bytearray(0x400)
    for at, value in values.items():
        struct.pack_into("<I", v, at, value)
    for at, mask in writable.items():
        struct.pack_into("<I", w, at, mask)
    return bytes(v + w)


# Mode 2: entries (bus, device << 3 | function, image, fault), then images.
bridge = image({0x00: 0x24641B21, 0x04: 0x00100000, 0x08: 0x06040000, 0x0C: 0x00010000,
                0x24: 0x00010001, 0x34: 0x40, 0x40: 0x00620010},
               {0x04: 0x7, 0x18: 0x00FFFFFF, 0x20: 0xFFF0FFF0, 0x24: 0xFFF0FFF0,
                0x28: 0xFFFFFFFF, 0x2C: 0xFFFFFFFF})
gpu = image({0x00: 0x744C1002, 0x04: 0x00100000, 0x08: 0x030000C8, 0x10: 0xC, 0x18: 0xC,
             0x34: 0x40, 0x40: 0x00020010, 0x100: 0x00010015, 0x104: 0x000FF000,
             0x108: 0x00000820},
            {0x04: 0x7, 0x10: 0xF0000000, 0x14: 0xFFFFFFFF, 0x18: 0xFFE00000,
             0x1C: 0xFFFFFFFF, 0x24: 0xFFF00000, 0x108: 0x3F00})
(out / "hierarchy").write_bytes(bytes([2, 2, 0, 0, 0, 0, 1, 0, 1, 0]) + bridge + gpu)
