package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/history"
)

// TestLeafFollowsOwnAppends: after a turn the binding names the leaf the
// engine's own entries made (the file's leaf), so a recover confirmation
// and its eligibility agree on the leaf; before, the binding kept the leaf
// of the start.
func TestLeafFollowsOwnAppends(t *testing.T) {
	r, k, _, start := settledTurn(t, nil)
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		snap, err := history.Read(r.session, history.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := k.reply(map[string]any{"type": "observe", "request": fmt.Sprint("o", n)})["binding"].(map[string]any)
		if b["leaf"] == snap.LeafID() && b["leaf"] != start {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("binding leaf %v, file leaf %q, start leaf %v: the binding does not follow the engine's appends", b["leaf"], snap.LeafID(), start)
		}
		sleep20()
	}
}

// TestRecoverConfirmsTheFileLeaf: with the session watch too slow to have
// followed the turn's appends before a force stop (PollInterval an hour),
// the recover confirmation still names the leaf the file is on, the same
// one the eligibility is for, and says the bytes after the stop's
// vouched ones were checked by nobody; a force stop's recover goes on.
func TestRecoverConfirmsTheFileLeaf(t *testing.T) {
	r, k, gen, start := settledTurn(t, func(c *Config) { c.PollInterval = time.Hour })
	cf := k.confirm("force-stop", gen)
	if rc := k.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != "stopped" {
		t.Fatalf("force stop %v", rc)
	}
	snap, err := history.Read(r.session, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.LeafID() == start {
		t.Fatalf("the turn appended nothing: leaf %v", start)
	}
	icf := k.must(map[string]any{"type": "issue-confirmation", "request": "ci", "operation": "recover", "generation": gen}, "confirmation")
	if intent := icf["intent"].(string); !strings.Contains(intent, "leaf "+snap.LeafID()) {
		t.Fatalf("recover intent %q does not name the file's leaf %s (start leaf %v)", intent, snap.LeafID(), start)
	}
	// The turn's appends came after the watch's last check: never "the
	// same session and leaf", the intent says they were checked by nobody.
	if intent := icf["intent"].(string); !strings.Contains(intent, "the history changed since the stop") || strings.Contains(intent, "the same session") {
		t.Fatalf("recover intent %q does not say the file holds bytes the controller never checked", intent)
	}
	k.must(map[string]any{"type": "answer-confirmation", "request": "ca", "confirmation": icf["id"], "answer": "confirm"}, "confirmation")
	el := k.must(map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": icf["id"]}, "eligibility")
	if el["leaf"] != snap.LeafID() {
		t.Fatalf("eligibility leaf %v, file leaf %s", el["leaf"], snap.LeafID())
	}
}

// settledTurn starts a rig, takes control on an observing connection and
// runs one prompt to its settle; it returns the rig, the connection, the
// generation and the leaf the binding named before the turn.
func settledTurn(t *testing.T, mutate func(*Config)) (*rig, *peer, float64, any) {
	t.Helper()
	r := newRig(t, plainScript, mutate)
	start := r.waitBinding("active")["leaf"]
	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": "o"}, "observed")
	gen := r.takeover(k)
	k.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hello"}, "receipt")
	k.settled()
	return r, k, gen, start
}
