#!/usr/bin/env python3
"""Writes a copy of a .def file with exactly one line replaced (the moved-field test's layout).

Usage: move_field.py IN OUT OLD_LINE NEW_LINE. Fails when OLD_LINE is not in IN exactly once,
so the test cannot silently run on an unchanged layout.
"""
import sys

src, dst, old, new = sys.argv[1:5]
lines = open(src).read().split("\n")
hits = [i for i, line in enumerate(lines) if line.startswith(old)]
if len(hits) != 1:
    sys.exit(f"{src}: expected one line starting with {old!r}, found {len(hits)}")
lines[hits[0]] = new
with open(dst, "w") as f:
    f.write("\n".join(lines))
