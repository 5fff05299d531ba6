package web

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestApprovalsChange: a stream sends the decisions a tab holds as a
// change, the order and only the views that changed, so a dialog the
// engine keeps changing (or a stream of dialogs opened and settled)
// does not cost the whole set per wake-up.
func TestApprovalsChange(t *testing.T) {
	var tb tab
	for _, d := range []string{"d1", "d2", "d3"} {
		tb.holdApprovalLocked(rec("ap-"+d, d, protocol.ApprovalPending, "ok"))
	}
	steps := []struct {
		name  string
		do    func()
		order []string
		set   []string // nil: no change at all
	}{
		{"first: the whole set", func() {}, []string{"a1", "a2", "a3"}, []string{"a1", "a2", "a3"}},
		{"nothing changed", func() {}, nil, nil},
		{"one resolved", func() { tb.holdApprovalLocked(rec("ap-d2", "d2", protocol.ApprovalResolved, "ok")) }, []string{"a1", "a2", "a3"}, []string{"a2"}},
		{"one gone", func() { tb.approvals = slices.Delete(tb.approvals, 0, 1) }, []string{"a2", "a3"}, []string{}},
		{"one new", func() { tb.holdApprovalLocked(rec("ap-d4", "d4", protocol.ApprovalPending, "ok")) }, []string{"a2", "a3", "a4"}, []string{"a4"}},
	}
	var sent map[string]string
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			var c *approvalsChange
			c, sent = tb.approvalsChangeLocked(sent)
			if s.set == nil {
				if c != nil {
					t.Fatalf("nothing changed, yet a change %+v", c)
				}
				return
			}
			if c == nil {
				t.Fatalf("no change, want order %q set %q", s.order, s.set)
			}
			var set []string
			for k := range c.Set {
				set = append(set, k)
			}
			slices.Sort(set)
			if !slices.Equal(c.Order, s.order) || !slices.Equal(set, s.set) && len(set)+len(s.set) > 0 {
				t.Errorf("change: order %q set %q, want order %q set %q", c.Order, set, s.order, s.set)
			}
		})
	}
}

// TestApprovalsChangeKeepsDigests: what a stream keeps of the views it
// sent is a digest each, never the view: the engine fills 64 decisions
// with 64 KiB of text that JSON escapes six times over, and a copy per
// stream would cost each open tab that much again.
func TestApprovalsChangeKeepsDigests(t *testing.T) {
	var tb tab
	big := strings.Repeat("<", 64<<10)
	for i := range maxHeldApprovals {
		d := fmt.Sprint("d", i)
		tb.holdApprovalLocked(rec("ap-"+d, d, protocol.ApprovalPending, big))
	}
	c, sent := tb.approvalsChangeLocked(nil)
	if c == nil || len(c.Set) != maxHeldApprovals {
		t.Fatalf("the first change holds %v views, want all %d", c, maxHeldApprovals)
	}
	kept := 0
	for k, v := range sent {
		kept += len(k) + len(v)
	}
	if kept > maxHeldApprovals*128 {
		t.Errorf("the stream keeps %d bytes of what it sent, want a digest per view (at most %d)", kept, maxHeldApprovals*128)
	}
	tb.holdApprovalLocked(rec("ap-d7", "d7", protocol.ApprovalResolved, big))
	if c, _ := tb.approvalsChangeLocked(sent); c == nil || len(c.Set) != 1 || c.Set["a8"] == nil {
		t.Errorf("one view changed: change %v, want only a8", c)
	}
}
