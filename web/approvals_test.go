package web

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

func rec(id, decision, state string, choices ...string) *protocol.Approval {
	r := protocol.RecordApproval
	if state == protocol.ApprovalResolved {
		r = protocol.RecordApprovalResolved
	}
	return &protocol.Approval{Record: r, ID: id, Decision: decision, Form: protocol.FormSelect,
		Title: "t\u202e<b>", Choices: choices, State: state}
}

func code(err error) string {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return fmt.Sprint(err)
}

// TestTabApprovals covers how a tab holds decisions for its page: a
// takeover's superseded projection and its successor, an answer to the
// old projection still reaching the controller (which names the current
// one), exact labels kept while the view is inert, the bound keeping the
// open ones, and an observe that no longer lists an open decision.
func TestTabApprovals(t *testing.T) {
	label := "multi\nline \x1b[1m\u202eX"
	t.Run("takeover reprojects", func(t *testing.T) {
		var tb tab
		tb.holdApprovalLocked(rec("ap-1", "d1", protocol.ApprovalPending, "ok", label))
		tb.holdApprovalLocked(rec("ap-1", "d1", protocol.ApprovalSuperseded, "ok", label))
		tb.holdApprovalLocked(rec("ap-2", "d1", protocol.ApprovalPending, "ok", label))
		vs := tb.approvalViewsLocked()
		if len(vs) != 1 || vs[0].ID != "ap-2" || vs[0].State != protocol.ApprovalPending {
			t.Fatalf("views %+v: want the one decision at its current projection ap-2, pending", vs)
		}
		if vs[0].Choices[1] != "multi^Jline ^[[1m<U+202E>X" || vs[0].Title != "t<U+202E><b>" {
			t.Errorf("the view %q / %q is not the inert text", vs[0].Title, vs[0].Choices[1])
		}
		for _, id := range []string{"ap-1", "ap-2"} {
			c, d, err := tb.choiceLocked(id, 1)
			if err != nil || c != label || d != "d1" {
				t.Errorf("choice 1 of %s: %q %q %v: want the exact label of decision d1", id, c, d, err)
			}
		}
		if _, _, err := tb.choiceLocked("ap-2", 2); code(err) != protocol.CodeApprovalChoice {
			t.Errorf("choice 2 of two: %v, want %s", err, protocol.CodeApprovalChoice)
		}
		if _, _, err := tb.choiceLocked("ap-9", 0); code(err) != protocol.CodeApprovalUnknown {
			t.Errorf("an approval the tab never saw: %v, want %s", err, protocol.CodeApprovalUnknown)
		}
	})
	t.Run("superseded of an unknown decision is not shown", func(t *testing.T) {
		var tb tab
		tb.holdApprovalLocked(rec("ap-1", "d1", protocol.ApprovalSuperseded, "ok"))
		if n := len(tb.approvalViewsLocked()); n != 0 {
			t.Fatalf("%d views: want none until the current projection arrives", n)
		}
	})
	t.Run("bound keeps the open ones", func(t *testing.T) {
		var tb tab
		tb.holdApprovalLocked(rec("ap-open", "open", protocol.ApprovalPending, "ok"))
		for i := range maxHeldApprovals + 10 {
			tb.holdApprovalLocked(rec(fmt.Sprint("ap-", i), fmt.Sprint("d", i), protocol.ApprovalResolved, "ok"))
		}
		vs := tb.approvalViewsLocked()
		if len(vs) != maxHeldApprovals || vs[0].ID != "ap-open" || vs[len(vs)-1].ID != fmt.Sprint("ap-", maxHeldApprovals+9) {
			t.Fatalf("%d views, first %s, last %s: want %d, the open one kept and the newest last", len(vs), vs[0].ID, vs[len(vs)-1].ID, maxHeldApprovals)
		}
		// Every one open: the newest is still kept.
		var all tab
		for i := range maxHeldApprovals + 1 {
			all.holdApprovalLocked(rec(fmt.Sprint("ap-", i), fmt.Sprint("d", i), protocol.ApprovalPending, "ok"))
		}
		vs = all.approvalViewsLocked()
		if len(vs) != maxHeldApprovals || vs[0].ID != "ap-1" || vs[len(vs)-2].ID != fmt.Sprint("ap-", maxHeldApprovals-1) ||
			vs[len(vs)-1].ID != fmt.Sprint("ap-", maxHeldApprovals) {
			t.Fatalf("%d views, first %s, last %s: want %d, the oldest gone and the newest kept", len(vs), vs[0].ID, vs[len(vs)-1].ID, maxHeldApprovals)
		}
		// The pending one that had to go is not dropped silently: the
		// page is told which, and that the controller still holds it.
		if len(all.outbox) != 1 || !strings.Contains(string(all.outbox[0]), "ap-0") || !strings.Contains(string(all.outbox[0]), "not shown") {
			t.Fatalf("records %q: want one saying that pending approval ap-0 is not shown", all.outbox)
		}
	})
	// An engine can open dialogs the controller shows disabled (a form
	// mosaic never answers, text too large, or one past the controller's
	// own bound) as fast as it likes; they must not push out of the page
	// a pending decision the person has to answer (the gate on a tool
	// call), which the page would otherwise drop without a word while
	// the controller keeps it pending.
	t.Run("a flood of unanswerable dialogs keeps the pending one", func(t *testing.T) {
		var tb tab
		tb.holdApprovalLocked(rec("ap-gate", "gate", protocol.ApprovalPending, "Allow", "Deny"))
		for i := range maxHeldApprovals + 10 {
			tb.holdApprovalLocked(rec(fmt.Sprint("ap-", i), fmt.Sprint("d", i), protocol.ApprovalDisabled))
		}
		vs := tb.approvalViewsLocked()
		if len(vs) != maxHeldApprovals || vs[0].ID != "ap-gate" || vs[len(vs)-1].ID != fmt.Sprint("ap-", maxHeldApprovals+9) {
			t.Fatalf("%d views, first %s, last %s: want %d, the pending one kept and the newest last", len(vs), vs[0].ID, vs[len(vs)-1].ID, maxHeldApprovals)
		}
		if c, d, err := tb.choiceLocked("ap-gate", 0); err != nil || c != "Allow" || d != "gate" {
			t.Fatalf("choice 0 of the pending one: %q %q %v: want it answerable from the page", c, d, err)
		}
		// Uncertain ones go after the disabled ones and before a pending
		// one, and the page is told.
		for i := range maxHeldApprovals {
			tb.holdApprovalLocked(rec(fmt.Sprint("ap-u", i), fmt.Sprint("u", i), protocol.ApprovalUncertain))
		}
		vs = tb.approvalViewsLocked()
		if len(vs) != maxHeldApprovals || vs[0].ID != "ap-gate" || vs[1].ID != "ap-u1" {
			t.Fatalf("%d views, first %s, %s: want the pending one, then the uncertain ones but the oldest", len(vs), vs[0].ID, vs[1].ID)
		}
		if len(tb.outbox) != 1 || !strings.Contains(string(tb.outbox[0]), "ap-u0") {
			t.Fatalf("records %q: want one saying that uncertain approval ap-u0 is not shown", tb.outbox)
		}
	})
	t.Run("an observe that no longer lists it", func(t *testing.T) {
		var tb tab
		tb.holdApprovalLocked(rec("ap-1", "d1", protocol.ApprovalPending, "ok"))
		tb.holdApprovalLocked(rec("ap-2", "d2", protocol.ApprovalResolved, "ok"))
		tb.observedApprovalsLocked(nil)
		vs := tb.approvalViewsLocked()
		if !vs[0].Unseen || vs[1].Unseen {
			t.Fatalf("unseen %v %v: want the open one marked, the resolved one left", vs[0].Unseen, vs[1].Unseen)
		}
		tb.observedApprovalsLocked([]protocol.Approval{*rec("ap-3", "d1", protocol.ApprovalPending, "ok")})
		if vs := tb.approvalViewsLocked(); vs[0].Unseen || vs[0].ID != "ap-3" {
			t.Fatalf("%+v: want d1 open again at ap-3", vs[0])
		}
	})
}

