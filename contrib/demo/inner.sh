#!/usr/bin/env bash
# inner.sh runs the demo as a user whose systemd user manager is running:
# install the units, a conversation with the pinned Pi 0.85.1 against the
# project's stub model (or a real model: MOSAIC_DEMO_PROVIDER,
# MOSAIC_DEMO_MODEL, MOSAIC_DEMO_AGENT_DIR), `mosaicctl attach` watching in
# tmux, a prompt that streams an answer and runs a tool whose child calls
# setsid, a confirmed force stop with its proof verified offline, the
# journal audit, and a recovery.
#
# The attached pane's tmux server listens where tmux puts it by default
# (tmux -L mosaic-demo: /tmp/tmux-UID), a directory every confined engine
# gets a private one of in its place: in the checkout, a tool of the
# demo's engine would reach the pane's server, have it start a process
# outside the cohort and take control as the operator. MOSAIC_DEMO_DIR
# (demo.sh sets it to the checkout's .build/demo) keeps the proof and a
# copy of the session file after the demo. MOSAIC_DEMO_WAIT is how many seconds to wait for someone to attach
# (demo.sh sets it when its output is a terminal; 0 otherwise).
set -euo pipefail
bin=$MOSAIC_BIN_DIR/mosaicctl
pi=${MOSAIC_PI:?MOSAIC_PI must name the pinned Pi (make demo installs it)}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
tmx() { tmux -L mosaic-demo "$@"; }

