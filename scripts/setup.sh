#!/bin/bash
# Installs what hcq needs on Debian 12 (as root), then configures and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(meson ninja-build pkg-config g++ clang lld python3 libdrm-dev libpci-dev liburing-dev
      libibverbs-dev ibverbs-providers rdma-core
      libboost-dev libelf-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev clang-19 lld-19
      libclang-rt-dev libcli11-dev nlohmann-json3-dev pci.ids libzstd-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# HCQ_MESON_ARGS: extra options for a fresh build/ (CI passes -Dwerror=true -Ddebug=false).
[ -f build/build.ninja ] || meson setup build ${HCQ_MESON_ARGS:-} >/dev/null
ninja -C build
