package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestConvAddRefusesATakenSeat: one seat tuple (seat, project, workspace)
// holds one conversation. A second session on a seat another conversation
// uses is refused `configuration`, naming that conversation and the fix,
// and writes nothing; it was accepted, and the second controller then
// refused to start for as long as the first one's claim held the seat.
// The same conversation again, its --replace, another seat or workspace,
// and the seat once its conversation was removed are all accepted.
func TestConvAddRefusesATakenSeat(t *testing.T) {
	sandboxtest.Require(t) // conv rm asks the user manager
	bin := sandboxtest.Bin(t, "mosaicctl")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	entry, _ := fakeEngine(t, stubmodel.Script{})
	proj := filepath.Join(home, "app")
	add := func(seat, name string, extra ...string) []string {
		if err := os.MkdirAll(filepath.Join(proj, ".pi", "state", seat, "sessions"), 0o755); err != nil {
			t.Fatal(err)
		}
		return append([]string{"conv", "add", "--project", proj, "--seat", seat, "--engine", entry,
			"--session", filepath.Join(proj, ".pi", "state", seat, "sessions", name)}, extra...)
	}
	first := strings.TrimSpace(mustRun(t, bin, add("alice", "x.jsonl")...))
	for _, tc := range []struct {
		name    string
		before  []string // run first, when set
		args    []string
		refused bool
	}{
		{"another session on the seat", nil, add("alice", "y.jsonl"), true},
		{"the same conversation again", nil, add("alice", "x.jsonl"), false},
		{"its own replace", nil, add("alice", "x.jsonl", "--replace", "--model", "m2"), false},
		{"another seat", nil, add("bob", "y.jsonl"), false},
		{"another workspace", nil, add("alice", "z.jsonl", "--workspace", "w2"), false},
		{"the seat once its conversation is removed", []string{"conv", "rm", first}, add("alice", "y.jsonl"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				mustRun(t, bin, tc.before...)
			}
			r := run(t, bin, tc.args...)
			if !tc.refused {
				if r.code != 0 {
					t.Fatalf("exit %d, stderr %q; want it accepted", r.code, r.stderr)
				}
				return
			}
			wantRefusal(t, r, protocol.CodeConfiguration)
			for _, want := range []string{"taken by conversation " + first, "`mosaicctl conv rm " + first + "`", "another seat"} {
				if !strings.Contains(r.stderr, want) {
					t.Fatalf("stderr %q does not say %q", r.stderr, want)
				}
			}
			if out := mustRun(t, bin, "conv", "list"); strings.Count(out, proj) != 1 {
				t.Fatalf("a refused add changed the store:\n%s", out)
			}
		})
	}
}
