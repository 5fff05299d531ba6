package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// stopTimeout bounds a whole force stop (TERM grace plus kill phase).
const stopTimeout = 2 * time.Minute

// terminal stop states: nothing moves a stop out of them.
var terminal = map[string]bool{protocol.StopReconciled: true, protocol.StopUncertain: true, protocol.StopStopped: true, protocol.StopSuperseded: true}

// transitionLocked moves a stop to state, journals and broadcasts it.
func (c *Controller) transitionLocked(s *protocol.Stop, state, reason string) {
	s.State, s.Reason = state, reason
	c.keepStopLocked(s)
	c.broadcastLocked(*s)
	fields := map[string]string{"STOP": s.ID, "KIND": s.Kind, "STATE": state, "EXECUTION": s.Execution}
	if s.ProofDigest != "" {
		fields["PROOF_DIGEST"] = s.ProofDigest
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("%s %s: %s %s", s.Kind, s.ID, state, reason), fields)
}

// interrupt is Q20: close admission, clear_queue, abort, wait for the
// settle, build the turn proof, reconcile, reopen under current control.
// A hang leaves the stop uncertain and force stop available (K9).
func (c *Controller) interrupt(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	c.mu.Lock()
	if r := c.checkControlLocked(k, cmd); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	x := c.st.exec
	switch {
	case x == nil || x.conn == nil:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeNoEngine, "no engine to interrupt")
	case c.st.stopRunning:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeFenced, "stop %s is already running", c.st.stop.ID)
	case c.st.binding != protocol.BindingActive:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeFenced, "the binding is %s: %s", c.st.binding, c.st.reason)
	}
	if ts := x.conn.Turn(); !ts.Running && ts.Slot == nil {
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeNoTurn, "nothing is running to interrupt")
	}
	s := &protocol.Stop{Record: protocol.RecordStop, ID: newID("s-"), Kind: protocol.StopInterrupt, Execution: x.id}
	c.st.stop, c.st.stopRunning = s, true
	c.closeAdmissionLocked("interrupt " + s.ID + " in progress")
	c.unsettleLocked(x, "interrupt "+s.ID+" began while the dialog was open; its outcome is left to native evidence")
	// Otherwise the next item would fire into the turn just stopped
	// (seed 002 §2): the items stay, shown paused, until resumed.
	c.pauseQueueLocked("interrupt " + s.ID + "; resume to send the queued items, or cancel them")
	c.transitionLocked(s, protocol.StopFenced, "admission closed")
	c.publishBindingLocked()
	gen := c.st.generation
	c.mu.Unlock()
	return deferred(func() protocol.Receipt { return c.cancelTurn(ctx, k, cmd, x, s, gen) }), nil
}

// cancelTurn is the waiting part of an interrupt: clear_queue, abort,
// settle, turn proof, reconcile; a force stop may supersede it meanwhile.
func (c *Controller) cancelTurn(ctx context.Context, k *conn, cmd *protocol.Command, x *execution, s *protocol.Stop, gen int64) protocol.Receipt {
	if !c.fenceDispatch(s) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.stopReceipt(k, cmd, s, gen)
	}

	proof, err := x.conn.Interrupt(ctx, s.ID)
	run(c.test.afterInterrupt)

	c.mu.Lock()
	defer c.mu.Unlock()
	if s.State == protocol.StopSuperseded {
		return c.stopReceipt(k, cmd, s, gen)
	}
	s.TurnProof, _ = json.Marshal(proof)
	s.CancelledDialogs = proof.CancelledDialogs
	c.cancelledLocked(x, proof.CancelledDialogs, "interrupt "+s.ID)
	s.Effects = effectReport(proof.Effects)
	s.ApprovalDisposition = c.approvalDispositionLocked()
	c.st.stopRunning = false
	if err != nil || proof.Uncertain || x.exited {
		why := fmt.Sprint(proof.Reasons)
		switch {
		case err != nil:
			why = err.Error()
		case x.exited:
			// A settled turn on an engine that then died proves nothing
			// about its cohort: only a force stop does.
			why = "the engine exited during the interrupt; force stop to prove the cohort ended"
		}
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked("interrupt " + s.ID + " ended uncertain: " + why)
		c.markUncertainLocked("interrupt " + s.ID + " ended uncertain: " + why)
		c.transitionLocked(s, protocol.StopUncertain, why)
	} else {
		c.transitionLocked(s, protocol.StopReconciled, "turn proof: native queue "+proof.NativeQueue)
		// Reopen only under valid current control: a takeover, a
		// revocation or an overlap meanwhile keeps it closed.
		if c.st.binding == protocol.BindingActive && c.st.exec == x {
			c.st.admission, c.st.reason = true, ""
		}
	}
	c.publishBindingLocked()
	return c.stopReceipt(k, cmd, s, gen)
}

