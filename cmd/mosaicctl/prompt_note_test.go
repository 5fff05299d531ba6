package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestPromptNamesAnApprovalOnce: `approve --take` answers a decision the
// prompt's turn waits on, and its takeover re-projects the decision
// (the old projection superseded, a new pending one under a new id)
// before the answer resolves it. The prompt names the decision once: a
// second note at that moment read as the answer not taken. A second
// decision of the same turn gets its own note.
func TestPromptNamesAnApprovalOnce(t *testing.T) {
	approval := func(id, decision, state string) client.Update {
		return client.Update{Record: "approval", Approval: &protocol.Approval{Record: "approval", ID: id, Decision: decision,
			Execution: "e-1", Form: protocol.FormConfirm, State: state}}
	}
	settled := client.Update{Record: "event", Event: &protocol.Event{Record: "event", Kind: protocol.EventRunSettled, Execution: "e-1", Seq: 9}}
	tp := &tape{wake: make(chan struct{})}
	for _, u := range []client.Update{
		approval("ap-1", "d-1", protocol.ApprovalPending),
		approval("ap-1", "d-1", protocol.ApprovalSuperseded), // approve --take took control
		approval("ap-2", "d-1", protocol.ApprovalPending),    // the same decision, projected anew
		approval("ap-2", "d-1", protocol.ApprovalResolved),
		approval("ap-3", "d-2", protocol.ApprovalPending), // a second dialog of the turn
		approval("ap-3", "d-2", protocol.ApprovalResolved),
		settled,
	} {
		tp.add(u)
	}
	var out, notes strings.Builder
	s := &session{id: "pi-0", tape: tp, out: &out, notes: &notes}
	if err := s.answer(t.Context(), 0, &protocol.Receipt{ID: "rc-1", Execution: "e-1"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(notes.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "approval ap-1 ") || !strings.Contains(lines[0], " d-1 --choice") ||
		!strings.Contains(lines[1], "approval ap-3 ") || !strings.Contains(lines[1], " d-2 --choice") {
		t.Fatalf("notes:\n%s\nwant one for decision d-1 (as ap-1), one for d-2", notes.String())
	}
}
