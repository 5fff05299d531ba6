package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/engine/claude"
)

// writeEnvFile writes a Claude env file of mode perm holding body.
func writeEnvFile(t *testing.T, body string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude.env")
	if err := os.WriteFile(p, []byte(body), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConvAddClaude, as a user types it: conv add --engine-kind claude
// pins the binary (version and SHA-256), chooses the session UUID and
// checks the env file now; Pi's flags, a readable env file, a name
// outside the allow-list and an adopted session without a transcript
// are refused with the fix; a Pi conversation refuses the Claude flags.
func TestConvAddClaude(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	cl := sandboxtest.Claude(t)
	proj, session := project(t, "cw")
	good := writeEnvFile(t, "ANTHROPIC_API_KEY=sk-dummy\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n", 0o600)
	base := []string{"conv", "add", "--project", proj, "--seat", "cw", "--engine-kind", "claude", "--engine", cl}

	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"pi session", []string{"--env-file", good, "--session", session}, "usage: --session is a Pi setting"},
		{"pi provider", []string{"--env-file", good, "--provider", "x"}, "usage: --provider is a Pi setting"},
		{"env file 0644", []string{"--env-file", writeEnvFile(t, "ANTHROPIC_API_KEY=k\n", 0o644)}, "env-file"},
		{"env file name", []string{"--env-file", writeEnvFile(t, "ANTHROPIC_API_KEY=k\nNODE_OPTIONS=--require=/x\n", 0o600)}, "NODE_OPTIONS"},
		{"resume without transcript", []string{"--env-file", good, "--resume-session", "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e"}, "no transcript at"},
		{"resume not a uuid", []string{"--env-file", good, "--resume-session", "../x"}, "not a session UUID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, bin, append(append([]string(nil), base...), tc.flags...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want a refusal containing %q", r.code, r.stderr, tc.want)
			}
		})
	}
	// The session's advice answers --session only, not another Pi flag.
	if r := run(t, bin, append(append([]string(nil), base...), "--env-file", good, "--thinking", "high")...); r.code != 2 ||
		!strings.Contains(r.stderr, "usage: --thinking is a Pi setting") || strings.Contains(r.stderr, "chooses the session") {
		t.Fatalf("--thinking on a Claude conversation: exit %d, %q", r.code, r.stderr)
	}
	if r := run(t, bin, "conv", "add", "--project", proj, "--seat", "cw", "--session", session, "--env-file", good); r.code == 0 || !strings.Contains(r.stderr, "add --engine-kind claude") {
		t.Fatalf("Pi conversation with --env-file: exit %d, %q", r.code, r.stderr)
	}
	if out := mustRun(t, bin, "conv", "list"); strings.Contains(out, proj) {
		t.Fatalf("a refused add left a conversation:\n%s", out)
	}

	added := run(t, bin, append(base, "--env-file", good, "--model", "claude-sonnet-4-5")...)
	id := strings.TrimSpace(added.stdout)
	if added.code != 0 {
		t.Fatalf("conv add: exit %d, %q", added.code, added.stderr)
	}
	t.Cleanup(func() { run(t, bin, "conv", "rm", id) })
	// Masks are made at a launch: an env file outside mosaic's keys is
	// out of reach only of the engines launched after the add, and the
	// add says so.
	if want := good + " is masked in the engines launched from now on"; !strings.Contains(added.stderr, want) {
		t.Fatalf("conv add with an env file outside mosaic's keys says %q, want %q", added.stderr, want)
	}
	show := mustRun(t, bin, "conv", "show", id)
	uuid := regexp.MustCompile(`(?m)^\s*session = "([0-9a-f-]{36})"$`).FindStringSubmatch(show)
	if uuid == nil || !claude.ValidSession(uuid[1]) {
		t.Fatalf("conv show has no session UUID:\n%s", show)
	}
	for _, want := range []string{`engine_kind = "claude"`, `version = "` + claude.PinnedVersion + `"`,
		`sha256 = "` + claude.PinnedSHA256 + `"`, `env_file = "` + good + `"`, `model = "claude-sonnet-4-5"`} {
		if !strings.Contains(show, want) {
			t.Fatalf("conv show lacks %s:\n%s", want, show)
		}
	}
	if strings.Contains(show, "sk-dummy") {
		t.Fatalf("conv show prints the env file's key:\n%s", show)
	}
	if out := mustRun(t, bin, "conv", "list"); !strings.Contains(out, uuid[1]) {
		t.Fatalf("conv list does not show the session %s:\n%s", uuid[1], out)
	}
	// A seat runs one conversation: a second add on it is refused, naming
	// the first.
	if r := run(t, bin, append(base, "--env-file", good)...); r.code == 0 || !strings.Contains(r.stderr, "configuration") || !strings.Contains(r.stderr, id) {
		t.Fatalf("a second add on seat cw: exit %d, stderr %q; want configuration naming %s", r.code, r.stderr, id)
	}
	onSeat := func(seat string) []string {
		return []string{"conv", "add", "--project", proj, "--seat", seat, "--engine-kind", "claude", "--engine", cl}
	}
	// The controller chooses the session: another seat's add is a second
	// conversation, never the first one's session.
	id2 := strings.TrimSpace(mustRun(t, bin, append(onSeat("cw2"), "--env-file", good)...))
	t.Cleanup(func() { run(t, bin, "conv", "rm", id2) })
	if id2 == id {
		t.Fatalf("two adds share id %s", id)
	}
	// Under mosaic's keys, every engine masks it, those running too:
	// nothing to say.
	kept := keyFile(t, "conv-add-note.env", "ANTHROPIC_API_KEY=sk-dummy\n")
	r := run(t, bin, append(onSeat("cw3"), "--env-file", kept)...)
	if r.code != 0 || strings.Contains(r.stderr, "note:") {
		t.Fatalf("conv add with an env file in mosaic's keys: exit %d, stderr %q; want no note", r.code, r.stderr)
	}
	t.Cleanup(func() { run(t, bin, "conv", "rm", strings.TrimSpace(r.stdout)) })
}
