#!/usr/bin/env bash
# inner.sh runs the demo as a user whose systemd user manager is running.
set -euo pipefail
bin=$MOSAIC_BIN_DIR/mosaicctl
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "mosaicctl install  (user units, manager reloaded over D-Bus)"
"$bin" install

project=$HOME/mosaic-demo
mkdir -p "$project/.pi/state/demo/sessions"
step "mosaicctl conv add  (prints the conversation id alone)"
id=$("$bin" conv add --project "$project" --seat demo --session "$project/.pi/state/demo/sessions/main.jsonl" 2>/dev/null)
echo "$id"
"$bin" conv list

step "systemctl --user start mosaic-conv@$id.socket"
systemctl --user start "mosaic-conv@$id.socket"
ls -ld "$XDG_RUNTIME_DIR/mosaic/conv" "$XDG_RUNTIME_DIR/mosaic/conv/$id.sock"
echo "controller before any client: $(systemctl --user is-active "mosaic-conv@$id.service" || true)"

step "two clients connect (the first one socket-activates the controller)"
"$bin" hello "$id"
"$bin" hello "$id"

step "systemctl --user status mosaic-conv@$id.service"
systemctl --user status "mosaic-conv@$id.service" --no-pager --lines=0 || true

step "journalctl --user -u mosaic-conv@$id.service MOSAIC_EVENT=hello"
journalctl --user -u "mosaic-conv@$id.service" MOSAIC_EVENT=hello --no-pager \
	-o verbose --output-fields=MESSAGE,MESSAGE_ID,MOSAIC_CONVERSATION,MOSAIC_CONNECTION,MOSAIC_PEER_UID,MOSAIC_EVENT

step "the whole audit trail"
journalctl --user -u "mosaic-conv@$id.service" --no-pager -o cat

echo
echo "the conversation stays socket-activated; stop it with: systemctl --user stop mosaic-conv@$id.socket mosaic-conv@$id.service"
