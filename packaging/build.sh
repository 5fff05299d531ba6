#!/usr/bin/env bash
# build.sh OUTDIR builds OUTDIR/mosaic_<version>_<arch>.deb with dpkg-deb.
#
# Everything in the package is generated from the project's own sources by
# the binary being packaged: the units from units/templates (the templates
# `mosaicctl install --global` renders, with ExecStart=/usr/bin/mosaicctl),
# the man pages and completions from the command tree (`mosaicctl gen`, a
# hidden command). The version is cmd/mosaicctl/version.txt, which the
# binary embeds, so `mosaicctl --version` and the package can never differ.
# GOARCH picks the architecture (amd64, arm64).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/.." && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
GO=${GO:-go}

version=$(tr -d '[:space:]' <"$checkout/cmd/mosaicctl/version.txt")
[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "build.sh: cmd/mosaicctl/version.txt holds $version, not a Debian version" >&2; exit 1; }
goarch=${GOARCH:-$($GO env GOARCH)}
case $goarch in
amd64 | arm64 | riscv64 | ppc64le | s390x) arch=$goarch ;;
386) arch=i386 ;;
*) echo "build.sh: no Debian architecture for GOARCH=$goarch" >&2; exit 1 ;;
esac
catalog=$here/catalog/mosaic.catalog
[ -f "$catalog" ] || { echo "build.sh: $catalog is missing" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
umask 022
mkdir -p "$root/DEBIAN" "$root/usr/bin"

# Static (no cgo in mosaic), so the package needs no libc version;
# -trimpath so the binary names no build directory; urfave_cli_no_docs as
# in the Makefile (it leaves out a Markdown generator mosaicctl never uses).
(cd "$checkout" && CGO_ENABLED=0 GOARCH=$goarch $GO build -tags urfave_cli_no_docs -trimpath -o "$root/usr/bin/mosaicctl" ./cmd/mosaicctl)
# The generators run the packaged binary itself (a host build when
# cross-compiling).
gen=$root/usr/bin/mosaicctl
if [ "$goarch" != "$($GO env GOHOSTARCH)" ]; then
	gen=$stage/mosaicctl-host
	(cd "$checkout" && CGO_ENABLED=0 $GO build -tags urfave_cli_no_docs -o "$gen" ./cmd/mosaicctl)
fi

"$gen" gen units --bin /usr/bin/mosaicctl "$root/usr/lib/systemd/user"
"$gen" gen man "$stage/man"
for page in "$stage"/man/*; do
	sec=${page##*.}
	mkdir -p "$root/usr/share/man/man$sec"
	gzip -9n <"$page" >"$root/usr/share/man/man$sec/$(basename "$page").gz"
done
install -D -m 0644 <("$gen" gen completion bash) "$root/usr/share/bash-completion/completions/mosaicctl"
install -D -m 0644 <("$gen" gen completion zsh) "$root/usr/share/zsh/vendor-completions/_mosaicctl"
install -D -m 0644 <("$gen" gen completion fish) "$root/usr/share/fish/vendor_completions.d/mosaicctl.fish"
install -D -m 0644 "$catalog" "$root/usr/lib/systemd/catalog/mosaic.catalog"

# Maintainer scripts: the shared reload function replaces #MOSAIC_RELOAD#,
# as debhelper fills #DEBHELPER#.
for s in postinst postrm; do
	awk -v f="$here/debian/reload.sh" '/^#MOSAIC_RELOAD#$/ { while ((getline l < f) > 0) print l; next } { print }' \
		"$here/debian/$s" >"$root/DEBIAN/$s"
	chmod 0755 "$root/DEBIAN/$s"
done
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" "$here/debian/control.in" >"$root/DEBIAN/control"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

# Reproducible: every file gets the last commit's time.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$checkout" log -1 --format=%ct 2>/dev/null || echo 0)}
find "$root" -exec touch -h -d "@$epoch" {} +
deb=$out/mosaic_${version}_${arch}.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
