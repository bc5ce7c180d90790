#!/usr/bin/env bash
# Checks the service files as `cmake --install` lays them out: the unit passes
# `systemd-analyze verify` (no complaint about it at all) and its exposure
# (`systemd-analyze security --offline`) stays at or under 2.0; the sysusers.d
# snippet makes a system user with /var/lib/matricxon as home and no login,
# and the tmpfiles.d snippet makes that folder 0700, owned by the user
# (both applied to an empty root with --root, nothing on this machine changes).
# usage: systemd_unit_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1
work=$(realpath -m "$2")
fail() { echo "FAIL: $*"; exit 1; }
for tool in systemd-analyze systemd-sysusers systemd-tmpfiles; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs systemd)"
done
rm -rf "$work"
stage=$work/stage
# Any prefix works; one whose ExecStart exists lets verify check the binary too.
cmake --install "$build" --prefix "$stage" > "$work.install.log" 2>&1 || { cat "$work.install.log"; fail "cmake --install"; }
unit=$stage/lib/systemd/system/matricxon.service
[ -f "$unit" ] || fail "no unit at $unit"
grep -qx "ExecStart=$stage/bin/matricxon serve" "$unit" || fail "ExecStart does not name the installed binary"
grep -qx "EnvironmentFile=-$stage/etc/matricxon/matricxon.env" "$unit" || fail "EnvironmentFile"
[ -f "$stage/etc/matricxon/matricxon.env" ] || fail "no settings file"
[ "$(stat -c '%a' "$stage/etc/matricxon/matricxon.env")" = 600 ] || fail "the settings file is not mode 0600"
for doc in README.md CHANGELOG.md LICENSE copyright docs/install.md; do
  [ -f "$stage/share/doc/matricxon/$doc" ] || fail "share/doc/matricxon/$doc is not installed"
done

rc=0
out=$(systemd-analyze verify "$unit" 2>&1) || rc=$?
echo "$out"
[ "$rc" = 0 ] || fail "systemd-analyze verify exited $rc"
if grep -q "matricxon.service" <<<"$out"; then fail "systemd-analyze verify complains about the unit"; fi
security=$(systemd-analyze security --offline=yes --threshold=20 "$unit" 2>&1) ||
  { echo "$security"; fail "exposure above 2.0"; }
tail -n 1 <<<"$security"
for option in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
              StateDirectory=matricxon StateDirectoryMode=0700 User=matricxon; do
  grep -qx "$option" "$unit" || fail "the unit lacks $option"
done
grep -q '^ExecReload=.*kill -HUP' "$unit" || fail "no ExecReload sending SIGHUP"

root=$work/root
mkdir -p "$root/etc"
touch "$root/etc/passwd" "$root/etc/group" "$root/etc/shadow" "$root/etc/gshadow"
systemd-sysusers --root="$root" "$stage/lib/sysusers.d/matricxon.conf" || fail "systemd-sysusers"
IFS=: read -r name _ uid gid _ home shell < <(grep '^matricxon:' "$root/etc/passwd") || fail "no user made"
{ [ "$name" = matricxon ] && [ "$uid" -lt 1000 ]; } || fail "matricxon is not a system user (uid $uid)"
{ [ "$home" = /var/lib/matricxon ] && [ "$shell" = /usr/sbin/nologin ]; } || fail "home $home, shell $shell"
if [ "$(id -u)" -ne 0 ]; then
  echo "not root: the tmpfiles.d ownership check (chown) did not run"
  exit 77
fi
systemd-tmpfiles --root="$root" --create "$stage/lib/tmpfiles.d/matricxon.conf" || fail "systemd-tmpfiles"
[ "$(stat -c '%a %u %g' "$root/var/lib/matricxon")" = "700 $uid $gid" ] ||
  fail "/var/lib/matricxon is $(stat -c '%a %u %g' "$root/var/lib/matricxon"), not 700 $uid $gid"
[ "$(stat -c '%u' "$root/var/lib/matricxon/models")" = "$uid" ] || fail "models folder owner"
echo "ok: the unit verifies, its exposure is low, the user and state folder come out right"
