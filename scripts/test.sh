#!/bin/bash
# Builds hcq (installing what is missing) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
meson test -C build --print-errorlogs
