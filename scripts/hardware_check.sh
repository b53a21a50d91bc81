#!/bin/bash
# Checks hcq on a real GPU, in one go: what the machine shows, `hcq run` (verified results),
# the device, batch and file-load suites on the device (HCQ_TEST_DEVICES), and the device
# benchmarks (HCQ_BENCH_DEVICES) beside the CUDA runtime's figures for the same work where
# bench/cuda_reference was built. Each step has a time limit, so a hang costs only its step.
#
#   scripts/hardware_check.sh DEVICE [OUT_DIR]      e.g. scripts/hardware_check.sh nv:0 hw-out
#
# BIN names the build folder (default: build). OUT_DIR gets tests.json, bench.json, cuda.json
# and the capture and decoded dump of one `hcq run`.
set -u
dev=${1:?usage: hardware_check.sh DEVICE [OUT_DIR]}
out=${2:-hardware-check}
bin=${BIN:-build}
mkdir -p "$out"

step() {
  local limit=$1
  shift
  echo "== $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout --signal=KILL "$limit" "$@"
  echo "== exit $? after $((SECONDS - t0))s"
}

echo "== machine: $(uname -r)"
[ -r /proc/driver/nvidia/version ] && head -1 /proc/driver/nvidia/version
command -v nvidia-smi >/dev/null && nvidia-smi -L
ls -l /dev/nvidia* /dev/kfd /dev/dri 2>/dev/null

step 30 "$bin/tools/hcq" ls --all
step 30 "$bin/tools/hcq" info "$dev"
# The bring-up view of the first GPU on the bus that the device's path opens, and its
# identifying register (read-only).
pci=$("$bin/tools/hcq" ls --all 2>/dev/null | awk '$5 ~ /^(RM|KFD|KGSL|msm)/ {print $1; exit}')
if [ -n "$pci" ]; then
  step 30 "$bin/tools/hcq" pci "$pci"
  case $dev in
    nv:*) step 30 "$bin/tools/hcq" reg "$pci" read NV_PMC_BOOT_0 ;;
    amd:*) step 30 "$bin/tools/hcq" reg "$pci" read GRBM_STATUS ;;
  esac
fi
step 60 "$bin/tools/hcq" run "$dev"
HCQ_CAPTURE="$out/run.hcqcap" step 60 "$bin/tools/hcq" run "$dev" --size 1000003
step 30 "$bin/tools/hcq" dump "$out/run.hcqcap" >"$out/run.dump.txt"
HCQ_TEST_DEVICES=$dev step 150 "$bin/tests/hcq_tests" --gtest_filter='Hardware/*' \
  --gtest_output="json:$out/tests.json"
bench_args=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true
            --benchmark_min_time=0.2 --benchmark_out_format=json)
HCQ_BENCH_DEVICES=$dev step 120 "$bin/bench/hcq_bench" --benchmark_filter="/$dev" \
  "${bench_args[@]}" --benchmark_out="$out/bench.json"
if [ -x "$bin/bench/cuda_reference" ] && [[ $dev == nv:* ]]; then
  step 60 "$bin/bench/cuda_reference" "${bench_args[@]}" --benchmark_out="$out/cuda.json"
fi
# What the kernel driver said (NVIDIA's Xid lines name the method and data a channel error
# came from); reading the log may need root.
dmesg 2>/dev/null | grep -iE 'nvrm|xid|amdgpu|kgsl|msm' | tail -60 >"$out/kernel_log.txt"
