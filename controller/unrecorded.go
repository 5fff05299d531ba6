package controller

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// A stop that ends the engine (a force stop, a hibernation) makes the
// binding stopping as it fences admission, so that everything that acts
// only on an active binding (lost output, a broken stdin, the leaf's
// follow, an interrupt's reopening) stands aside from then on. Clients
// are told stopping only once the claim has been asked to record it:
// a controller that dies before that leaves the engine running under an
// active claim, which its successor re-attaches to, and no client was
// told the engine was stopping; one that dies after it leaves a stopping
// claim, whose stop the successor resumes (K10).

// beginStoppingLocked makes the binding stopping, shown as it was until
// recordStopping. Callers hold mu.
func (c *Controller) beginStoppingLocked() {
	if c.st.binding != protocol.BindingStopping {
		c.st.shown = c.st.binding
	}
	c.st.binding = protocol.BindingStopping
}

// shownLocked is the binding state clients are shown. Callers hold mu.
func (c *Controller) shownLocked() string {
	if c.st.shown != "" && c.st.binding == protocol.BindingStopping {
		return c.st.shown
	}
	return c.st.binding
}

// recordStopping asks the claim to record stopping for stop (what names
// it, as "force stop s-1"), and then shows clients the binding stopping.
// A claim that refused (its store full or read-only) does not hold the
// stop back, which goes on to prove the cohort ended; the refusal is
// journaled and returned for the stop record's reason.
func (c *Controller) recordStopping(ctx context.Context, k *conn, stop, what string) (refused string) {
	if err := c.claimDo(func(cl *claims.Claim) error { return cl.BeginStop(ctx, what) }); err != nil {
		refused = fmt.Sprintf("; the claim could not record stopping (%v): a controller restart now would not resume this stop", err)
		c.audit(audit.Transition, k, "claim could not record stopping: "+err.Error(), map[string]string{"STOP": stop})
	}
	c.mu.Lock()
	c.st.shown = ""
	c.publishBindingLocked()
	c.mu.Unlock()
	return refused
}
