package controller

import (
	"context"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// An interrupt whose abort hangs holds the dispatch lock only for its
// fence, not for the engine's wait: while the engine sits on the abort,
// another connection's takeover and acquire-recovery-control are answered
// (refused, the binding being fenced and its controller present) and
// its observe is served; the interrupt ends only after the abort is let
// go, reconciled, and admission reopens.
func TestHangingInterruptLeavesDispatchFree(t *testing.T) {
	// The abort's own bound is longer than the wait for a record, so a
	// read loop stuck behind the interrupt fails the test, never passes.
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, func(c *Config) { c.AbortTimeout = 2 * time.Minute })
	r.waitBinding("active")
	fc := r.fakeControl()
	ctl, other := r.dial(), r.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gen := r.abortHeldTurn(ctx, fc, ctl)
	ctl.send(map[string]any{"type": "interrupt", "request": "i1", "generation": gen})
	if _, err := fc.Wait(ctx, "abort-received"); err != nil {
		t.Fatal(err)
	}

	other.refused(map[string]any{"type": "takeover", "request": "t2", "generation": gen}, protocol.CodeFenced)
	other.refused(map[string]any{"type": "acquire-recovery-control", "request": "a2", "generation": gen}, protocol.CodeControllerPresent)
	other.must(map[string]any{"type": "observe", "request": "o2"}, "observed")
	r.ctrl.mu.Lock()
	state := r.ctrl.st.stop.State
	r.ctrl.mu.Unlock()
	if state != "cancelling" {
		t.Fatalf("the interrupt is %s while its abort is held; want cancelling", state)
	}

	if err := fc.Release(ctx, "abort-received"); err != nil {
		t.Fatal(err)
	}
	rc := ctl.await(func(m map[string]any) bool { return m["record"] == "receipt" && m["request"] == "i1" })
	if rc["state"] != "reconciled" {
		t.Fatalf("interrupt after the abort was let go: %v; want reconciled", rc)
	}
	if b := r.waitBinding("active"); b["admission"] != "open" {
		t.Fatalf("binding after the interrupt: %v; want admission open", b)
	}
}
