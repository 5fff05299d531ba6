package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
)

// TestNoKeyNote: a Claude conversation added with no env file, or with
// the empty one README's `install -m 0600 /dev/null` makes, has no key:
// its engine answers every prompt "Not logged in · Please run /login"
// with exit 0 (measured with Claude Code 2.1.328). conv add says so and
// names the fix; an env file with a key or a token gets no note.
func TestNoKeyNote(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, env, want string
	}{
		{"no env file", "", "has no env file"},
		{"empty", file("empty.env", ""), "sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN"},
		{"base url only", file("url.env", "ANTHROPIC_BASE_URL=http://127.0.0.1:9\n"), "sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN"},
		{"key", file("key.env", "ANTHROPIC_API_KEY=k\n"), ""},
		{"token", file("token.env", "ANTHROPIC_AUTH_TOKEN=t\n"), ""},
	} {
		cv := &conversations.Conversation{ID: "pi-00000000000000000000", EngineKind: engine.KindClaude,
			Claude: &conversations.Claude{EnvFile: tc.env}}
		var w bytes.Buffer
		noteNoKey(&w, cv)
		switch {
		case tc.want == "" && w.Len() > 0:
			t.Errorf("%s: a note %q", tc.name, w.String())
		case tc.want != "" && !strings.Contains(w.String(), tc.want):
			t.Errorf("%s: note %q, want %q", tc.name, w.String(), tc.want)
		}
	}
	var w bytes.Buffer
	noteNoKey(&w, &conversations.Conversation{ID: "pi-00000000000000000000", EngineKind: engine.KindPi})
	if w.Len() > 0 {
		t.Errorf("a Pi conversation: a note %q", w.String())
	}
}

// TestClaudeAddEmptyEnvFileNoted: README's Claude section, step by step:
// the env file made with `install -m 0600 /dev/null` and added before the
// key is put in it is accepted (it is read at each launch), with a note
// on stderr naming the missing key; no --env-file gets the same.
func TestClaudeAddEmptyEnvFileNoted(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	cl := sandboxtest.Claude(t)
	proj, _ := project(t, "nokey")
	env := writeEnvFile(t, "", 0o600)
	for _, tc := range []struct {
		seat string
		args []string
		want string
	}{
		{"nokey", []string{"--env-file", env}, "sets neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN"},
		{"noenv", nil, "has no env file"},
	} {
		r := run(t, bin, append([]string{"conv", "add", "--project", proj, "--seat", tc.seat, "--engine-kind", "claude", "--engine", cl}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%s: conv add: exit %d, %q", tc.seat, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		t.Cleanup(func() { run(t, bin, "conv", "rm", id) })
		if !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "Not logged in") {
			t.Errorf("%s: conv add said %q, want a note %q", tc.seat, r.stderr, tc.want)
		}
	}
}
