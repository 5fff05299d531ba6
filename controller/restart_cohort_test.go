package controller

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// A restart finds a claim stopping but no readable cohort record: it can
// neither resume nor prove that stop, so the binding is uncertain, with a
// reason naming the missing cohort, never stopping for good.
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
	b.mu.Lock()
	st, reason, stop := b.st.binding, b.st.reason, b.st.stop
	b.mu.Unlock()
	if st != protocol.BindingUncertain || !strings.Contains(reason, "cohort") || stop != nil {
		t.Fatalf("restart over a stopping claim without its cohort: binding %s (%s), stop %+v; want uncertain naming the cohort, no stop", st, reason, stop)
	}
}
