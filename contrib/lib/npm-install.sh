# Sourced by contrib/pi/install.sh and contrib/claude/install.sh: the steps
# of installing pinned npm packages into a directory that do not depend on
# the package. The caller sets log_prefix, dir (absolute) and result (what
# to print when done) and defines installed_ok before calling these.
#
# The shape both share, and why:
#   - A second run is fast and offline: installed_ok decides, and npm is
#     not called.
#   - One installer at a time per directory (flock); a second one waits,
#     then finds the first one's result.
#   - The install goes to a staging directory that the caller renames into
#     place, so an interrupted run never leaves a half-installed package
#     that the stamp would vouch for.
#   - --ignore-scripts: no install script from the registry runs (as root,
#     in CI); each caller says why its packages need none.

log() { printf '%s: %s\n' "$log_prefix" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# package_version FILE prints the "version" of a package.json without
# needing any node: npm's own formatting of a published package.json is
# enough for sed.
package_version() {
	sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$1" | head -n 1
}

# done_if_installed prints $result and exits when installed_ok holds.
done_if_installed() {
	if installed_ok; then
		printf '%s\n' "$result"
		exit 0
	fi
}

# lock_dir takes the per-directory lock (fd 9, held until exit), then
# checks again: another installer may have finished meanwhile.
lock_dir() {
	exec 9>"$dir/.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
		done_if_installed
	fi
}

# npm_stage SPEC... installs the package specs into a fresh staging
# directory under $dir, named in $stage, saying every 10 s how far the
# silent download got; the EXIT trap removes the stage unless the caller
# clears the trap after moving it into place.
npm_stage() {
	command -v npm >/dev/null 2>&1 || die "npm is needed to install from the npm registry"
	stage=$(mktemp -d "$dir/.stage.XXXXXX")
	(
		while sleep 10; do
			log "still installing: $(du -sm -- "$stage" 2>/dev/null | cut -f1) MB so far"
		done
	) >&2 &
	heartbeat=$!
	trap 'kill "$heartbeat" 2>/dev/null; rm -rf -- "$stage"' EXIT
	npm install \
		--prefix "$stage" \
		--no-audit --no-fund --no-update-notifier --ignore-scripts \
		--omit=dev --loglevel=error \
		"$@" >&2 ||
		die "npm install failed"
	kill "$heartbeat" 2>/dev/null || true
}
