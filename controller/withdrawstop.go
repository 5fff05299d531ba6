package controller

import (
	"context"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// unreleasedLocked reports whether no engine cohort is current and the
// claim is a launch that never released its engine (withdrawable): a
// force stop then has no cohort to kill or prove, and withdraws the launch
// instead. Callers hold mu.
func (c *Controller) unreleasedLocked() bool {
	x := c.st.exec
	return (x == nil || x.handle == nil) && c.st.claim != nil && withdrawable(c.st.claim.Record())
}

// withdrawByStopLocked starts a confirmed force stop of a launch that
// never released its engine. It does what a restart does (withdrawLaunch:
// kill what the scope holds once no launch can be under way, read the
// unit, withdraw), so the user need not restart the controller; the stop
// ends stopped on the withdrawn record, which is no cohort proof.
// Callers hold mu; it is released.
func (c *Controller) withdrawByStopLocked(k *conn, cmd *protocol.Command) *outcome {
	s := c.beginForceLocked(c.st.claim.Record().Execution)
	c.closeAdmissionLocked("force stop " + s.ID + " in progress")
	c.transitionLocked(s, protocol.StopStopping, "the launch never released its engine: kill what its scope holds, then withdraw it")
	c.publishBindingLocked()
	gen := c.st.generation
	c.mu.Unlock()
	return deferred(func() protocol.Receipt { return c.withdrawByStop(k, cmd, s, gen) })
}

// withdrawByStop is the waiting part: the queued items become drafts, as
// at every force stop (a stop a restart infers, or a withdrawal a restart
// or a failed launch makes by itself, keeps them queued), then the
// withdrawal, then the stop's outcome. A withdrawal that fails leaves the
// claim as it was and the stop uncertain, with why.
func (c *Controller) withdrawByStop(k *conn, cmd *protocol.Command, s *protocol.Stop, gen int64) protocol.Receipt {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	c.recoverDrafts(s)
	err := c.claimDo(func(cl *claims.Claim) error { return c.withdrawLaunch(ctx, cl, "force stop "+s.ID, withdrawWait) })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.stopRunning, c.st.forceRunning = false, false
	if err != nil {
		why := "the launch could not be withdrawn: " + err.Error()
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked(why)
		c.transitionLocked(s, protocol.StopUncertain, why)
	} else {
		// withdrawLaunch made the binding stopped; the stop names the
		// withdrawn record for what it is.
		sum, _ := claims.WithdrawnSummary(c.st.claim.Record().Proof)
		c.transitionLocked(s, protocol.StopStopped, sum)
	}
	c.publishBindingLocked()
	return c.stopReceipt(k, cmd, s, gen)
}
