#!/usr/bin/env python3
"""Device ownership between hcq processes (issue 19): an `hcq run` holding emu:gfx1100_am (and
then emu:gfx1100_usb, the GPU behind the emulated USB bridge) is shown by `hcq ls` (text and --json), a second `hcq run` of the device fails naming the
holder's pid and command line, and once the holder is SIGKILLed the next run succeeds and a
clean exit leaves nothing in /dev/shm. Every process runs in one emulated scope of this test
(HCQ_EMULATED_SCOPE), so the emulated machines of other tests never meet these."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

HCQ = os.path.abspath(sys.argv[1])
SCOPE = f"owner-cli-{os.getpid()}"
ENV = dict(os.environ, HCQ_EMULATED_SCOPE=SCOPE)
ENV.pop("HCQ_CAPTURE", None)
failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n--- got\n{got!r}\n--- want\n{want!r}")


def hcq(args):
    return subprocess.run([HCQ] + args, capture_output=True, text=True, env=ENV, timeout=120)


def holder_in_ls(device):
    p = hcq(["ls", "--json"])
    for d in json.loads(p.stdout)["devices"]:
        if d["name"] == device:
            return d.get("holder")
    return None


def leftovers():
    return sorted(glob.glob(f"/dev/shm/hcq.emu.{SCOPE}.*"))


def check(device):
    """A holder: a long run, stopped (SIGSTOP) as soon as ls shows it holding the device, so
    it holds it for as long as the test needs."""
    argv = [HCQ, "run", device, "--size", "4000000"]
    holder = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        seen = None
        deadline = time.monotonic() + 60
        while seen is None and time.monotonic() < deadline and holder.poll() is None:
            seen = holder_in_ls(device)
            if seen is None:
                time.sleep(0.01)
        if seen is None:
            failures.append(f"{device}: hcq ls never showed the holder (exit status {holder.poll()})")
            return
        holder.send_signal(signal.SIGSTOP)
        command = " ".join(argv)
        expect(f"{device}: ls --json holder", (seen["pid"], seen["command"]), (holder.pid, command))
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seen["since_unix_ms"] // 1000))
        p = hcq(["ls"])
        line = [l for l in p.stdout.splitlines() if l.startswith(device + " ")]
        expect(f"{device}: ls text line", len(line), 1)
        expect(f"{device}: ls text holder",
               line[0].endswith(f"  [emulated]  [held by pid {holder.pid} ({command}), since {since}]")
               if line else line, True)
        # The second opener: one line naming the holder, exit status 1.
        p = hcq(["run", device, "--size", "1000"])
        expect(f"{device}: second opener", (p.returncode, p.stderr),
               (1, f"hcq: {device}: in use by pid {holder.pid} ({command}), since {since}\n"))
        # Other devices and other scopes are not held.
        j = json.loads(hcq(["ls", "--json"]).stdout)
        expect(f"{device}: held devices", [d["name"] for d in j["devices"] if "holder" in d], [device])
        j = json.loads(subprocess.run([HCQ, "ls", "--json"], capture_output=True, text=True,
                                      env=dict(ENV, HCQ_EMULATED_SCOPE=SCOPE + "-other")).stdout)
        expect(f"{device}: another scope", [d for d in j["devices"] if "holder" in d], [])
        # The holder crashes: the next run reclaims the device and leaves nothing behind.
        holder.kill()
        holder.wait(timeout=30)
        expect(f"{device}: holder after SIGKILL", holder_in_ls(device), None)
        p = hcq(["run", device, "--size", "1000"])
        expect(f"{device}: run after the holder died", (p.returncode, p.stderr), (0, ""))
        expect(f"{device}: /dev/shm after a clean exit", leftovers(), [])
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)


for device in ("emu:gfx1100_am", "emu:gfx1100_usb"):
    check(device)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("ok")
