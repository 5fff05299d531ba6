package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestConsentBeforeTake: a stop that can only be refused is refused
// before anything is sent, naming every fix at once. `stop --take`
// without --yes and without a terminal is confirmation-required before it
// takes control (the takeover would revoke whoever holds it for a stop
// that cannot happen); `stop` without --take is not-controller, and names
// --yes too when nobody could consent, so fixing the first refusal never
// meets a second; each names what would have been stopped.
func TestConsentBeforeTake(t *testing.T) {
	const id = "pi-0123456789abcdef0123"
	b := &protocol.Binding{Execution: "e-0123456789abcdef", Scope: "mosaic-engine-x.scope"}
	for _, tc := range []struct {
		name           string
		take, yes, tty bool
		code           string   // "": not refused
		want           []string // besides what would be stopped and "nothing was done"
	}{
		{name: "--take, no --yes, no terminal", take: true, code: protocol.CodeConfirmationRequired,
			want: []string{"control was not taken", "`mosaicctl stop --take --yes " + id + "`"}},
		{name: "--take --yes", take: true, yes: true},
		{name: "--take on a terminal", take: true, tty: true},
		{name: "neither --take nor --yes, no terminal", code: protocol.CodeNotController,
			want: []string{"pass --take to take control first and --yes to consent", "`mosaicctl stop --take --yes " + id + "`"}},
		{name: "--yes without --take", yes: true, code: protocol.CodeNotController,
			want: []string{"pass --take to take control first: `mosaicctl stop --take --yes " + id + "`"}},
		{name: "no --take on a terminal", tty: true, code: protocol.CodeNotController,
			want: []string{"pass --take to take control first: `mosaicctl stop --take " + id + "` (it asks y/N here)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := consentBeforeTake(id, tc.take, tc.yes, tc.tty, b)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if protocol.CodeOf(err) != tc.code {
				t.Fatalf("err %v; want %s", err, tc.code)
			}
			// The one-shot verbs' hint adds nothing to a refusal that
			// names its fixes already.
			if got := withHint(err, "stop", id); got.Error() != err.Error() {
				t.Errorf("the hint was added again: %q", got)
			}
			for _, want := range append(tc.want, "nothing was done", "execution e-0123456789abcdef: every process in mosaic-engine-x.scope") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q; want it to say %q", err, want)
				}
			}
		})
	}
}
