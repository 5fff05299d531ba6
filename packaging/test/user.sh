#!/usr/bin/env bash
# user.sh start|stop ID runs as the test user from the installed package
# only (installed.sh): mosaicctl from PATH, the units from
# /usr/lib/systemd/user, no checkout in the home, no `mosaicctl install`.
set -euo pipefail
fail() { echo "user.sh: FAIL: $*" >&2; exit 1; }
pass() { echo "packaging test: ok: $*"; }
cd "$HOME"

case "$1" in
start)
	[ "$(command -v mosaicctl)" = /usr/bin/mosaicctl ] || fail "mosaicctl on PATH is $(command -v mosaicctl)"
	[ -z "$(find "$HOME" -name go.mod -print -quit)" ] || fail "a checkout in the test user's home"
	[ ! -e "$HOME/.config/systemd/user/mosaic-conv@.service" ] || fail "user units exist: this must run without mosaicctl install"
	out=$(systemd-analyze --user verify /usr/lib/systemd/user/mosaic-conv@.socket /usr/lib/systemd/user/mosaic-conv@.service \
		/usr/lib/systemd/user/mosaic-web.socket /usr/lib/systemd/user/mosaic-web.service 2>&1) ||
		fail "systemd-analyze --user verify: $out"
	[ -z "$out" ] || fail "systemd-analyze --user verify: $out"

	# The model: the checkout's stub model on loopback (no key, no network).
	"$MOSAIC_CHECKOUT/.build/bin/stubmodel" -script "$MOSAIC_CHECKOUT/contrib/demo/model.json" -agent-dir "$HOME/agent" >stub.out 2>&1 &
	for _ in $(seq 100); do grep -q '^PI_CODING_AGENT_DIR' stub.out 2>/dev/null && break; sleep 0.1; done
	grep -q '^PI_CODING_AGENT_DIR' stub.out || fail "the stub model did not start: $(cat stub.out)"

	mkdir -p proj/.pi/state/deb/sessions
	id=$(mosaicctl conv add --project "$HOME/proj" --seat deb --session "$HOME/proj/.pi/state/deb/sessions/main.jsonl" \
		--engine "$MOSAIC_PI" --provider fakellm --model fake-model --agent-dir "$HOME/agent")
	echo "$id" >"$HOME/.mosaic-deb-test-id"
	systemctl --user start "mosaic-conv@$id.socket"
	[ -S "$XDG_RUNTIME_DIR/mosaic/conv/$id.sock" ] || fail "no socket at $XDG_RUNTIME_DIR/mosaic/conv/$id.sock"
	pass "conversation $id: socket started from /usr/lib/systemd/user"
	answer=$(mosaicctl prompt --take --timeout 3m "$id" "Look at the project and start a background job.")
	grep -q "still running" <<<"$answer" || fail "the answer lacks the model's text: $answer"
	pgrep -u "$(id -u)" -f 'sleep 600' >/dev/null || fail "the tool's setsid child is not running"
	pass "prompt: the pinned Pi answered through the stub model and its tool's setsid child runs"
	;;
stop)
	id=$2
	# The completions, from the installed files, complete this id.
	got=$(bash -c 'source /usr/share/bash-completion/bash_completion
		_completion_loader mosaicctl || true
		complete -p mosaicctl >/dev/null || exit 1
		COMP_WORDS=(mosaicctl stop --timeout 1m pi-); COMP_CWORD=4; COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
		_mosaicctl; printf "%s\n" "${COMPREPLY[@]}"')
	[ "$got" = "$id" ] || fail "bash completed \"mosaicctl stop --timeout 1m pi-\" to \"$got\", want $id"
	got=$(zsh -fc 'autoload -U compinit; compinit -u -D
		[[ $_comps[mosaicctl] == _mosaicctl ]] || exit 1
		compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }
		words=(mosaicctl stop pi-); CURRENT=3; _mosaicctl')
	[ "$got" = "$id" ] || fail "zsh completed \"mosaicctl stop pi-\" to \"$got\", want $id"
	got=$(fish -c 'complete -C"mosaicctl stop pi-"' | cut -f1)
	[ "$got" = "$id" ] || fail "fish completed \"mosaicctl stop pi-\" to \"$got\", want $id"
	pass "completions: bash, zsh and fish load from /usr/share and complete $id"

	mosaicctl stop --take --yes --proof "$HOME/proof.json" "$id" || fail "force stop exited $?"
	verify=$(mosaicctl proof verify "$HOME/proof.json" 2>&1) || fail "proof verify: $verify"
	[[ $verify == *"verified: all"* ]] || fail "proof verify: $verify"
	! pgrep -u "$(id -u)" -f 'sleep 600' >/dev/null || fail "the setsid child survived the force stop"
	pass "force stop with a proof that verifies; the setsid child is gone"
	systemctl --user stop "mosaic-conv@$id.socket" "mosaic-conv@$id.service"
	;;
*) fail "usage: user.sh start|stop ID" ;;
esac
