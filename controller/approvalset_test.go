package controller

import (
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestByDecisionNamesTheOpenRequest: an engine that asks again under an
// id it closed names the request it holds open now: byDecision, which
// the native timeout, a withdrawal and a stop's cancel go through, finds
// the live approval, never the one settled before under the same id.
func TestByDecisionNamesTheOpenRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states []string // in arrival order, all under decision "d"
		want   int
	}{
		{"answered then pending", []string{protocol.ApprovalResolved, protocol.ApprovalPending}, 1},
		{"pending then answered", []string{protocol.ApprovalPending, protocol.ApprovalResolved}, 0},
		{"all settled", []string{protocol.ApprovalResolved, protocol.ApprovalResolvedNatively}, 1},
		{"settled, pending, settled", []string{protocol.ApprovalResolved, protocol.ApprovalPending, protocol.ApprovalResolvedNatively}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s approvalSet
			var all []*approval
			s.add(&approval{rec: protocol.Approval{ID: "other", Decision: "e", State: protocol.ApprovalPending}})
			for i, st := range tc.states {
				a := &approval{rec: protocol.Approval{ID: string(rune('a' + i)), Decision: "d", State: st}}
				all = append(all, a)
				if !s.add(a) {
					t.Fatal("add refused")
				}
			}
			if got := s.byDecision("d"); got != all[tc.want] {
				t.Fatalf("byDecision found %+v, want %+v", got.rec, all[tc.want].rec)
			}
		})
	}
}
