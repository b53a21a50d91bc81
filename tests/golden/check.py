#!/usr/bin/env python3
"""Decode every golden input with `hcq dump --raw` and compare with the expected text."""
import pathlib
import subprocess
import sys

hcq, folder = sys.argv[1], pathlib.Path(sys.argv[2])
failed = 0
inputs = sorted(folder.glob("*.hex"))
for hexfile in inputs:
    name, fmt = hexfile.stem.rsplit(".", 1)  # launch_gfx11.pm4 -> launch_gfx11, pm4
    gen = name.rsplit("_", 1)[1]
    got = subprocess.run([hcq, "dump", "--raw", fmt, "--gen", gen, str(hexfile)],
                         capture_output=True, text=True, check=False)
    want = hexfile.with_suffix(".expected").read_text()
    if got.returncode != 0 or got.stdout != want:
        failed += 1
        print(f"FAIL {hexfile.name}: exit {got.returncode}\n{got.stderr}")
        for a, b in zip(want.splitlines(), got.stdout.splitlines()):
            if a != b:
                print(f"  expected: {a}\n  got:      {b}")
                break
print(f"{len(inputs) - failed} passed, {failed} failed")
sys.exit(1 if failed or not inputs else 0)
