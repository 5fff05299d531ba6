package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// approve answers one native decision (P1): only the current controller,
// only through the current projection, only with exactly one of its
// native choices, and once. It runs under the dispatch lock, so a
// takeover either committed first (the answer refuses revoked, H5) or
// waits for the write. A second identical answer sends nothing and gets
// the same resolution (H6); a different one refuses (H7); one after the
// deadline refuses and leaves the decision to native evidence (H8).
func (c *Controller) approve(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	unlock := c.lockDispatch()
	defer func() { unlock() }()
	if r := c.checkControlLocked(k, cmd); r != nil {
		return nil, r
	}
	x := c.st.exec
	if x == nil || x.conn == nil {
		return nil, protocol.Refuse(protocol.CodeNoEngine, "no engine holds a decision to answer")
	}
	a, r := c.approvalLocked(x, cmd)
	if r != nil {
		return nil, r
	}
	if a.rec.State == protocol.ApprovalResolved && a.rec.ResolvedBy != nil {
		if a.rec.Chosen != cmd.Choice {
			return nil, protocol.Refuse(protocol.CodeApprovalConflict, "approval %s was already answered %s by request %s; a decision is answered once",
				a.rec.ID, quoted(a.rec.Chosen), a.rec.ResolvedBy.Request)
		}
		c.audit(audit.Receipt, k, fmt.Sprintf("approval %s: the same answer again (request %s); nothing sent", a.rec.ID, cmd.Request),
			map[string]string{"REQUEST": cmd.Request, "APPROVAL": a.rec.ID, "DECISION": a.rec.Decision})
		rec := a.rec
		rec.Request = cmd.Request
		return done(rec), nil
	}
	if a.rec.State != protocol.ApprovalPending {
		return nil, protocol.Refuse(protocol.CodeApprovalClosed, "approval %s is %s (%s); it can no longer be answered", a.rec.ID, a.rec.State, a.rec.Reason)
	}
	if !a.deadline.IsZero() && !time.Now().Before(a.deadline) {
		x.forget(a.rec.Decision)
		c.changeLocked(a, protocol.ApprovalUncertain, "the native timeout passed: the engine resolved the dialog by itself and said nothing")
		return nil, protocol.Refuse(protocol.CodeApprovalClosed, "approval %s passed its deadline %s; the engine resolved it by itself, so the answer was not sent", a.rec.ID, a.rec.Deadline)
	}
	// The write happens outside mu (a full pipe must not stall every
	// client) and inside the dispatch lock (no takeover, no other answer).
	decision := a.rec.Decision
	c.mu.Unlock()
	run(c.test.beforeAnswer)
	err := x.answer(decision, cmd.Choice, c.commandTimeout())
	c.mu.Lock()
	switch {
	case errors.Is(err, engine.ErrAnswerShape):
		return nil, protocol.Refuse(protocol.CodeApprovalChoice, "%s is not one of the native choices of approval %s (%s); send one exactly",
			quoted(cmd.Choice), a.rec.ID, quotedList(a.rec.Choices))
	case errors.Is(err, engine.ErrDialogClosed):
		if a.rec.State == protocol.ApprovalPending {
			c.changeLocked(a, protocol.ApprovalUncertain, "the engine no longer holds the dialog open")
		}
		return nil, protocol.Refuse(protocol.CodeApprovalClosed, "approval %s is %s (%s); nothing was sent", a.rec.ID, a.rec.State, a.rec.Reason)
	case err != nil:
		c.changeLocked(a, protocol.ApprovalUncertain, "the answer may not have reached the engine: "+err.Error())
		return nil, protocol.Wrap(protocol.CodeEngineGone, err, "answer approval %s", a.rec.ID)
	}
	a.rec.Chosen = cmd.Choice
	a.rec.ResolvedBy = &protocol.Decider{Actor: Actor, Connection: k.id, Request: cmd.Request, Generation: c.st.generation}
	a.rec.Request = cmd.Request
	c.changeLocked(a, protocol.ApprovalResolved, "answered by the controller")
	rec := a.rec
	a.rec.Request = ""
	return done(rec), nil
}

// approvalLocked finds the decision an answer names: the current
// projection of a decision of the current execution.
func (c *Controller) approvalLocked(x *execution, cmd *protocol.Command) (*approval, *protocol.Refusal) {
	a := x.approvals.projections[cmd.Approval]
	switch {
	case cmd.Approval == "" || cmd.Choice == "":
		return nil, protocol.Refuse(protocol.CodeMalformed, "an approval names the approval id and a choice")
	case a == nil:
		return nil, protocol.Refuse(protocol.CodeApprovalUnknown, "no approval %s in execution %s; list them with observe", quoted(cmd.Approval), x.id)
	case cmd.Decision != "" && cmd.Decision != a.rec.Decision:
		return nil, protocol.Refuse(protocol.CodeApprovalUnknown, "approval %s belongs to decision %s, not %s", a.rec.ID, a.rec.Decision, quoted(cmd.Decision))
	case a.rec.ID != cmd.Approval:
		return nil, protocol.Refuse(protocol.CodeApprovalSuperseded, "approval %s was superseded by %s when control moved; answer that one", quoted(cmd.Approval), a.rec.ID)
	}
	return a, nil
}

// quotedList quotes each choice, for a refusal that names them.
func quotedList(choices []string) string {
	q := make([]string, len(choices))
	for i, s := range choices {
		q[i] = quoted(s)
	}
	return strings.Join(q, ", ")
}
