#!/usr/bin/env bash
# Lints the Dockerfile (no Docker daemon needed): dockerfile-utils (npm,
# pinned) for instructions and syntax, then this project's rules: Debian 12
# base images only, the build stage's packages are ones scripts/install-deps.sh
# installs, apt lists are removed, the image runs as the matricxon user, has a
# HEALTHCHECK on /health, and the .dockerignore keeps build folders out.
# usage: dockerfile_lint.sh SOURCE_DIR WORK_DIR   (exit 77 without node/npm)
set -euo pipefail
src=$1
work=$2
dockerfile=$src/Dockerfile
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node/npm not installed (scripts/install-deps.sh installs them): skipping"
  exit 77
fi
mkdir -p "$work"
if [ ! -x "$work/node_modules/.bin/dockerfile-utils" ]; then
  (cd "$work" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
    npm install --no-audit --no-fund --silent dockerfile-utils@0.16.3) ||
    fail "npm install dockerfile-utils@0.16.3"
fi
"$work/node_modules/.bin/dockerfile-utils" lint "$dockerfile" || fail "dockerfile-utils lint"

# The instructions, one a line (continuations joined).
joined=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$dockerfile" | grep -v '^[[:space:]]*#')
froms=$(grep -E '^FROM ' <<<"$joined" | awk '{print $2}')
for image in $froms; do
  [[ "$image" =~ ^debian:bookworm(-slim)?$ ]] || fail "base image $image is not Debian 12 (debian:bookworm[-slim])"
done
[ "$(wc -l <<<"$froms")" -ge 2 ] || fail "expected a build stage and an image stage"

# Packages the build stage installs must be ones the project already uses.
known=$(sed 's/#.*//' "$src/scripts/install-deps.sh" | sed -n '/^pkgs=(/,/)/p' | tr -s ' ()' '\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -v '^pkgs=' || true)
build_stage=$(awk '/^FROM .* AS build/{on=1; next} /^FROM /{on=0} on' <<<"$joined")
wanted=$(grep -oE 'apt-get install [^&]*' <<<"$build_stage" | tr ' ' '\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install)$' || true)
[ -n "$wanted" ] || fail "no apt-get install in the build stage"
for p in $wanted; do
  grep -qx "$p" <<<"$known" || fail "the build stage installs $p, which scripts/install-deps.sh does not"
done

image_stage=$(awk '/^FROM /{n++} n==2' <<<"$joined")
while read -r run; do
  if grep -q 'apt-get install' <<<"$run"; then
    grep -q -- '--no-install-recommends' <<<"$run" || fail "apt-get install without --no-install-recommends: $run"
    grep -q 'rm -rf /var/lib/apt/lists' <<<"$run" || fail "apt lists left in the layer: $run"
  fi
done < <(grep -E '^RUN ' <<<"$joined")
grep -qE '^USER matricxon$' <<<"$image_stage" || fail "the image does not run as the matricxon user"
grep -qE '^HEALTHCHECK .*/health' <<<"$image_stage" || fail "no HEALTHCHECK on /health"
grep -qE '^CMD \["/usr/bin/matricxon", "serve"\]' <<<"$image_stage" || fail "CMD is not matricxon serve"
grep -qE 'apt-get install .*/tmp/matricxon_\*\.deb' <<<"$image_stage" || fail "the image does not install the .deb"
for ignored in .git build/ data/; do
  grep -qxF "$ignored" "$src/.dockerignore" || fail ".dockerignore does not keep $ignored out"
done
echo "ok: the Dockerfile lints clean and keeps the project's rules"
