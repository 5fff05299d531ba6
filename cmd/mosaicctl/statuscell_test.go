package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
)

// TestClaimCellNamesWhatTheStopRestsOn: status says a withdrawn launch or
// a reservation never launched for what it is, never "stopped (proof)",
// which a cohort or boot proof alone earns.
func TestClaimCellNamesWhatTheStopRestsOn(t *testing.T) {
	tests := []struct {
		proofType string
		want      string
	}{
		{"cohort", "stopped (proof)"},
		{"boot", "stopped (proof)"},
		{claims.ProofWithdrawn, "stopped (launch withdrawn, no cohort proof)"},
		{claims.ProofUnlaunched, "stopped (never launched)"},
	}
	for _, tt := range tests {
		t.Run(tt.proofType, func(t *testing.T) {
			st := &convStatus{Conversation: "pi-1", Claim: &claimStatus{State: claims.Stopped, Conversation: "pi-1",
				ProofType: tt.proofType, ProofDigest: "sha256:00", Proven: true}}
			got := claimCell(st)
			if got != tt.want {
				t.Fatalf("claim cell %q, want %q", got, tt.want)
			}
			if tt.proofType == claims.ProofWithdrawn && !strings.Contains(got, "no cohort proof") {
				t.Fatalf("a withdrawn launch reads %q", got)
			}
		})
	}
}

// TestClaimCellOfAnotherConversation: a seat whose last claim is another
// conversation's proven stop is free (the controller launches past it),
// and status says so; one that claim still holds names it and its state.
func TestClaimCellOfAnotherConversation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  claims.State
		proven bool
		want   string
	}{
		{"proven stop", claims.Stopped, true, "none (seat free; pi-a's claim stopped)"},
		{"stopped without a proof", claims.Stopped, false, "seat held by pi-a (stopped)"},
		{"uncertain", claims.Uncertain, false, "seat held by pi-a (uncertain)"},
		{"active", claims.Active, false, "seat held by pi-a (active)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &convStatus{Conversation: "pi-y", Claim: &claimStatus{State: tc.state, Conversation: "pi-a", Proven: tc.proven}}
			if got := claimCell(st); got != tc.want {
				t.Fatalf("claim cell %q, want %q", got, tc.want)
			}
		})
	}
}
