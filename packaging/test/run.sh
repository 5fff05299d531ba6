#!/usr/bin/env bash
# run.sh DEB tests the package from the outside, then installed in a
# systemd sandbox (`make test-deb`; part of `make test`):
#   1. metadata (dpkg-deb -I): name, version = cmd/mosaicctl/version.txt,
#      architecture, exactly the dependencies systemd and dbus-user-session;
#   2. contents (dpkg-deb -c): exactly the expected files, root-owned, with
#      their modes, nothing outside /usr; the units name /usr/bin/mosaicctl
#      and equal what the packaged binary renders; `--version` matches;
#   3. every man page renders with `man --warnings` silent;
#   4. installed.sh, as root in a sandbox whose / is an overlay on tmpfs:
#      apt install, the end-to-end path as a user with no checkout, a
#      reinstall that leaves the running conversation alone, completions,
#      purge; then this host has no trace of the package.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/../.." && pwd)
deb=${1:?usage: run.sh DEB}
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
fail() { echo "packaging test: FAIL: $*" >&2; exit 1; }
pass() { echo "packaging test: ok: $*"; }

version=$(tr -d '[:space:]' <"$checkout/cmd/mosaicctl/version.txt")
arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "mosaic_${version}_${arch}.deb" ] || fail "package file $(basename "$deb"), want mosaic_${version}_${arch}.deb"

# 1. Metadata.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = mosaic ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), want $version"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture: $(field Architecture)"
[ "$(field Depends)" = "systemd, dbus-user-session" ] || fail "Depends: $(field Depends)"
for f in Recommends Suggests Pre-Depends Conflicts Breaks Replaces Provides; do
	[ -z "$(field "$f")" ] || fail "unexpected $f: $(field "$f")"
done
info=$(dpkg-deb -I "$deb")
for s in postinst postrm; do
	grep -Eq "^ +[0-9]+ bytes, +[0-9]+ lines +\\* +$s " <<<"$info" || fail "no executable $s"
done
for s in preinst prerm; do
	if grep -Eq " $s " <<<"$info"; then fail "a $s: nothing should run before unpacking or removal"; fi
done
pass "metadata: mosaic $version $arch, Depends: systemd, dbus-user-session"

# 2. Contents: the exact list of files, owner and mode.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/x"
"$work/x/usr/bin/mosaicctl" gen man "$work/man"
{
	echo "-rwxr-xr-x root/root ./usr/bin/mosaicctl"
	echo "-rw-r--r-- root/root ./usr/lib/systemd/catalog/mosaic.catalog"
	echo "-rw-r--r-- root/root ./usr/lib/systemd/user/mosaic-conv@.service"
	echo "-rw-r--r-- root/root ./usr/lib/systemd/user/mosaic-conv@.socket"
	echo "-rw-r--r-- root/root ./usr/lib/systemd/user/mosaic-web.service"
	echo "-rw-r--r-- root/root ./usr/lib/systemd/user/mosaic-web.socket"
	echo "-rw-r--r-- root/root ./usr/share/bash-completion/completions/mosaicctl"
	echo "-rw-r--r-- root/root ./usr/share/fish/vendor_completions.d/mosaicctl.fish"
	echo "-rw-r--r-- root/root ./usr/share/zsh/vendor-completions/_mosaicctl"
	for p in "$work"/man/*; do
		n=$(basename "$p")
		echo "-rw-r--r-- root/root ./usr/share/man/man${n##*.}/$n.gz"
	done
} | sort >"$work/want"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $1, $2, $6 }' | sort >"$work/got"
diff -u "$work/want" "$work/got" || fail "contents differ from the expected list (- want, + got)"
if dpkg-deb -c "$deb" | awk '{ print $6 }' | grep -Ev '^\./(usr/.*)?$' >&2; then
	fail "files outside /usr"
fi
dpkg-deb -c "$deb" | awk '$1 ~ /^d/ && $2 != "root/root" { bad = 1 } END { exit bad }' || fail "a directory not owned by root"
for v in prompt stop attach conv; do
	[ -f "$work/man/mosaicctl-$v.1" ] || fail "no man page mosaicctl-$v(1)"
done
[ -f "$work/man/mosaic-conv@.service.5" ] || fail "no mosaic-conv@.service(5)"
"$work/x/usr/bin/mosaicctl" gen units --bin /usr/bin/mosaicctl "$work/units"
for u in mosaic-conv@.socket mosaic-conv@.service mosaic-web.socket mosaic-web.service; do
	cmp -s "$work/units/$u" "$work/x/usr/lib/systemd/user/$u" || fail "$u differs from what the binary renders"
done
grep -qx 'ExecStart=/usr/bin/mosaicctl serve --conversation %i' "$work/x/usr/lib/systemd/user/mosaic-conv@.service" ||
	fail "the service does not run /usr/bin/mosaicctl"
[ "$("$work/x/usr/bin/mosaicctl" --version)" = "mosaicctl version $version" ] || fail "mosaicctl --version says $("$work/x/usr/bin/mosaicctl" --version)"
[[ $(ldd "$work/x/usr/bin/mosaicctl" 2>&1) == *"not a dynamic executable"* ]] || fail "mosaicctl is not statically linked (the package declares no libc)"
pass "contents: $(wc -l <"$work/got") files, units render /usr/bin/mosaicctl, --version $version"

# 3. Man pages render without a warning.
n=0
for p in "$work"/x/usr/share/man/man*/*.gz; do
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) || fail "man -l $p failed: $w"
	[ -z "$w" ] || fail "man --warnings -l $(basename "$p"): $w"
	[ "$(MANWIDTH=80 man -l "$p" 2>/dev/null | wc -l)" -gt 10 ] || fail "$(basename "$p") renders almost nothing"
	n=$((n + 1))
done
pass "man: $n pages render without warnings"

# 4. Installed, in a sandbox.
host_had_bin=0
[ -e /usr/bin/mosaicctl ] && host_had_bin=1
bash "$checkout/contrib/sandbox/sandbox.sh" run --root --setenv "MOSAIC_DEB=$deb" \
	--setenv "MOSAIC_CHECKOUT=$checkout" -- bash "$here/installed.sh"
# The sandbox's / was an overlay on tmpfs: the host never saw the package.
if dpkg-query -W mosaic >/dev/null 2>&1; then fail "the host's dpkg database knows mosaic after the sandbox"; fi
[ ! -e /usr/lib/systemd/user/mosaic-conv@.socket ] || fail "the host has /usr/lib/systemd/user/mosaic-conv@.socket after the sandbox"
if [ "$host_had_bin" = 0 ] && [ -e /usr/bin/mosaicctl ]; then fail "the host has /usr/bin/mosaicctl after the sandbox"; fi
pass "installed in the sandbox; the host is untouched"