// fenceDispatch waits for a prompt already past admission to finish its
// write; one not yet there is refused at dispatch, admission being closed
// (H9). The dispatch lock is held only for that, never across the
// engine's wait: takeovers and recovery control on other connections are
// answered while an abort hangs. False when a force stop superseded s.
func (c *Controller) fenceDispatch(s *protocol.Stop) bool {
	c.dispatch.Lock()
	defer c.dispatch.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.State == protocol.StopSuperseded {
		return false
	}
	c.transitionLocked(s, protocol.StopCancelling, "clear_queue, then abort")
	return true
}

// effectReport turns tool calls started and never ended into uncertain
// effects: killing or aborting never counts as rollback.
func effectReport(open []engine.Effect) *protocol.EffectReport {
	r := &protocol.EffectReport{Record: protocol.RecordEffectReport, Uncertain: []protocol.Effect{}, Disposition: protocol.DispositionReconciled}
	for _, e := range open {
		r.Uncertain = append(r.Uncertain, protocol.Effect{CallID: e.CallID, Tool: e.Name, Reason: "started-without-end"})
	}
	if len(r.Uncertain) > 0 {
		r.Disposition = protocol.DispositionUncertain
	}
	return r
}

func (c *Controller) stopReceipt(k *conn, cmd *protocol.Command, s *protocol.Stop, gen int64) protocol.Receipt {
	state := protocol.ReceiptUncertain
	switch s.State {
	case protocol.StopReconciled:
		state = protocol.ReceiptReconciled
	case protocol.StopStopped:
		state = protocol.ReceiptStopped
	}
	r := protocol.Receipt{Record: protocol.RecordReceipt, ID: newID("rc-"), Request: cmd.Request, Command: cmd.Type, State: state,
		Revision: 1, Execution: s.Execution, Generation: gen, Actor: Actor, Connection: k.id, Digest: fingerprint(cmd),
		Stop: s.ID, Reason: s.Reason}
	c.audit(audit.Receipt, k, fmt.Sprintf("%s %s: %s", cmd.Type, cmd.Request, state),
		map[string]string{"REQUEST": cmd.Request, "RECEIPT": r.ID, "STATE": state, "STOP": s.ID})
	return r
}

// forceStop needs an answered confirmation; it supersedes a running
// interrupt (H10) and reaches stopped only with a cohort proof.
func (c *Controller) forceStop(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	c.mu.Lock()
	if c.st.revoked[k.id] || c.st.controller != k.id {
		defer c.mu.Unlock()
		return nil, c.checkControlLocked(k, cmd)
	}
	if cmd.Generation == nil || *cmd.Generation != c.st.generation {
		defer c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeStaleGeneration, "the controller generation is %d", c.st.generation)
	}
	x := c.st.exec
	unreleased := c.unreleasedLocked()
	switch {
	case (x == nil || x.handle == nil) && !unreleased:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeNoEngine, "no engine cohort is known to stop: %s", c.wayOutLocked())
	case c.st.forceRunning:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeFenced, "force stop %s is already running", c.st.stop.ID)
	case c.st.binding == protocol.BindingStopped:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeFenced, "already stopped with a proof: %s", c.wayOutLocked())
	}
	if r := c.useConfirmationLocked(k, cmd.Confirmation, protocol.CmdForceStop); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	if unreleased {
		return c.withdrawByStopLocked(k, cmd), nil
	}
	if ps := c.st.pending; ps != nil {
		// The cohort is already proven gone: write the held proof now,
		// signal nothing.
		gen := c.st.generation
		c.mu.Unlock()
		return deferred(func() protocol.Receipt { return c.recordHeld(k, cmd, ps, gen) }), nil
	}
	s := c.fenceForceLocked(x, "")
	gen := c.st.generation
	c.mu.Unlock()
	return deferred(func() protocol.Receipt { return c.killCohort(k, cmd, x, s, gen) }), nil
}

