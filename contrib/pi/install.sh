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
#   - CI installs as root into a shared directory and the tests run as
#     another user, so the result is made world-readable.
#   - Fast offline reruns, a lock, a staging directory renamed into place:
#     contrib/lib/npm-install.sh, shared with contrib/claude/install.sh.
#
# Progress goes to stderr; stdout carries only the wrapper path.
set -euo pipefail

PI_PACKAGE=@earendil-works/pi-coding-agent
PI_VERSION=0.85.1
NODE_VERSION=22.23.3

log_prefix=contrib/pi/install.sh
# shellcheck source=../lib/npm-install.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/npm-install.sh"

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

# installed_ok succeeds when DIR already holds exactly the pinned versions.
installed_ok() {
	[[ -f $stamp && $(cat -- "$stamp") == "$want" ]] || return 1
	[[ -x $wrapper && -x $node_bin && -f $pi_entry ]] || return 1
	[[ $(package_version "$pi_pkg_dir/package.json") == "$PI_VERSION" ]] || return 1
	[[ $("$node_bin" --version 2>/dev/null) == "v$NODE_VERSION" ]] || return 1
}

result=$wrapper
done_if_installed
lock_dir

log "installing $node_pkg@$NODE_VERSION and $PI_PACKAGE@$PI_VERSION into $dir (about 300 MB on disk, from the npm registry, once)"
# No install script is needed: the pinned packages need none (Node comes
# as a plain platform package, Pi ships a shrinkwrap of pure JS/wasm deps).
npm_stage "$node_pkg@$NODE_VERSION" "$PI_PACKAGE@$PI_VERSION"

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
