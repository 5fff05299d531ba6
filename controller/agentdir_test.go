package controller

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
)

// TestOwnAgentDir: the engine's agent directory is the controller's: a
// fresh settings.json of {} at every spawn, a link to the user's
// models.json and a copy of its auth.json, and nothing of the user's settings.json,
// extensions/ or packages; what an engine left there is gone at the next
// spawn.
func TestOwnAgentDir(t *testing.T) {
	root := t.TempDir()
	store, err := claims.Open(filepath.Join(root, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(root, "user-agent")
	for name, body := range map[string]string{
		"models.json": `{"providers":{}}`, "auth.json": `{}`,
		"settings.json":      `{"extensions":["/x/evil.ts"],"packages":["npm:evil"]}`,
		"extensions/auto.ts": "export default function () {}",
		"prompts/p.md":       "x",
	} {
		p := filepath.Join(user, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := New(Config{Claims: store})
	cv := &conversations.Conversation{ID: "pi-00000000000000000000", Engine: conversations.Engine{AgentDir: user}}
	for round := 0; round < 2; round++ {
		dir, err := c.ownAgentDir(cv)
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"auth.json", "models.json", "settings.json"}) {
			t.Fatalf("round %d: the engine's agent dir holds %v", round, names)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "settings.json")); string(b) != "{}\n" {
			t.Fatalf("round %d: settings.json %q", round, b)
		}
		if to, err := os.Readlink(filepath.Join(dir, "models.json")); err != nil || to != filepath.Join(user, "models.json") {
			t.Fatalf("round %d: models.json links to %q (%v)", round, to, err)
		}
		// The credentials are a copy (authrelay.go): the engine may
		// write it, never the user's.
		if st, err := os.Lstat(filepath.Join(dir, "auth.json")); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: auth.json is no private copy: %v, %v", round, st, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "auth.json")); string(b) != `{}` {
			t.Fatalf("round %d: auth.json copy holds %q", round, b)
		}
		// What an engine may leave: settings it persisted, a planted
		// extension directory.
		os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"packages":["npm:evil"]}`), 0o600)
		os.MkdirAll(filepath.Join(dir, "extensions"), 0o700)
		os.WriteFile(filepath.Join(dir, "auth.json"), []byte(`{"x":{"type":"api_key","key":"!sh"}}`), 0o600)
	}
}
