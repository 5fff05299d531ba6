package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/history"
)

// TestRecoverConfirmsTheFileLeaf: with the session watch too slow to have
// followed the turn's appends before a force stop (PollInterval an hour),
// the recover confirmation still names the leaf the file is on, the same
// one the eligibility is for.
func TestRecoverConfirmsTheFileLeaf(t *testing.T) {
	r := newRig(t, plainScript, func(c *Config) { c.PollInterval = time.Hour })
	start := r.waitBinding("active")["leaf"]
	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": "o"}, "observed")
	gen := r.takeover(k)
	k.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hello"}, "receipt")
	k.settled()
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
	k.must(map[string]any{"type": "answer-confirmation", "request": "ca", "confirmation": icf["id"], "answer": "confirm"}, "confirmation")
	el := k.must(map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": icf["id"]}, "eligibility")
	if el["leaf"] != snap.LeafID() {
		t.Fatalf("eligibility leaf %v, file leaf %s", el["leaf"], snap.LeafID())
	}
}
