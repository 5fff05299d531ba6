package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRefusalOfAPartlyWrittenRequest: the server refuses a line over its
// cap and closes while the client is still writing it. The refusal names
// no request (the server never read one), and it is this request's
// answer: the client half-closes, reads it and returns it, not an unknown
// outcome (a partial line is never dispatched).
func TestRefusalOfAPartlyWrittenRequest(t *testing.T) {
	tests := []struct {
		name  string
		bytes int
	}{
		{"just over the cap", protocol.MaxLine + 1},
		{"many times the socket buffer", 8 * protocol.MaxLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil)
			c := observed(t, f)
			ctx := testContext(t)
			if _, err := c.Takeover(ctx); err != nil {
				t.Fatal(err)
			}
			_, err := c.Do(ctx, protocol.Command{Type: protocol.CmdPrompt, Text: strings.Repeat("x", tt.bytes)})
			var lost *OutcomeError
			if errors.As(err, &lost) {
				t.Fatalf("outcome reported unknown, the server's refusal was lost: %v", err)
			}
			wantCode(t, err, protocol.CodeLineTooLong)
			if f.count(protocol.CmdPrompt) != 0 {
				t.Fatal("the partial line was dispatched")
			}
		})
	}
}
