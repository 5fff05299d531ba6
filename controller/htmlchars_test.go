package controller

import (
	"bytes"
	"context"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRecordsKeepHTMLCharacters: a tool call whose arguments hold <, >
// and & reaches a client as the engine wrote it, in the live events and in
// the history page of a later observe: every record is encoded without
// HTML escaping (protocol.Line), so no renderer has to undo an escape.
func TestRecordsKeepHTMLCharacters(t *testing.T) {
	const command = `echo tool-output 2>&1 </dev/null`
	r := newRig(t, `{"turns":[{"text":["Running."],"tool":{"command":"`+command+`"}},{"text":["Done."]}]}`, nil)
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := r.libClient(ctx)
	tr := mclient.NewTranscript()
	if _, err := c.Reobserve(ctx, tr.Pending()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	want := []byte(command)
	escaped := func(b []byte) bool { return bytes.Contains(b, []byte(`\u003c`)) || bytes.Contains(b, []byte(`\u0026`)) }
	live := false
	for _, u := range follow(t, ctx, c, tr, settledClean(1)) {
		if u.Event != nil && u.Event.Kind == protocol.EventToolStart {
			live = true
			if !bytes.Contains(u.Raw, want) || escaped(u.Raw) {
				t.Fatalf("the tool-start line does not carry %q as written: %s", command, u.Raw)
			}
		}
	}
	if !live {
		t.Fatalf("no tool-start event: %s", viewString(tr.Snapshot()))
	}
	obs, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(obs.History, want) || escaped(obs.History) {
		t.Fatalf("the history page does not carry %q as written: %s", command, obs.History)
	}
}
