package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRefusedBeforeTakingControl: a `--take` verb whose refusal the
// client can decide (a text admission refuses, an interrupt with nothing
// running) is refused before it takes control: the client that holds
// control (here a library connection, as an attached terminal is) keeps
// it, the generation does not move, and nothing reaches the model.
func TestRefusedBeforeTakingControl(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "notake", stubmodel.Script{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lib := activeLib(t, ctx, pc.path)
	ctl, err := lib.c.Takeover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  string
	}{
		{"a slash command", []string{"prompt", "--take", pc.id, "/help"}, "", protocol.CodeTextPolicy},
		{"a slash after spaces", []string{"prompt", "--take", pc.id, "  /help"}, "", protocol.CodeTextPolicy},
		{"an empty text", []string{"prompt", "--take", pc.id, ""}, "", protocol.CodeDraft},
		{"an empty standard input", []string{"prompt", "--take", pc.id, "-"}, "", protocol.CodeDraft},
		{"a slash edit", []string{"queue", "edit", "--take", pc.id, "q-0000000000000000", "/help"}, "", protocol.CodeTextPolicy},
		{"an interrupt of the idle engine", []string{"interrupt", "--take", pc.id}, "", protocol.CodeNoTurn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(pc.bin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			wantRefusal(t, runCmd(t, cmd), tc.code)
		})
	}
	st := readStatus(t, pc.bin, pc.id)
	if st.Generation == nil {
		t.Fatalf("status after the refusals shows no generation: %+v", st)
	}
	if *st.Generation != ctl.Generation {
		t.Fatalf("generation after the refusals %d, want %d (no takeover)", *st.Generation, ctl.Generation)
	}
	if s := lib.c.State(); s.Mode != "controller" || s.Controller != s.Connection {
		t.Fatalf("the library connection lost control: mode %s, controller %s, itself %s", s.Mode, s.Controller, s.Connection)
	}
	if got := pc.stub.Requests(); len(got) != 0 {
		t.Fatalf("a refused prompt reached the model: %v", got)
	}
}
