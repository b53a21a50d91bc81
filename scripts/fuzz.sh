#!/bin/bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 60).
# Not part of CI's timed path; record the results in docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=build-fuzz
mkdir -p "$out"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Ilib -Idrivers -Idrivers/amd/compat
       -I/usr/include/libdrm)
common=(lib/core/error.cpp lib/core/decoded.cpp drivers/amd/packets.cpp drivers/amd/targets.cpp drivers/amd/decode.cpp
        drivers/nv/push.cpp drivers/qcom/packets.cpp drivers/qcom/decode.cpp)
clang++ "${flags[@]}" fuzz/fuzz_decoders.cpp "${common[@]}" -o "$out/fuzz_decoders"
clang++ "${flags[@]}" fuzz/fuzz_capture.cpp lib/core/capture_reader.cpp lib/core/error.cpp \
  tools/buffers.cpp -lz -o "$out/fuzz_capture"
# The capture corpus starts from small version-3 captures (memory pieces, kinds, DeviceEnd).
python3 scripts/fuzz_capture_seeds.py "$out/corpus_fuzz_capture"
clang++ "${flags[@]}" fuzz/fuzz_cubin.cpp drivers/nv/cubin.cpp drivers/common/elf.cpp \
  lib/core/error.cpp -lelf -o "$out/fuzz_cubin"
clang++ "${flags[@]}" fuzz/fuzz_code_object.cpp drivers/amd/code_object.cpp drivers/amd/metadata.cpp \
  drivers/common/elf.cpp drivers/common/msgpack.cpp lib/core/error.cpp -lelf -o "$out/fuzz_code_object"
clang++ "${flags[@]}" fuzz/fuzz_msgpack.cpp drivers/common/msgpack.cpp lib/core/error.cpp \
  -o "$out/fuzz_msgpack"
clang++ "${flags[@]}" fuzz/fuzz_ir3.cpp drivers/qcom/ir3_program.cpp lib/core/error.cpp \
  -o "$out/fuzz_ir3"
clang++ "${flags[@]}" fuzz/fuzz_am_discovery.cpp drivers/amd/am/discovery.cpp \
  drivers/amd/emu/am_discovery_writer.cpp lib/core/error.cpp -o "$out/fuzz_am_discovery"
# The discovery corpus starts from the emulated RX 7900 XTX's table.
mkdir -p "$out/corpus_fuzz_am_discovery"
clang++ -std=c++20 -Ilib -Idrivers -x c++ - drivers/amd/emu/am_discovery_writer.cpp \
  lib/core/error.cpp -o "$out/write_gfx1100_discovery" <<'EOF'
#include <cstdio>
#include "amd/emu/am_discovery_writer.hpp"
int main(int, char** argv) {
  const auto t = hcq::amd::emu::gfx1100_discovery_table();
  FILE* f = std::fopen(argv[1], "wb");
  return f && std::fwrite(t.data(), 1, t.size(), f) == t.size() && std::fclose(f) == 0 ? 0 : 1;
}
EOF
"$out/write_gfx1100_discovery" "$out/corpus_fuzz_am_discovery/gfx1100.bin"
clang++ "${flags[@]}" fuzz/fuzz_am_firmware.cpp drivers/amd/am/firmware.cpp lib/core/error.cpp \
  -lzstd -o "$out/fuzz_am_firmware"
clang++ "${flags[@]}" fuzz/fuzz_usb.cpp drivers/usb/asm2464_protocol.cpp \
  drivers/usb/pcie_transport.cpp drivers/usb/pcie_enumerate.cpp lib/os/usb.cpp lib/os/pci.cpp \
  lib/core/error.cpp -lpci -o "$out/fuzz_usb"
clang++ "${flags[@]}" -I. fuzz/fuzz_rdma_wire.cpp rdma/local_wire.cpp -o "$out/fuzz_rdma_wire"
clang++ "${flags[@]}" fuzz/fuzz_capture_ring.cpp lib/core/capture_ring.cpp \
  lib/core/capture_reader.cpp lib/os/shm.cpp lib/os/cleanup.cpp lib/core/error.cpp -lz \
  -o "$out/fuzz_capture_ring"
# The ring corpus: each capture seed's records in an open ring of 4 KiB (RingHeader: magic,
# version, state, capacity, writer pid, generation, start time, dropped, head at 64, tail at
# 128), head just past them.
mkdir -p "$out/corpus_fuzz_capture_ring"
python3 - "$out/corpus_fuzz_capture" "$out/corpus_fuzz_capture_ring" <<'PY'
import struct, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).iterdir())[:16]:
    records = f.read_bytes()[1 + 16:][:4096]  # the target's first byte, the file header
    h = b"HCQCAP\0\0" + struct.pack("<IIQiIQQ", 3, 1, 4096, 0, 0, 0, 0)
    h = h.ljust(64, b"\0") + struct.pack("<Q", len(records))
    h = h.ljust(128, b"\0") + struct.pack("<Q", 0)
    (Path(sys.argv[2]) / f.name).write_bytes(h.ljust(192, b"\0") + records)
PY
# The USB corpus starts from a few completions, a bridge's sysfs and a bridge with a GPU.
python3 scripts/fuzz_usb_seeds.py "$out/corpus_fuzz_usb"
for t in fuzz_decoders fuzz_capture fuzz_cubin fuzz_code_object fuzz_msgpack fuzz_ir3 \
    fuzz_am_discovery fuzz_am_firmware fuzz_usb fuzz_rdma_wire fuzz_capture_ring; do
  mkdir -p "$out/corpus_$t"
  # Seed the ir3 corpus with the demo containers when a build made them.
  if [ "$t" = fuzz_ir3 ]; then cp -n build/kernels/*.ir3 "$out/corpus_$t/" 2>/dev/null || true; fi
  echo "== $t for ${seconds}s"
  # fuzz_usb's hierarchies are up to 8 functions of 0x800 bytes.
  max_len=()
  if [ "$t" = fuzz_usb ]; then max_len=(-max_len=8192); fi
  "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" "${max_len[@]}" \
    "$out/corpus_$t" 2>&1 |
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY" || true
done
