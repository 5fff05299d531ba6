package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// withdrawWait bounds how long a withdrawal after a failed launch waits for the user manager to
// see a failed launch's scope gone: the launcher killed the scope's
// processes and reset the unit, and the manager notices the empty cgroup
// on its own time.
const withdrawWait = 5 * time.Second

// withdrawable reports whether rec is a launch that began and recorded no
// incarnation: the held child was never told to run the engine.
func withdrawable(rec claims.Record) bool {
	return rec.State != claims.Stopped && rec.Launcher != nil && rec.Engine == nil
}

// withdrawLaunch ends a launch that failed before its engine was released:
// it reads the execution's scope unit from the user manager until it shows
// it dead (or wait passes; a scope still alive then has what it holds
// killed, killUnreleased, and is read again) and records stopped with a withdrawn
// proof of exactly that observation (claims.Claim.Withdraw checks the
// rules). The binding is then stopped, and recover launches again on the
// same leaf. On any error the claim is unchanged.
func (c *Controller) withdrawLaunch(ctx context.Context, claim *claims.Claim, why string, wait time.Duration) error {
	rec := claim.Record()
	if !withdrawable(rec) {
		return fmt.Errorf("execution %s: %w", rec.Execution, errNotWithdrawable)
	}
	if h := c.test.withdrawFault; h != nil {
		if err := h(); err != nil {
			return fmt.Errorf("execution %s: %w", rec.Execution, err)
		}
	}
	obs, err := c.observeScope(ctx, rec, wait)
	if err != nil {
		return err
	}
	if !obs.Dead() {
		if obs, err = c.killUnreleased(ctx, claim, rec); err != nil {
			return err
		}
		why += "; mosaic killed what its scope held, only the held child and anchor"
	}
	reason := fmt.Sprintf("launch of execution %s withdrawn before its engine ran (%s)", rec.Execution, why)
	if err := claim.Withdraw(ctx, obs.Unit, obs, reason); err != nil {
		return err
	}
	rec = claim.Record()
	sum, _ := claims.WithdrawnSummary(rec.Proof)
	c.mu.Lock()
	c.st.claim = claim
	c.st.binding = protocol.BindingStopped
	c.closeAdmissionLocked(reason + "; recover, then launch, to start again")
	c.publishBindingLocked()
	c.mu.Unlock()
	// Journaled as a transition, not a proof: it is no cohort proof, and
	// `mosaicctl audit` names it for what it is.
	c.audit(audit.Transition, nil, sum,
		map[string]string{"EXECUTION": rec.Execution, "PROOF_DIGEST": rec.Proof.Digest, "PROOF_TYPE": rec.Proof.Type, "SCOPE": obs.Unit})
	return nil
}

// killUnreleased kills what the scope of a launch that never released its
// engine holds, once no launch of it can be under way (its launcher is gone, or
// is this controller, whose launch returned), and reads the unit again.
// A controller killed between creating the scope and recording the
// incarnation leaves the held child and the anchor in it for good; they
// are mosaic's own processes, waiting, and no agent code ran, so killing
// them needs nobody's confirmation. Withdraw still decides from the
// observation, and refuses if the unit is not seen dead.
func (c *Controller) killUnreleased(ctx context.Context, claim *claims.Claim, rec claims.Record) (claims.UnitObservation, error) {
	over, err := claim.LaunchOver()
	if err != nil {
		return claims.UnitObservation{}, fmt.Errorf("execution %s: is its launcher gone: %w", rec.Execution, err)
	}
	if !over {
		return claims.UnitObservation{}, fmt.Errorf("execution %s: its launcher still runs; its launch may be under way", rec.Execution)
	}
	if err := c.cfg.Scopes.KillUnreleased(ctx, rec.Conversation, rec.Execution); err != nil {
		return claims.UnitObservation{}, err
	}
	return c.observeScope(ctx, rec, withdrawWait)
}

var errNotWithdrawable = fmt.Errorf("not a launch that failed before release")

// observeScope reads the state of rec's execution scope, again until it is
// dead or wait has passed; the last reading is returned.
func (c *Controller) observeScope(ctx context.Context, rec claims.Record, wait time.Duration) (claims.UnitObservation, error) {
	boot, err := procfs.BootID()
	if err != nil {
		return claims.UnitObservation{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		name, st, err := c.cfg.Scopes.ScopeState(ctx, rec.Conversation, rec.Execution)
		if err != nil {
			return claims.UnitObservation{}, err
		}
		obs := claims.UnitObservation{Unit: name, LoadState: st.LoadState, ActiveState: st.ActiveState, BootID: boot, ObservedAt: time.Now()}
		if obs.Dead() || time.Now().After(deadline) {
			return obs, nil
		}
		select {
		case <-ctx.Done():
			return obs, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stoppedReason is what admission says of a stopped claim a restart found:
// a withdrawn launch says what was observed, never that a proof ended it.
func stoppedReason(rec claims.Record) string {
	if sum, err := claims.WithdrawnSummary(rec.Proof); err == nil {
		return sum + "; recover, then launch, to start again"
	}
	return "stopped with a proof; recover, then launch, to start again"
}
