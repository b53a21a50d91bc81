#!/usr/bin/env python3
"""The hcq CLI's argument handling and output as a user meets them: the usual conventions
(--help and SUB --help on standard output with status 0, --version, usage errors with status 2
and a hint, failures with status 1), numbers parsed strictly with the value named, output that
cannot be written (a full disk, a planted symlink) failing with one line and a non-zero exit
instead of a silent success."""
import json
import os
import resource
import subprocess
import sys
import tempfile

HCQ, VERSION = os.path.abspath(sys.argv[1]), sys.argv[2]
SUBCOMMANDS = ["ls", "info", "run", "trace", "dump", "pci", "reg"]
failures = []
# An AddressSanitizer build reserves terabytes of shadow memory at start, which a data limit
# refuses; there the memory limit and the out-of-memory case (which needs it) are left out.
with open(HCQ, "rb") as f:
    SANITIZED = b"__asan_init" in f.read()


def limit_memory():
    # 4 GiB of data: a size that slips through allocates and fails instead of filling the
    # machine (RLIMIT_AS would refuse the emulated GPU's address space reservation).
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_DATA, (4 << 30, 4 << 30))


def run(args, ok=True, stdout=subprocess.PIPE, status=None):
    """`ok`: exit 0 or not; `status`: exactly this exit status."""
    env = dict(os.environ)
    env.pop("HCQ_EMULATED_PCI", None)
    env.pop("HCQ_CAPTURE", None)
    p = subprocess.run([HCQ] + args, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env,
                       preexec_fn=limit_memory)
    if status is None and (p.returncode == 0) != ok or status is not None and p.returncode != status:
        failures.append(f"hcq {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
    return p


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n--- got\n{got!r}\n--- want\n{want!r}")


def usage(message, sub=None):
    """What a usage error prints: the message, then where the usage is."""
    return f"hcq: {message}\nRun 'hcq{' ' + sub if sub else ''} --help' for usage.\n"


# ---- help and version: standard output, status 0 ----
for flag in ("--help", "-h"):
    p = run([flag], status=0)
    expect(f"hcq {flag}", (p.stdout.startswith("hcq drives GPUs from user space"), p.stderr), (True, ""))
    for sub in SUBCOMMANDS:
        expect(f"hcq {flag} names {sub}", f"\n  {sub} " in p.stdout, True)
    # Every --raw format is in the top-level usage.
    for fmt in ("pm4", "sdma", "nv-push", "qmd", "adreno-cp", "adreno-uav"):
        expect(f"hcq {flag} names --raw {fmt}", fmt in p.stdout, True)
for sub in SUBCOMMANDS:
    for flag in ("--help", "-h"):
        p = run([sub, flag], status=0)
        expect(f"hcq {sub} {flag}", (p.stdout.startswith(f"{sub}\nUsage: hcq {sub} ") or
                                     p.stdout.split("\n")[1].startswith(f"Usage: hcq {sub} "), p.stderr),
               (True, ""))
    # --help wins over a missing or bad argument: it is never taken for a device.
    p = run([sub, "emu:gfx1100", "--bogus", "--help"], status=0)
    expect(f"hcq {sub} ... --help", "Usage: hcq " + sub in p.stdout, True)
p = run(["--version"], status=0)
expect("hcq --version", (p.stdout, p.stderr), (f"hcq {VERSION}\n", ""))

# ---- usage errors: one line saying what, one saying where the usage is; status 2 ----
for args, want in [
        ([], usage("A subcommand is required")),
        (["frob"], usage("unknown subcommand frob (ls, info, run, trace, dump, pci, reg, usb, rdma, replay, boot)")),
        (["--frob"], usage("unknown option --frob")),
        (["--frob", "ls"], usage("unknown option --frob", "ls")),
        (["ls", "--bogus"], usage("unknown option --bogus", "ls")),
        (["ls", "extra"], usage("unexpected argument extra", "ls")),
        (["info", "emu:gfx1100", "--bogus"], usage("unknown option --bogus", "info")),
        (["info", "emu:gfx1100", "emu:gfx942"], usage("unexpected argument emu:gfx942", "info")),
        (["run", "--size"], usage("--size: 1 required UINT missing", "run")),
        (["dump"], usage("FILE is required", "dump")),
        (["dump", "--queue", "both", "x"], usage("--queue: both not in {compute,copy}", "dump")),
        (["dump", "--raw", "pm5", "x"],
         usage("dump: --raw takes pm4, sdma, nv-push, qmd, adreno-cp or adreno-uav, not 'pm5'", "dump")),
        (["pci"], usage("DEVICE is required", "pci")),
        (["pci", "01:00.0", "--unbind", "--bind-vfio"], usage("--unbind excludes --bind-vfio", "pci")),
        (["reg", "01:00.0", "peek", "0x0"], usage("ACTION: peek not in {read,write,list}", "reg"))]:
    p = run(args, status=2)
    expect(f"hcq {' '.join(args)}", (p.stdout, p.stderr), ("", want))

# ---- failures that are not usage errors: status 1 ----
p = run(["info", "emu:nope"], status=1)
expect("hcq info emu:nope: one line", p.stderr.count("\n"), 1)

# ---- --json: one valid JSON document, the figures a script wants ----
def json_of(args):
    p = run(args, status=0)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        failures.append(f"hcq {' '.join(args)}: not JSON ({e}): {p.stdout!r}")
        return {}


j = json_of(["ls", "--json"])
expect("hcq ls --json", ({"name": "emu:gfx1100", "description": "AMD Radeon RX 7900 XTX (emulated)",
                          "emulated": True} in j.get("devices", []), isinstance(j.get("pci"), list)),
       (True, True))
j = json_of(["info", "emu:gfx942", "--json"])
expect("hcq info --json", {k: j.get(k) for k in ("name", "vendor", "arch", "wave_size", "copy_engine")},
       {"name": "emu:gfx942", "vendor": "AMD", "arch": "gfx942", "wave_size": 64, "copy_engine": True})
j = json_of(["run", "emu:a660", "--size", "1000", "--json"])
expect("hcq run --json", (j.get("device", {}).get("name"), j.get("size"), j.get("launches"),
                          j.get("device_copies"), j.get("copy_engine"), j.get("copy_in", {}).get("bytes"),
                          j.get("verify")),
       ("emu:a660", 1000, 107, 3, False, 8000, {"ok": True, "wrong": 0, "first_wrong": None}))

# ---- a capture slows the run: hcq run says so beside its figures ----
with tempfile.TemporaryDirectory() as tmp:
    cap = os.path.join(tmp, "demo.hcqcap")
    p = subprocess.run([HCQ, "run", "emu:gfx1100", "--size", "1000"], capture_output=True, text=True,
                       env=dict(os.environ, HCQ_CAPTURE=cap))
    expect("hcq run with HCQ_CAPTURE", (p.returncode, p.stdout.splitlines()[1:2]),
           (0, [f"capture  on (HCQ_CAPTURE={cap}): every submission is recorded, so the figures "
                "below are slower than without"]))
    p = subprocess.run([HCQ, "run", "emu:gfx1100", "--size", "1000", "--json"], capture_output=True,
                       text=True, env=dict(os.environ, HCQ_CAPTURE=cap + ",zlib"))
    expect("hcq run --json with HCQ_CAPTURE", (p.returncode, json.loads(p.stdout or "{}").get("capture")),
           (0, cap + ",zlib"))
expect("hcq run without HCQ_CAPTURE", [l for l in run(["run", "emu:gfx1100", "--size", "1000"]).stdout.splitlines()
                                       if l.startswith("capture")], [])
expect("hcq run --json without HCQ_CAPTURE", "capture" in j and j["capture"] is None, True)

# ---- numbers: decimal or 0x hex, nothing else, within range, the value named ----
NUM = "(decimal, or hex with 0x)"
for arg, msg in [
        ("-1", f"--size: '-1' is not a number {NUM}"),
        ("+5", f"--size: '+5' is not a number {NUM}"),
        ("abc", f"--size: 'abc' is not a number {NUM}"),
        ("", f"--size: '' is not a number {NUM}"),
        ("12abc", f"--size: '12abc' is not a number {NUM}"),
        (" 12", f"--size: ' 12' is not a number {NUM}"),
        ("0x", f"--size: '0x' is not a number {NUM}"),
        ("0x-1", f"--size: '0x-1' is not a number {NUM}"),
        ("1e3", f"--size: '1e3' is not a number {NUM}"),
        ("0140", "--size: '0140' has a leading 0 (octal is not accepted: write 140 or 0x140)"),
        ("5000000000", "--size: '5000000000' is out of range (at most 4294967295)"),
        ("0x100000000", "--size: '0x100000000' is out of range (at most 0xffffffff)"),
        ("99999999999999999999999", "--size: '99999999999999999999999' is out of range (at most 4294967295)"),
        ("0", "--size: '0' is out of range (at least 1)")]:
    p = run(["run", "emu:gfx1100", "--size", arg], status=2)
    expect(f"hcq run --size {arg!r}", (p.stderr, p.stdout), (usage(msg, "run"), ""))
expect("hcq run --size 0x100", (run(["run", "emu:gfx1100", "--size", "0x100"]).stdout.splitlines() or [""])[-1],
       "verify   OK: all 256 results match")

# ---- a std exception gets context, never only its name ----
if not SANITIZED:
    p = run(["run", "emu:gfx1100", "--size", "4294967295"], ok=False)  # 16 GiB per host array
    expect("hcq run out of memory", p.stderr,
           "hcq: out of memory (std::bad_alloc: a host allocation failed)\n")

# ---- standard output that cannot be written: a one-line error, exit non-zero ----
with open("/dev/full", "w") as full:
    for args in (["ls"], ["info", "emu:gfx1100"]):
        p = run(args, ok=False, stdout=full)
        expect(f"hcq {' '.join(args)} > /dev/full", p.stderr,
               "hcq: cannot write standard output: No space left on device\n")

# ---- the trace file: checked writes, no symlink followed ----
p = run(["trace", "emu:gfx1100", "/dev/full"], ok=False)
expect("hcq trace to /dev/full", (p.stderr, p.stdout),
       ("hcq: write to /dev/full failed after 0 bytes: No space left on device (errno 28)\n", ""))
with tempfile.TemporaryDirectory() as tmp:
    target, trace = os.path.join(tmp, "precious"), os.path.join(tmp, "trace.json")
    with open(target, "w") as f:
        f.write("keep me\n")
    os.symlink(target, trace)
    p = run(["trace", "emu:gfx1100", trace], ok=False)
    expect("hcq trace through a symlink", p.stderr,
           f"hcq: {trace}: refusing to write through a symbolic link: Too many levels of symbolic "
           "links (errno 40)\n")
    expect("the symlink's target is untouched", open(target).read(), "keep me\n")
    os.unlink(trace)
    with open(trace, "w") as f:
        f.write("x" * 100000)  # an old, longer trace: truncated, not overwritten in place
    p = run(["trace", "emu:gfx1100", trace])
    expect("hcq trace's line", p.stdout.startswith("trace    ") and p.stdout.endswith(f"-> {trace}\n"), True)
    try:
        events = json.load(open(trace))
    except ValueError as e:
        events = f"not JSON: {e}"
    expect("the trace is JSON with events", isinstance(events, dict) and bool(events.get("traceEvents")), True)
    # '-' is standard output: the trace there, the summary on standard error, no file '-'.
    p = subprocess.run([HCQ, "trace", "emu:gfx1100", "-"], capture_output=True, text=True, cwd=tmp)
    try:
        events = json.loads(p.stdout)
    except ValueError as e:
        events = f"not JSON: {e}"
    expect("hcq trace DEV -", (p.returncode, isinstance(events, dict) and bool(events.get("traceEvents")),
                               p.stderr.startswith("trace    ") and p.stderr.endswith("-> standard output\n"),
                               os.path.exists(os.path.join(tmp, "-"))),
           (0, True, True, False))

# hcq boot: the register-level emulated gfx1100 booted by hcq itself; what the boot found, the
# IP versions from its discovery table, the phases (times vary, names do not).
out = run(["boot", "emu:gfx1100_am"]).stdout.splitlines()
expect("hcq boot emu:gfx1100_am", [l.split(":")[0] for l in out],
       ["VRAM", "found", "IP versions", "firmware", "SMU firmware", "phases"])
expect("hcq boot: VRAM and state", out[:2], ["VRAM: 24576 MiB, frame buffer at MC 0x8000000000",
                                             "found: cold (sOS not running, no boot marker), SMU answering"])
expect("hcq boot: phases run", [p.split()[0] for p in out[-1][len("phases: "):].split(", ") if "not run" not in p],
       ["discovery", "firmware", "soc", "gmc", "ih", "psp", "smu", "gfx", "sdma"])
expect("hcq boot --reset", run(["boot", "emu:gfx1100_am", "--reset"]).stdout.splitlines()[1],
       "found: cold (sOS not running, no boot marker), SMU answering: mode-1 reset")
p = run(["boot", "emu:gfx1100"], status=2)
expect("hcq boot of a KFD device", p.stderr,
       usage("boot: emu:gfx1100 is not a GPU hcq boots itself (am:<PCI address> or emu:gfx1100_am)", "boot"))
p = run(["boot", "am:03:00.0"], status=1)
expect("hcq boot of a short PCI address", p.stderr,
       "hcq: bad device name 'am:03:00.0': expected am:<domain:bus:device.function>, e.g. am:0000:03:00.0\n")

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("ok")
