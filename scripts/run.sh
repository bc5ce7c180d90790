#!/usr/bin/env bash
# Sets up and runs Matricxon's main job on a fresh machine: installs the
# Debian packages, builds, writes the default model (a small synthetic one,
# `matricxon make-model`) on first run, and starts a chat with it.
# Extra arguments go to `matricxon chat`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMATRICXON_TESTS=OFF -DMATRICXON_BENCH=OFF >/dev/null
ninja -C build matricxon
models=${MATRICXON_MODELS_DIR:-./data/models}
mkdir -p "$models"
default="$models/default.gguf"
if [ ! -f "$default" ]; then
  ./build/matricxon make-model --preset tiny --vocab 4096 --name default --out "$default"
fi
exec ./build/matricxon chat --model "$default" "$@"
