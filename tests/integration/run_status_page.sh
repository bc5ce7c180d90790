#!/usr/bin/env bash
# Runs status_page.mjs (puppeteer-core driving Debian's chromium, headless)
# against a real `matricxon serve` on port 0 with an admin token and a
# generated model. Usage: run_status_page.sh <matricxon> <work dir> <artifacts dir>
# Installs the pinned puppeteer-core into <work dir>/node_modules when it is
# missing: a failed install (no registry) fails the test; only a machine
# without node, npm or chromium skips it, and scripts/install-deps.sh
# installs all three. Screenshots: <artifacts dir>/status-page-{desktop,phone}.png.
set -euo pipefail
BIN="$1"
WORK="$2"
ARTIFACTS="$3"
PUPPETEER="puppeteer-core@24.43.1"  # Node >= 18; drives the chromium Debian ships
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$WORK" "$ARTIFACTS"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node/npm not installed (scripts/install-deps.sh installs them): skipping"; exit 77
fi
CHROMIUM="${MATRICXON_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "chromium not installed (scripts/install-deps.sh installs it): skipping"; exit 77
fi
if [ ! -f "$WORK/node_modules/puppeteer-core/package.json" ] ||
   [ "$(node -p "require('$WORK/node_modules/puppeteer-core/package.json').version")" != "${PUPPETEER#*@}" ]; then
  (cd "$WORK" && { [ -f package.json ] || echo '{"private":true,"type":"module"}' > package.json; } \
     && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --silent "$PUPPETEER") \
    || { echo "FAIL: npm install $PUPPETEER failed (is the npm registry reachable?)"; exit 1; }
fi
cp "$HERE/status_page.mjs" "$WORK/status_page.mjs"
TMP="$(mktemp -d)"
mkdir -p "$TMP/models"
"$BIN" make-model --out "$TMP/models/tiny.gguf" --quiet
TOKEN="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# A 1 MiB RAM budget: the pool bar shows the tiny model's entries at a visible width.
MATRICXON_MODELS_DIR="$TMP/models" MATRICXON_PROMPT_CACHE_DIR="$TMP/prompt_cache" MATRICXON_ADMIN_TOKEN="$TOKEN" \
  MATRICXON_PROMPT_CACHE_BUDGET_MB=1 \
  "$BIN" serve --port 0 --threads 1 > "$TMP/server.log" 2>&1 &
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
if ! timeout 120 node "$WORK/status_page.mjs" "http://127.0.0.1:$PORT" "$TOKEN" "$ARTIFACTS" "$CHROMIUM"; then
  echo "--- server log (last 40 lines) ---"; tail -n 40 "$TMP/server.log"; exit 1
fi