# Under $HOME, not /tmp: the controller's unit may have a private /tmp,
# and the engine reads the agent dir written here.
mkdir -p "$HOME/.cache"
work=$(mktemp -d "$HOME/.cache/mosaic-demo.XXXXXX")
keep=${MOSAIC_DEMO_DIR:-}
[ -n "$keep" ] && mkdir -p "$keep"
stubpid='' tm='' id=''
cleanup() {
	[ -n "$tm" ] && tmx kill-server 2>/dev/null || true
	[ -n "$stubpid" ] && kill "$stubpid" 2>/dev/null || true
	if [ -n "$id" ]; then
		# The stub model ends with the demo, so its conversation does too:
		# its engine first (a proven stop: stopping the socket and the
		# service alone would leave the engine's scope running), then its
		# units, then its registration.
		"$bin" stop --take --yes "$id" >/dev/null 2>&1 || true
		systemctl --user stop "mosaic-conv@$id.socket" "mosaic-conv@$id.service" 2>/dev/null || true
		"$bin" conv rm "$id" >/dev/null 2>&1 || echo "demo: could not remove conversation $id: see \`$bin status\`" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# gen WHY prints the controller generation with what moved it. Every
# command that changes something names the generation it believes
# current; one naming an older generation is refused stale-generation.
lastgen=''
gen() {
	local g
	g=$("$bin" status "$id" --json | sed -n 's/.*"generation":\([0-9]*\).*/\1/p')
	if [ -z "$g" ]; then
		echo "generation: - (no controller runs; it starts with the next client)"
	elif [ -z "$lastgen" ]; then
		echo "generation $g: $*"
	else
		echo "generation $lastgen -> $g: $*"
	fi
	lastgen=$g
}

step "mosaicctl install  (user units, manager reloaded over D-Bus)"
"$bin" install

if [ -n "${MOSAIC_DEMO_PROVIDER:-}" ]; then
	step "model: $MOSAIC_DEMO_PROVIDER/$MOSAIC_DEMO_MODEL (keys from the agent dir ${MOSAIC_DEMO_AGENT_DIR:-~/.pi/agent})"
	provider=$MOSAIC_DEMO_PROVIDER model=${MOSAIC_DEMO_MODEL:?set MOSAIC_DEMO_MODEL with MOSAIC_DEMO_PROVIDER}
	agent=${MOSAIC_DEMO_AGENT_DIR:-$HOME/.pi/agent}
	prompt_text="List the files of this project with one bash command, then start 'setsid sleep 600 &' in the background and say that you did."
else
	step "model: the project's stub model (scripted, OpenAI-compatible, on 127.0.0.1; no API key)"
	agent=$work/agent
	"$MOSAIC_BIN_DIR/stubmodel" -script "$here/model.json" -agent-dir "$agent" >"$work/stub.out" 2>&1 &
	stubpid=$!
	for _ in $(seq 100); do grep -q '^PI_CODING_AGENT_DIR' "$work/stub.out" 2>/dev/null && break; sleep 0.1; done
	cat "$work/stub.out"
	provider=fakellm model=fake-model
	prompt_text="Look at the project and start a background job."
fi

project=$HOME/mosaic-demo
mkdir -p "$project/.pi/state/demo/sessions"
printf 'A demo project for mosaic.\n' >"$project/README"
step "mosaicctl conv add  (the engine is pinned: path, version, sha256)"
session=$project/.pi/state/demo/sessions/main-$(date +%s).jsonl
id=$("$bin" conv add --project "$project" --seat demo \
	--session "$session" \
	--engine "$pi" --provider "$provider" --model "$model" --agent-dir "$agent")
echo "$id"
"$bin" conv show "$id"

step "systemctl --user start mosaic-conv@$id.socket  (no process until the first client)"
systemctl --user start "mosaic-conv@$id.socket"
ls -ld "$XDG_RUNTIME_DIR/mosaic/conv" "$XDG_RUNTIME_DIR/mosaic/conv/$id.sock"
echo "controller before any client: $(systemctl --user is-active "mosaic-conv@$id.service" || true)"

if command -v tmux >/dev/null; then
	step "mosaicctl attach $id  (an observer, in a tmux pane the demo reads back)"
	tm=mosaic-demo
	tmx kill-server 2>/dev/null || true
	tmx new-session -d -s demo -x 110 -y 34 "TERM=xterm-256color $bin attach $id"
	pane() { tmx capture-pane -p -t demo | sed 's/[[:space:]]*$//' | cat -s; }
	for _ in $(seq 100); do pane | grep -q 'observer' && break; sleep 0.1; done
	watch="tmux -L $tm attach -r -t demo"
	if [ -n "${MOSAIC_SANDBOX_INIT:-}" ]; then
		# From the host, as root: into the sandbox's mounts, as its user.
		watch="nsenter -t $MOSAIC_SANDBOX_INIT -m -- runuser -u $(id -un) -- $watch"
	fi
	echo "watch it live, read-only, from another terminal:  $watch"
	if [ "${MOSAIC_DEMO_WAIT:-0}" -gt 0 ]; then
		echo "waiting up to ${MOSAIC_DEMO_WAIT}s for you to attach (MOSAIC_DEMO_WAIT=0 skips the wait)"
		for _ in $(seq $((MOSAIC_DEMO_WAIT * 10))); do
			[ -n "$(tmx list-clients 2>/dev/null)" ] && { echo "attached; going on"; sleep 1; break; }
			sleep 0.1
		done
	fi
fi

step "mosaicctl prompt --take $id '$prompt_text'  (prints the answer once the turn settles)"
"$bin" prompt --take --timeout 3m "$id" "$prompt_text"
gen "the controller generation counts control changes. The controller started at 0; prompt --take took control, and each takeover raises it by one"

step "mosaicctl status"
"$bin" status "$id"

if [ -n "$tm" ]; then
	step "what the attached terminal shows (observer: the same stream, live)"
	sleep 0.5
	pane
fi

step "the tool's setsid child is still alive, inside the engine's scope"
ps -o pid,sid,args -u "$(id -u)" | grep -E '[s]leep 600' || echo "(no background job: the model did not start one)"
for p in $(pgrep -u "$(id -u)" -f 'sleep 600' || true); do echo "pid $p: $(cat "/proc/$p/cgroup")"; done

proof=${keep:-$work}/proof.json
step "mosaicctl stop --take --yes --proof proof.json $id  (force stop of the whole cohort)"
"$bin" stop --take --yes --proof "$proof" "$id"
echo "background jobs left: $(pgrep -u "$(id -u)" -f 'sleep 600' | wc -l)"
gen "this new connection took control again (a connection starts as an observer); the prompt's connection, gone, holds an older generation and could no longer act"

step "mosaicctl proof verify proof.json  (offline re-check of the cohort proof)"
"$bin" proof verify "$proof"

step "mosaicctl audit $id  (decisions from the journal; every proof digest re-verified)"
"$bin" audit "$id"

step "mosaicctl recover --take $id  (eligibility, then a new execution on the same leaf)"
"$bin" recover --take "$id"
gen "after a stop admission stays closed, so recover took recovery control (one more), and the launch of the new execution raised it once more"
"$bin" prompt --take --timeout 3m "$id" "Are you back?"
gen "the prompt's own takeover"

if [ -n "$tm" ]; then
	step "the attached terminal after the stop and the recovery"
	sleep 0.5
	pane
fi

step "journalctl --user -u mosaic-conv@$id.service  (the raw audit trail, last 25 lines)"
journalctl --user -u "mosaic-conv@$id.service" --no-pager -o cat | tail -n 25

kept=''
if [ -n "$keep" ]; then
	[ -f "$session" ] && cp "$session" "$keep/session.jsonl" && kept="$keep/session.jsonl (a copy of the session file), "
	kept="${kept}$proof (the stop's proof)"
fi
# In the sandbox, demo.sh says what is left once the sandbox is gone.
if [ -z "${MOSAIC_DEMO_SANDBOX:-}" ]; then
	echo
	echo "demo done: conversation $id is stopped and removed on exit; the units stay installed (\`$bin uninstall\` removes them); the session file stays at $session${kept:+; kept: $kept}"
fi
