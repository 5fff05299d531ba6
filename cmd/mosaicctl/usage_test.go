package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestLostControlNamesTheFix: a verb whose command was refused because
// another client took control between its takeover and its command
// (stale-generation, revoked: two `--take` racing) says that nothing was
// done and what to run, as every refusal of a verb does.
func TestLostControlNamesTheFix(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	for _, code := range []string{protocol.CodeStaleGeneration, protocol.CodeRevoked} {
		t.Run(code, func(t *testing.T) {
			err := withHint(protocol.Refuse(code, "the controller generation is 3, not the expected one; someone else took control"), "prompt", id)
			if protocol.CodeOf(err) != code {
				t.Fatalf("withHint changed the code: %v", err)
			}
			for _, want := range []string{"nothing was done", "`mosaicctl attach " + id + "`", "run the command again"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s refusal %q; want it to say %q", code, err, want)
				}
			}
		})
	}
}
