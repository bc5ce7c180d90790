#!/usr/bin/env bash
# Sets up and runs Matricxon's main job on a fresh machine: installs the
# Debian packages, builds, writes the default model (a small synthetic one,
# `matricxon make-model`) on first run, and starts the server on
# http://127.0.0.1:8080 serving every model in ./data/models.
# Once the server answers, it shows the prompt cache at work: two curl
# commands (a chat's first turn, then the whole chat resent with one more
# message, as chat front ends do) and what they returned; the second turn's
# usage.prompt_tokens_details.cached_tokens counts the prompt tokens it did
# not read again. MATRICXON_DEMO=0 leaves the demo out.
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
  # A vocabulary of 400 holds only tokens that spell text (the synthetic
  # tokenizer learns fewer merges than that; a larger one is padded with
  # unused tokens that print as nothing): replies are random, not empty.
  ./build/matricxon make-model --preset tiny --vocab 400 --name default --out "$default"
fi
export MATRICXON_MODELS_DIR="$models"

# Where the server will listen, from the same flags and variables serve reads.
host=${MATRICXON_HOST:-127.0.0.1}
port=${MATRICXON_PORT:-8080}
keys=${MATRICXON_API_KEYS_FILE:-}
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --host) host=${args[i + 1]:-$host} ;;
    --host=*) host=${args[i]#--host=} ;;
    --port) port=${args[i + 1]:-$port} ;;
    --port=*) port=${args[i]#--port=} ;;
    --api-keys-file) keys=${args[i + 1]:-} ;;
    --api-keys-file=*) keys=${args[i]#--api-keys-file=} ;;
  esac
done
case "$host" in 0.0.0.0 | :: | "[::]") host=127.0.0.1 ;; esac
[[ "$host" == *:* ]] && host="[$host]"

demo() {
  local base="http://$host:$port" filter='{reply: .choices[0].message.content, usage}'
  for _ in $(seq 1 600); do  # up to a minute for the server to answer
    curl -sf -o /dev/null "$base/health" && break
    sleep 0.1
  done
  local health
  health=$(curl -sf "$base/health") || return 0
  local version turn out=()
  version=$(jq -r '"\(.version) (commit \(.commit), kernels \(.kernels))"' <<<"$health")
  if [ -z "$keys" ]; then  # run the two turns first: the block below then prints in one piece
    for turn in 1 2; do
      out+=("$(curl -s "$base/v1/chat/completions" -d @"scripts/demo/turn$turn.json" | jq -c "$filter")")
    done
  fi
  {
    echo
    echo "Matricxon $version is up: $base/ shows the status page."
    echo "The prompt cache at work: a chat's first turn, then the whole chat sent again with one more"
    echo "message, as chat front ends do (the default model has random weights: its replies are noise,"
    echo "8 tokens each):"
    for turn in 1 2; do
      echo "  curl -s $base/v1/chat/completions -d @scripts/demo/turn$turn.json | jq -c '$filter'"
    done
    if [ -n "$keys" ]; then
      echo "(this server wants an API key: add -H 'Authorization: Bearer KEY' to both)"
    else
      echo "  turn 1 -> ${out[0]}"
      echo "  turn 2 -> ${out[1]}"
      echo "The second turn's cached_tokens are the prompt tokens taken from the cache instead of read again."
      if [ "$(jq -r '.usage.prompt_tokens_details.cached_tokens // 0' <<<"${out[0]}")" != 0 ]; then
        echo "Turn 1 came from the cache too: an earlier run saved this chat to disk, and saved caches"
        echo "outlive restarts (MATRICXON_PROMPT_CACHE_DIR, here ${MATRICXON_PROMPT_CACHE_DIR:-./data/prompt_cache})."
      fi
    fi
    echo
  } >&2
}
if [ "${MATRICXON_DEMO:-1}" != 0 ] && [ "$port" != 0 ]; then
  demo &
fi
exec ./build/matricxon serve "$@"
