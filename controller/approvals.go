package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxApprovals bounds the decisions an execution keeps; the closed ones
// (resolved, resolved natively, uncertain and no longer open) go first.
const maxApprovals = 256

// maxApprovalText bounds the render data an approval keeps (title,
// message and choices together): 256 decisions of at most 64 KiB each. A
// larger dialog cannot be shown whole, so it is disabled and keeps only
// a 1 KiB prefix of its title and message.
const maxApprovalText = 64 << 10

// deadlineMargin is taken off a native timeout: Pi starts its timer before
// it writes the request, and drops an answer that arrives after it
// silently, so an answer too close to the end could be lost unseen.
const deadlineMargin = 250 * time.Millisecond

// approval is one native decision of an execution and its current
// projection. Guarded by Controller.mu.
type approval struct {
	rec protocol.Approval
	// prev is the projection the current one superseded: an answer to it
	// is told which is current; older ones are forgotten (unknown), so
	// takeovers do not grow the set.
	prev     string
	inRun    bool
	deadline time.Time
	timer    *time.Timer
}

// approvalSet is an execution's decisions in arrival order, and every
// projection id it handed out (superseded ones included, so an answer to
// an old one is told which is current).
type approvalSet struct {
	order       []*approval
	projections map[string]*approval
}

// byDecision returns the approval of native decision id: the newest live
// one, else the newest. An engine may ask again under an id it closed
// (the adapters refuse only an id still open), and what it says about the
// id now (a timeout, a withdrawal, a cancel) is about the request it holds
// open, never one settled before.
func (s *approvalSet) byDecision(id string) *approval {
	var newest *approval
	for i := len(s.order) - 1; i >= 0; i-- {
		a := s.order[i]
		switch {
		case a.rec.Decision != id:
		case live(a.rec.State):
			return a
		case newest == nil:
			newest = a
		}
	}
	return newest
}

// add keeps a within the bound: the oldest closed decision goes first.
// False when every kept decision is still live.
func (s *approvalSet) add(a *approval) bool {
	if s.projections == nil {
		s.projections = map[string]*approval{}
	}
	if len(s.order) >= maxApprovals {
		i := slices.IndexFunc(s.order, func(o *approval) bool { return !live(o.rec.State) })
		if i < 0 {
			return false
		}
		old := s.order[i]
		for id, p := range s.projections {
			if p == old {
				delete(s.projections, id)
			}
		}
		s.order = slices.Delete(s.order, i, i+1)
	}
	s.order = append(s.order, a)
	s.projections[a.rec.ID] = a
	return true
}

// live states are shown to a client that attaches: the decision is not
// settled yet.
func live(state string) bool {
	return state == protocol.ApprovalPending || state == protocol.ApprovalDisabled || state == protocol.ApprovalUncertain
}

// dialogOpened turns a native dialog into an approval and tells every
// client. Input and editor, and a dialog whose text framing cut, are
// shown disabled with a reason and never answered (P3).
func (c *Controller) dialogOpened(x *execution, ui *protocol.NativeUI) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := &approval{inRun: ui.InRun, rec: protocol.Approval{Record: protocol.RecordApproval, ID: newID("ap-"), Decision: ui.ID,
		Execution: x.id, Generation: c.st.generation, Controller: c.st.controller, Form: ui.Method,
		Title: ui.Title, Message: ui.Message, Choices: []string{}, State: protocol.ApprovalPending}}
	switch ui.Method {
	case protocol.FormConfirm:
		a.rec.Choices = []string{"true", "false"}
	case protocol.FormSelect:
		a.rec.Choices = slices.Clone(ui.Options)
	default:
		a.rec.State = protocol.ApprovalDisabled
		a.rec.Reason = fmt.Sprintf("a native %s form asks for free text; mosaic answers only confirm and select with the engine's exact choices, so nothing is sent", ui.Method)
	}
	size := len(ui.Title) + len(ui.Message)
	for _, o := range ui.Options {
		size += len(o)
	}
	if ui.Cut || size > maxApprovalText {
		a.rec.State, a.rec.Choices = protocol.ApprovalDisabled, []string{}
		a.rec.Title, a.rec.Message = clipTo(ui.Title, 1<<10), clipTo(ui.Message, 1<<10)
		a.rec.Reason = fmt.Sprintf("the dialog's text (%d bytes) is too large to show whole; what cannot be shown whole cannot be answered", size)
	}
	if ui.TimeoutMS > 0 {
		a.deadline = time.Now().Add(time.Duration(ui.TimeoutMS)*time.Millisecond - deadlineMargin)
		a.rec.Deadline = a.deadline.UTC().Format(time.RFC3339Nano)
		decision := ui.ID
		a.timer = time.AfterFunc(time.Until(a.deadline), func() { c.deadlinePassed(x, decision) })
	}
	if !x.approvals.add(a) {
		a.rec.State, a.rec.Choices = protocol.ApprovalDisabled, []string{}
		a.rec.Reason = fmt.Sprintf("the engine holds %d decisions open already", maxApprovals)
		if a.timer != nil {
			a.timer.Stop()
		}
	}
	c.broadcastLocked(a.rec)
	c.publishBindingLocked()
	c.auditEngine(engineOpened, fmt.Sprintf("native %s dialog %s opened as approval %s: %s", ui.Method, ui.ID, a.rec.ID, a.rec.State),
		map[string]string{"EXECUTION": x.id, "DECISION": ui.ID, "APPROVAL": a.rec.ID, "STATE": a.rec.State})
}

