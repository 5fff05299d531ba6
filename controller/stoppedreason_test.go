package controller

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
)

// TestStoppedReasonOfAWithdrawnLaunch: a restart that finds a withdrawn
// launch closes admission saying what was observed, never that a proof
// ended it; any other stopped claim keeps the proof's wording.
func TestStoppedReasonOfAWithdrawnLaunch(t *testing.T) {
	body := []byte(`{"type":"withdrawn","basis":"no-incarnation","execution":"e-1",` +
		`"unit":{"unit":"mosaic-engine-c-e\\x2d1.scope","load_state":"not-found","active_state":"inactive"}}`)
	tests := []struct {
		name  string
		proof *claims.ProofRecord
		want  string
		never string
	}{
		{"withdrawn", &claims.ProofRecord{Type: claims.ProofWithdrawn, Body: body}, "no cohort proof", "stopped with a proof"},
		{"cohort", &claims.ProofRecord{Type: "cohort"}, "stopped with a proof", "withdrawn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stoppedReason(claims.Record{State: claims.Stopped, Proof: tt.proof})
			if !strings.Contains(got, tt.want) || strings.Contains(got, tt.never) {
				t.Fatalf("admission reason %q; want %q, never %q", got, tt.want, tt.never)
			}
		})
	}
}
