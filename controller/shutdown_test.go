package controller

import (
	"context"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
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
	r.ctrl.test.inKill = func() { close(reached); <-release }
	sendForceStop(r)
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

// A shutdown reaches a prompt already written to the engine: with the
// engine holding its acknowledgement and the command timeout far off,
// Serve returns once its context is cancelled, and the prompt's receipt
// is journaled delivery-unknown (the engine may or may not hold it).
// Without the context the read loop would wait out the command timeout,
// and Serve with it.
func TestShutdownReachesPromptSent(t *testing.T) {
	r := newRig(t, plainScript, func(c *Config) { c.CommandTimeout = 10 * time.Minute })
	r.waitBinding("active")
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fc.Arm(ctx, fakepi.PointPromptReceived); err != nil {
		t.Fatal(err)
	}
	ctl := r.dial()
	gen := r.takeover(ctl)
	ctl.send(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hold it"})
	if _, err := fc.Wait(ctx, fakepi.PointPromptReceived); err != nil {
		t.Fatal(err)
	}

	r.cancel()
	select {
	case <-r.served:
	case <-ctx.Done():
		t.Fatal("Serve did not return while the engine held the prompt's acknowledgement")
	}
	var last map[string]string
	for deadline := time.Now().Add(20 * time.Second); ; sleep20() {
		for _, e := range r.audit.entries(t) {
			if e["MOSAIC_REQUEST"] == "p1" && e["MOSAIC_RECEIPT"] != "" {
				last = e
			}
		}
		if last != nil && last["MOSAIC_STATE"] == protocol.ReceiptDeliveryUnknown {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("last prompt receipt after shutdown: %v; want %s", last, protocol.ReceiptDeliveryUnknown)
		}
	}
}
