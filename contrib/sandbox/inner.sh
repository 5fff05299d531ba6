#!/usr/bin/env bash
# inner.sh runs as PID 1 of the sandbox's fresh PID, mount and cgroup
# namespaces (started by sandbox.sh through unshare). It builds an overlay of
# the host's root on a tmpfs, so the booted systemd can never touch the host's
# /tmp, /etc or journal, then execs systemd as the namespace's init.
#
# usage: inner.sh WORKDIR TESTUSER PEERUSER [SHARED_DIR...]
set -euo pipefail

work=$1 testuser=$2 peeruser=$3
shift 3

mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs "$work"
mkdir -p "$work/upper" "$work/work" "$work/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/upper,workdir=$work/work" "$work/root"
root=$work/root

mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=1777 tmpfs "$root/var/tmp"

# The journal is "persistent" only inside the overlay, whose upper layer is
# the tmpfs above: nothing reaches the host's disk. Persistent storage is what
# makes journald split files per user, so `journalctl --user` works as it does
# on a real machine (a volatile journal has no user files).
mkdir -p "$root/run/systemd/journald.conf.d" "$root/var/log/journal"
printf '[Journal]\nStorage=persistent\nSplitMode=uid\nRateLimitIntervalSec=0\n' >"$root/run/systemd/journald.conf.d/sandbox.conf"

# The test users exist only in the overlay. The test user may read the journal
# (as an admin in systemd-journal would) and may run programs as the peer
# user, which is how a test connects to a socket with a second uid.
for u in "$testuser" "$peeruser"; do
	if ! chroot "$root" id -u "$u" >/dev/null 2>&1; then
		chroot "$root" useradd --create-home --shell /bin/bash "$u"
	fi
done
chroot "$root" usermod -a -G systemd-journal "$testuser"
# It may also set journald's rate limit through one fixed root helper, which
# is how a test makes journald drop messages (the sandbox turns the limit off
# above); the helper takes only an interval and a burst, or "off".
cat >"$root/usr/local/sbin/mosaic-sandbox-journald" <<'HELPER'
#!/bin/sh
# usage: mosaic-sandbox-journald ratelimit INTERVAL BURST | ratelimit off
set -eu
conf=/run/systemd/journald.conf.d/zz-test-ratelimit.conf
case "${1:-}:${2:-}" in
ratelimit:off) rm -f "$conf" ;;
ratelimit:*)
	echo "${2:-}" | grep -Eqx '[0-9]+(ms|s|min)?' || { echo "bad interval" >&2; exit 2; }
	echo "${3:-}" | grep -Eqx '[0-9]+' || { echo "bad burst" >&2; exit 2; }
	printf '[Journal]\nRateLimitIntervalSec=%s\nRateLimitBurst=%s\n' "$2" "$3" >"$conf" ;;
*) echo "usage: $0 ratelimit INTERVAL BURST | ratelimit off" >&2; exit 2 ;;
esac
systemctl restart systemd-journald
HELPER
chmod 0755 "$root/usr/local/sbin/mosaic-sandbox-journald"
# And install mosaic's journal message catalog, read from its stdin (so the
# caller's own permissions decide what it can read), as the package does:
# that is how a test sees `journalctl -x` explain an entry.
cat >"$root/usr/local/sbin/mosaic-sandbox-catalog" <<'HELPER'
#!/bin/sh
# usage: mosaic-sandbox-catalog install < mosaic.catalog
set -eu
[ "${1:-}" = install ] || { echo "usage: $0 install < mosaic.catalog" >&2; exit 2; }
mkdir -p /usr/lib/systemd/catalog
head -c 1048576 >/usr/lib/systemd/catalog/mosaic.catalog
journalctl --update-catalog
HELPER
chmod 0755 "$root/usr/local/sbin/mosaic-sandbox-catalog"
# And bind a directory of the test user's at a second place under /mnt
# (and undo it), as a bind of /home elsewhere does: how a test shows that a
# mask covers every place a file is mounted, not only its path.
cat >"$root/usr/local/sbin/mosaic-sandbox-bind" <<'HELPER'
#!/bin/sh
# usage: mosaic-sandbox-bind SRC /mnt/NAME | mosaic-sandbox-bind -u /mnt/NAME
set -eu
dst=${2:-}
echo "$dst" | grep -Eqx '/mnt/mosaic-[A-Za-z0-9_-]+' || { echo "usage: $0 SRC /mnt/mosaic-NAME | -u /mnt/mosaic-NAME" >&2; exit 2; }
case "${1:-}" in
-u) umount "$dst" && rmdir "$dst" ;;
*)
	src=$(realpath -e "${1:-}")
	[ "$(stat -c %U "$src")" = "$SUDO_USER" ] || { echo "$src is not $SUDO_USER's" >&2; exit 2; }
	mkdir -p "$dst" && mount --bind "$src" "$dst" ;;
esac
HELPER
chmod 0755 "$root/usr/local/sbin/mosaic-sandbox-bind"
if [ -d "$root/etc/sudoers.d" ]; then
	{
		printf '%s ALL=(%s) NOPASSWD: ALL\n' "$testuser" "$peeruser"
		printf '%s ALL=(root) NOPASSWD: /usr/local/sbin/mosaic-sandbox-journald\n' "$testuser"
		printf '%s ALL=(root) NOPASSWD: /usr/local/sbin/mosaic-sandbox-catalog install\n' "$testuser"
		printf '%s ALL=(root) NOPASSWD: /usr/local/sbin/mosaic-sandbox-bind\n' "$testuser"
	} >"$root/etc/sudoers.d/mosaic-sandbox"
	chmod 0440 "$root/etc/sudoers.d/mosaic-sandbox"
fi

# Shared directories keep their host path, read-write. Their ancestors get
# o+x in the overlay only, so the non-root test user can reach them even under
# a 0700 home such as /root.
for d in "$@"; do
	[ -d "$d" ] || continue
	mkdir -p "$root$d"
	mount --bind "$d" "$root$d"
	p=$(dirname "$d")
	while [ "$p" != / ]; do
		chmod o+x "$root$p" 2>/dev/null || true
		p=$(dirname "$p")
	done
done

cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot 2>/dev/null || true

export container=other
exec /lib/systemd/systemd --system --unit=basic.target
