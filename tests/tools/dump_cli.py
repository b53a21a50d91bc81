#!/usr/bin/env python3
"""hcq dump and HCQ_CAPTURE on hostile and failing inputs and outputs, as a user runs them:
exact exit status and error text, bounded memory and time (docs/capture-format.md, Limits)."""
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HCQ = sys.argv[1]
failures = []
MAX_RECORD = 256 << 20


def run(args, env=None, stdin=None, stdout=subprocess.PIPE, timeout=60):
    t = time.monotonic()
    p = subprocess.run([HCQ] + args, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                       env={**os.environ, **(env or {})}, timeout=timeout)
    return p.returncode, (p.stdout or b"").decode(errors="replace"), p.stderr.decode(), time.monotonic() - t


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n  got  {got!r}\n  want {want!r}")


def header():
    return b"HCQCAP\0\0" + struct.pack("<II", 2, 0)


def record(rtype, payload, flags=0, length=None):
    return struct.pack("<IIQ", rtype, flags, len(payload) if length is None else length) + payload


tmp = tempfile.mkdtemp(prefix="hcq_dump_cli_")

# 1. Through a pipe, a record claiming 200 MiB (within the limit) that the input does not back
# fails as truncated without allocating the claim. First, so that this process's children's
# peak memory is this run's.
r, w = os.pipe()
os.write(w, header() + struct.pack("<IIQ", 2, 0, 200 << 20) + b"abc")
os.close(w)
p = subprocess.run([HCQ, "dump", "/dev/stdin"], stdin=r, capture_output=True, text=True, timeout=60)
os.close(r)
expect("pipe: truncated claim", (p.returncode, p.stderr),
       (1, "hcq: /dev/stdin: truncated: the record at offset 16 claims 209715200 bytes, "
           "the input ends after 3 of them\n"))
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if peak_kib > 150 * 1024:
    failures.append(f"pipe: hcq dump peaked at {peak_kib} KiB for a 35-byte input claiming 200 MiB")

# 2. Through a pipe, a 32-byte input claiming 1.5 GiB: refused at the limit.
r, w = os.pipe()
os.write(w, header() + struct.pack("<IIQ", 2, 0, 1536 << 20))
os.close(w)
p = subprocess.run([HCQ, "dump", "/dev/stdin"], stdin=r, capture_output=True, text=True, timeout=60)
os.close(r)
expect("pipe: huge claim", (p.returncode, p.stderr),
       (1, "hcq: /dev/stdin: record at offset 16 claims 1610612736 bytes, more than the "
           "268435456 (256 MiB) a record may hold\n"))

# 3. 20,000 zero-length records of an unknown type (320 KB): skipped, no output, success.
path = os.path.join(tmp, "unknown.hcqcap")
with open(path, "wb") as f:
    f.write(header() + record(99, b"") * 20000)
rc, out, err, _ = run(["dump", path])
expect("20,000 unknown records", (rc, out, err), (0, "", ""))

# 4. zlib bombs: 300 MiB of zeros in about 300 KB.
c = zlib.compressobj()
bomb = b"".join(c.compress(bytes(1 << 20)) for _ in range(300)) + c.flush()
path = os.path.join(tmp, "bomb.hcqcap")
with open(path, "wb") as f:  # states its true inflated size, over the limit
    f.write(header() + record(1, struct.pack("<Q", 300 << 20) + bomb, flags=1))
rc, out, err, secs = run(["dump", path])
expect("zlib bomb stating its size", (rc, err),
       (1, f"hcq: {path}: compressed record at offset 16 claims 314572800 bytes inflated, more "
           "than the 268435456 (256 MiB) a record may hold\n"))
with open(path, "wb") as f:  # states 1,000 bytes
    f.write(header() + record(1, struct.pack("<Q", 1000) + bomb, flags=1))
