#!/usr/bin/env python3
"""A capture of the demo on every emulated target decodes completely (no packet hcq dump
cannot decode), and holds both queues' work."""
import os
import subprocess
import sys
import tempfile

hcq = sys.argv[1]
failed = 0
# What each vendor's launches and copies decode as.
targets = {"gfx90a": ("DISPATCH_DIRECT", "COPY_LINEAR"), "gfx942": ("DISPATCH_DIRECT", "COPY_LINEAR"),
           "gfx1030": ("DISPATCH_DIRECT", "COPY_LINEAR"),
           "gfx1100": ("DISPATCH_DIRECT", "COPY_LINEAR"), "gfx1201": ("DISPATCH_DIRECT", "COPY_LINEAR"),
           "sm_80": ("SEND_PCAS_A", "LAUNCH_DMA.DATA_TRANSFER_TYPE=2"),
           "sm_90": ("SEND_PCAS_A", "LAUNCH_DMA.DATA_TRANSFER_TYPE=2"),
           "sm_100": ("SEND_PCAS_A", "LAUNCH_DMA.DATA_TRANSFER_TYPE=2"),
           # Adreno copies are host copies: only the launches and their signals are submitted.
           "a660": ("CP_EXEC_CS", "CP_MEM_WRITE"), "a740": ("CP_EXEC_CS", "CP_MEM_WRITE")}
for target, (launch, copy) in targets.items():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "demo.hcqcap")
        run = subprocess.run([hcq, "run", "emu:" + target, "--size", "5000"],
                             env={**os.environ, "HCQ_CAPTURE": path},
                             capture_output=True, text=True, check=False)
        dump = subprocess.run([hcq, "dump", path], capture_output=True, text=True, check=False)
        problems = [l for l in dump.stdout.splitlines() if "!!" in l]
        ok = (run.returncode == 0 and dump.returncode == 0 and not problems and
              launch in dump.stdout and copy in dump.stdout)
        if not ok:
            failed += 1
            print(f"FAIL {target}: run {run.returncode} dump {dump.returncode} {dump.stderr}")
            print("\n".join(problems[:5]))
print(f"{len(targets) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
