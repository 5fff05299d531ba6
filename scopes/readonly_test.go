package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// readOnlyEngine tries to change a read-only directory of the user's
// (the files in it, what it holds, the directory itself, its parent's
// entry for it) and a read-only file, reads both, and writes what was
// bound back writable; each line says 0 when the attempt succeeded.
const readOnlyEngine = shProbe + `
probe read 'grep -q real %[1]s/models.json'
probe write 'echo forged > %[1]s/models.json'
probe plant 'echo forged > %[1]s/planted.json'
probe remove 'rm -f %[1]s/models.json'
probe replace 'mv %[1]s/models.json %[1]s/old.json'
probe movedir 'mv %[1]s %[1]s.x'
probe moveparent 'mv %[3]s %[3]s.x'
probe auth 'echo refreshed > %[1]s/auth.json'
probe session 'echo entry >> %[1]s/sessions/s.jsonl'
probe envread 'grep -q real %[2]s'
probe envwrite 'echo forged > %[2]s'
probe envreplace 'echo forged > %[2]s.new && mv %[2]s.new %[2]s'
probe dotauth 'echo refreshed > %[4]s/auth.json'
probe unmask 'echo forged > %[4]s/sessions/revision.json'
probe linkedwrite 'echo forged > %[5]s/auth.json'
probe dotmodels 'echo forged > %[4]s/models.json'
echo ready 1
exec sleep 300
`

// TestReadOnlyInputs: the inputs of other conversations named in
// Spec.ReadOnly (a Pi agent directory, a Claude env file) can be read
// from inside the engine and not changed, replaced or added to, in
// place or by renaming them or a parent (a fresh ~/.pi/agent made in
// its place would be what the next conversation links); what
// Spec.Writable names below one of them (Pi's auth.json, its sessions)
// is written in place, and one missing there is no failure.
func TestReadOnlyInputs(t *testing.T) {
	m := testManager(t)
	home := t.TempDir()
	agent := filepath.Join(home, ".pi", "agent")
	env := filepath.Join(home, "keys", "claude.env")
	for _, d := range []string{filepath.Join(agent, "sessions"), filepath.Dir(env)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(agent, "models.json"), filepath.Join(agent, "auth.json"), env} {
		if err := os.WriteFile(f, []byte("real\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A second agent directory whose auth.json links to a dotfiles tree
	// (written through the link, outside the read-only bind) and whose
	// sessions a tool had made a link to a hidden directory (never
	// bound back writable over its mask).
	agent2, dotfiles := filepath.Join(home, "agent2"), filepath.Join(home, "dotfiles")
	hidden := filepath.Join(agent2, "state", "claims") // an agent directory that holds mosaic's state
	for _, d := range []string{agent2, dotfiles, hidden} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"auth.json", "models.json"} {
		if err := os.WriteFile(filepath.Join(dotfiles, f), []byte("real\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Its models.json, a link into the dotfiles too, is read-only where it
	// leads and cannot be repointed (its directory is read-only): it is
	// reported so.
	for link, target := range map[string]string{filepath.Join(agent2, "auth.json"): filepath.Join(dotfiles, "auth.json"),
		filepath.Join(agent2, "sessions"): hidden, filepath.Join(agent2, "models.json"): filepath.Join(dotfiles, "models.json")} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	// A third whose auth.json a tool had linked to a file of the first
	// (never followed into a read-only directory and bound back there),
	// and a fourth reached through a link the user could replace (bound,
	// but not reported read-only: a tool can repoint the link).
	agent3, linked, linkedTo := filepath.Join(home, "agent3"), filepath.Join(home, "linked"), filepath.Join(home, "dotfiles2")
	other := filepath.Join(agent, "other.json")
	for _, d := range []string{agent3, linkedTo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(other, []byte("real\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{filepath.Join(agent3, "auth.json"): other, linked: linkedTo} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	e := launchWith(t, m, fmt.Sprintf(readOnlyEngine, agent, env, filepath.Dir(agent), agent2, agent3), func(s *Spec) {
		s.Hide = []string{hidden}
		s.ReadOnly = []string{agent, env, agent2, agent3, linked, filepath.Join(agent2, "models.json")}
		s.Writable = []string{filepath.Join(agent, "auth.json"), filepath.Join(agent, "sessions"), filepath.Join(agent, "missing"),
			filepath.Join(agent2, "auth.json"), filepath.Join(agent2, "sessions"), filepath.Join(agent3, "auth.json")}
	})
	got := e.expect(t, "read", "write", "plant", "remove", "replace", "movedir", "moveparent", "auth", "session", "envread", "envwrite", "envreplace", "dotauth", "unmask", "linkedwrite", "dotmodels", "ready")
	requireConfined(t, e)
	for k, want := range map[string]string{"read": "0", "auth": "0", "session": "0", "envread": "0", "dotauth": "0", "unmask": "1", "linkedwrite": "1", "dotmodels": "1",
		"write": "1", "plant": "1", "remove": "1", "replace": "1", "movedir": "1", "moveparent": "1", "envwrite": "1", "envreplace": "1"} {
		if got[k] != want {
			t.Errorf("%s: %s, want %s (0: it succeeded)", k, got[k], want)
		}
	}
	for _, f := range []string{filepath.Join(agent, "models.json"), env, other, filepath.Join(dotfiles, "models.json")} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "real\n" {
			t.Errorf("%s changed from inside the engine: %q, %v", f, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(agent, "auth.json")); err != nil || string(b) != "refreshed\n" {
		t.Errorf("auth.json not written in place: %q, %v", b, err)
	}
	if want := []string{agent, env, agent2, agent3, filepath.Join(agent2, "models.json")}; !slices.Equal(e.Cohort.Confinement.ReadOnly, want) {
		t.Errorf("recorded read-only paths %v, want %v", e.Cohort.Confinement.ReadOnly, want)
	}
	if _, err := os.Stat(filepath.Join(hidden, "revision.json")); err == nil {
		t.Error("a link at sessions reopened the hidden directory writable")
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-readonly", Grace: time.Second})
}

func TestReadOnlyPathsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ro, wr []string
	}{
		{"relative read-only", []string{"home/.pi/agent"}, nil},
		{"relative writable", []string{"/h/.pi/agent"}, []string{"auth.json"}},
		{"writable under nothing read-only", []string{"/h/.pi/agent"}, []string{"/h/.pi/auth.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := readOnlyPaths(tc.ro, tc.wr); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	ro, wr, err := readOnlyPaths([]string{"/h/.pi/agent/", "/h/.pi/agent"}, []string{"/h/.pi/agent/auth.json"})
	if err != nil || !slices.Equal(ro, []string{"/h/.pi/agent"}) || !slices.Equal(wr, []string{"/h/.pi/agent/auth.json"}) {
		t.Fatalf("readOnlyPaths = %v %v %v", ro, wr, err)
	}
}
