#!/usr/bin/env bash
# install.sh [DIR] installs the pinned Pi coding agent and the Node 22 it
# needs into DIR, from the npm registry only, and prints on stdout the
# absolute path of an executable `pi` wrapper that runs that Pi with that
# Node:
#
#   MOSAIC_PI=$(contrib/pi/install.sh /opt/mosaic-pi)
#
# DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/pi-<version>.
#
# Why this shape:
#   - The machine's own node may be older than Pi's engines field
#     (>=22.19), so Node comes from the npm package node-linux-<arch>, the
#     platform package that the `node` npm package installs through its
#     preinstall script. Installing the platform package directly needs no
#     install script and gives the same binary.
#   - A second run is fast and offline: a stamp file plus a version check of
#     the installed files decide, and npm is not called.
#   - CI installs as root into a shared directory and the tests run as
#     another user, so the result is made world-readable.
#   - The install goes to a staging directory first and is renamed into
#     place, so an interrupted run never leaves a half-installed Pi that the
#     stamp would vouch for.
#
# Progress goes to stderr; stdout carries only the wrapper path.
set -euo pipefail

PI_PACKAGE=@earendil-works/pi-coding-agent
PI_VERSION=0.85.1
NODE_VERSION=22.23.3

log() { printf 'contrib/pi/install.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "$(uname -m)" in
	x86_64 | amd64) node_arch=x64 ;;
	aarch64 | arm64) node_arch=arm64 ;;
	*) die "unsupported machine $(uname -m)" ;;
esac
node_pkg=node-linux-$node_arch

dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/pi-$PI_VERSION}
umask 022
mkdir -p -- "$dir"
dir=$(cd -- "$dir" && pwd -P)

lib=$dir/lib
node_bin=$lib/node_modules/$node_pkg/bin/node
pi_pkg_dir=$lib/node_modules/$PI_PACKAGE
pi_entry=$pi_pkg_dir/dist/bundle/cli.js
wrapper=$dir/bin/pi
stamp=$dir/.installed
want="pi=$PI_VERSION node=$NODE_VERSION arch=$node_arch"

# package_version FILE prints the "version" of a package.json without
# needing any node: the file is read with sed, which is enough for npm's
# own formatting of a published package.json.
package_version() {
	sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$1" | head -n 1
}

# installed_ok succeeds when DIR already holds exactly the pinned versions.
installed_ok() {
	[[ -f $stamp && $(cat -- "$stamp") == "$want" ]] || return 1
	[[ -x $wrapper && -x $node_bin && -f $pi_entry ]] || return 1
	[[ $(package_version "$pi_pkg_dir/package.json") == "$PI_VERSION" ]] || return 1
	[[ $("$node_bin" --version 2>/dev/null) == "v$NODE_VERSION" ]] || return 1
}

if installed_ok; then
	printf '%s\n' "$wrapper"
	exit 0
fi

# One installer at a time per DIR; a second one waits, then finds the
# first one's result.
exec 9>"$dir/.lock"
if command -v flock >/dev/null 2>&1; then
	flock 9
	if installed_ok; then
		printf '%s\n' "$wrapper"
		exit 0
	fi
fi

command -v npm >/dev/null 2>&1 || die "npm is needed to install from the npm registry"

stage=$(mktemp -d "$dir/.stage.XXXXXX")

log "installing $node_pkg@$NODE_VERSION and $PI_PACKAGE@$PI_VERSION into $dir (about 300 MB on disk, from the npm registry, once)"
# npm at --loglevel=error is silent for the whole download: say every 10 s
# how far it got.
(
	while sleep 10; do
		log "still installing: $(du -sm -- "$stage" 2>/dev/null | cut -f1) MB so far"
	done
) >&2 &
heartbeat=$!
trap 'kill "$heartbeat" 2>/dev/null; rm -rf -- "$stage"' EXIT
# --ignore-scripts: the pinned packages need no install script (Node comes
# as a plain platform package, Pi ships a shrinkwrap of pure JS/wasm deps),
# and a script would be code from the registry running as root in CI.
npm install \
	--prefix "$stage" \
	--no-audit --no-fund --no-update-notifier --ignore-scripts \
	--omit=dev --loglevel=error \
	"$node_pkg@$NODE_VERSION" "$PI_PACKAGE@$PI_VERSION" >&2 ||
	die "npm install failed"
kill "$heartbeat" 2>/dev/null || true

got_pi=$(package_version "$stage/node_modules/$PI_PACKAGE/package.json")
[[ $got_pi == "$PI_VERSION" ]] || die "installed $PI_PACKAGE is $got_pi, want exactly $PI_VERSION"
got_node=$("$stage/node_modules/$node_pkg/bin/node" --version) ||
	die "the installed node does not run"
[[ $got_node == "v$NODE_VERSION" ]] || die "installed node is $got_node, want v$NODE_VERSION"
[[ -f $stage/node_modules/$PI_PACKAGE/dist/bundle/cli.js ]] ||
	die "$PI_PACKAGE@$PI_VERSION has no dist/bundle/cli.js"

rm -f -- "$stamp"
rm -rf -- "$lib"
mv -- "$stage" "$lib"
trap - EXIT

mkdir -p -- "$dir/bin"
# The wrapper names the entry file on a comment line so tools that pin the
# engine by the SHA-256 of its entry file can find it without running it.
cat >"$wrapper.tmp" <<EOF
#!/bin/sh
# Pinned Pi $PI_VERSION on Node $NODE_VERSION, installed by contrib/pi/install.sh.
# pi-entry: $pi_entry
# pi-node: $node_bin
exec "$node_bin" "$pi_entry" "\$@"
EOF
chmod 0755 "$wrapper.tmp"
mv -- "$wrapper.tmp" "$wrapper"

chmod -R a+rX -- "$dir"
printf '%s\n' "$want" >"$stamp"
chmod 0644 -- "$stamp"

installed_ok || die "the installation in $dir does not verify"
log "installed; wrapper: $wrapper"
printf '%s\n' "$wrapper"
