package main

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// approvalsOf holds the open decisions attach knows, by native decision:
// what observe answered, then every approval record since. A superseded
// projection is skipped: the new one follows it.
type approvalsOf struct {
	open  map[string]protocol.Approval
	order []string // decisions in arrival order
	// shown is the projection on screen; hidden the ones Esc hid.
	shown  string
	hidden map[string]bool
}

func (s *approvalsOf) reset(list []protocol.Approval) {
	s.open, s.order, s.shown = map[string]protocol.Approval{}, nil, ""
	if s.hidden == nil {
		s.hidden = map[string]bool{}
	}
	for _, a := range list {
		s.put(a)
	}
}

// put records one approval record and returns a notice for a decision
// that closed ("" otherwise).
func (s *approvalsOf) put(a protocol.Approval) string {
	if s.open == nil {
		s.reset(nil)
	}
	switch a.State {
	case protocol.ApprovalSuperseded:
		return ""
	case protocol.ApprovalPending, protocol.ApprovalDisabled, protocol.ApprovalUncertain:
		if _, ok := s.open[a.Decision]; !ok {
			s.order = append(s.order, a.Decision)
		}
		s.open[a.Decision] = a
		return ""
	}
	delete(s.open, a.Decision)
	if a.ResolvedBy != nil {
		return fmt.Sprintf("approval %s %s by %s: %s", a.ID, a.State, a.ResolvedBy.Connection, terminal.SanitizeLine(a.Chosen))
	}
	return fmt.Sprintf("approval %s %s (%s)", a.ID, a.State, a.Evidence)
}

// next is the approval to show: the one shown if it is still open, else
// the first pending one not hidden.
func (s *approvalsOf) next() (protocol.Approval, bool) {
	for _, d := range s.order {
		if a, ok := s.open[d]; ok && a.ID == s.shown {
			return a, true
		}
	}
	for _, d := range s.order {
		if a, ok := s.open[d]; ok && a.State == protocol.ApprovalPending && !s.hidden[a.ID] {
			return a, true
		}
	}
	return protocol.Approval{}, false
}

// syncApproval shows the decision to answer (or watch) in the composer's
// place, with the keys only a controller gets; it hides it once closed.
func (a *attacher) syncApproval() {
	s := &a.approvals
	if s.shown != "" && a.scr.Approval() == nil {
		s.hidden[s.shown] = true // Esc hid it
	}
	ap, ok := s.next()
	if !ok {
		a.scr.HideApproval()
		s.shown = ""
		return
	}
	st := a.c.State()
	s.shown = ap.ID
	a.scr.ShowApproval(terminal.ApprovalView{Approval: ap,
		CanAnswer: a.connected && st.Mode == client.ModeController && ap.State == protocol.ApprovalPending})
}

// approve answers the shown approval with choice.
func (a *attacher) approve(choice string) {
	v := a.scr.Approval()
	if v == nil {
		return
	}
	ap := v.Approval
	a.request("approve", func(ctx context.Context, c *client.Client) (string, error) {
		r, err := c.Approve(ctx, ap.ID, choice, ap.Decision)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("approval %s %s: %s", r.ID, r.State, terminal.SanitizeLine(r.Chosen)), nil
	})
}
