#!/usr/bin/env bash
# Sets up and runs Matricxon's main job on a fresh machine: installs the
# Debian packages, builds, writes the default model (a small synthetic one,
# `matricxon make-model`) on first run, and starts the server on
# http://127.0.0.1:8080 serving every model in ./data/models.
# Extra arguments go to `matricxon serve` (see `matricxon serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build matricxon
models=${MATRICXON_MODELS_DIR:-./data/models}
mkdir -p "$models"
default="$models/default.gguf"
if [ ! -f "$default" ]; then
  ./build/matricxon make-model --preset tiny --name default --out "$default"
fi
export MATRICXON_MODELS_DIR="$models"
exec ./build/matricxon serve "$@"