// fenceForceLocked begins a force stop of x (beginForceLocked), closes
// admission and publishes the binding; why, if not "", says what asked
// for it when no client did (shutdown.go). Callers hold mu.
func (c *Controller) fenceForceLocked(x *execution, why string) *protocol.Stop {
	s := c.beginForceLocked(x.id)
	reason, fenced := "force stop "+s.ID+" in progress", "admission closed"
	if why != "" {
		reason, fenced = reason+": "+why, fenced+": "+why
	}
	c.closeAdmissionLocked(reason)
	c.unsettleLocked(x, "force stop "+s.ID+" began while the dialog was open; its outcome is not known")
	c.transitionLocked(s, protocol.StopFenced, fenced)
	c.publishBindingLocked()
	return s
}

// beginForceLocked makes the force stop of execution the running stop: it
// supersedes a stop still under way, the binding is stopping (shown so
// once the claim was asked to record it, unrecorded.go), and the queue
// pauses until its waiting part turns the queued items into drafts
// (recoverDrafts). Callers hold mu.
func (c *Controller) beginForceLocked(execution string) *protocol.Stop {
	s := &protocol.Stop{Record: protocol.RecordStop, ID: newID("s-"), Kind: protocol.StopForce, Execution: execution}
	if prev := c.st.stop; prev != nil {
		s.Predecessor = prev.ID
		if !terminal[prev.State] {
			c.transitionLocked(prev, protocol.StopSuperseded, "force stop "+s.ID+" took over")
		}
	}
	c.st.stop, c.st.stopRunning, c.st.forceRunning = s, true, true
	c.beginStoppingLocked()
	c.pauseQueueLocked("force stop " + s.ID + ": queued items become recovered drafts")
	return s
}

// killCohort is the waiting part of a client's force stop (endCohort),
// answered with its receipt.
func (c *Controller) killCohort(k *conn, cmd *protocol.Command, x *execution, s *protocol.Stop, gen int64) protocol.Receipt {
	c.endCohort(k, x, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopReceipt(k, cmd, s, gen)
}

// endCohort is the waiting part of a force stop: the claim records
// stopping (before anything else, so that a successor resumes the stop
// from here, K10), the cohort gets TERM, then the kill phase, then the
// proof. k is the connection that asked, nil for none.
func (c *Controller) endCohort(k *conn, x *execution, s *protocol.Stop) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	run(c.test.beforeClaimStop)
	refused := c.recordStopping(ctx, k, s.ID, "force stop "+s.ID)
	c.recoverDrafts(s)
	c.mu.Lock()
	c.transitionLocked(s, protocol.StopStopping, fmt.Sprintf("SIGTERM to the cohort, %s grace, then freeze and kill%s", c.cfg.Grace, refused))
	c.mu.Unlock()
	if c.test.beforeKill != nil {
		c.stopping.add(-1)
		c.test.beforeKill()
		c.stopping.add(1)
	}
	run(c.test.inKill)
	c.cancelDialogs(x, s)
	res := x.handle.Stop(ctx, scopes.StopOptions{Stop: s.ID, Grace: c.cfg.Grace})
	c.finishStop(ctx, x, s, res)
}

// cancelDialogs cancels every native dialog the engine still holds before
// a force stop signals it, so an extension that waits on one lets the
// engine end, and records that on the stop and the approvals.
func (c *Controller) cancelDialogs(x *execution, s *protocol.Stop) {
	if x.conn == nil {
		return
	}
	ids := x.cancelDecisions()
	if len(ids) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.CancelledDialogs = append(s.CancelledDialogs, ids...)
	c.cancelledLocked(x, ids, "force stop "+s.ID)
	c.audit(audit.Transition, nil, fmt.Sprintf("force stop %s cancelled %d native dialog(s) before signalling the cohort", s.ID, len(ids)),
		map[string]string{"STOP": s.ID, "DIALOGS": fmt.Sprint(ids)})
}