rc, out, err, secs = run(["dump", path])
expect("zlib bomb stating 1,000 bytes", (rc, err),
       (1, f"hcq: {path}: compressed record at offset 16 inflates to more than its stated 1000 "
           "bytes\n"))
if secs > 5:
    failures.append(f"zlib bomb stating 1,000 bytes took {secs:.1f} s")

# 5. --raw on an endless input ends quickly with the limit named.
rc, out, err, secs = run(["dump", "--raw", "pm4", "/dev/zero"], timeout=60)
expect("--raw /dev/zero", (rc, out, err),
       (1, "", "hcq: dump: /dev/zero holds more than 67108864 bytes (64 MiB), the most --raw "
               "reads\n"))
if secs > 10:
    failures.append(f"--raw /dev/zero took {secs:.1f} s")

# 6. A directory is named as one.
expect("dump DIR", run(["dump", tmp])[:3], (1, "", f"hcq: {tmp} is a directory, not a capture file\n"))
expect("dump --raw pm4 DIR", run(["dump", "--raw", "pm4", tmp])[:3],
       (1, "", f"hcq: dump: {tmp} is a directory, not a file of dwords\n"))

# 7. A stream decoded a window at a time reads as one decoded whole: 70,000 NOPs of 4 dwords
# after one type-2 filler (so packets straddle every window), 280,001 dwords.
path = os.path.join(tmp, "nops.bin")
nop = struct.pack("<I", (3 << 30) | (2 << 16) | (0x10 << 8)) + bytes(12)  # PM4 NOP, 3 body dwords
with open(path, "wb") as f:
    f.write(struct.pack("<I", 0x80000000) + nop * 70000)
rc, out, err, _ = run(["dump", "--raw", "pm4", path])
lines = out.splitlines()
expect("70,001 packets", (rc, len(lines), err), (0, 70001, ""))
expect("every NOP whole", sum(1 for l in lines[1:] if "  NOP" in l and "!!" not in l), 70000)
expect("offsets run on across windows", [l.split()[0] for l in lines[-2:]],
       [hex(4 + 16 * 69998), hex(4 + 16 * 69999)])

# 8. Output to a full device: exit status 1 and one line saying so.
cap = os.path.join(tmp, "demo.hcqcap")
rc, _, err, _ = run(["run", "emu:gfx1100", "--size", "5000"], env={"HCQ_CAPTURE": cap})
expect("capture the demo", (rc, err), (0, ""))
for args in (["dump", cap], ["dump", "--json", cap], ["dump", "--raw", "pm4", path]):
    with open("/dev/full", "wb") as full:
        rc, _, err, _ = run(args, stdout=full)
    expect(f"hcq {' '.join(args)} > /dev/full", (rc, err),
           (1, "hcq: dump: writing the output to standard output failed: No space left on device "
               "(errno 28)\n"))

# 9. HCQ_CAPTURE that cannot be written fails the run with the path and errno.
rc, _, err, _ = run(["run", "emu:gfx1100", "--size", "5000"], env={"HCQ_CAPTURE": "/dev/full"})
expect("HCQ_CAPTURE=/dev/full", (rc, err),
       (1, "hcq: write to /dev/full failed after 0 bytes: No space left on device (errno 28)\n"))
target, link = os.path.join(tmp, "precious"), os.path.join(tmp, "link.hcqcap")
with open(target, "w") as f:
    f.write("keep me")
os.symlink(target, link)
rc, _, err, _ = run(["run", "emu:gfx1100", "--size", "5000"], env={"HCQ_CAPTURE": link})
expect("HCQ_CAPTURE=symlink", (rc, err),
       (1, f"hcq: {link}: refusing to write through a symbolic link: Too many levels of symbolic "
           "links (errno 40)\n"))
expect("the symlink's target is kept", open(target).read(), "keep me")

