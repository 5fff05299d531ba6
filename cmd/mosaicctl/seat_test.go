package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
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
	bin, home, entry := seatHome(t)
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

// TestConvRmRefusesAHeldSeat: `conv rm` of a conversation whose own claim
// still holds its seat unproven is refused with the claim's code and the
// way to prove its stop: removed, nothing could ever prove it, and the
// seat would stay held. A proven stop is free, and the conversation goes.
func TestConvRmRefusesAHeldSeat(t *testing.T) {
	bin, home, entry := seatHome(t)
	store, err := claims.Open(filepath.Join(home, ".local", "state", "mosaic", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		to     func(c *claims.Claim) error // from reserved
		code   string                      // "" when removed
		broken bool                        // its file made not to load first
	}{
		{"reserved", func(*claims.Claim) error { return nil }, protocol.CodeAlreadyActive, false},
		{"uncertain", func(c *claims.Claim) error {
			if err := c.BeginLaunch(ctx); err != nil {
				return err
			}
			return c.MarkUncertain(ctx, "test")
		}, protocol.CodeUnsafeReplacement, false},
		{"stopped with a proof", func(c *claims.Claim) error { return c.Abandon(ctx, "test") }, "", false},
		// Its claims are found by the id the revisions carry: the seat
		// key is in the file that does not load.
		{"reserved, the file broken", func(*claims.Claim) error { return nil }, protocol.CodeAlreadyActive, true},
		{"stopped with a proof, the file broken", func(c *claims.Claim) error { return c.Abandon(ctx, "test") }, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proj := filepath.Join(home, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.MkdirAll(filepath.Join(proj, ".pi", "state", "alice", "sessions"), 0o755); err != nil {
				t.Fatal(err)
			}
			id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "alice", "--engine", entry,
				"--session", filepath.Join(proj, ".pi", "state", "alice", "sessions", "main.jsonl")))
			c, err := store.Acquire(ctx, claims.Request{Keys: claims.Keys{Seat: claims.SeatKey{Seat: "alice", Project: proj, Workspace: "default"}, Session: "new:" + id},
				Binding: "b-1", Harness: "pi", Conversation: id, Branch: "main", Execution: "e-1"})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.to(c); err != nil {
				t.Fatal(err)
			}
			if tc.broken {
				file := filepath.Join(home, ".config", "mosaic", "conversations", id+".toml")
				if err := os.WriteFile(file, []byte("garbage = [\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := run(t, bin, "conv", "rm", id)
			if tc.code == "" {
				if r.code != 0 {
					t.Fatalf("exit %d, stderr %q; want it removed", r.code, r.stderr)
				}
				return
			}
			wantRefusal(t, r, tc.code)
			if want := "`mosaicctl stop --take --yes " + id + "`"; !strings.Contains(r.stderr, want) {
				t.Fatalf("stderr %q does not say %q", r.stderr, want)
			}
			if tc.broken {
				if _, err := os.Stat(filepath.Join(home, ".config", "mosaic", "conversations", id+".toml")); err != nil {
					t.Fatalf("a refused conv rm removed %s: %v", id, err)
				}
				return
			}
			mustRun(t, bin, "conv", "show", id)
		})
	}
}

// seatHome gives a test its own home (conversations, claims) and the fake
// engine to pin; conv rm asks the user manager, hence the sandbox.
func seatHome(t *testing.T) (bin, home, entry string) {
	t.Helper()
	sandboxtest.Require(t)
	bin = sandboxtest.Bin(t, "mosaicctl")
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".local", "state"))
	entry, _ = fakeEngine(t, stubmodel.Script{})
	return bin, home, entry
}
