#!/usr/bin/env bash
# demo.sh is the README's main job: a real conversation with the pinned Pi
# under a real systemd user manager (contrib/demo/inner.sh has the story).
# It uses this user's manager when one answers; as root on a machine
# without one (CI, containers) it boots the test sandbox (contrib/sandbox)
# and runs the demo there as a normal user.
#
#   demo.sh [--provider P --model M [--agent-dir DIR]]
#
# Without flags Pi talks to the project's stub model (no API key). With
# them it uses that model; Pi reads its key from the agent dir (auth.json,
# written by `pi` at login; default ~/.pi/agent), because the engine's
# environment is sealed and never carries credentials.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/../.." && pwd)
export MOSAIC_BIN_DIR=${MOSAIC_BIN_DIR:-$checkout/.build/bin}
export MOSAIC_PI=${MOSAIC_PI:-$(bash "$checkout/contrib/pi/install.sh" "$checkout/.build/pi")}

share=()
while [ $# -gt 0 ]; do
	case "$1" in
	--provider) export MOSAIC_DEMO_PROVIDER=$2; shift 2 ;;
	--model) export MOSAIC_DEMO_MODEL=$2; shift 2 ;;
	--agent-dir) export MOSAIC_DEMO_AGENT_DIR=$(cd "$2" && pwd); share+=(--share "$MOSAIC_DEMO_AGENT_DIR"); shift 2 ;;
	*) echo "usage: $0 [--provider P --model M [--agent-dir DIR]]" >&2; exit 2 ;;
	esac
done

# The proof and a copy of the session file go to .build/demo, which the
# sandbox shares (it shares the checkout).
export MOSAIC_DEMO_DIR=$checkout/.build/demo
mkdir -p "$MOSAIC_DEMO_DIR"
# A tmux socket an older demo left there may belong to another sandbox
# user (the directory is sticky): this process, not the sandbox, removes it.
rm -f "$MOSAIC_DEMO_DIR/session.jsonl" "$MOSAIC_DEMO_DIR/proof.json" "$MOSAIC_DEMO_DIR/tmux.sock"
# On a terminal, wait a little for a watcher to attach to the pane.
if [ -t 1 ]; then
	export MOSAIC_DEMO_WAIT=${MOSAIC_DEMO_WAIT:-20}
fi

if [ "$(id -u)" != 0 ] && systemctl --user show-environment >/dev/null 2>&1; then
	exec bash "$here/inner.sh"
fi
if [ "$(id -u)" = 0 ]; then
	echo "demo: no user manager for root here; booting a systemd sandbox (see docs/sandbox.md)" >&2
	# The sandbox's unprivileged user writes there.
	chmod 1777 "$MOSAIC_DEMO_DIR"
	export MOSAIC_DEMO_SANDBOX=1
	status=0
	bash "$checkout/contrib/sandbox/sandbox.sh" run "${share[@]}" -- bash "$here/inner.sh" || status=$?
	# Give .build/demo back as the checkout's: the sandbox user's uid may
	# be a real user's on this machine.
	chmod 0755 "$MOSAIC_DEMO_DIR"
	kept=()
	for f in "$MOSAIC_DEMO_DIR/session.jsonl" "$MOSAIC_DEMO_DIR/proof.json"; do
		[ -f "$f" ] && kept+=("$f") && chown "$(stat -c %u:%g "$checkout")" "$f"
	done
	echo
	if [ "$status" != 0 ]; then
		echo "demo failed (exit $status) in a throwaway systemd sandbox, which is gone with its files${kept[*]:+; kept: ${kept[*]}}"
		exit "$status"
	fi
	echo "demo done in a throwaway systemd sandbox, now gone with its units, conversation and project; kept on this machine: ${kept[*]:-nothing}"
	exit 0
fi
echo "demo: no systemd user manager answers (systemctl --user); log in through systemd-logind, or run as root to use the sandbox" >&2
exit 1