# 10. --submissions numbers: strict, and the range in order; usage errors (status 2).
HINT = "Run 'hcq dump --help' for usage.\n"
for arg, want in [
    ("-1", "hcq: dump: --submissions: '-1' is not a number (decimal, or hex with 0x) "
           "(it takes A:B, A:, :B or A)\n"),
    ("1:x", "hcq: dump: --submissions: 'x' is not a number (decimal, or hex with 0x) "
            "(it takes A:B, A:, :B or A)\n"),
    ("0140", "hcq: dump: --submissions: '0140' has a leading 0 (octal is not accepted: write 140 "
             "or 0x140) (it takes A:B, A:, :B or A)\n"),
    ("2:1", "hcq: dump: --submissions 2:1: the first (2) is after the last (1)\n")]:
    rc, out, err, _ = run(["dump", "--submissions", arg, cap])
    expect(f"dump --submissions {arg}", (rc, out, err), (2, "", want + HINT))
rc, out, err, _ = run(["dump", "--submissions", "0x1:1", cap])
expect("dump --submissions 0x1:1", (rc, out.startswith("submission 1 "), err), (0, True, ""))

# 11. --json writes valid JSON Lines whatever a capture's strings hold: control characters,
# quotes, backslashes, and a byte that is not UTF-8 (replaced by U+FFFD).
import json
name = b"emu:\x01evil\n\t\x1b[31m\"quoted\"\\\x7f\xff"
device = struct.pack("<I", 7) + b"".join(struct.pack("<H", len(x)) + x
                                         for x in (name, b"AMD", b"gfx1100"))
