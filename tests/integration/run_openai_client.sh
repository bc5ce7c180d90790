#!/usr/bin/env bash
# Runs openai_client.mjs (the official `openai` npm package) against a real
# `matricxon serve` on port 0, with a synthetic model "tiny" (ChatML) and one
# "tools" that carries Qwen 3's real chat template (Hermes tool calls).
# Usage: run_openai_client.sh <matricxon> <work dir> <template golden .json>
# Installs openai 5.x into <work dir>/node_modules when it is missing or of
# another major version (a failed install fails the test; only a machine without
# node/npm skips it, and scripts/install-deps.sh installs both). Version 4 is not
# used: its node-fetch 2.7 reports "Premature close" on every streamed reply
# under Debian 12's Node 18.20.4, from any server (Node's own http server too).
set -euo pipefail
BIN="$1"
WORK="$2"
TEMPLATE_JSON="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$WORK"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node/npm not installed: skipping"; exit 77
fi
installed="$(cat "$WORK/node_modules/openai/package.json" 2>/dev/null | grep -o '"version": *"[0-9]*' | grep -o '[0-9]*$' || true)"
if [ "$installed" != "5" ]; then
  (cd "$WORK" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } \
     && npm install --no-audit --no-fund --silent openai@5) || { echo "npm install openai@5 failed"; exit 1; }
fi
cp "$HERE/openai_client.mjs" "$WORK/openai_client.mjs"
TMP="$(mktemp -d)"
mkdir -p "$TMP/models"
"$BIN" make-model --out "$TMP/models/tiny.gguf" --quiet
node -e 'const fs=require("fs"); fs.writeFileSync(process.argv[2], JSON.parse(fs.readFileSync(process.argv[1])).template)' \
  "$TEMPLATE_JSON" "$TMP/tools.jinja"
"$BIN" make-model --out "$TMP/models/tools.gguf" --chat-template "$TMP/tools.jinja" --quiet
MATRICXON_MODELS_DIR="$TMP/models" MATRICXON_PROMPT_CACHE_DIR="$TMP/prompt_cache" "$BIN" serve --port 0 --threads 1 > "$TMP/server.log" 2>&1 &
PID=$!
cleanup() { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
PORT=""
for _ in $(seq 1 300); do
  PORT="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/server.log" | grep -o '[0-9]*$' || true)"
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || { echo "server did not start:"; cat "$TMP/server.log"; exit 1; }
node "$WORK/openai_client.mjs" "http://127.0.0.1:$PORT/v1" tiny tools
