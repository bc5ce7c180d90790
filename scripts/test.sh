#!/usr/bin/env bash
# Builds Matricxon (Release, warnings on) and runs the whole test suite.
# Usage: scripts/test.sh [extra cmake args]   e.g. -DMATRICXON_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${MATRICXON_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 900
