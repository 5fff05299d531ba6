#!/usr/bin/env bash
# installed.sh runs as root in the sandbox's system manager (run.sh): apt
# installs $MOSAIC_DEB while the test user's manager is already running,
# and the user, who has no checkout and never ran `mosaicctl install`,
# drives a conversation from the installed files only (user.sh). The engine
# the user "installed" is the checkout's pinned Pi ($MOSAIC_PI) and the
# model the checkout's stub model. Between the prompt and the stop the
# package is reinstalled (the upgrade path of the maintainer scripts): the
# running controller and engine must not notice. The removal must name
# what still runs, and purge must leave the user's conversations and
# claims.
set -euo pipefail
fail() { echo "installed.sh: FAIL: $*" >&2; exit 1; }
pass() { echo "packaging test: ok: $*"; }
deb=${MOSAIC_DEB:?} checkout=${MOSAIC_CHECKOUT:?}
: "${MOSAIC_PI:?MOSAIC_PI must name the pinned Pi}"
user=mosaic-test
uid=$(id -u "$user")
home=$(getent passwd "$user" | cut -d: -f6)
export DEBIAN_FRONTEND=noninteractive

asuser() {
	systemd-run --machine="$user@" --user --wait --pipe --quiet --collect \
		--setenv=MOSAIC_PI="$MOSAIC_PI" --setenv=MOSAIC_CHECKOUT="$checkout" \
		-- bash "$checkout/packaging/test/user.sh" "$@"
}
uctl() { systemctl --machine="$user@" --user "$@"; }

# Lingering, as for any user whose conversations outlive a login: without
# it logind stops the user manager, and every conversation with it, once
# the last process of the user that is not a service ends.
loginctl enable-linger "$user"
systemctl is-active --quiet "user@$uid.service" || fail "the test user's manager is not running before the install"
[ ! -e /usr/bin/mosaicctl ] || fail "/usr/bin/mosaicctl exists before the install"
[ "$(uctl show -p LoadState --value mosaic-conv@probe.socket)" = not-found ] || fail "mosaic-conv@.socket is known before the install"

apt-get install -y -q "$deb" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install $deb"; }
pass "apt-get install $(basename "$deb")"
# postinst reloaded the running user manager: the template is loaded from
# the package's directory with no reload pending.
[ "$(uctl show -p FragmentPath --value mosaic-conv@probe.socket)" = /usr/lib/systemd/user/mosaic-conv@.socket ] ||
	fail "the user manager does not load mosaic-conv@.socket from /usr/lib/systemd/user: $(uctl show -p FragmentPath,LoadState mosaic-conv@probe.socket)"
[ "$(uctl show -p NeedDaemonReload --value mosaic-conv@probe.service)" = no ] || fail "the user manager needs a daemon-reload after the install"

asuser start
id=$(cat "$home/.mosaic-deb-test-id")
svc=mosaic-conv@$id.service
pid=$(uctl show -p MainPID --value "$svc")
[ "$pid" != 0 ] || fail "$svc has no main process after the prompt"
mapfile -t scopes < <(uctl list-units --plain --no-legend --state=active "mosaic-engine-*" | awk '{ print $1 }')
[ "${#scopes[@]}" -gt 0 ] || fail "no active engine scope after the prompt"

# The user manager's loaded definition of the running service is made
# older than the file the reinstall writes back (systemd flags a reload
# when the file's mtime is newer than the one it loaded): only the reload
# by postinst then clears NeedDaemonReload.
touch -d @1 /usr/lib/systemd/user/mosaic-conv@.service
uctl daemon-reload
[ "$(uctl show -p NeedDaemonReload --value "$svc")" = no ] || fail "$svc needs a reload right after one"
# The upgrade path: prerm upgrade, postinst configure OLD-VERSION.
apt-get install -y -q --reinstall "$deb" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install --reinstall"; }
diag() { uctl status --no-pager "$svc" "${scopes[@]}" || true; journalctl --no-pager -n 40 _UID="$uid" || true; }
[ "$(uctl show -p MainPID --value "$svc")" = "$pid" ] || { diag; fail "the reinstall restarted $svc (main pid $pid -> $(uctl show -p MainPID --value "$svc"))"; }
[ "$(uctl show -p NeedDaemonReload --value "$svc")" = no ] || fail "postinst did not reload the user manager: $svc needs a daemon-reload"
for s in "${scopes[@]}"; do
	uctl is-active --quiet "$s" || fail "the reinstall ended the engine scope $s"
done
pass "reinstall (upgrade path): the user manager reloaded, controller pid $pid and engine scope kept"

# A global uninstall asks every user's manager (root may use each one's
# private socket): refused while the test user's engine runs, with the
# user named, and the files stay; once the conversation stops it removes
# what install --global wrote.
/usr/bin/mosaicctl install --global >/dev/null || fail "mosaicctl install --global"
rc=0
out=$(/usr/bin/mosaicctl uninstall --global 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ $out == *engine-alive* ]] && [[ $out == *"uid $uid ($user)"* ]] ||
	fail "uninstall --global under a running engine: exit $rc, want 2 and engine-alive naming uid $uid ($user): $out"
[ -e /etc/systemd/user/mosaic-conv@.socket ] || fail "the refused uninstall --global removed /etc/systemd/user/mosaic-conv@.socket"
pass "uninstall --global refused while uid $uid's engine runs: $out"

asuser stop "$id"

out=$(/usr/bin/mosaicctl uninstall --global 2>&1) || fail "uninstall --global after the stop: $out"
[ ! -e /etc/systemd/user/mosaic-conv@.socket ] || fail "uninstall --global left /etc/systemd/user/mosaic-conv@.socket"
pass "uninstall --global once nothing runs"

# The removal names what still runs: here the conversation's socket,
# whose next connection would start nothing.
uctl start "mosaic-conv@$id.socket"
apt-get purge -y -q mosaic >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get purge mosaic"; }
grep -q "mosaic: removed while $user still runs: mosaic-conv@$id.socket" /tmp/apt.log ||
	{ cat /tmp/apt.log; fail "the removal did not name the running mosaic-conv@$id.socket"; }
uctl stop "mosaic-conv@$id.socket"
pass "removal named mosaic-conv@$id.socket, still running"
[ ! -e /usr/bin/mosaicctl ] && [ ! -e /usr/lib/systemd/user/mosaic-conv@.service ] || fail "purge left package files"
[ "$(uctl show -p LoadState --value mosaic-conv@probe2.socket)" = not-found ] || fail "the user manager still knows mosaic-conv@.socket after the purge"
[ -n "$(ls -A "$home/.config/mosaic/conversations")" ] || fail "purge removed the user's conversations"
[ -d "$home/.local/state/mosaic/claims" ] || fail "purge removed the user's claims"
pass "purge: package files gone, the user's conversations and claims kept"
