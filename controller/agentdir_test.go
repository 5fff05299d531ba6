package controller

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
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
		dir, _, err := c.ownAgentDir(cv)
		if err != nil {
			t.Fatal(err)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"auth.json", "models.json", "settings.json"}) {
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
		if _, sealed, _ := c.ownAgentDir(cv); !slices.Equal(sealed, []string{filepath.Join(dir, "auth.json")}) {
			t.Fatalf("round %d: sealed %v; want the copy, which holds no login", round, sealed)
		}
		// What an engine may leave: settings it persisted, a planted
		// extension directory.
		os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"packages":["npm:evil"]}`), 0o600)
		os.MkdirAll(filepath.Join(dir, "extensions"), 0o700)
		os.WriteFile(filepath.Join(dir, "auth.json"), []byte(`{"x":{"type":"api_key","key":"!sh"}}`), 0o600)
	}
}

// TestOwnAgentDirRemovesWhatToolsLeft: a tool writes the engine's agent
// directory and can leave there what a plain removal cannot remove (a
// directory of mode 000 with an entry blocked every later launch and
// recover), or a symlink that a removal following it would empty the
// target of. The next launch gives the owner access back, removes every
// entry, and leaves whatever a symlink points at as it was.
func TestOwnAgentDirRemovesWhatToolsLeft(t *testing.T) {
	if os.Geteuid() == 0 {
		// root's CAP_DAC_OVERRIDE reads and removes through mode 000.
		sandboxtest.Unavailable(t, "as root the modes a tool sets block nothing: run as an ordinary user (`make test` does, in the sandbox)")
	}
	tests := []struct {
		name  string
		plant func(t *testing.T, dir, outside string)
	}{
		{"a directory of mode 000 with an entry", func(t *testing.T, dir, _ string) {
			mkdirs(t, filepath.Join(dir, "trap", "x"))
			chmod(t, filepath.Join(dir, "trap"), 0)
		}},
		{"nested directories of mode 000, the innermost first", func(t *testing.T, dir, _ string) {
			deep := filepath.Join(dir, "a", "b", "c")
			mkdirs(t, deep)
			writeFile(t, filepath.Join(deep, "f"), "x", 0o600)
			for _, d := range []string{deep, filepath.Dir(deep), filepath.Join(dir, "a")} {
				chmod(t, d, 0)
			}
		}},
		{"a directory that may not be written", func(t *testing.T, dir, _ string) {
			mkdirs(t, filepath.Join(dir, "ro"))
			writeFile(t, filepath.Join(dir, "ro", "f"), "x", 0o600)
			chmod(t, filepath.Join(dir, "ro"), 0o500)
		}},
		{"the agent directory itself of mode 000", func(t *testing.T, dir, _ string) {
			writeFile(t, filepath.Join(dir, "left"), "x", 0o600)
			chmod(t, dir, 0)
		}},
		{"symlinks to a directory outside, beside and below a mode-000 one", func(t *testing.T, dir, outside string) {
			mkdirs(t, filepath.Join(dir, "trap"))
			for _, l := range []string{filepath.Join(dir, "link"), filepath.Join(dir, "trap", "link")} {
				if err := os.Symlink(outside, l); err != nil {
					t.Fatal(err)
				}
			}
			chmod(t, filepath.Join(dir, "trap"), 0)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, cv, outside := agentDirFixture(t)
			dir, _, err := c.ownAgentDir(cv)
			if err != nil {
				t.Fatal(err)
			}
			tc.plant(t, dir, outside)
			if _, _, err := c.ownAgentDir(cv); err != nil {
				t.Fatalf("the next launch: %v", err)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"auth.json", "models.json", "settings.json"}) {
				t.Fatalf("the engine's agent dir holds %v", names)
			}
			if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
				t.Fatalf("the engine's agent dir: %v, %v", st, err)
			}
			checkOutside(t, outside)
		})
	}
}

// TestOwnAgentDirRefusesASymlink: the agent directory replaced by a
// symlink is neither followed nor emptied: the launch refuses with
// configuration, naming the directory and the fix.
func TestOwnAgentDirRefusesASymlink(t *testing.T) {
	c, cv, outside := agentDirFixture(t)
	dir, _, err := c.ownAgentDir(cv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ownAgentDir(cv)
	if protocol.CodeOf(err) != protocol.CodeConfiguration || !strings.Contains(err.Error(), "chmod -R u+rwX "+dir) || !strings.Contains(err.Error(), "then recover again") {
		t.Fatalf("a launch over an agent directory that is a symlink: %v; want a configuration refusal naming it and the fix", err)
	}
	checkOutside(t, outside)
}

// TestOwnAgentDirBoundsItsDepth (mutant 317): a tree as deep as
// maxAgentDepth below the agent directory is emptied; one level deeper
// (a tool's `mkdir a; cd a` loop) is refused with the fix, where the walk
// held a descriptor, a read buffer and a path a level, the paths growing
// with the square of the depth.
func TestOwnAgentDirBoundsItsDepth(t *testing.T) {
	for _, tc := range []struct {
		depth   int
		refused bool
	}{{maxAgentDepth, false}, {maxAgentDepth + 1, true}} {
		t.Run(fmt.Sprint(tc.depth), func(t *testing.T) {
			c, cv, _ := agentDirFixture(t)
			dir, _, err := c.ownAgentDir(cv)
			if err != nil {
				t.Fatal(err)
			}
			mkdirs(t, filepath.Join(append([]string{dir}, slices.Repeat([]string{"a"}, tc.depth)...)...))
			_, _, err = c.ownAgentDir(cv)
			switch {
			case tc.refused && (protocol.CodeOf(err) != protocol.CodeConfiguration || !strings.Contains(err.Error(), "rm -rf "+dir)):
				t.Fatalf("a tree %d deep: %v; want a configuration refusal naming the fix", tc.depth, err)
			case !tc.refused && err != nil:
				t.Fatalf("a tree %d deep: %v", tc.depth, err)
			}
		})
	}
}

// agentDirFixture is a controller with a claim store, a conversation
// with a user agent directory, and a directory outside both (mode 0500,
// one file) that nothing may change.
func agentDirFixture(t *testing.T) (*Controller, *conversations.Conversation, string) {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { chmodTree(root) })
	store, err := claims.Open(filepath.Join(root, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(root, "user-agent")
	mkdirs(t, user)
	writeFile(t, filepath.Join(user, "models.json"), `{"providers":{}}`, 0o600)
	writeFile(t, filepath.Join(user, "auth.json"), `{}`, 0o600)
	outside := filepath.Join(root, "outside")
	mkdirs(t, outside)
	writeFile(t, filepath.Join(outside, "keep"), "x", 0o600)
	chmod(t, outside, 0o500)
	return New(Config{Claims: store}), &conversations.Conversation{ID: "pi-00000000000000000000", Engine: conversations.Engine{AgentDir: user}}, outside
}

// checkOutside: the directory outside kept its file and its mode.
func checkOutside(t *testing.T, outside string) {
	t.Helper()
	st, err := os.Lstat(outside)
	if err != nil || st.Mode() != fs.ModeDir|0o500 {
		t.Fatalf("the directory a symlink pointed at changed: %v, %v", st, err)
	}
	if names := dirNames(t, outside); !slices.Equal(names, []string{"keep"}) {
		t.Fatalf("the directory a symlink pointed at holds %v", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mkdirs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// chmodTree gives the owner access to every directory under root, so
// t.TempDir's removal can remove what a failed test left.
func chmodTree(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

// TestOwnAgentDirSealsAllButLogins: the engine's copy of auth.json is
// sealed (read-only in the engine) unless it holds an OAuth login, the
// one thing Pi writes there; a user with no auth.json gets a copy of {}
// sealed too, so the engine cannot make one with a "!command" in it.
func TestOwnAgentDirSealsAllButLogins(t *testing.T) {
	login := `{"type":"oauth","access":"a","refresh":"r","expires":1}`
	for _, tc := range []struct {
		name, auth string // "" is no auth.json
		sealed     bool
	}{
		{"none", "", true},
		{"keys", `{"openai":{"type":"api_key","key":"sk-1"}}`, true},
		{"command key", `{"openai":{"type":"api_key","key":"!pass openai"}}`, true},
		{"login", `{"anthropic":` + login + `}`, false},
		{"login and keys", `{"anthropic":` + login + `,"openai":{"type":"api_key","key":"sk-1"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			store, err := claims.Open(filepath.Join(root, "state", "claims"))
			if err != nil {
				t.Fatal(err)
			}
			user := filepath.Join(root, "user-agent")
			if err := os.MkdirAll(user, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				if err := os.WriteFile(filepath.Join(user, "auth.json"), []byte(tc.auth), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := New(Config{Claims: store})
			cv := &conversations.Conversation{ID: "pi-00000000000000000000", Engine: conversations.Engine{AgentDir: user}}
			dir, sealed, err := c.ownAgentDir(cv)
			if err != nil {
				t.Fatal(err)
			}
			copy := filepath.Join(dir, "auth.json")
			if _, err := os.Stat(copy); err != nil {
				t.Fatalf("no copy of auth.json: %v", err)
			}
			if got := slices.Equal(sealed, []string{copy}); got != tc.sealed {
				t.Fatalf("sealed %v; want the copy sealed: %v", sealed, tc.sealed)
			}
		})
	}
}
