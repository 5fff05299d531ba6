package controller

import (
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// The engine dies right after its interrupt settled, before the
// controller records the outcome. An engine exit is never a proof: the
// interrupt ends uncertain, admission stays closed, the binding and the
// claim say uncertain, and a confirmed force stop still proves the cohort.
func TestEngineExitEndsInterruptUncertain(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
	r.waitBinding("active")
	r.ctrl.mu.Lock()
	x := r.ctrl.st.exec
	r.ctrl.mu.Unlock()
	r.ctrl.test.afterInterrupt = func() {
		if err := syscall.Kill(x.handle.Cohort.PID, syscall.SIGKILL); err != nil {
			t.Errorf("kill the engine: %v", err)
			return
		}
		for !r.gone(x) {
			sleep20()
		}
	}
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"}, "receipt")
	ctl.await(func(m map[string]any) bool { return m["kind"] == "text-delta" })

	rc := ctl.must(map[string]any{"type": "interrupt", "request": "i1", "generation": gen}, "receipt")
	if rc["state"] != "uncertain" {
		t.Fatalf("interrupt whose engine died before its outcome was recorded: %v; want uncertain", rc)
	}
	if b := r.waitBinding("uncertain"); b["admission"] != "closed" {
		t.Fatalf("binding after the engine died: %v; want admission closed", b)
	}
	ctl.refused(map[string]any{"type": "prompt", "request": "p2", "generation": gen, "text": "again"}, protocol.CodeFenced)
	r.ctrl.writes.Wait()
	r.ctrl.mu.Lock()
	cl := r.ctrl.st.claim
	r.ctrl.mu.Unlock()
	if st := cl.Record().State; st != claims.Uncertain {
		t.Fatalf("claim after the engine died during an interrupt: %s; want uncertain", st)
	}
	cf := ctl.confirm("force-stop", gen)
	if fs := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); fs["state"] != "stopped" {
		t.Fatalf("force stop after the engine died: %v; want stopped", fs)
	}
}
