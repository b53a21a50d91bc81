#!/usr/bin/env python3
"""Interrupted runs leave nothing behind (issue 33, item 12): `hcq run emu:gfx1100_am` (an
emulated PCI bus's sysfs tree, the AM GPU's firmware tree, the device record's segment) is
stopped with SIGINT and with SIGTERM while it works. It must end by that signal, with no
temporary tree of its pid in $TMPDIR/hcq-<uid> and no /dev/shm segment of its emulated machine
(hcq.emu.p<pid>-...). A SIGKILLed run's leftovers are reclaimed by the next run."""
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

HCQ = os.path.abspath(sys.argv[1])
failures = []
tmp = tempfile.mkdtemp(prefix="hcq-signal-cli-")
ENV = dict(os.environ, TMPDIR=tmp)
ENV.pop("HCQ_CAPTURE", None)
ENV.pop("HCQ_EMULATED_SCOPE", None)
USER_DIR = os.path.join(tmp, f"hcq-{os.geteuid()}")


def trees(pid):
    return sorted(glob.glob(os.path.join(USER_DIR, f"*-{pid}-*")))


def segments(pid):
    return sorted(glob.glob(f"/dev/shm/hcq.emu.p{pid}-*"))


def started(sig):
    """An `hcq run` on the emulated AM GPU, once its trees and segments exist."""
    p = subprocess.Popen([HCQ, "run", "emu:gfx1100_am", "--size", str(1 << 26)], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    until = time.monotonic() + 60
    while time.monotonic() < until and p.poll() is None:
        if len(trees(p.pid)) == 2 and segments(p.pid):
            return p
        time.sleep(0.005)
    p.kill()
    p.wait()
    failures.append(f"{signal.Signals(sig).name}: the run ended or made no trees: "
                    f"{p.returncode}, {p.stderr.read()}")
    return None


for sig in (signal.SIGINT, signal.SIGTERM):
    p = started(sig)
    if not p:
        continue
    made = trees(p.pid) + segments(p.pid)
    print(f"{sig.name}: pid {p.pid} made {len(made)}: {[os.path.basename(m) for m in made]}")
    p.send_signal(sig)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        failures.append(f"{sig.name}: the run did not end within 30 s")
    if p.returncode != -sig:
        failures.append(f"{sig.name}: exit status {p.returncode}, not {-sig} (ended by it)")
    left = trees(p.pid) + segments(p.pid)
    if left:
        failures.append(f"{sig.name}: left {left} (it had made {made})")

# SIGKILL: no handler runs; the next run reclaims what the killed one left.
p = started(signal.SIGKILL)
if p:
    p.kill()
    p.wait()
    left = trees(p.pid) + segments(p.pid)
    if not left:
        failures.append("SIGKILL: the killed run left nothing to reclaim (the test shows nothing)")
    q = subprocess.run([HCQ, "run", "emu:gfx1100_am", "--size", "1024"], env=ENV,
                       capture_output=True, text=True, timeout=120)
    if q.returncode != 0:
        failures.append(f"the run after a SIGKILL failed: {q.stderr}")
    still = trees(p.pid) + segments(p.pid)
    if still:
        failures.append(f"SIGKILL: the next run did not reclaim {still}")

subprocess.run(["rm", "-rf", tmp])
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