// TestTabApprovalProjectionsBounded: an engine that opens dialog after
// dialog under one decision id (it may reuse an id it closed; each is a
// new projection with up to 64 KiB of choices) leaves the tab holding the
// choices of the current projection and the one it follows, as the
// controller does, not of every projection it ever saw. Both stay
// answerable; an older one is unknown to the tab (reload the page).
func TestTabApprovalProjectionsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closed string // the state each dialog ends in before the next opens
	}{
		{"resolved dialogs", protocol.ApprovalResolved},
		{"timed out dialogs", protocol.ApprovalUncertain},
		{"superseded by takeovers", protocol.ApprovalSuperseded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tb tab
			const n = 500
			for i := range n {
				id := fmt.Sprintf("ap-%d", i)
				tb.holdApprovalLocked(rec(id, "d1", protocol.ApprovalPending, "yes", strings.Repeat("x", 1024)))
				tb.holdApprovalLocked(rec(id, "d1", tc.closed, "yes", strings.Repeat("x", 1024)))
			}
			if len(tb.approvals) != 1 {
				t.Fatalf("%d decisions held, want the one", len(tb.approvals))
			}
			if got := len(tb.approvals[0].choices); got > 2 {
				t.Errorf("the tab holds the choices of %d projections of one decision, want at most 2", got)
			}
			for _, id := range []string{fmt.Sprintf("ap-%d", n-1), fmt.Sprintf("ap-%d", n-2)} {
				if c, d, err := tb.choiceLocked(id, 0); err != nil || c != "yes" || d != "d1" {
					t.Errorf("choice 0 of %s: %q %q %v, want the exact label of d1", id, c, d, err)
				}
			}
			if _, _, err := tb.choiceLocked("ap-0", 0); code(err) != protocol.CodeApprovalUnknown {
				t.Errorf("the first projection: %v, want %s", err, protocol.CodeApprovalUnknown)
			}
		})
	}
}