// engineOpened is the MOSAIC_ENGINE_CAUSED kind of a dialog the engine
// opened; what the engine settles by itself is "approval-" and the state.
const engineOpened = "approval-opened"

// auditEngine journals a transition the engine's own output caused. The
// engine repeats it at will (an extension may ask a confirm with a 1 ms
// timeout in a loop, three transitions a dialog), so it is counted like a
// peer's entries beyond the burst (audit.Entry.Engine): written whole, a
// flood of them would crowd the decisions out of journald's notice/info
// pool. The approval records themselves still reach every client.
func (c *Controller) auditEngine(kind, msg string, fields map[string]string) {
	c.log.Log(audit.Entry{Event: audit.Transition, Engine: kind, Message: msg, Fields: fields})
}

// deadlinePassed makes a still pending approval uncertain when its native
// timeout ends: Pi resolves it by itself (a confirm to false, a select to
// no choice) and writes nothing, so only later evidence settles it (P4).
func (c *Controller) deadlinePassed(x *execution, decision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := x.approvals.byDecision(decision)
	if a == nil {
		return
	}
	if x.conn != nil && (a.rec.State == protocol.ApprovalPending || a.rec.State == protocol.ApprovalDisabled) {
		x.forget(decision) // closed natively: never cancelled or answered now
	}
	if a.rec.State != protocol.ApprovalPending {
		return
	}
	c.nativeChangeLocked(a, protocol.ApprovalUncertain, "the native timeout passed: the engine resolved the dialog by itself and said nothing")
}

// changeLocked moves an approval to state and tells every client; the
// journal entry is a decision.
func (c *Controller) changeLocked(a *approval, state, reason string) {
	c.moveLocked(a, state, reason, false)
}

// nativeChangeLocked is changeLocked for a change the engine's output
// caused (its timeout, its settle, its withdrawal): counted beyond the
// burst (auditEngine).
func (c *Controller) nativeChangeLocked(a *approval, state, reason string) {
	c.moveLocked(a, state, reason, true)
}

func (c *Controller) moveLocked(a *approval, state, reason string, byEngine bool) {
	a.rec.State, a.rec.Reason = state, reason
	a.rec.Record = protocol.RecordApproval
	if state == protocol.ApprovalResolved || state == protocol.ApprovalResolvedNatively {
		a.rec.Record = protocol.RecordApprovalResolved
	}
	if a.timer != nil && state != protocol.ApprovalPending && state != protocol.ApprovalDisabled {
		a.timer.Stop()
	}
	c.broadcastLocked(a.rec)
	c.publishBindingLocked()
	if state != protocol.ApprovalPending && state != protocol.ApprovalDisabled {
		// A dialog raised outside a run held the queue back (dispatch.go);
		// its close lets the scheduler look at the head again.
		c.kickQueue()
	}
	msg := fmt.Sprintf("approval %s (decision %s): %s: %s", a.rec.ID, a.rec.Decision, state, reason)
	fields := map[string]string{"EXECUTION": a.rec.Execution, "DECISION": a.rec.Decision, "APPROVAL": a.rec.ID, "STATE": state}
	if byEngine {
		c.auditEngine("approval-"+state, msg, fields)
		return
	}
	c.audit(audit.Transition, nil, msg, fields)
}

