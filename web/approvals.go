package web

import (
	"fmt"
	"slices"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// maxHeldApprovals bounds the decisions a tab holds for its page: the
// open ones and the latest closed ones (who decided what). Past it the
// oldest of the least needed kind goes first (evictOrder): a closed one,
// then one the controller shows disabled (never answered), then an
// uncertain one, and a pending one last. The engine chooses how many
// dialogs it opens and the controller holds up to 256 per execution
// (most of them disabled, if it likes), so oldest-first alone would let a
// flood of unanswerable dialogs push the pending one the person must
// answer off the page while the controller keeps it pending. Holding all
// 256 was weighed: each may carry 64 KiB of text, for every tab.
const maxHeldApprovals = 64

// evictOrder is the order in which held decisions leave a full tab, by
// their view's state. A state not listed (the closed ones) goes first.
var evictOrder = []string{protocol.ApprovalDisabled, protocol.ApprovalUncertain, protocol.ApprovalPending}

// approvalView is a native decision as the page shows it: every string
// the engine wrote (title, message, choices, the chosen label) made inert
// by terminal.SanitizeLine, as the terminal's dialog shows it. The page
// answers by the index of a choice; the server sends the exact label it
// holds (heldApproval.choices), so the engine's bytes never pass through
// the page and cannot be altered there.
type approvalView struct {
	Record     string            `json:"record"`
	ID         string            `json:"id"`
	Decision   string            `json:"decision"`
	Execution  string            `json:"execution"`
	Generation int64             `json:"generation"`
	Controller string            `json:"controller"`
	Form       string            `json:"form"`
	Title      string            `json:"title"`
	Message    string            `json:"message"`
	Choices    []string          `json:"choices"`
	State      string            `json:"state"`
	Reason     string            `json:"reason"`
	Deadline   string            `json:"deadline"`
	Chosen     string            `json:"chosen"`
	ResolvedBy *protocol.Decider `json:"resolvedBy"`
	Cancelled  bool              `json:"cancelled"`
	Evidence   string            `json:"evidence"`
	// Unseen: the decision was open and a later observe no longer lists
	// it, so it was settled while this tab's connection was not reading;
	// its outcome is in the audit log, not guessed here.
	Unseen bool `json:"unseen"`
}

// heldApproval is one decision a tab holds: its latest projection as the
// page sees it, and the exact choices of every projection id the page may
// still name (a superseded one goes to the controller, which refuses it
// naming the current one).
type heldApproval struct {
	decision string // the engine's decision id, exactly
	key      string // the decision's key on the page's stream (approvalchange.go)
	view     approvalView
	choices  map[string][]string // projection id -> exact choices
}

func viewOf(a *protocol.Approval) approvalView {
	v := approvalView{Record: a.Record, ID: a.ID, Decision: terminal.SanitizeLine(a.Decision), Execution: a.Execution,
		Generation: a.Generation, Controller: a.Controller, Form: terminal.SanitizeLine(a.Form),
		Title: terminal.SanitizeLine(a.Title), Message: terminal.SanitizeLine(a.Message), Choices: sanitizeAll(a.Choices),
		State: a.State, Reason: terminal.SanitizeLine(a.Reason), Deadline: a.Deadline, Chosen: terminal.SanitizeLine(a.Chosen),
		Cancelled: a.Cancelled, Evidence: terminal.SanitizeLine(a.Evidence)}
	if a.ResolvedBy != nil {
		d := *a.ResolvedBy
		d.Actor, d.Connection, d.Request = terminal.SanitizeLine(d.Actor), terminal.SanitizeLine(d.Connection), terminal.SanitizeLine(d.Request)
		v.ResolvedBy = &d
	}
	return v
}

// open states may still change; closed ones are history.
func openState(v approvalView) bool {
	return !v.Unseen && (v.State == protocol.ApprovalPending || v.State == protocol.ApprovalDisabled || v.State == protocol.ApprovalUncertain)
}

// holdApprovalLocked folds an approval record into the tab's set. A
// superseded projection only marks its id as one the page may still name;
// the current projection replaces the decision's view.
func (t *tab) holdApprovalLocked(a *protocol.Approval) {
	i := slices.IndexFunc(t.approvals, func(h *heldApproval) bool { return h.decision == a.Decision })
	if i < 0 {
		if a.State == protocol.ApprovalSuperseded {
			return // the current projection follows it
		}
		h := &heldApproval{decision: a.Decision, choices: map[string][]string{}}
		t.keyApprovalLocked(h)
		t.approvals = append(t.approvals, h)
		i = len(t.approvals) - 1
		if len(t.approvals) > maxHeldApprovals {
			t.evictLocked(t.approvals[:i]) // the new one (last) is never the one to go
			i = len(t.approvals) - 1
		}
	}
	h := t.approvals[i]
	h.choices[a.ID] = slices.Clone(a.Choices)
	if a.State == protocol.ApprovalSuperseded && h.view.ID != a.ID {
		return
	}
	if prev := h.view.ID; prev != a.ID {
		h.view = viewOf(a)
		forgetProjections(h, prev)
		return
	}
	h.view = viewOf(a)
}

// forgetProjections keeps the exact choices of the decision's current
// projection and the one it follows (which a page not yet sent the
// current one may still name; the controller keeps those two as well),
// and lets go of the rest. An engine may open dialogs under one decision
// id without end (it reuses an id it closed, each with a new projection
// of up to 64 KiB of choices): kept by projection, they would grow the
// tab for as long as it lives.
func forgetProjections(h *heldApproval, prev string) {
	for id := range h.choices {
		if id != h.view.ID && id != prev {
			delete(h.choices, id)
		}
	}
}

// evictLocked removes the decision of old (the held ones but the newest)
// that is least needed (evictOrder), the oldest of its kind. One the
// person could still act on or must know the outcome of (uncertain,
// pending) is not dropped silently: the page gets a record naming it,
// and that the controller still holds it.
func (t *tab) evictLocked(old []*heldApproval) {
	j := slices.IndexFunc(old, func(h *heldApproval) bool { return !openState(h.view) })
	for _, st := range evictOrder {
		if j >= 0 {
			break
		}
		j = slices.IndexFunc(old, func(h *heldApproval) bool { return h.view.State == st })
	}
	if j < 0 {
		j = 0
	}
	v := t.approvals[j].view
	t.approvals = slices.Delete(t.approvals, j, j+1)
	if openState(v) && v.State != protocol.ApprovalDisabled {
		t.pushLocked(mustJSON(map[string]any{"record": "web-error", "message": fmt.Sprintf(
			"%s approval %s (decision %s) is not shown here any more: more than %d decisions are open at once, and the page holds %d. "+
				"The controller still holds it: `mosaicctl approve %s` lists every open decision and answers one",
			v.State, clip(v.ID, 40), clip(v.Decision, 40), maxHeldApprovals, maxHeldApprovals, t.conv)}))
	}
}

// observedApprovalsLocked takes an observe's open decisions: those the
// tab held open and the observe does not list were settled while the
// connection was not reading, so they are marked unseen, never guessed.
func (t *tab) observedApprovalsLocked(list []protocol.Approval) {
	for _, h := range t.approvals {
		if openState(h.view) && !slices.ContainsFunc(list, func(a protocol.Approval) bool { return a.Decision == h.decision }) {
			h.view.Unseen = true
		}
	}
	for i := range list {
		t.holdApprovalLocked(&list[i])
	}
}

// approvalViewsLocked is what the page shows, oldest first.
func (t *tab) approvalViewsLocked() []approvalView {
	out := make([]approvalView, len(t.approvals))
	for i, h := range t.approvals {
		out[i] = h.view
	}
	return out
}

// choiceLocked returns the exact label the page's choice index names in
// projection id, and the decision it belongs to.
func (t *tab) choiceLocked(id string, index int) (choice, decision string, err error) {
	for _, h := range t.approvals {
		cs, ok := h.choices[id]
		if !ok {
			continue
		}
		if index < 0 || index >= len(cs) {
			return "", "", protocol.Refuse(protocol.CodeApprovalChoice, "approval %s has %d choices; the page named choice %d: reload the page", clip(id, 40), len(cs), index)
		}
		return cs[index], h.decision, nil
	}
	return "", "", protocol.Refuse(protocol.CodeApprovalUnknown, "this page holds no approval %s; reload the page to see the current ones", clip(id, 40))
}
