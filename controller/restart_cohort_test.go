package controller

import (
	"context"
	"os"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
)

// A restart finds a claim stopping but no readable cohort record. The
// claim's own incarnation (engine cgroup and its id, pid, start time)
// still names the scope, which still runs: the restart rebuilds the
// cohort from it and finishes the stop, stopped only with a proof, never
// stopping for good. (A removed scope needs the anchor the lost record
// kept: then the binding stays uncertain, docs/recovery.md.)
func TestRestartStoppingWithoutCohort(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	exec := r.execution()
	// The crashed controller had recorded stopping; its cohort record is gone.
	if err := r.ctrl.claimDo(func(cl *claims.Claim) error { return cl.BeginStop(context.Background(), "force stop s-test") }); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.ctrl.cohortPath(exec)); err != nil {
		t.Fatal(err)
	}
	b, _ := r.restart()
	s := waitStop(t, b)
	if s.State != "stopped" || s.Execution != exec || proofBasis(t, s) != proofs.BasisEmptyObserved {
		t.Fatalf("restart over a stopping claim without its cohort record: stop %+v; want %s stopped with a proof", s, exec)
	}
	b.mu.Lock()
	rec := b.st.claim.Record()
	b.mu.Unlock()
	if rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Digest != s.ProofDigest {
		t.Fatalf("claim after the restart: %s %+v", rec.State, rec.Proof)
	}
}
