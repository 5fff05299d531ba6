package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// TestAttachApprovalInTmux: a pending select shows in an observer's attach
// read-only, with its labels inert and who may answer; once the terminal
// takes control the re-projected decision takes a digit, and the engine
// receives exactly that label, once.
func TestAttachApprovalInTmux(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	if _, err := exec.LookPath("tmux"); err != nil {
		sandboxtest.Unavailable(t, "tmux is not installed: %v", err)
	}
	labels := []string{"Allow <i>once</i>", "multi\nline", "\u202egnp.exe\u202c"}
	entry, stdinLog := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Dialog: &stubmodel.Dialog{Method: "select", Title: "Gate \x1b[31mRED\x1b[0m", Options: labels}, Text: []string{"after the gate"}},
	}})
	id, _, path := startConversation(t, bin, "approve-attach", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lib := activeLib(t, ctx, path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	tsock := filepath.Join(t.TempDir(), "tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", tsock, "kill-server").Run() })
	p := startPane(t, tsock, "approve", bin+" attach "+id)
	p.wait("an observer's status line", func(rows []string) bool { return strings.Contains(status(rows, id), " | observer | ") })
	if _, err := lib.c.Prompt(ctx, "gated"); err != nil {
		t.Fatal(err)
	}
	rows := p.wait("the approval, read-only", func(rows []string) bool {
		return strings.Contains(strings.Join(rows, "\n"), "read-only: only the controller")
	})
	screen := strings.Join(rows, "\n")
	for _, want := range []string{"Gate ^[[31mRED^[[0m", "1: Allow <i>once</i>", "2: multi^Jline", "3: <U+202E>gnp.exe<U+202C>"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the screen lacks %q:\n%s", want, screen)
		}
	}
	p.keys("3") // an observer's digit answers nothing
	p.keys("C-t")
	p.wait("the controller's keys", func(rows []string) bool {
		return strings.Contains(strings.Join(rows, "\n"), "1-3 answers with exactly that choice")
	})
	p.keys("3")
	waitFor(t, func() bool { return len(responsesIn(stdinLog)) > 0 })
	waitFor(t, func() bool { return lib.runs() >= 1 })
	got := responsesIn(stdinLog)
	if len(got) != 1 || got[0]["value"] != labels[2] {
		t.Fatalf("the engine read %v; want one response with %q", got, labels[2])
	}
}

// responsesIn returns the extension_ui_response records in a stdin log.
func responsesIn(stdinLog string) []map[string]any {
	b, _ := os.ReadFile(stdinLog)
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["type"] == "extension_ui_response" {
			out = append(out, m)
		}
	}
	return out
}
