#!/usr/bin/env bash
# Runs the benchmark programs in N interleaved rounds (default 5), each group of benchmarks in
# its own process, the groups in a different order every round, and writes one JSON file per
# round and group: OUT/round-R-G.json. scripts/bench_summary.py OUT prints the median, min and
# max of every benchmark over the rounds. docs/performance.md says how the figures are taken.
#
#   scripts/bench_rounds.sh [-n ROUNDS] [-o OUT] [-b BENCH] [-g FILTER]... [-- ARGS...]
#
#   -n ROUNDS  rounds (default 5)
#   -o OUT     output folder (default bench-rounds-YYYYMMDD-HHMMSS); must not hold rounds yet
#   -b BENCH   the benchmark program (default build/bench/hcq_bench)
#   -g FILTER  a group: a --benchmark_filter regex run as one process; repeat for more groups
#              (default: the groups below)
#   ARGS       passed to every run (e.g. --benchmark_repetitions=3)
set -euo pipefail

rounds=5
out="bench-rounds-$(date +%Y%m%d-%H%M%S)"
bench=build/bench/hcq_bench
groups=()
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) rounds="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    -b) bench="$2"; shift 2 ;;
    -g) groups+=("$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "bench_rounds.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
extra=("$@")
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_rounds.sh: -n wants a positive count, got '$rounds'" >&2; exit 2; }
[[ -x "$bench" ]] || { echo "bench_rounds.sh: no benchmark program at $bench (build it, or pass -b)" >&2; exit 1; }
if [[ ${#groups[@]} -eq 0 ]]; then
  # Each group runs alone in its process, so one group's threads and memory do not linger
  # into another's figures; the file load and read() share a group (their ratio is the
  # figure), as do the staged copy and memcpy.
  groups=(
    '^BM_Encode'
    '^BM_HostSignalRoundTrip|^BM_EmulatedEmptyLaunch'
    '^BM_StagedCopyIn|^BM_Memcpy'
    '^BM_LoadFile/|^BM_ReadFile'
    '^BM_BatchCompile|^BM_BatchReplay8Changed/|^BM_BatchReplayCpuOnly'
    '^BM_BatchReplay8ChangedEvery2ms|^BM_BatchReplayChangedBindings|^BM_BatchRunAndWait'
  )
fi
mkdir -p "$out"
if compgen -G "$out/round-*.json" >/dev/null; then
  echo "bench_rounds.sh: $out already holds rounds; pass another -o" >&2
  exit 1
fi
{
  echo "date: $(date -Is)"
  echo "host: $(uname -srm), $(nproc) CPUs"
  echo "bench: $bench"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "rounds: $rounds"
  echo "args: ${extra[*]:-}"
  for i in "${!groups[@]}"; do echo "group $i: ${groups[$i]}"; done
} > "$out/README.txt"

n=${#groups[@]}
for ((r = 1; r <= rounds; r++)); do
  # Round r starts at group (r - 1) mod n and walks the groups forward on odd rounds and
  # backward on even ones, so no group always runs first or always follows the same one.
  for ((j = 0; j < n; j++)); do
    if ((r % 2)); then g=$(((r - 1 + j) % n)); else g=$(((r - 1 - j + 2 * n) % n)); fi
    file="$out/round-$r-$g.json"
    echo "round $r/$rounds, group $g: ${groups[$g]}" >&2
    "$bench" --benchmark_filter="${groups[$g]}" --benchmark_format=json \
      --benchmark_out="$file" --benchmark_out_format=json "${extra[@]}" >/dev/null
  done
done
echo "wrote $((rounds * n)) files to $out; summary: python3 scripts/bench_summary.py $out" >&2
