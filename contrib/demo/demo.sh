#!/usr/bin/env bash
# demo.sh is the README's main job: a mosaic conversation socket-activated
# by a real systemd user manager. It uses this user's manager when one
# answers; as root on a machine without one (CI, containers) it boots the
# test sandbox (contrib/sandbox) and runs the demo there as a normal user.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/../.." && pwd)
export MOSAIC_BIN_DIR=${MOSAIC_BIN_DIR:-$checkout/.build/bin}

if [ "$(id -u)" != 0 ] && systemctl --user show-environment >/dev/null 2>&1; then
	exec bash "$here/inner.sh"
fi
if [ "$(id -u)" = 0 ]; then
	echo "demo: no user manager for root here; booting a systemd sandbox (see docs/sandbox.md)" >&2
	exec bash "$checkout/contrib/sandbox/sandbox.sh" run -- bash "$here/inner.sh"
fi
echo "demo: no systemd user manager answers (systemctl --user); log in through systemd-logind, or run as root to use the sandbox" >&2
exit 1
