#!/bin/bash
# Checks hcq on a real GPU, in one go: what the machine shows (read-only), `hcq run` (verified
# results), the device, batch and file-load suites on the device (HCQ_TEST_DEVICES), and the
# launch benchmarks (HCQ_BENCH_DEVICES) beside the CUDA runtime's figures for the same work
# where bench/cuda_reference was built. On an NVIDIA device (nv:N, or emu:sm_XX for a dry run)
# the benchmarks run as an A/B matrix of the driver's switches (drivers/nv/options.hpp): the
# current path, each switch alone, then all together; the suites run with all of them on.
# Each step has a time limit and the whole run a budget (BUDGET_S, default 330 s: a rerun fits
# a 15-minute device session), so a hang costs only its step. Read-only on the machine: it
# never resets the GPU, rebinds its driver, or changes clocks, power limits or MIG mode.
#
#   scripts/hardware_check.sh DEVICE [OUT_DIR]      e.g. scripts/hardware_check.sh nv:0 hw-out
#
# BIN names the build folder (default: build). OUT_DIR gets facts.json (the machine: RM
# version, RDMA NICs), tests.json, ab-<config>.json per configuration of the matrix (Google
# Benchmark JSON), cuda.json, ab_summary.txt, the capture and decoded dump of one `hcq run`,
# and log.txt (everything printed).
set -u
dev=${1:?usage: hardware_check.sh DEVICE [OUT_DIR]}
out=${2:-hardware-check}
bin=${BIN:-build}
budget=${BUDGET_S:-330}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1

# step LIMIT CMD...: runs CMD for at most LIMIT seconds, and never past the budget.
step() {
  local limit=$1
  shift
  local left=$((budget - SECONDS))
  if [ "$left" -lt 5 ]; then
    echo "== skipped (budget of ${budget}s spent): $*"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout --signal=KILL "$limit" "$@"
  echo "== exit $? after $((SECONDS - t0))s"
}

# ---- read-only facts ------------------------------------------------------------------
echo "== machine: $(uname -r)"
rm_version=$(cat /proc/driver/nvidia/version 2>/dev/null)
[ -n "$rm_version" ] && echo "$rm_version"
command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L
ls -l /dev/nvidia* /dev/kfd /dev/dri 2>/dev/null
infiniband=$(ls /sys/class/infiniband 2>/dev/null)
echo "== /sys/class/infiniband: ${infiniband:-(none)}"
ibv=""
if command -v ibv_devinfo >/dev/null; then
  ibv=$(timeout 20 ibv_devinfo 2>&1)
  echo "$ibv"
else
  echo "== ibv_devinfo: not installed"
fi
if command -v python3 >/dev/null; then
  RM_VERSION="$rm_version" IB="$infiniband" IBV="$ibv" KERNEL="$(uname -r)" python3 -c '
import json, os
print(json.dumps({"kernel": os.environ["KERNEL"], "nvidia_version": os.environ["RM_VERSION"],
                  "infiniband": os.environ["IB"].split(), "ibv_devinfo": os.environ["IBV"]},
                 indent=1))' >"$out/facts.json"
fi

step 20 "$bin/tools/hcq" ls --all
step 20 "$bin/tools/hcq" info "$dev"
# The bring-up view of the first GPU on the bus that the device's path opens, and its
# identifying register (read-only).
pci=$("$bin/tools/hcq" ls --all 2>/dev/null | awk '$5 ~ /^(RM|KFD|KGSL|msm)/ {print $1; exit}')
if [ -n "$pci" ]; then
  step 20 "$bin/tools/hcq" pci "$pci"
  case $dev in
    nv:*) step 20 "$bin/tools/hcq" reg "$pci" read NV_PMC_BOOT_0 ;;
    amd:*) step 20 "$bin/tools/hcq" reg "$pci" read GRBM_STATUS ;;
  esac
fi

# ---- the A/B matrix: the launch benchmarks under each configuration --------------------
# Round trip, 1,000 launches with one wait, and replays of 10 to 10,000 calls; every
# repetition is kept in the JSON (bench_summary.py takes medians over them).
case $dev in
  nv:* | emu:sm_*) nv=1 ;;
  *) nv=0 ;;
esac
configs=(base)
[ "$nv" = 1 ] && configs=(base gpfifo_host qmd_by_address all)
# switches CONFIG: the switches' values for a configuration, in $gpfifo_host and $qmd.
switches() {
  gpfifo_host=0 qmd=0
  case $1 in
    gpfifo_host) gpfifo_host=1 ;;
    qmd_by_address) qmd=1 ;;
    all) gpfifo_host=1 qmd=1 ;;
  esac
}
# (Names end in /real_time, /iterations:50/manual_time: the filter anchors only the start.)
filter="^BM_(EmptyLaunchRoundTrip|EmptyLaunchThroughput)/$dev/|^BM_BatchReplay8Changed/$dev/calls:[0-9]+/idle:0/"
bench_args=("--benchmark_repetitions=${REPS:-3}" --benchmark_display_aggregates_only=true
            "--benchmark_min_time=${MIN_TIME:-0.1}" --benchmark_out_format=json)
for c in "${configs[@]}"; do
  switches "$c"
  HCQ_NV_GPFIFO_HOST=$gpfifo_host HCQ_NV_QMD_BY_ADDRESS=$qmd HCQ_BENCH_DEVICES=$dev \
    step 60 "$bin/bench/hcq_bench" --benchmark_filter="$filter" "${bench_args[@]}" \
    --benchmark_out="$out/ab-$c.json"
done
if [ -x "$bin/bench/cuda_reference" ] && [[ $dev == nv:* ]]; then
  step 45 "$bin/bench/cuda_reference" \
    --benchmark_filter='EmptyLaunch|GraphRelaunch8Changed' "${bench_args[@]}" \
    --benchmark_out="$out/cuda.json"
fi
if command -v python3 >/dev/null; then
  for f in "$out"/ab-*.json "$out"/cuda.json; do
    [ -s "$f" ] || continue
    echo "== $(basename "$f")"
    python3 "$(dirname "$0")/bench_summary.py" "$f"
  done >"$out/ab_summary.txt" 2>&1
  cat "$out/ab_summary.txt"
fi

# ---- ordering safety and results: hcq run and the suites, all switches on ----------------
switches "$([ "$nv" = 1 ] && echo all || echo base)"
export HCQ_NV_GPFIFO_HOST=$gpfifo_host HCQ_NV_QMD_BY_ADDRESS=$qmd
step 30 "$bin/tools/hcq" run "$dev"
HCQ_CAPTURE="$out/run.hcqcap" step 30 "$bin/tools/hcq" run "$dev" --size 1000003
step 20 "$bin/tools/hcq" dump "$out/run.hcqcap" >"$out/run.dump.txt"
HCQ_TEST_DEVICES=$dev step 120 "$bin/tests/hcq_tests" --gtest_filter='Hardware/*' \
  --gtest_output="json:$out/tests.json"

# What the kernel driver said (NVIDIA's Xid lines name the method and data a channel error
# came from); reading the log may need root.
dmesg 2>/dev/null | grep -iE 'nvrm|xid|amdgpu|kgsl|msm' | tail -60 >"$out/kernel_log.txt"
echo "== done in ${SECONDS}s (budget ${budget}s); results in $out"
