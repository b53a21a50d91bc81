#!/usr/bin/env python3
"""Prints what failed in a meson test run: each failing test's name, result and time, the
GoogleTest cases it names as failed with the end of each case's output, and the end of its log.

    .ci/failed_tests.py BUILD_DIR [LINES]

Reads BUILD_DIR/meson-logs/testlog.json (one JSON object a line, one line a test). Exits 0
whether or not anything failed: it only reports. A missing or unreadable log is said in one line.
"""
import json
import re
import sys

PASSED = {"OK", "SKIP", "EXPECTEDFAIL"}
# A GoogleTest case's output runs from its "[ RUN      ]" line to its "[  FAILED  ]" line.
RUN = re.compile(r"^\[ RUN      \] (\S+)")
# "[  FAILED  ] Suite.Case (12 ms)", or for a parameterized case "[  FAILED  ] Targets/S.C/p,
# where GetParam() = "p" (12 ms)".
FAILED = re.compile(r"^\[  FAILED  \] ([^\s,]+)(?:, where .*)?(?: \(\d+ ms\))?$")
# A sanitizer's report starts here and ends the process: no "[  FAILED  ]" line follows it.
SANITIZER = re.compile(r"^==\d+==ERROR: |runtime error: |^SUMMARY: \w+Sanitizer")


def tail(lines, n):
    return lines[-n:] if len(lines) > n else lines


def failed_cases(lines, n):
    """(case, last n lines of its output) for each GoogleTest case that failed."""
    cases, start, seen = [], {}, set()
    for i, line in enumerate(lines):
        m = RUN.match(line)
        if m:
            start[m.group(1)] = i
            continue
        m = FAILED.match(line)
        if m and m.group(1) in start and m.group(1) not in seen:
            seen.add(m.group(1))
            cases.append((m.group(1), tail(lines[start[m.group(1)]:i + 1], n)))
    return cases


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path = sys.argv[1] + "/meson-logs/testlog.json"
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 60
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"(no test log to read: {path}: {e})")
        return 0
    failed = [r for r in records if r.get("result") not in PASSED]
    if not failed:
        print(f"(no failed test in {path})")
        return 0
    print(f"{len(failed)} of {len(records)} tests failed in {sys.argv[1]}:")
    for r in failed:
        print(f"  FAILED: {r.get('name')} ({r.get('result')}, {r.get('duration', 0):.1f} s,"
              f" exit {r.get('returncode')})")
    for r in failed:
        out = (r.get("stdout") or "") + (r.get("stderr") or "")
        lines = out.splitlines()
        print(f"\n==== {r.get('name')}: {r.get('result')}")
        print("command: " + " ".join(r.get("command") or []))
        cases = failed_cases(lines, n)
        for case, body in cases:
            print(f"---- failed case {case}:")
            print("\n".join(body))
        report = next((i for i, line in enumerate(lines) if SANITIZER.search(line)), None)
        if report is not None:
            print(f"---- the sanitizer's report (from line {report + 1} of the log):")
            print("\n".join(lines[report:report + 2 * n]))
        print(f"---- last {min(n, len(lines))} lines of its log:")
        print("\n".join(tail(lines, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