nop = struct.pack("<II", (3 << 30) | (0 << 16) | (0x10 << 8), 0)  # PM4 NOP, 1 body dword
submission = (struct.pack("<IBBHQQI", 7, 0, 0, 0, 0, 0, 1) +
              struct.pack("<BBHIQ", 0, 0, 0, len(nop) // 4, 0) + nop)
path = os.path.join(tmp, "hostile_name.hcqcap")
with open(path, "wb") as f:
    f.write(header() + record(1, device) + record(2, submission))
p = subprocess.run([HCQ, "dump", "--json", path], capture_output=True, timeout=60)
try:
    out = p.stdout.decode("utf-8")  # JSON is UTF-8 (RFC 8259 8.1): strictly, no byte replaced
except UnicodeDecodeError as e:
    out = f"not UTF-8: {e}"
expect("dump --json of a hostile device name", (p.returncode, p.stderr, len(out.splitlines())),
       (0, b"", 1))
for line in out.splitlines():
    try:
        j = json.loads(line)
    except ValueError as e:
        j = {"device": f"not JSON: {e}: {line!r}"}
    expect("the device name survives the JSON line", (j["device"], j["name"]),
           (name[:-1].decode() + "\ufffd", "NOP"))
    expect("no raw control character in the line", any(ord(c) < 0x20 for c in line), False)

# 12. '-' is standard input, for a capture and for --raw.
with open(cap, "rb") as f:
    rc, out, err, _ = run(["dump", "-"], stdin=f)
expect("dump - (a capture on standard input)", (rc, out, err), (0,) + run(["dump", cap])[1:3])
golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "launch_gfx11.pm4.hex")
with open(golden) as f:
    golden_text = f.read()
want = run(["dump", "--raw", "pm4", golden])
expect("dump --raw pm4 of the golden text", (want[0], want[2], len(want[1].splitlines()) > 5), (0, "", True))
with open(golden, "rb") as f:
    expect("dump --raw pm4 - (text on standard input)", run(["dump", "--raw", "pm4", "-"], stdin=f)[:3], want[:3])

# 13. --raw text: kernel-log lines (a timestamp, then a prefix up to the last ':') and offsets
# are accepted; anything else is refused with the line and what was expected; the decision
# text or binary is explicit (--format), never taken from the size.
words = golden_text.split()
forms = [f"[  {i}.123456] amdgpu 0000:03:00.0: ring gfx: " + " ".join(words[i:i + 4])
         for i in range(0, len(words), 4)]
forms[1] = "0x" + ", 0x".join(forms[1].rsplit(": ", 1)[1].split())  # 0x and commas, no prefix
forms[2] = f"{8:08x}: " + forms[2].rsplit(": ", 1)[1]  # an offset, as in a ring dump
path = os.path.join(tmp, "dmesg.txt")
with open(path, "w") as f:
    f.write("amdgpu 0000:03:00.0: ring gfx dump:\n\n" + "\r\n".join(forms) + "\n")
expect("dump --raw pm4 of kernel-log lines", run(["dump", "--raw", "pm4", path])[:3], want[:3])
EXPECTED = ("expected hex dwords such as c0001000 or 0xc0001000, separated by spaces or commas; a "
            "line may start with a kernel-log timestamp [  12.345678] and a prefix ending in ':'; "
            "--format binary reads the file as binary")
typo = golden_text.replace(words[9], words[9][:3] + "g" + words[9][4:], 1)  # c00g5800
typo += " " * (-len(typo) % 4)  # whole dwords in size: binary, if size decided
path = os.path.join(tmp, "typo.txt")
with open(path, "w") as f:
    f.write(typo)
expect("dump --raw pm4 of text with a typo (whole dwords in size)", run(["dump", "--raw", "pm4", path])[:3],
       (1, "", f"hcq: dump: {path} line 2: '{words[9][:3]}g{words[9][4:]}' is not a 32-bit hex dword "
               f"({EXPECTED})\n"))
with open(path, "w") as f:
    f.write("[  12.5] amdgpu 0000:03:00.0: ring gfx: c0001000\n"
            "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout\n")
expect("dump --raw pm4 of a log line without dwords", run(["dump", "--raw", "pm4", path])[:3],
       (1, "", f"hcq: dump: {path} line 2: 'amdgpu_job_timedout' is not a 32-bit hex dword "
               f"({EXPECTED})\n"))
with open(path, "w") as f:
    f.write("c0001000 123456789\n")
expect("dump --raw pm4 of a word wider than 32 bits", run(["dump", "--raw", "pm4", path])[2],
       f"hcq: dump: {path} line 1: '123456789' is not a 32-bit hex dword ({EXPECTED})\n")
# A hostile token is shown cut to 40 bytes, its unprintable bytes as \xNN (no escape
# sequence reaches the terminal, no 100 KB message).
with open(path, "wb") as f:
    f.write(b"c0001000 " + b"f" * 100000 + b"\n")
expect("dump --raw pm4 of a 100,000-byte token", run(["dump", "--raw", "pm4", path])[:3],
       (1, "", f"hcq: dump: {path} line 1: '{'f' * 40}...' is not a 32-bit hex dword ({EXPECTED})\n"))
with open(path, "wb") as f:
    f.write(b"c0001000 \x1b[2Jzz\n")
expect("dump --raw pm4 --format text of a token with an escape byte",
       run(["dump", "--raw", "pm4", "--format", "text", path])[:3],
       (1, "", f"hcq: dump: {path} line 1: '\\x1b[2Jzz' is not a 32-bit hex dword ({EXPECTED})\n"))
# --format binary takes the same 8 bytes as two dwords; --format text refuses a binary file.
with open(path, "w") as f:
    f.write("00001000")
expect("dump --raw pm4 --format binary of text", run(["dump", "--raw", "pm4", "--format", "binary", path])[:3],
       (0, "0x0000  0x30303030  INVALID  !! type-0 header (hcq emits type-3 packets only)\n"
           "0x0004  0x30303031  INVALID  !! type-0 header (hcq emits type-3 packets only)\n", ""))
binary = os.path.join(tmp, "nops.bin")
expect("dump --raw pm4 --format text of binary", run(["dump", "--raw", "pm4", "--format", "text", binary])[0], 1)

subprocess.run(["rm", "-rf", tmp], check=False)
for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
