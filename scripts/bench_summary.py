#!/usr/bin/env python3
"""Summarises Google Benchmark JSON files over rounds: the median, min and max of each
benchmark, with the spread ((max - min) / median).

    python3 scripts/bench_summary.py OUT [--ratio A=B]... [--markdown]

OUT is a folder of round-R-G.json files (scripts/bench_rounds.sh) or JSON files named on the
command line. Each benchmark run (not Google Benchmark's own aggregates) is one sample; with
--benchmark_repetitions each repetition is one. Printed per benchmark: the time per iteration
(real time, in the benchmark's unit), bytes per second where the benchmark sets it, and the
p50_ns counter (the median iteration of a replay benchmark) where present.

--ratio A=B prints A's figure divided by B's, taken within each round (the rounds' figures
are noisy, their ratios less so), then summarised the same way: bytes per second where both
have it, else time. Names are exact (e.g. BM_LoadFile/real_time=BM_ReadFile/real_time).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys


def load_samples(files):
    """{name: {metric: [(round, value), ...]}} from the files' iteration entries."""
    samples = {}
    for path in files:
        m = re.match(r"round-(\d+)-", os.path.basename(path))
        # A round is its folder and number: sittings summarised together keep their rounds apart.
        rnd = (os.path.dirname(os.path.abspath(path)), int(m.group(1))) if m else (path, 0)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"bench_summary.py: cannot read {path}: {e}")
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" or "error_occurred" in b and b["error_occurred"]:
                continue
            metrics = samples.setdefault(b["name"], {})
            unit = b.get("time_unit", "ns")
            metrics.setdefault("time_" + unit, []).append((rnd, float(b["real_time"])))
            if "bytes_per_second" in b:
                metrics.setdefault("GB/s", []).append((rnd, float(b["bytes_per_second"]) / 1e9))
            if "p50_ns" in b:
                metrics.setdefault("p50_ns", []).append((rnd, float(b["p50_ns"])))
    return samples


def stats(values):
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    spread = (hi - lo) / med * 100 if med else float("nan")
    return med, lo, hi, spread


def fmt(v):
    return f"{v:.4g}"


def ratio_values(samples, a, b):
    """Per-round A/B: bytes per second where both have it, else time."""
    for name in (a, b):
        if name not in samples:
            sys.exit(f"bench_summary.py: --ratio: no benchmark named {name!r}")
    if "GB/s" in samples[a] and "GB/s" in samples[b]:
        metric = "GB/s"
    else:
        metric = next(m for m in samples[a] if m.startswith("time_"))
        if metric not in samples[b]:
            sys.exit(f"bench_summary.py: --ratio: {a} and {b} use different time units")
    per_round = {}
    for name, side in ((a, 0), (b, 1)):
        for rnd, v in samples[name][metric]:
            per_round.setdefault(rnd, ([], []))[side].append(v)
    out = []
    for rnd in sorted(per_round, key=str):
        va, vb = per_round[rnd]
        if va and vb and statistics.median(vb):
            out.append(statistics.median(va) / statistics.median(vb))
    return metric, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="a folder of round-*.json files, or JSON files")
    ap.add_argument("--ratio", action="append", default=[], metavar="A=B")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args()
    files = []
    for p in args.inputs:
        files += sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p]
    if not files:
        sys.exit("bench_summary.py: no JSON files")
    samples = load_samples(files)
    rows = []
    for name in sorted(samples):
        for metric, vals in samples[name].items():
            med, lo, hi, spread = stats([v for _, v in vals])
            rows.append((name, metric, len(vals), med, lo, hi, spread))
    for spec in args.ratio:
        a, sep, b = spec.partition("=")
        if not sep:
            sys.exit(f"bench_summary.py: --ratio wants A=B, got {spec!r}")
        metric, vals = ratio_values(samples, a, b)
        if vals:
            med, lo, hi, spread = stats(vals)
            rows.append((f"{a} / {b}", f"ratio of {metric}", len(vals), med, lo, hi, spread))
    head = ("benchmark", "metric", "n", "median", "min", "max", "spread %")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print(f"| `{r[0]}` | {r[1]} | {r[2]} | {fmt(r[3])} | {fmt(r[4])} | {fmt(r[5])} | {r[6]:.0f} |")
        return
    width = max(len(r[0]) for r in rows)
    print(f"{head[0]:<{width}}  {head[1]:<14} {head[2]:>3} {head[3]:>10} {head[4]:>10} {head[5]:>10} {head[6]:>8}")
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:<14} {r[2]:>3} {fmt(r[3]):>10} {fmt(r[4]):>10} {fmt(r[5]):>10} {r[6]:>8.0f}")


if __name__ == "__main__":
    main()
