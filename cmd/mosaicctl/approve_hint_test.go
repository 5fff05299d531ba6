package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestApproveListNamesYesForClaudePermission: a Claude tool's permission
// request (a select of allow-once and deny) is answered with --yes/--no,
// as README's Claude section does, so the listing names them beside
// --choice; a select of other labels does not.
func TestApproveListNamesYesForClaudePermission(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    protocol.Approval
		want string
	}{
		{"permission", protocol.Approval{ID: "ap-1", Form: protocol.FormSelect, State: protocol.ApprovalPending,
			Choices: []string{engine.ChoiceAllowOnce, engine.ChoiceDeny}}, "(or --yes to allow once, --no to deny)"},
		{"deny only", protocol.Approval{ID: "ap-2", Form: protocol.FormSelect, State: protocol.ApprovalPending,
			Choices: []string{engine.ChoiceDeny}}, "(or --no to deny)"},
		{"confirm", protocol.Approval{ID: "ap-3", Form: protocol.FormConfirm, State: protocol.ApprovalPending,
			Choices: []string{"true", "false"}}, "(or --yes / --no)"},
		{"select", protocol.Approval{ID: "ap-4", Form: protocol.FormSelect, State: protocol.ApprovalPending,
			Choices: []string{"red", "blue"}}, ""},
	} {
		var out bytes.Buffer
		printApprovals(&session{id: "pi-00000000000000000000", out: &out}, []protocol.Approval{tc.a})
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "answer:") {
				line = l
			}
		}
		if !strings.HasSuffix(line, "--choice LABEL`") && tc.want == "" || tc.want != "" && !strings.HasSuffix(line, tc.want) {
			t.Errorf("%s: answer line %q, want it to end in %q", tc.name, line, tc.want)
		}
	}
}

// TestApproveNothingPendingNamesTheList: answering when nothing is
// pending is refused before any takeover, saying so and naming the
// listing, not just "no approval is pending".
func TestApproveNothingPendingNamesTheList(t *testing.T) {
	_, err := pickApproval([]protocol.Approval{{ID: "ap-1", State: protocol.ApprovalUncertain}}, "")
	if protocol.CodeOf(err) != protocol.CodeApprovalUnknown || !strings.Contains(err.Error(), "control was not taken") ||
		!strings.Contains(err.Error(), "`mosaicctl approve ID` lists the open ones") {
		t.Fatalf("refusal %v; want approval-unknown saying control was not taken and naming the listing", err)
	}
}
