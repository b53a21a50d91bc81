#!/usr/bin/env python3
"""hcq dump --buffers and --buffer (issue 22, Extract) as a user runs them, checked against this
file's own reader of the documented format (docs/capture-format.md): the listing of a full
capture of hcq run line for line, its JSON Lines, a buffer's bytes at a submission and at the
end, a buffer of two pieces joined, and the exact errors and exit statuses."""
import json
import atexit
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HCQ = sys.argv[1]
failures = []
PIECE = 64 << 20
KEPT = 2 | 4 | 8 | 16  # executable, signals, cpu-written, user: a buffer's, not a record's
FLAG_NAMES = [(2, "executable"), (4, "signals"), (16, "user"), (8, "cpu-written")]


def run(args, env=None):
    p = subprocess.run([HCQ] + args, capture_output=True, env={**os.environ, **(env or {})},
                       timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode()


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n  got  {got!r}\n  want {want!r}")


def record(rtype, payload):
    return struct.pack("<IIQ", rtype, 0, len(payload)) + payload


def device(dev):
    name = f"emu{dev}".encode()
    return record(1, struct.pack("<IH", dev, len(name)) + name + b"\3\0AMD\7\0gfx1100" +
                  struct.pack("<QQQII", 0, 0, 0, 1, 1))


def mem(dev, address, data, timeline=0, flags=1):
    return record(3, struct.pack("<IIQQQ", dev, flags, timeline, address, len(data)) + data)


def sub(dev, seq):
    return record(2, struct.pack("<IBBHQQI", dev, 0, 0, 0, seq, 0, 0))


HEADER = b"HCQCAP\0\0" + struct.pack("<II", 3, 0)


def read_capture(path):
    """The records of a version-3 capture: devices {id: name}, submissions [seq], memory
    records [(device, flags, timeline, address, bytes, submissions before it, the types of the
    records since the last memory record and its own)]."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"HCQCAP\0\0" and struct.unpack_from("<I", data, 8)[0] == 3
    at, devices, subs, memory, kinds = 16, {}, [], [], []
    while at < len(data):
        rtype, flags, length = struct.unpack_from("<IIQ", data, at)
        payload = data[at + 16:at + 16 + length]
        at += 16 + length
        if flags & 1:
            payload = zlib.decompress(payload[8:])
        kinds.append(rtype)
        if rtype == 1:
            (dev,), (n,) = struct.unpack_from("<I", payload), struct.unpack_from("<H", payload, 4)
            devices[dev] = payload[6:6 + n].decode()
        elif rtype == 2:
            subs.append(struct.unpack_from("<Q", payload, 8)[0])
        elif rtype == 3:
            dev, mflags, timeline, address, size = struct.unpack_from("<IIQQQ", payload)
            memory.append((dev, mflags, timeline, address, payload[32:32 + size], len(subs), kinds))
            kinds = []
    return devices, subs, memory


def buffers_of(memory):
    """The documented listing: pieces joined, buffers by (device, start, size, kind, flags)."""
    recordings = []  # [device, flags, timeline, start, bytes, submissions_before, last piece]
    for dev, mflags, timeline, address, data, before, between in memory:
        r = recordings[-1] if recordings else None
        if (r and not [k for k in between if k != 3] and r[6] == PIECE and data and
                (dev, mflags, timeline) == (r[0], r[1], r[2]) and r[3] + len(r[4]) == address):
            r[4] += data
            r[6] = len(data)
            continue
        recordings.append([dev, mflags, timeline, address, bytearray(data), before, len(data)])
    buffers = {}
    for dev, mflags, _, start, data, before, _ in recordings:
        key = (dev, start, len(data), mflags >> 8, mflags & KEPT)
        buffers.setdefault(key, []).append((before, bytes(data)))
    return dict(sorted(buffers.items()))


def where(subs, before):
    return f"before submission {subs[before]}" if before < len(subs) else "at the end"


def listing(devices, subs, memory):
    lines, objects = [], []
    bufs = buffers_of(memory)
    for (dev, start, size, kind, flags), recs in bufs.items():
        names = [n for bit, n in FLAG_NAMES if flags & bit]
        n = len(recs)
        lines.append(f"device {dev}  {hex(start)}..{hex(start + size)}  {size} bytes  "
                     f"{['device', 'host'][kind]}  {','.join(names) or '-'}  {n} record"
                     f"{'' if n == 1 else 's'}  first {where(subs, recs[0][0])}, last "
                     f"{where(subs, recs[-1][0])}")
        objects.append({"device": dev, "device_name": devices[dev], "start": start,
                        "end": start + size, "size": size, "kind": ["device", "host"][kind],
                        "flags": names, "records": n,
                        "first_before": subs[recs[0][0]] if recs[0][0] < len(subs) else None,
                        "last_before": subs[recs[-1][0]] if recs[-1][0] < len(subs) else None})
    lines.append(f"{len(bufs)} buffer{'' if len(bufs) == 1 else 's'}, {len(memory)} memory record"
                 f"{'' if len(memory) == 1 else 's'}, {len(subs)} submission"
                 f"{'' if len(subs) == 1 else 's'}")
    return "\n".join(lines) + "\n", objects, bufs


tmp = tempfile.mkdtemp(prefix="hcq_buffers_cli_")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # a 64 MiB capture among its files
cap = os.path.join(tmp, "run.hcqcap")
rc, out, err = run(["run", "emu:gfx1100", "--size", "4096"], env={"HCQ_CAPTURE": cap + ",full,zlib"})
expect("full capture of hcq run", rc, 0)
# A full capture holds memory contents: private (issue 33).
expect("the capture's mode", oct(os.stat(cap).st_mode & 0o777), oct(0o600))
devices, subs, memory = read_capture(cap)
text, objects, bufs = listing(devices, subs, memory)

# 1. The listing, line for line, as the format's own reading gives it; and as JSON Lines.
expect("--buffers", run(["dump", "--buffers", cap]), (0, text, ""))
rc, out, err = run(["dump", "--buffers", "--json", cap])
expect("--buffers --json", (rc, [json.loads(line) for line in out.splitlines()], err),
       (0, objects, ""))
expect("--buffers --device 0", run(["dump", "--buffers", "--device", "0", cap]), (0, text, ""))
expect("--buffers --device 7", run(["dump", "--buffers", "--device", "7", cap]),
       (1, "", f"hcq: dump: {cap} recorded no buffer on device 7; hcq dump --buffers lists them all\n"))
# What the demo's full capture holds for sure: several buffers, code among them, signals, and
# every buffer's last contents recorded when the device closed (after the last submission).
if len(bufs) < 3 or not any(k[4] & 2 for k in bufs) or not any(k[4] & 4 for k in bufs):
    failures.append(f"the demo's capture lists {len(bufs)} buffers, code and signals expected:\n{text}")

# 2. A buffer's bytes: one recorded more than once, asked for by an address in its middle,
# at a submission between its recordings and at the end.
key, recs = max(bufs.items(), key=lambda kv: len(kv[1]))
dev, start, size = key[0], key[1], key[2]
if len(recs) < 2:
    failures.append(f"no buffer of the demo's capture was recorded twice:\n{text}")
else:
    before, data = recs[1]
    at = subs[min(before, len(subs) - 1)] if before < len(subs) else subs[-1]
    # The latest recording made before submission `at`.
    index = max(i for i, r in enumerate(recs) if r[0] <= subs.index(at))
    want = recs[index][1]
    path = os.path.join(tmp, "mid.bin")
    rc, out, err = run(["dump", "--buffer", hex(start + size // 2), "--at", str(at), "--output",
                        path, cap])
    expect("--buffer --at: status", (rc, err), (0, ""))
    expect("--buffer --at: report", out,
           f"wrote {size} bytes of the buffer {hex(start)}..{hex(start + size)} (device {dev}), "
           f"recorded {where(subs, recs[index][0])}, to {path}\n")
    with open(path, "rb") as f:
        expect("--buffer --at: the recording's bytes", f.read() == want, True)
    path = os.path.join(tmp, "last.bin")
    rc, out, err = run(["dump", "--buffer", str(start), "--output", path, "--json", cap])
    expect("--buffer (last): status", (rc, err), (0, ""))
    expect("--buffer (last) --json", json.loads(out),
           {"output": path, "bytes": size, "device": dev, "start": start, "end": start + size,
            "recorded_before": subs[recs[-1][0]] if recs[-1][0] < len(subs) else None})
    with open(path, "rb") as f:
        expect("--buffer (last): the last recording's bytes", f.read() == recs[-1][1], True)
    expect("--buffer output's mode", oct(os.stat(path).st_mode & 0o777), oct(0o600))
    # The output may not be the capture it reads, by any name: it would be truncated first
    # (issue 33). The capture is left whole.
    size_before = os.path.getsize(cap)
    link = os.path.join(tmp, "same.hcqcap")
    os.link(cap, link)
    for out_path in (cap, link):
        expect(f"--buffer --output {out_path} (the input)",
               run(["dump", "--buffer", str(start), "--output", out_path, cap]),
               (1, "", f"hcq: {out_path}: is the input {cap} (the command reads it; "
                       "choose another output)\n"))
    os.remove(link)
    expect("the capture after --output named it", os.path.getsize(cap), size_before)

# 3. Exact errors; those that read the capture, on a small one made by hand.
small = os.path.join(tmp, "small.hcqcap")
with open(small, "wb") as f:
    f.write(HEADER + device(0) + mem(0, 0x2000, b"s" * 16) + sub(0, 0))
expect("no buffer there", run(["dump", "--buffer", "0x1", "--output", os.path.join(tmp, "x"), small]),
       (1, "", f"hcq: dump: {small} recorded no buffer at 0x1; hcq dump --buffers lists them\n"))
expect("no such submission",
       run(["dump", "--buffer", hex(start), "--at", "99999", "--output", os.path.join(tmp, "x"), cap]),
       (1, "", f"hcq: dump: {cap} holds no submission 99999 (its submissions are {subs[0]} to "
               f"{subs[-1]})\n"))
expect("no file written on an error", os.path.exists(os.path.join(tmp, "x")), False)
rc, out, err = run(["dump", "--buffer", "zz", "--output", os.path.join(tmp, "x"), cap])
expect("a bad address", (rc, err.splitlines()[0] if err else ""),
       (2, "hcq: --buffer: 'zz' is not a number (decimal, or hex with 0x)"))
rc, out, err = run(["dump", "--buffer", hex(start), "--at", "-1", "--output", os.path.join(tmp, "x"), cap])
expect("a bad --at", (rc, err.splitlines()[0] if err else ""),
       (2, "hcq: --at: '-1' is not a number (decimal, or hex with 0x)"))
expect("--buffer without --output", run(["dump", "--buffer", hex(start), cap]),
       (2, "", "hcq: dump: --buffer writes the buffer's bytes to a file: give --output PATH\n"
               "Run 'hcq dump --help' for usage.\n"))
expect("--at without --buffer", run(["dump", "--buffers", "--at", "1", cap]),
       (2, "", "hcq: dump: --at and --output go with --buffer ADDR\nRun 'hcq dump --help' for usage.\n"))
expect("--buffer from standard input", run(["dump", "--buffer", "0", "--output", "y", "-"]),
       (2, "", "hcq: dump: --buffer reads the capture twice: give its path, not '-' (standard "
               "input)\nRun 'hcq dump --help' for usage.\n"))
bad = os.path.join(tmp, "no", "such", "dir.bin")
expect("an output that cannot be created", run(["dump", "--buffer", "0x2000", "--output", bad, small]),
       (1, "", f"hcq: cannot create {bad}: No such file or directory (errno 2)\n"))
link = os.path.join(tmp, "link.bin")
os.symlink(os.path.join(tmp, "target.bin"), link)
expect("a symlink as the output: refused, not followed",
       run(["dump", "--buffer", "0x2000", "--output", link, small]) +
       (os.path.exists(os.path.join(tmp, "target.bin")),),
       (1, "", f"hcq: {link}: refusing to write through a symbolic link: Too many levels of "
               "symbolic links (errno 40)\n", False))
expect("a full disk", run(["dump", "--buffer", "0x2000", "--output", "/dev/full", small]),
       (1, "", "hcq: write to /dev/full failed after 0 bytes: No space left on device (errno 28)\n"))


# 4. Made by hand: a capture that is not full; a buffer of two pieces (64 MiB and 5 bytes)
# joined; two devices with a buffer at one address; an address reused for a larger buffer.
plain = os.path.join(tmp, "plain.hcqcap")
with open(plain, "wb") as f:
    f.write(HEADER + device(0) + sub(0, 0) + sub(0, 1))
msg = f"hcq: dump: {plain} holds no buffer contents (a full capture is HCQ_CAPTURE=path,full)\n"
expect("--buffers of a capture that is not full", run(["dump", "--buffers", plain]), (1, "", msg))
expect("--buffer of a capture that is not full",
       run(["dump", "--buffer", "0", "--output", os.path.join(tmp, "x"), plain]), (1, "", msg))


big = bytes(range(256)) * (PIECE // 256)
made = os.path.join(tmp, "big.hcqcap")
with open(made, "wb") as f:
    f.write(HEADER + device(0) + mem(0, 0x10000000, big) + mem(0, 0x10000000 + PIECE, b"tail!") +
            mem(0, 0x10000000 + PIECE + 5, b"next") + sub(0, 0))
expect("made: pieces joined, a buffer after them apart", run(["dump", "--buffers", made]), (0, (
    f"device 0  0x10000000..{hex(0x10000000 + PIECE + 5)}  {PIECE + 5} bytes  device  -  1 record  "
    "first before submission 0, last before submission 0\n"
    f"device 0  {hex(0x10000000 + PIECE + 5)}..{hex(0x10000000 + PIECE + 9)}  4 bytes  device  -  "
    "1 record  first before submission 0, last before submission 0\n"
    "2 buffers, 3 memory records, 1 submission\n"), ""))
path = os.path.join(tmp, "big.bin")
expect("made: two pieces joined", run(["dump", "--buffer", hex(0x10000000 + PIECE + 2), "--output", path, made]),
       (0, f"wrote {PIECE + 5} bytes of the buffer 0x10000000..{hex(0x10000000 + PIECE + 5)} (device 0), "
           f"recorded before submission 0, to {path}\n", ""))
with open(path, "rb") as f:
    expect("made: the joined bytes", f.read() == big + b"tail!", True)
os.unlink(path)
made = os.path.join(tmp, "made.hcqcap")
with open(made, "wb") as f:
    f.write(HEADER + device(0) + device(1))
    f.write(mem(0, 0x2000, b"a" * 16) + mem(1, 0x2000, b"b" * 16) + sub(0, 0) + sub(1, 1))
    f.write(mem(0, 0x2000, b"c" * 32, timeline=1) + sub(0, 2))
expect("made: --buffers", run(["dump", "--buffers", made]), (0, (
    "device 0  0x2000..0x2010  16 bytes  device  -  1 record  first before submission 0, last before submission 0\n"
    "device 0  0x2000..0x2020  32 bytes  device  -  1 record  first before submission 2, last before submission 2\n"
    "device 1  0x2000..0x2010  16 bytes  device  -  1 record  first before submission 0, last before submission 0\n"
    "3 buffers, 3 memory records, 3 submissions\n"), ""))
expect("made: two devices at one address",
       run(["dump", "--buffer", "0x2004", "--output", path, made]),
       (1, "", f"hcq: dump: {made} recorded buffers at 0x2004 on devices 0, 1; choose one with --device\n"))
for at, dev, want in [("1", "0", b"a" * 16), ("2", "0", b"c" * 32), ("2", "1", b"b" * 16)]:
    rc, out, err = run(["dump", "--buffer", "0x2004", "--at", at, "--device", dev, "--output", path, made])
    with open(path, "rb") as f:
        expect(f"made: 0x2004 before submission {at} on device {dev}", (rc, err, f.read()), (0, "", want))
expect("made: no buffer at 0x2004 on device 2",
       run(["dump", "--buffer", "0x2004", "--device", "2", "--output", path, made]),
       (1, "", f"hcq: dump: {made} recorded no buffer at 0x2004 on device 2; hcq dump --buffers lists them\n"))
expect("made: 0x2018 (only the reused buffer) before submission 1",
       run(["dump", "--buffer", "0x2018", "--at", "1", "--output", path, made]),
       (1, "", "hcq: dump: the buffer 0x2000..0x2020 (device 0) was first recorded before submission 2; "
               "--at 1 is earlier\n"))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("hcq dump --buffers/--buffer: all checks passed")
