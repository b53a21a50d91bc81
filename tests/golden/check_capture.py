#!/usr/bin/env python3
"""A capture of the demo on every emulated target decodes completely (no packet hcq dump
cannot decode), and holds both queues' work."""
import os
import subprocess
import sys
import tempfile

hcq = sys.argv[1]
failed = 0
targets = ["gfx90a", "gfx942", "gfx1100", "gfx1201"]
for target in targets:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "demo.hcqcap")
        run = subprocess.run([hcq, "run", "emu:" + target, "--size", "5000"],
                             env={**os.environ, "HCQ_CAPTURE": path},
                             capture_output=True, text=True, check=False)
        dump = subprocess.run([hcq, "dump", path], capture_output=True, text=True, check=False)
        problems = [l for l in dump.stdout.splitlines() if "!!" in l]
        ok = (run.returncode == 0 and dump.returncode == 0 and not problems and
              "DISPATCH_DIRECT" in dump.stdout and "COPY_LINEAR" in dump.stdout)
        if not ok:
            failed += 1
            print(f"FAIL {target}: run {run.returncode} dump {dump.returncode} {dump.stderr}")
            print("\n".join(problems[:5]))
print(f"{len(targets) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
