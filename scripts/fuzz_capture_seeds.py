#!/usr/bin/env python3
# Seeds for fuzz/fuzz_capture.cpp: captures of format version 3 (docs/capture-format.md; the
# layouts lib/core/capture_reader.cpp reads) reaching the paths version 3 added: the device
# record's heap, timeline and queue counts, memory flags, kinds (a bad one too) and timelines,
# grouped submissions, DeviceEnd, pieces (the target's first byte makes them 16 bytes here),
# a zlib-compressed record, and a version 2 file. Each input is that first byte, then the file.
import struct
import sys
import zlib
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
PIECE = 16  # the first byte, 15, makes the target join pieces of 16 bytes
EXEC, SIGNALS, WRITTEN, USER, SETTLED = 2, 4, 8, 16, 1
DEVICE, HOST = 0, 1


def header(version=3):
    return b"HCQCAP\0\0" + struct.pack("<II", version, 0)


def record(rtype, payload, compress=False):
    if compress:
        payload = struct.pack("<Q", len(payload)) + zlib.compress(payload)
    return struct.pack("<IIQ", rtype, 1 if compress else 0, len(payload)) + payload


def string(s):
    return struct.pack("<H", len(s)) + s.encode()


def device(dev_id, arch="gfx1100", version=3):
    p = struct.pack("<I", dev_id) + string("emu") + string("AMD") + string(arch)
    if version >= 3:
        p += struct.pack("<QQQII", 0x100000000, 1 << 40, 0x100000000, 1, 1)
    return record(1, p)


def submission(dev_id, seq, grouped=False, kind=0, words=(0xC0001000, 0)):
    seg = struct.pack("<BBHIQ", 0, 0, 0, len(words), 0) + struct.pack(f"<{len(words)}I", *words)
    return record(2, struct.pack("<IBBHQQI", dev_id, kind, 0, 1 if grouped else 0, seq, 1000 + seq, 1)
                  + seg)


def memory(dev_id, address, data, flags=0, kind=DEVICE, timeline=0, compress=False):
    return record(3, struct.pack("<IIQQQ", dev_id, flags | kind << 8, timeline, address, len(data))
                  + data, compress)


def pieces(dev_id, address, data, **kw):
    return b"".join(memory(dev_id, address + at, data[at:at + PIECE], **kw)
                    for at in range(0, len(data), PIECE))


def end(dev_id, timeline):
    return record(5, struct.pack("<IIQ", dev_id, 0, timeline))


def seed(name, body):
    (out / name).write_bytes(bytes([PIECE - 1]) + body)


code = bytes(range(48))
seed("full", header() + device(0) +
     pieces(0, 0x200000, code, flags=EXEC | SETTLED) +
     memory(0, 0x100000000, bytes(16), flags=SIGNALS | SETTLED, kind=HOST) +
     submission(0, 0, grouped=True) + submission(0, 1) +
     memory(0, 0x100000000, struct.pack("<QQ", 1, 0), flags=SIGNALS, kind=HOST, timeline=1) +
     pieces(0, 0x200000, code[::-1], flags=EXEC, timeline=1) +
     submission(0, 2, kind=1) +
     memory(0, 0x300000, b"user", flags=USER | SETTLED, kind=HOST, timeline=2) +
     end(0, 2))
seed("bad_kind", header() + device(0) + memory(0, 0x1000, b"abcd", kind=2) + submission(0, 0))
seed("two_devices", header() + device(0) + device(1, "gfx90a") +
     memory(0, 0x1000, b"zero" * 4) + memory(1, 0x1000, b"one!" * 8) +
     submission(0, 0) + submission(1, 1) + end(1, 1) + end(0, 1))
seed("written", header() + device(0) +
     memory(0, 0x5000, b"w" * 40, flags=WRITTEN, kind=HOST) + submission(0, 0) +
     memory(0, 0x5010, b"v" * 8, flags=WRITTEN, kind=HOST, timeline=1) + submission(0, 1))
seed("zlib", header() + device(0) + memory(0, 0x8000, bytes(64), compress=True) +
     submission(0, 0) + end(0, 1))
seed("reused", header() + device(0) + memory(0, 0x9000, b"a" * 16) + submission(0, 0) +
     memory(0, 0x9000, b"b" * 32, timeline=1) + submission(0, 1) + end(0, 1))
seed("version2", header(2) + device(0, version=2) +
     record(3, struct.pack("<IIQQ", 0, 0, 0x4000, 8) + b"12345678") + submission(0, 0))
