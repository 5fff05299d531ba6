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
