#!/usr/bin/env bash
# install.sh [DIR] installs the pinned Claude Code CLI into DIR, from the npm
# registry only, checks the SHA-256 of its native binary, and prints on
# stdout the absolute path of that binary:
#
#   MOSAIC_CLAUDE=$(contrib/claude/install.sh /opt/mosaic-claude)
#
# DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/claude-<version>.
#
# Why this shape:
#   - @anthropic-ai/claude-code@2.1.328 is a thin npm package whose
#     postinstall copies a native (Bun) ELF from the optional platform
#     package @anthropic-ai/claude-code-<os>-<arch> over bin/claude.exe.
#     The two files are identical (DIGEST §0), so the install runs with
#     --ignore-scripts (no registry code runs as root in CI) and the path
#     printed is the platform package's `claude` itself: no node is needed
#     at run time, and the engine pin covers exactly one file.
#   - The SHA-256 is checked here against the one the digest recorded, so a
#     registry that serves other bytes under the same version fails the
#     install, not a later conversation.
#   - The binary is never run here: running it without the variables that
#     disable auto-update, telemetry, error reporting and nonessential
#     traffic would reach the network. Its version is read from the
#     package.json beside it; engine/claude pins the version by running it
#     with the sealed environment.
#   - Fast offline reruns, a lock, a staging directory renamed into place
#     (contrib/lib/npm-install.sh, shared with contrib/pi/install.sh) and a
#     world-readable result (CI installs as root; tests run as another
#     user).
#
# Progress goes to stderr; stdout carries only the binary's path.
set -euo pipefail

CLAUDE_PACKAGE=@anthropic-ai/claude-code
CLAUDE_VERSION=2.1.328
# linux-x64 is the platform the digest recorded; another platform has
# another binary and so another hash, which this script does not know.
CLAUDE_SHA256_linux_x64=a982d38030b97e750848add2cbb2df6d9a70d5544a22ca9b216a349ba25865e8

log_prefix=contrib/claude/install.sh
# shellcheck source=../lib/npm-install.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../lib/npm-install.sh"

case "$(uname -s)-$(uname -m)" in
	Linux-x86_64 | Linux-amd64) plat=linux-x64 want_sha=$CLAUDE_SHA256_linux_x64 ;;
	*) die "no pinned Claude Code binary for $(uname -s) $(uname -m) (only linux-x64 is pinned)" ;;
esac
plat_pkg=$CLAUDE_PACKAGE-$plat

dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/mosaic/claude-$CLAUDE_VERSION}
umask 022
mkdir -p -- "$dir"
dir=$(cd -- "$dir" && pwd -P)

lib=$dir/lib
bin=$lib/node_modules/$plat_pkg/claude
stamp=$dir/.installed
want="claude=$CLAUDE_VERSION plat=$plat sha256=$want_sha"

sha() { sha256sum -- "$1" | cut -d' ' -f1; }

# installed_ok succeeds when DIR holds exactly the pinned binary. The hash
# is recomputed every time (about a second for 373 MB): the stamp alone
# would vouch for a file changed since.
installed_ok() {
	[[ -f $stamp && $(cat -- "$stamp") == "$want" ]] || return 1
	[[ -x $bin ]] || return 1
	[[ $(package_version "$lib/node_modules/$plat_pkg/package.json") == "$CLAUDE_VERSION" ]] || return 1
	[[ $(sha "$bin") == "$want_sha" ]] || return 1
}

result=$bin
done_if_installed
lock_dir

log "installing $CLAUDE_PACKAGE@$CLAUDE_VERSION ($plat) into $dir (about 380 MB on disk, from the npm registry, once)"
# The platform package is named explicitly, at the same version, so npm's
# optional-dependency resolution (os/cpu filters, --omit=optional in a
# user's npmrc) cannot leave it out silently. An older node only warns
# about the package's engines field (>=22); the binary needs no node.
npm_stage "$CLAUDE_PACKAGE@$CLAUDE_VERSION" "$plat_pkg@$CLAUDE_VERSION"

got=$(package_version "$stage/node_modules/$plat_pkg/package.json")
[[ $got == "$CLAUDE_VERSION" ]] || die "installed $plat_pkg is $got, want exactly $CLAUDE_VERSION"
[[ -f $stage/node_modules/$plat_pkg/claude ]] || die "$plat_pkg@$CLAUDE_VERSION has no claude binary"
got_sha=$(sha "$stage/node_modules/$plat_pkg/claude")
[[ $got_sha == "$want_sha" ]] ||
	die "$plat_pkg@$CLAUDE_VERSION/claude has sha256 $got_sha, want $want_sha (the registry served other bytes; refusing)"
chmod 0755 -- "$stage/node_modules/$plat_pkg/claude"

rm -f -- "$stamp"
rm -rf -- "$lib"
mv -- "$stage" "$lib"
trap - EXIT

chmod -R a+rX -- "$dir"
printf '%s\n' "$want" >"$stamp"
chmod 0644 -- "$stamp"

installed_ok || die "the installation in $dir does not verify"
log "installed; binary: $bin"
printf '%s\n' "$bin"
