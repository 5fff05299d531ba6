package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestConsentBeforeTake: `stop --take` without --yes and without a
// terminal is refused confirmation-required before it takes control (the
// takeover would revoke whoever holds it for a stop that cannot happen),
// saying so and naming what would have been stopped and the fix.
func TestConsentBeforeTake(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	b := &protocol.Binding{Execution: "e-0123456789abcdef", Scope: "mosaic-engine-x.scope"}
	for _, tc := range []struct {
		name           string
		take, yes, tty bool
		refused        bool
	}{
		{name: "--take, no --yes, no terminal", take: true, refused: true},
		{name: "--take --yes", take: true, yes: true},
		{name: "--take on a terminal", take: true, tty: true},
		{name: "no --take: the controller answers not-controller", take: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := consentBeforeTake(id, tc.take, tc.yes, tc.tty, b)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if protocol.CodeOf(err) != protocol.CodeConfirmationRequired {
				t.Fatalf("err %v; want confirmation-required", err)
			}
			for _, want := range []string{"control was not taken", "`mosaicctl stop --take --yes " + id + "`", "execution e-0123456789abcdef: every process in mosaic-engine-x.scope"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q; want it to say %q", err, want)
				}
			}
		})
	}
}
