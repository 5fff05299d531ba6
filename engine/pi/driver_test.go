package pi

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
)

// TestDriverDecisions: through the seam, Pi's open dialogs are the
// pending decisions, in arrival order, with exactly the native choices
// Answer takes (none for input and editor); Decide is Answer; Changed
// fires on every open and close; Turn says Waiting while one is open and
// counts settles as State does.
func TestDriverDecisions(t *testing.T) {
	p := startPeer(t, engine.Options{})
	var d engine.Driver = p.conn
	changed := d.Changed()
	p.emit(`{"type":"extension_ui_request","id":"d-sel","method":"select","title":"T","options":["Allow <i>once</i>","multi\nline"]}`,
		`{"type":"extension_ui_request","id":"d-cf","method":"confirm","title":"C","message":"m"}`,
		`{"type":"extension_ui_request","id":"d-in","method":"input","title":"I","placeholder":"p"}`,
		`{"type":"extension_ui_request","id":"n-1","method":"notify","message":"fire and forget"}`)
	p.sync()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("Changed did not fire for %s", what)
		}
	}
	wait(changed, "opened dialogs")
	type row struct{ id, kind, title string }
	var got []row
	var choices [][]string
	for _, dec := range d.Decisions() {
		if dec.State != engine.DecisionPending {
			t.Fatalf("decision %+v is not pending", dec)
		}
		got = append(got, row{dec.ID, dec.Kind, dec.Title})
		choices = append(choices, dec.Choices)
	}
	if want := []row{{"d-sel", "select", "T"}, {"d-cf", "confirm", "C"}, {"d-in", "input", "I"}}; !slices.Equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if !slices.Equal(choices[0], []string{"Allow <i>once</i>", "multi\nline"}) || !slices.Equal(choices[1], []string{"true", "false"}) ||
		choices[2] == nil || len(choices[2]) != 0 {
		t.Fatalf("choices %q", choices)
	}
	if !d.Turn().Waiting {
		t.Fatal("Turn is not Waiting with dialogs open")
	}
	ctx := context.Background()
	if err := d.Decide(ctx, "d-cf", "yes"); !errors.Is(err, engine.ErrAnswerShape) {
		t.Fatalf("Decide(yes) = %v, want ErrAnswerShape", err)
	}
	if err := d.Decide(ctx, "d-in", ""); !errors.Is(err, engine.ErrAnswerShape) {
		t.Fatalf("Decide on an input = %v, want ErrAnswerShape", err)
	}
	changed = d.Changed()
	if err := d.Decide(ctx, "d-cf", "true"); err != nil {
		t.Fatal(err)
	}
	if got := p.next("extension_ui_response"); got["id"] != "d-cf" || got["confirmed"] != true {
		t.Fatalf("response %v", got)
	}
	wait(changed, "an answer")
	if err := d.Decide(ctx, "d-cf", "true"); !errors.Is(err, engine.ErrDialogClosed) {
		t.Fatalf("second Decide = %v, want ErrDialogClosed", err)
	}
	changed = d.Changed()
	p.conn.Forget("d-in")
	wait(changed, "a forget")
	if ds := d.Decisions(); len(ds) != 1 || ds[0].ID != "d-sel" {
		t.Fatalf("after answer and forget: %+v", ds)
	}
	changed = d.Changed()
	if ids, err := p.conn.Cancel(); err != nil || !slices.Equal(ids, []string{"d-sel"}) {
		t.Fatalf("Cancel = %v, %v", ids, err)
	}
	if got := p.next("extension_ui_response"); got["id"] != "d-sel" || got["cancelled"] != true {
		t.Fatalf("cancel wrote %v", got)
	}
	wait(changed, "a cancel")
	if len(d.Decisions()) != 0 || d.Turn().Waiting {
		t.Fatalf("after cancel: %+v, waiting %v", d.Decisions(), d.Turn().Waiting)
	}

	p.emit(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[],"willRetry":false}`, `{"type":"agent_settled"}`)
	p.sync()
	if ts, st := d.Turn(), p.conn.State(); ts.Settles != 1 || st.Settles != 1 || ts.Running {
		t.Fatalf("Turn %+v, State settles %d; want one settle, not running", ts, st.Settles)
	}
}
