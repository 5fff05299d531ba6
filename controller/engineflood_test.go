package controller

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/audit"
)

// TestEngineDialogFloodAggregated: an engine that asks a confirm with a
// 1 ms timeout in a loop (an extension calling ctx.ui.confirm over and
// over; Pi resolves each by itself and writes nothing) causes three
// approval transitions per dialog (opened, uncertain at the deadline,
// resolved natively at the run's settle). They repeat at the engine's
// will, so they are counted like a peer's entries: at most the burst of
// each kind is written whole, every dialog is still accounted for, and a
// decision after the flood is written whole at notice priority.
func TestEngineDialogFloodAggregated(t *testing.T) {
	const n = 300
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "again?", "message": "m", "timeout": 1, "repeat": n}), nil)
	r.waitBinding("active")
	ctl, obs := r.dial(), r.dial()
	obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"}, "receipt")
	obs.await(func(m map[string]any) bool { return m["record"] == "approval" })
	obs.await(func(m map[string]any) bool { return m["kind"] == "run-settled" })
	r.waitBindingField("engineState", "idle")
	r.takeover(r.dial()) // a decision: the counts held back are written before it

	var whole, opened, counted int
	for _, e := range r.audit.entries(t) {
		isEngine := e["MOSAIC_ENGINE_CAUSED"] != "" || e["MOSAIC_APPROVAL"] != ""
		if !isEngine {
			continue
		}
		if c, ok := e["MOSAIC_COUNT"]; ok {
			k, err := strconv.Atoi(c)
			if err != nil {
				t.Fatalf("count %q: %v", c, err)
			}
			counted += k
			if e["MOSAIC_ENGINE_CAUSED"] == "approval-opened" {
				opened += k
			}
			continue
		}
		whole++
		if strings.Contains(e["MESSAGE"], " opened as approval ") {
			opened++
		}
	}
	if limit := 3 * audit.Burst; whole > limit {
		t.Fatalf("%d approval entries written whole for %d engine dialogs (counted %d); want at most %d: the engine's output drowns the journal", whole, n, counted, limit)
	}
	if opened != n {
		t.Fatalf("%d dialog openings accounted for (whole or counted), want %d", opened, n)
	}
	var last map[string]string
	for _, e := range r.audit.entries(t) {
		if e["MOSAIC_EVENT"] == string(audit.Takeover) {
			last = e
		}
	}
	if last == nil || last["PRIORITY"] != "5" {
		t.Fatalf("the takeover after the flood was not written whole at notice: %v", last)
	}
}

// TestEngineNoticeFloodKeepsClients: an extension that calls
// ctx.ui.notify in a loop writes its notifications back to back, far
// faster than a socket takes them one record at a time. Each becomes a
// notice to every client; the clients here read at once, so none may be
// dropped as too slow: the engine's output waits for them, and both the
// controlling client and an observer get every notice, in order, and the
// run's end.
func TestEngineNoticeFloodKeepsClients(t *testing.T) {
	const n = 5000
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("note %d", i)
	}
	script, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"notify": msgs, "text": []string{"done"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, string(script), nil)
	r.waitBinding("active")
	ctl, obs := r.dial(), r.dial()
	obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"}, "receipt")
	for _, k := range []*peer{obs, ctl} {
		next := 0
		k.await(func(m map[string]any) bool {
			if m["record"] == "notice" && m["kind"] == "notify" {
				var d struct{ Text string }
				raw, _ := json.Marshal(m["detail"])
				json.Unmarshal(raw, &d)
				if want := fmt.Sprintf("note %d", next); d.Text != want {
					t.Fatalf("notice %q, want %q", d.Text, want)
				}
				next++
			}
			return next == n
		})
	}
	obs.await(func(m map[string]any) bool { return m["kind"] == "run-settled" })
	ctl.must(map[string]any{"type": "observe", "request": "o2"}, "observed") // still connected
}