// runSettled settles the uncertain approvals the run raised once the
// engine no longer holds their dialogs: the run that waited on them
// ended, so the engine closed them (native evidence, P4/H8).
func (c *Controller) runSettled(x *execution, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range x.approvals.order {
		if (a.rec.State != protocol.ApprovalUncertain && a.rec.State != protocol.ApprovalDisabled) || !a.inRun || (x.conn != nil && x.decisionOpen(a.rec.Decision)) {
			continue
		}
		a.rec.Evidence = fmt.Sprintf("run-settled (event %d): the run that raised the dialog ended, so the engine closed it", seq)
		c.nativeChangeLocked(a, protocol.ApprovalResolvedNatively, a.rec.Reason)
	}
}

// unsettleLocked makes every live approval of x uncertain, never denied
// (P6): an interrupt, a force stop or the engine's exit leaves its
// outcome to native evidence.
func (c *Controller) unsettleLocked(x *execution, why string) {
	if x == nil {
		return
	}
	for _, a := range x.approvals.order {
		if a.rec.State == protocol.ApprovalPending || a.rec.State == protocol.ApprovalDisabled {
			c.changeLocked(a, protocol.ApprovalUncertain, why) // never a denial: nobody chose
		}
	}
}

// cancelledLocked records that the controller cancelled these native
// dialogs itself, in a stop chain.
func (c *Controller) cancelledLocked(x *execution, ids []string, how string) {
	for _, id := range ids {
		if a := x.approvals.byDecision(id); a != nil && !a.rec.Cancelled {
			a.rec.Cancelled = true
			c.changeLocked(a, a.rec.State, a.rec.Reason+"; "+how+" cancelled the native dialog")
		}
	}
}

// reprojectLocked gives every live decision a new projection for the new
// generation and supersedes the old one (H5, P5): the decision and its
// text are unchanged, nothing is sent to the engine.
func (c *Controller) reprojectLocked() {
	x := c.st.exec
	if x == nil {
		return
	}
	for _, a := range x.approvals.order {
		if !live(a.rec.State) {
			continue
		}
		old := a.rec
		old.State, old.Reason, old.Record = protocol.ApprovalSuperseded, fmt.Sprintf("control moved to generation %d", c.st.generation), protocol.RecordApproval
		c.broadcastLocked(old)
		delete(x.approvals.projections, a.prev)
		a.prev = old.ID
		a.rec.ID, a.rec.Supersedes = newID("ap-"), old.ID
		a.rec.Generation, a.rec.Controller = c.st.generation, c.st.controller
		x.approvals.projections[a.rec.ID] = a
		c.broadcastLocked(a.rec)
	}
}

// liveApprovalsLocked are the current projections an attaching client
// needs: every decision not settled yet.
func (c *Controller) liveApprovalsLocked() []protocol.Approval {
	x := c.st.exec
	if x == nil {
		return nil
	}
	var out []protocol.Approval
	for _, a := range x.approvals.order {
		if live(a.rec.State) {
			out = append(out, a.rec)
		}
	}
	return out
}

// pendingApprovalsLocked counts what the controller may answer now.
func (c *Controller) pendingApprovalsLocked() int {
	n := 0
	if x := c.st.exec; x != nil {
		for _, a := range x.approvals.order {
			if a.rec.State == protocol.ApprovalPending {
				n++
			}
		}
	}
	return n
}

// nativeDialogOpenLocked reports whether the engine holds a native dialog
// open: answered, cancelled and timed-out ones are closed; a disabled
// input or editor stays open until its timeout, an interrupt or a stop.
// Dispatch of queued input holds while it is true (pinned Pi runs a prompt
// beside an open dialog). Callers hold mu.
func (c *Controller) nativeDialogOpenLocked() bool {
	x := c.st.exec
	return x != nil && x.conn != nil && x.openDecisions() > 0
}

// approvalDispositionLocked is a stop's approvalDisposition: uncertain
// while any decision of the execution is not settled by an answer or
// native evidence.
func (c *Controller) approvalDispositionLocked() string {
	if x := c.st.exec; x != nil {
		for _, a := range x.approvals.order {
			if live(a.rec.State) {
				return protocol.DispositionUncertain
			}
		}
	}
	if c.st.dialogSeen {
		return protocol.DispositionUncertain
	}
	return protocol.DispositionResolved
}
