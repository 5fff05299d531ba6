#!/usr/bin/env bash
# sandbox.sh boots a real systemd (PID 1 of its own PID, mount and cgroup
# namespaces, over an overlay of /) with a user manager for a non-root test
# user, runs one command inside that user manager as a transient service, and
# tears everything down. See ../../docs/sandbox.md.
#
# usage: sandbox.sh run [--share DIR]... [--setenv NAME=VALUE]... [--root] -- CMD [ARG...]
#
#   --share DIR       bind DIR read-write at the same path (repeatable; the
#                     checkout holding this script is always shared)
#   --setenv N=V      set N in the command's environment (repeatable); CI,
#                     MOSAIC_*, GOTRACEBACK, GORACE and GOMAXPROCS pass through
#   --root            run CMD as root in the sandbox's system manager instead
#
# It needs root, unshare and nsenter (util-linux), systemd, dbus and
# dbus-user-session. Exit status: CMD's, or 125 when the sandbox did not boot.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/../.." && pwd)
testuser=${MOSAIC_SANDBOX_USER:-mosaic-test}
peeruser=${MOSAIC_SANDBOX_PEER:-mosaic-peer}

die() { echo "sandbox: $*" >&2; exit 125; }

cg2mount() {
	awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup2") { print $5; exit } break } }' /proc/self/mountinfo
}

init_pid=""
unshare_pid=""
cgroup=""
work=""
log=""

teardown() {
	set +e
	if [ -n "$init_pid" ]; then kill -KILL "$init_pid" 2>/dev/null; fi
	if [ -n "$unshare_pid" ]; then wait "$unshare_pid" 2>/dev/null; fi
	if [ -n "$cgroup" ] && [ -d "$cgroup" ]; then
		for _ in $(seq 1 100); do
			# Deepest first: a cgroup can only go once its children are gone.
			find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null
			[ -d "$cgroup" ] || break
			sleep 0.05
		done
		[ -d "$cgroup" ] && echo "sandbox: could not remove $cgroup" >&2
	fi
	if [ -n "$work" ]; then rm -rf "$work"; fi
	if [ -n "$log" ]; then rm -f "$log"; fi
}

in_ns() { nsenter -t "$init_pid" -p -m -C -- "$@"; }

boot() {
	[ "$(id -u)" = 0 ] || die "needs root (it boots systemd in new namespaces)"
	for c in unshare nsenter /lib/systemd/systemd; do
		command -v "$c" >/dev/null || die "$c not found: apt-get install systemd dbus-user-session util-linux"
	done
	local cg2
	cg2=$(cg2mount)
	[ -n "$cg2" ] || die "no cgroup2 mount in /proc/self/mountinfo"
	cgroup="$cg2/mosaic-sandbox-$$-$RANDOM"
	mkdir "$cgroup" || die "cannot create cgroup $cgroup"
	work=$(mktemp -d /var/tmp/mosaic-sandbox.XXXXXX)
	log=$(mktemp /var/tmp/mosaic-sandbox-log.XXXXXX)
	# The subshell joins the sandbox cgroup before unshare, so the new cgroup
	# namespace is rooted there and two sandboxes never see each other.
	(
		echo "$BASHPID" >"$cgroup/cgroup.procs"
		exec unshare --cgroup --pid --fork --mount --propagation private -- \
			bash "$here/inner.sh" "$work" "$testuser" "$peeruser" "${shares[@]}"
	) </dev/null >"$log" 2>&1 &
	unshare_pid=$!
	for _ in $(seq 1 200); do
		init_pid=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')
		[ -n "$init_pid" ] && break
		kill -0 "$unshare_pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$init_pid" ] || { cat "$log" >&2; die "namespace init did not start"; }
	local state=""
	for _ in $(seq 1 300); do
		state=$(in_ns systemctl is-system-running 2>/dev/null || true)
		case "$state" in running|degraded) break ;; esac
		kill -0 "$init_pid" 2>/dev/null || break
		sleep 0.1
	done
	case "$state" in
	running|degraded) ;;
	*) tail -n 50 "$log" >&2; die "systemd in the sandbox did not come up (state: ${state:-none})" ;;
	esac
	test_uid=$(in_ns id -u "$testuser") || die "no test user $testuser"
	in_ns systemctl start "user@$test_uid.service" || die "user manager for $testuser did not start"
}

run() {
	shares=("$checkout")
	local envs=() as_root=0
	while [ $# -gt 0 ]; do
		case "$1" in
		--share) shares+=("$(cd "$2" && pwd)"); shift 2 ;;
		--setenv) envs+=("$2"); shift 2 ;;
		--root) as_root=1; shift ;;
		--) shift; break ;;
		*) die "unknown option $1" ;;
		esac
	done
	[ $# -gt 0 ] || die "no command"
	local name
	while IFS= read -r name; do
		envs+=("$name=${!name}")
	done < <(compgen -e | grep -E '^(CI|MOSAIC_[A-Z0-9_]+|GOTRACEBACK|GORACE|GOMAXPROCS)$' || true)
	envs+=("MOSAIC_SANDBOX=1" "MOSAIC_SANDBOX_PEER=$peeruser" "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin")

	trap teardown EXIT
	trap 'exit 130' INT TERM
	boot

	# The host's pid of the sandbox's PID 1, for a command that tells the
	# caller how to reach inside (nsenter -t).
	envs+=("MOSAIC_SANDBOX_INIT=$init_pid")
	local setenv=() e
	for e in "${envs[@]}"; do setenv+=("--setenv=$e"); done
	local rc=0
	if [ "$as_root" = 1 ]; then
		in_ns systemd-run --quiet --wait --pipe --collect --working-directory="$PWD" \
			"${setenv[@]}" -- "$@" || rc=$?
	else
		in_ns runuser -u "$testuser" -- env \
			"XDG_RUNTIME_DIR=/run/user/$test_uid" \
			"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$test_uid/bus" \
			systemd-run --user --quiet --wait --pipe --collect --working-directory="$PWD" \
			"${setenv[@]}" -- "$@" || rc=$?
	fi
	return "$rc"
}

case "${1:-}" in
run) shift; run "$@" ;;
*) echo "usage: $0 run [--share DIR]... [--setenv N=V]... [--root] -- CMD [ARG...]" >&2; exit 2 ;;
esac
