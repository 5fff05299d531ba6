package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/history"
)

// TestLeafFollowsOwnAppends: after a turn the binding names the leaf the
// engine's own entries made (the file's leaf), so a recover confirmation
// and its eligibility agree on the leaf; before, the binding kept the leaf
// of the start.
func TestLeafFollowsOwnAppends(t *testing.T) {
	r := newRig(t, plainScript, nil)
	start := r.waitBinding("active")["leaf"]
	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": "o"}, "observed")
	gen := r.takeover(k)
	k.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hello"}, "receipt")
	k.settled()
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
