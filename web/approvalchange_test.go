package web

import (
	"slices"
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