// conclude finishes a stop a restarted controller resumes (K10) or an
// observation of a cohort that is already empty. drafts is set for the
// resumed force stop only: a stop inferred at restart keeps queued items
// queued. A resumed force stop whose stop pipe the previous controller
// kept runs its TERM phase again, with the grace, before the kill phase:
// the previous one may have ended before it signalled, and without the
// pipe a TERM phase would end the engine's pid namespace with the engine
// and its tools without their grace, so it is skipped.
func (c *Controller) conclude(ctx context.Context, x *execution, stopID, why string, drafts bool) {
	s := &protocol.Stop{Record: protocol.RecordStop, ID: stopID, Kind: protocol.StopForce, Execution: x.id}
	c.mu.Lock()
	c.st.stop, c.st.stopRunning, c.st.forceRunning = s, true, true
	c.transitionLocked(s, protocol.StopStopping, why)
	c.mu.Unlock()
	if drafts {
		// The force stop being resumed may have been cut short while it
		// made its drafts (or recorded some only in memory): finish that
		// part too, so it never ends stopped with items still queued.
		c.recoverDrafts(s)
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	opts := scopes.StopOptions{Stop: stopID}
	if drafts && x.handle.StopPipe() != nil {
		opts.Grace = c.cfg.Grace
	}
	res := x.handle.Stop(ctx, opts)
	if drafts {
		c.dropKept(x.id, engineRoles...) // what the store kept for this stop (resume); the mark goes once the stop is recorded
	}
	c.finishStop(ctx, x, s, res)
}

// finishStop records a kill phase's outcome: stopped only when the claim
// accepts a cohort proof built from the complete observation.
func (c *Controller) finishStop(ctx context.Context, x *execution, s *protocol.Stop, res scopes.StopResult) {
	switch {
	case x.conn != nil:
		x.conn.Close() // the cohort is dead or not: stdin has no reader to keep
	case x.handle != nil:
		// An execution never opened (unopened): no connection owns its
		// pipes, so they are closed here or never.
		for _, f := range []*os.File{x.handle.Stdin, x.handle.Stdout} {
			if f != nil {
				f.Close()
			}
		}
	}
	var open []engine.Effect
	if x.conn != nil {
		open = x.conn.Turn().OpenTools
	}
	c.mu.Lock()
	claim := c.st.claim
	c.mu.Unlock()
	outcome, reason := res.Outcome, res.Reason
	var proof *claims.ProofRecord
	var held *proofs.CohortProof
	var heldErr error
	if outcome == scopes.Stopped {
		c.lastCheck(x)
		p, err := proofs.NewCohortProof(res.Observation)
		switch {
		case err != nil:
			outcome, reason = scopes.Uncertain, "the observation does not prove the stop: "+err.Error()
		case claim == nil:
			outcome, reason = scopes.Uncertain, "no claim to record the proof in"
		default:
			// A store that cannot be written now (full, read-only) does
			// not undo the proof: it is held and written again.
			if proof, err = c.recordProof(ctx, x, p, s.Kind); err != nil && retryable(err) {
				held, heldErr = p, err
			} else if err != nil {
				outcome, reason = scopes.Uncertain, "the claim refused the proof: "+err.Error()
			}
		}
	}
	if proof == nil && held == nil && claim != nil {
		c.claimDo(func(cl *claims.Claim) error { return cl.MarkUncertain(ctx, "force stop "+s.ID+": "+reason) })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Effects = effectReport(open)
	if x.conn == nil {
		// A stop this controller resumed or made after a restart never
		// read the engine's stream: which tool calls were open is not
		// known, so the report must not say reconciled.
		s.Effects.Uncertain = append(s.Effects.Uncertain, protocol.Effect{Reason: "stream-not-observed"})
		s.Effects.Disposition = protocol.DispositionUncertain
	}
	s.ApprovalDisposition = c.approvalDispositionLocked()
	c.st.stopRunning, c.st.forceRunning = false, false
	switch {
	case proof != nil:
		c.stoppedLocked(x, s, proof)
	case held != nil:
		c.holdProofLocked(x, s, held, heldErr)
	default:
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked("force stop " + s.ID + " ended uncertain: " + reason)
		c.transitionLocked(s, protocol.StopUncertain, reason)
	}
	c.publishBindingLocked()
}
