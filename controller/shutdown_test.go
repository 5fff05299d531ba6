package controller

import (
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// A shutdown (SIGTERM: Serve's context cancelled, then Close) during a
// confirmed force stop's kill phase lets the stop finish: Close returns
// only after the stop reached stopped with a verifying proof and the
// claim recorded it, never leaving the claim stopping.
func TestShutdownWaitsForForceStop(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
	reached, release := make(chan struct{}), make(chan struct{})
	r.ctrl.inKill = func() { close(reached); <-release }
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	cf := ctl.confirm("force-stop", gen)
	ctl.send(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf})
	<-reached
	r.ctrl.mu.Lock()
	x := r.ctrl.st.exec
	r.ctrl.mu.Unlock()

	r.cancel()
	<-r.served
	closed := make(chan protocol.Stop)
	go func() {
		r.ctrl.Close()
		r.ctrl.mu.Lock()
		s := *r.ctrl.st.stop
		r.ctrl.mu.Unlock()
		closed <- s
	}()
	// Close takes the engine's stdin first; once the engine is gone, Close
	// is at its wait. Only then does the kill phase go on.
	deadline := time.Now().Add(30 * time.Second)
	for !r.gone(x) {
		select {
		case s := <-closed:
			t.Fatalf("Close returned with the force stop held in its kill phase (stop %s)", s.State)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine did not exit after Close took its stdin")
		}
		sleep20()
	}
	close(release)
	s := <-closed
	if s.State != "stopped" {
		t.Fatalf("stop when Close returned: %s (%s); want stopped", s.State, s.Reason)
	}
	if _, rep, err := proofs.VerifyBytes(s.Proof); err != nil || !rep.OK() {
		t.Fatalf("the stop's proof does not verify: %v %+v", err, rep)
	}
	r.ctrl.mu.Lock()
	cl := r.ctrl.st.claim
	r.ctrl.mu.Unlock()
	if rec := cl.Record(); rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest {
		t.Fatalf("claim when Close returned: %s, proof %+v; want stopped with %s", rec.State, rec.Proof, s.ProofDigest)
	}
}
