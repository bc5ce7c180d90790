#!/usr/bin/env bash
# Installs the Debian packages Matricxon builds and tests with. Idempotent:
# packages already present are skipped, and apt-get update runs only when
# something is missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      libssl-dev libcpp-httplib-dev nlohmann-json3-dev libpcre2-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libpng-dev libjpeg-dev libwebp-dev libgif-dev
      gnuplot-nox
      libedit-dev          # the chat's line editor (BSD licence)
      dpkg-dev file        # cpack -G DEB: dpkg-shlibdeps computes the package's Depends
      mmdebstrap systemd   # the .deb's test in a clean Debian root; systemd-analyze verify
      python3 curl jq      # the chat's pty test; the first-run demo (scripts/run.sh)
      chromium fonts-dejavu-core)  # the status page's browser test (headless; its fonts)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (for the test that drives the server with the official openai
# package) may come from another packaging that bundles npm (NodeSource): only
# install what is absent, so Debian's npm never fights a bundled one.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
