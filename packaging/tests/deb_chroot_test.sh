#!/usr/bin/env bash
# Installs the .deb in a clean Debian root (mmdebstrap, chroot) and uses it
# there as an administrator would: the Depends must pull in every library the
# binary needs, postinst must make the user and the 0700 state folder, the
# service must serve as its own user with the unit's settings, reload its API
# keys through the unit's ExecReload line, and stop cleanly; then systemd is
# added, the package reinstalled (the upgrade path, systemd-sysusers and
# systemd-tmpfiles this time) and the installed unit checked with
# systemd-analyze; last, purge.
#
# usage: deb_chroot_test.sh PACKAGE.deb WORK_DIR
# Needs root (chroot, mount) and the Debian mirror. The clean root is built
# once and kept as a tarball (MATRICXON_CHROOT_CACHE, default
# /var/cache/matricxon-test/bookworm-apt.tar; rebuilt after 7 days), the
# packages apt fetches into it are kept beside it. When the root cannot be
# made (no root user, no mirror) the test fails, unless
# MATRICXON_SKIP_CHROOT_TEST=1 says to skip it (exit 77, shown as skipped).
set -euo pipefail

deb=$(realpath "$1")
work=$2
suite=${MATRICXON_CHROOT_SUITE:-bookworm}
mirror=${MATRICXON_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${MATRICXON_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cache=${MATRICXON_CHROOT_CACHE:-/var/cache/matricxon-test/$suite-apt.tar}
archives=$(dirname "$cache")/apt-archives

cannot() {
  if [ "${MATRICXON_SKIP_CHROOT_TEST:-}" = 1 ]; then
    echo "SKIPPED (MATRICXON_SKIP_CHROOT_TEST=1): $*"
    exit 77
  fi
  echo "FAIL: $* (set MATRICXON_SKIP_CHROOT_TEST=1 to skip this test explicitly)"
  exit 1
}
fail() {
  echo "FAIL: $*"
  if [ -f "${root:-/nonexistent}/tmp/serve.log" ]; then
    echo "--- the server's log:"
    tail -n 30 "$root/tmp/serve.log"
  fi
  exit 1
}
step() { echo "== $*"; }

[ "$(id -u)" -eq 0 ] || cannot "needs root for chroot and mount (uid $(id -u))"
command -v mmdebstrap >/dev/null || cannot "mmdebstrap is not installed (scripts/install-deps.sh installs it)"
command -v curl >/dev/null || cannot "curl is not installed"
[ -f "$deb" ] || fail "no package at $1"

# ---- the clean root: from the cache, or made now ----
mkdir -p "$(dirname "$cache")" "$archives"
# One run at a time on a machine: the cached root and apt's archive folder are shared.
exec 9> "$(dirname "$cache")/lock"
flock -w 600 9 || cannot "another run held $(dirname "$cache")/lock for 10 minutes"
if [ -f "$cache" ] && [ -z "$(find "$cache" -mtime +7)" ]; then
  step "clean $suite root from $cache"
else
  step "making a clean $suite root with mmdebstrap from $mirror"
  rm -f "$cache.tmp"
  if ! mmdebstrap --quiet --variant=apt --mode=root --format=tar "$suite" "$cache.tmp" \
      "deb $mirror $suite main" "deb $mirror $suite-updates main" \
      "deb $security $suite-security main"; then
    rm -f "$cache.tmp"
    cannot "mmdebstrap could not make a $suite root from $mirror"
  fi
  mv "$cache.tmp" "$cache"
fi

root=$(realpath -m "$work")/root
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" || true; fi
  for m in var/cache/apt/archives proc; do
    if mountpoint -q "$root/$m"; then umount "$root/$m" || umount -l "$root/$m" || true; fi
  done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
cleanup
mkdir -p "$root"
tar -C "$root" -xf "$cache"
mount -t proc proc "$root/proc"
mount --bind "$archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
in_root() { chroot "$root" "$@"; }  # (paths inside the root, its users)
as_service() { chroot --userspec=matricxon:matricxon "$root" "$@"; }

# ---- install: apt resolves the Depends from the mirror ----
step "apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/matricxon.deb"
in_root apt-get update -qq || cannot "apt-get update in the root failed (no mirror?)"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  /tmp/matricxon.deb > "$work/apt-install.log" 2>&1 || { cat "$work/apt-install.log"; fail "apt-get install"; }

step "the binary finds every library it needs"
missing=$(in_root ldd /usr/bin/matricxon | grep "not found" || true)
[ -z "$missing" ] || fail "the Depends miss libraries: $missing"
version=$(in_root /usr/bin/matricxon --version) || fail "matricxon --version"
echo "$version"
[[ "$version" == "matricxon "*"(commit "* ]] || fail "unexpected --version: $version"
release=$(sed -n 's/^matricxon \([0-9.]*\) .*/\1/p' <<<"$version" | head -n 1)
# shellcheck disable=SC2016  # dpkg-query's own ${...} fields
[ "$(in_root dpkg-query -W -f='${Version}' matricxon)" = "$release-1" ] || fail "package version is not $release-1"

step "postinst: user, state folder, settings file, unit enabled"
entry=$(in_root getent passwd matricxon) || fail "no matricxon user"
IFS=: read -r _ _ uid _ _ home shell <<<"$entry"
[ "$uid" -lt 1000 ] || fail "matricxon is not a system user (uid $uid)"
[ "$home" = /var/lib/matricxon ] || fail "home is $home"
[ "$shell" = /usr/sbin/nologin ] || fail "shell is $shell"
[ "$(in_root stat -c '%a %U %G' "/var/lib/matricxon")" = "700 matricxon matricxon" ] ||
  fail "/var/lib/matricxon is $(in_root stat -c '%a %U %G' "/var/lib/matricxon"), not 700 matricxon matricxon"
[ "$(in_root stat -c '%U' "/var/lib/matricxon/models")" = matricxon ] || fail "models folder owner"
[ "$(in_root stat -c '%a %U' "/etc/matricxon/matricxon.env")" = "600 root" ] || fail "settings file mode"
# shellcheck disable=SC2016
in_root dpkg-query -W -f='${Conffiles}' matricxon | grep -q /etc/matricxon/matricxon.env ||
  fail "/etc/matricxon/matricxon.env is not a conffile"
[ -L "$root/etc/systemd/system/multi-user.target.wants/matricxon.service" ] ||
  fail "postinst did not enable matricxon.service"
unit=$root/usr/lib/systemd/system/matricxon.service
grep -qx 'ExecStart=/usr/bin/matricxon serve' "$unit" || fail "ExecStart is not /usr/bin/matricxon serve"
grep -qx 'EnvironmentFile=-/etc/matricxon/matricxon.env' "$unit" || fail "EnvironmentFile"

step "make-model and chat as the service user"
as_service /usr/bin/matricxon make-model --quiet --preset tiny --out /var/lib/matricxon/models/default.gguf
chat=$(printf 'Hi there\nAnd again\n' | as_service /usr/bin/matricxon chat --threads 1 \
  --model /var/lib/matricxon/models/default.gguf --stats --temperature 0 --max-tokens 8 --ignore-eos 2>&1) ||
  { echo "$chat"; fail "matricxon chat"; }
grep -E '^\[turn 1: prompt [0-9]+ tokens, 0 reused' <<<"$chat" || { echo "$chat"; fail "chat turn 1"; }
grep -E '^\[turn 2: prompt [0-9]+ tokens, [1-9][0-9]* reused' <<<"$chat" || { echo "$chat"; fail "chat turn 2 reused nothing"; }

# ---- serve as the unit would: its user, its Environment= lines, its settings file ----
step "serve with the unit's settings and an API keys file"
printf 'alice-key-0123456789 alice\n' > "$root/etc/matricxon/api_keys"
in_root chown matricxon:matricxon /etc/matricxon/api_keys
chmod 600 "$root/etc/matricxon/api_keys"
printf 'MATRICXON_PORT=0\nMATRICXON_THREADS=1\nMATRICXON_API_KEYS_FILE=/etc/matricxon/api_keys\n' \
  >> "$root/etc/matricxon/matricxon.env"
mapfile -t unit_env < <(sed -n 's/^Environment=//p' "$unit")
mapfile -t file_env < <(grep -E '^[A-Z_]+=' "$root/etc/matricxon/matricxon.env")
(cd "$root" && exec chroot --userspec=matricxon:matricxon "$root" /usr/bin/env -i \
  PATH=/usr/bin:/bin HOME=/var/lib/matricxon "${unit_env[@]}" "${file_env[@]}" \
  /bin/sh -c 'cd /var/lib/matricxon && umask 077 && exec /usr/bin/matricxon serve' \
  > "$root/tmp/serve.log" 2>&1) &
server_pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$root/tmp/serve.log")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "the server exited before listening"
  sleep 0.1
done
[ -n "$port" ] || fail "no listening line in 30 s"
base=http://127.0.0.1:$port

health=$(curl -sf "$base/health") || fail "GET /health"
echo "$health"
grep -q "\"version\":\"$release\"" <<<"$health" || fail "/health does not name version $release"
grep -q '"kernels":"' <<<"$health" || fail "/health does not name the kernels' path"

chat_body() {  # $1: the messages after the system prompt
  printf '{"model":"default","max_tokens":8,"temperature":0,"ignore_eos":true,"messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly and plainly."},%s]}' "$1"
}
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/chat/completions" -d "$(chat_body '{"role":"user","content":"Hi"}')")
[ "$code" = 401 ] || fail "a chat without an API key got $code, not 401"
turn1=$(curl -sf -H 'Authorization: Bearer alice-key-0123456789' "$base/v1/chat/completions" \
  -d "$(chat_body '{"role":"user","content":"Hi"}')") || fail "turn 1"
turn2=$(curl -sf -H 'Authorization: Bearer alice-key-0123456789' "$base/v1/chat/completions" \
  -d "$(chat_body '{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"What can you do?"}')") ||
  fail "turn 2"
cached() { sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' <<<"$1"; }
echo "turn 1 cached_tokens=$(cached "$turn1"), turn 2 cached_tokens=$(cached "$turn2")"
[ "$(cached "$turn1")" = 0 ] || fail "turn 1 came from the cache: $turn1"
[ "$(cached "$turn2")" -gt 0 ] || fail "turn 2 reused nothing: $turn2"
[ "$(in_root stat -c '%a %U' "/var/lib/matricxon/prompt_cache")" = "700 matricxon" ] || fail "prompt_cache mode"
[ "$(in_root stat -c '%a %U' "/var/lib/matricxon/prompt_cache/prompt_cache.key")" = "600 matricxon" ] || fail "key mode"

step "reload the API keys through the unit's ExecReload line"
reload=$(sed -n 's/^ExecReload=//p' "$unit" | sed 's/\$\$/$/g')
printf 'alice-key-0123456789 alice\nbob-key-0123456789ab bob\n' > "$root/etc/matricxon/api_keys.new"
in_root chown matricxon:matricxon /etc/matricxon/api_keys.new
chmod 600 "$root/etc/matricxon/api_keys.new"
mv "$root/etc/matricxon/api_keys.new" "$root/etc/matricxon/api_keys"
MAINPID=$server_pid eval "$reload"
for _ in $(seq 1 100); do
  grep -q "API keys re-read: 2" "$root/tmp/serve.log" && break
  sleep 0.1
done
grep -q "API keys re-read: 2" "$root/tmp/serve.log" || fail "SIGHUP did not re-read the keys"
curl -sf -o /dev/null -H 'Authorization: Bearer bob-key-0123456789ab' "$base/v1/models" || fail "the reloaded key is refused"

step "SIGTERM: the server stops and exits 0"
kill -TERM "$server_pid"
for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "the server did not stop in 30 s"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" = 0 ] || fail "the server exited $rc"

# ---- with systemd: the upgrade path and the installed unit ----
step "apt-get install systemd; reinstall the package (upgrade path)"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd \
  > "$work/apt-systemd.log" 2>&1 || { cat "$work/apt-systemd.log"; fail "apt-get install systemd"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall /tmp/matricxon.deb \
  > "$work/apt-reinstall.log" 2>&1 || { cat "$work/apt-reinstall.log"; fail "reinstall"; }
[ "$(in_root id -u matricxon)" = "$uid" ] || fail "the reinstall changed the user's uid"
[ "$(in_root stat -c '%a %U' "/var/lib/matricxon")" = "700 matricxon" ] || fail "state folder after reinstall"
grep -q MATRICXON_API_KEYS_FILE "$root/etc/matricxon/matricxon.env" || fail "the reinstall replaced the edited settings file"
step "systemd-analyze verify and security in the root"
in_root systemd-analyze verify /usr/lib/systemd/system/matricxon.service || fail "systemd-analyze verify"
in_root systemd-analyze security --offline=yes --threshold=20 /usr/lib/systemd/system/matricxon.service \
  > "$work/security.txt" 2>&1 || { tail -n 30 "$work/security.txt"; fail "exposure above 2.0"; }
tail -n 1 "$work/security.txt"

step "purge"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq matricxon > "$work/apt-purge.log" 2>&1 ||
  { cat "$work/apt-purge.log"; fail "purge"; }
[ ! -e "$root/usr/bin/matricxon" ] || fail "the binary is still there"
[ ! -e "$root/etc/matricxon/matricxon.env" ] || fail "the settings file is still there"
[ ! -e "$root/var/lib/matricxon/prompt_cache" ] || fail "the saved caches are still there"
[ -f "$root/var/lib/matricxon/models/default.gguf" ] || fail "purge deleted the administrator's models"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/matricxon.service" ] || fail "the unit is still enabled"
echo "ok: the package installs, serves, reloads, stops, upgrades and purges in a clean $suite root"
