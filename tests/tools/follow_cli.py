#!/usr/bin/env python3
"""Live capture between processes, as a user runs it (issue 19, part 3): `hcq run` with
HCQ_CAPTURE="FILE;shm:NAME" and `hcq dump --follow NAME` in another process. The follower's
output must equal `hcq dump FILE` of the same run byte for byte (text and --json, with
filters); killing the writer or the follower at any point never hangs the other; nothing is
left in /dev/shm. Every child is waited for with a timeout."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HCQ = sys.argv[1]
failures = []
tmp = tempfile.mkdtemp(prefix="hcq_follow_cli_")
names = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n  got  {got!r}\n  want {want!r}")


def ring(what):
    name = f"hcq-follow-{what}-{os.getpid()}"
    names.append(name)
    return name


def env(capture=None):
    e = dict(os.environ)
    e.pop("HCQ_CAPTURE", None)
    if capture:
        e["HCQ_CAPTURE"] = capture
    return e


def start(args, capture=None):
    return subprocess.Popen([HCQ] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env(capture))


def finish(p, what, limit=60):
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        failures.append(f"{what}: still running after {limit} s")
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def polling(p, limit=10):
    """Waits (bounded) until follower `p` sleeps between its looks for the ring, in
    clock_nanosleep (syscall 230 on x86-64, 115 on arm64): started, and waiting for a writer.
    A writer started before that may be gone again before the follower looks."""
    until = time.monotonic() + limit
    while time.monotonic() < until and p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/syscall") as f:
                if f.read().split(" ")[0] in ("230", "115"):
                    return
        except OSError:  # no /proc/PID/syscall here: give it time instead
            time.sleep(0.5)
            return
        time.sleep(0.005)
    failures.append(f"follower {p.pid} was not waiting for a writer within {limit} s")


def first_line(p, limit=30):
    """Waits (bounded) until `p` has written a line to stdout, which it returns."""
    os.set_blocking(p.stdout.fileno(), False)
    data, until = b"", time.monotonic() + limit
    while b"\n" not in data and time.monotonic() < until and p.poll() is None:
        chunk = p.stdout.read(4096)
        if chunk:
            data += chunk
        else:
            time.sleep(0.01)
    os.set_blocking(p.stdout.fileno(), True)
    return data


# 1. The follower starts first; the run captures to a file and the ring at once. What the
#    follower printed is what `hcq dump FILE` prints, for each of these ways of dumping.
for extra in ([], ["--json"], ["--queue", "copy", "--json"], ["--submissions", "2:5"]):
    name, cap = ring("same"), os.path.join(tmp, "run.cap")
    follower = start(["dump", "--follow", name] + extra)
    polling(follower)
    # A run long enough (about 0.3 s idle) that a follower on a loaded machine looks in time.
    rc, _, err = finish(start(["run", "emu:gfx1100", "--size", "1000000"], f"{cap};shm:{name}"),
                        "hcq run")
    expect(f"hcq run with a file and a ring ({extra})", (rc, err), (0, ""))
    frc, fout, ferr = finish(follower, "hcq dump --follow")
    drc, dout, derr = finish(start(["dump", cap] + extra), "hcq dump FILE")
    expect(f"hcq dump --follow {extra}: exit and stderr", (frc, ferr), (0, ""))
    expect(f"hcq dump FILE {extra}: exit and stderr", (drc, derr), (0, ""))
    expect(f"hcq dump --follow {extra} has output", len(fout) > 100, True)
    expect(f"hcq dump --follow {extra} == hcq dump FILE", fout, dout)

# 1b. A ring too small for the run's buffer contents (",full", 1 MiB against 4 MB buffers): the
#     records that do not fit are dropped whole, and the follower says how many where they
#     were missing; everything else is the file's, line for line.
memory = lambda text: sum(l.startswith("memory ") for l in text.splitlines())
DROPS = r"(\d+) records? dropped"
for extra in ([], ["--json"]):
    name, cap = ring("drops"), os.path.join(tmp, "full.cap")
    follower = start(["dump", "--follow", name] + extra)
    polling(follower)
    rc, _, err = finish(start(["run", "emu:gfx1100", "--size", "1000000"],
                             f"{cap},full;shm:{name},size=1,full"), "hcq run ,full")
    expect("hcq run with a full file and a 1 MiB ring", (rc, err), (0, ""))
    frc, fout, ferr = finish(follower, f"hcq dump --follow {extra} (drops)")
    _, dout, _ = finish(start(["dump", cap] + extra), "hcq dump FILE (full)")
    expect(f"hcq dump --follow {extra} with drops: exit and stderr", (frc, ferr), (0, ""))
    if extra:  # one {"dropped": N} object where they were missing
        objects = [json.loads(l) for l in fout.splitlines()]
        drops = [o["dropped"] for o in objects if "dropped" in o]
        expect("drops in JSON are objects of their own",
               all(set(o) == {"dropped"} for o in objects if "dropped" in o), True)
        fout = "\n".join(l for l in fout.splitlines() if not l.startswith('{"dropped":'))
        memory = lambda text: sum(l.startswith('{"memory":') for l in text.splitlines())
    else:
        drops = [int(m.group(1)) for m in map(lambda l: re.fullmatch(DROPS, l), fout.splitlines())
                 if m]
        fout = "\n".join(l for l in fout.splitlines() if not re.fullmatch(DROPS, l))
    expect(f"{extra}: some records were dropped", sum(drops) > 0 and min(drops) > 0, True)
    expect(f"{extra}: the dropped records are the memory records missing", sum(drops),
           memory(dout) - memory(fout))
    keep = lambda text: [l for l in text.splitlines()
                         if not l.startswith("memory ") and not l.startswith('{"memory":')]
    expect(f"{extra}: with drops, the rest equals hcq dump FILE", keep(fout), keep(dout))

# 2. The writer killed mid-run: the follower shows what it published and ends, saying so.
name = ring("killw")
writer = start(["run", "emu:gfx1100", "--size", "16000000"], f"shm:{name}")
follower = start(["dump", "--follow", name])
line = first_line(follower)
expect("a follower of a long run sees a record before the kill", line.startswith(b"submission 0"),
       True)
writer.send_signal(signal.SIGKILL)
finish(writer, "the killed writer")
t = time.monotonic()
rc, _, err = finish(follower, "the follower of a killed writer", limit=10)
expect("the follower of a killed writer: exit and message",
       (rc, err), (1, f"hcq: dump: shm:{name}: the writer (pid {writer.pid}) ended without "
                      "closing the capture; what it wrote before is shown\n"))
expect("the follower of a killed writer ends soon", time.monotonic() - t < 5, True)

# 3. The follower killed mid-run: the run goes on and completes (the ring drops, never blocks).
name = ring("killf")
follower = start(["dump", "--follow", name])
polling(follower)
writer = start(["run", "emu:gfx1100", "--size", "1000000"], f"shm:{name},size=1")
first_line(follower)
follower.send_signal(signal.SIGKILL)
finish(follower, "the killed follower")
rc, out, err = finish(writer, "the writer of a killed follower")
expect("the run of a killed follower completes", (rc, err), (0, ""))

# 4. No writer: the follower's bounded wait, and the command line's exact errors.
name = ring("none")
rc, out, err = finish(start(["dump", "--follow", name, "--timeout", "200"]), "a follower alone")
expect("hcq dump --follow with no writer", (rc, out, err),
       (1, "", f"hcq: dump: shm:{name}: no capture writer appeared in 200 ms\n"))
rc, out, err = finish(start(["dump", "--follow", "a/b"]), "a bad ring name")
expect("hcq dump --follow a/b", (rc, err), (1, "hcq: shared segment 'a/b': a name is letters, "
                                                "digits, '.', '_' and '-' (1 to 200)\n"))
for args, message in (
        (["dump", "--follow", "x", "f.cap"], "dump: --follow x reads a live ring, not FILE 'f.cap'"),
        (["dump", "--follow", "x", "--raw", "pm4"], "dump: --follow decodes a capture, not --raw dwords"),
        (["dump"], "FILE is required")):
    rc, out, err = finish(start(args), "hcq " + " ".join(args))
    expect("hcq " + " ".join(args), (rc, err),
           (2, f"hcq: {message}\nRun 'hcq dump --help' for usage.\n"))
rc, out, err = finish(start(["run", "emu:gfx1100", "--size", "1000"], "shm:x,size=0"), "bad spec")
expect("HCQ_CAPTURE=shm:x,size=0", (rc, err.splitlines()[-1:]),
       (1, ["hcq: HCQ_CAPTURE: size takes 1 to 4096 (MiB), not '0'"]))

# 5. Nothing is left in /dev/shm by any of these, the killed ones included: the last process
#    out removes a ring, and the killed writer's was removed by its follower.
expect("left in /dev/shm", [n for n in names if os.path.exists("/dev/shm/" + n)], [])

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("live capture: follower == file dump, kills end cleanly, nothing left in /dev/shm")
