package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// renameProbes tries to move each parent of a hidden directory away and
// make a forged one in its place (%[1]s the top directory under the home,
// %[2]s the state directory, %[3]s its mosaic directory, %[4]s the hidden
// claims directory), and to move the user manager's configuration's
// parent (%[5]s), and, under a directory of the user's made read-only
// (%[7]s), the parent (%[8]s) of another hidden directory; a sibling of
// theirs (%[6]s) must move freely.
const renameProbes = `try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
echo "engine $$"
try move-top mv %[1]s %[1]s.x
try move-state mv %[2]s %[2]s.x
try move-mosaic mv %[3]s %[3]s.x
try move-config mv %[5]s %[5]s.x
try forge sh -c 'mkdir -p %[4]s.new && echo forged > %[4]s.new/forged && mv %[4]s.new %[4]s'
try move-under-read-only sh -c 'chmod u+w %[7]s && mv %[8]s %[8]s.x'
try move-sibling mv %[6]s %[6]s.x
echo "ready 1"; exec cat`

// TestHiddenDirCannotBeRenamedAway: no tool of a confined engine can move
// a parent of a hidden directory (or of the user manager's masked
// configuration) away and put a forged tree at the path the controller
// reads, while a directory beside them still moves; outside, the hidden
// directory still holds its own file and nothing forged.
func TestHiddenDirCannotBeRenamedAway(t *testing.T) {
	m := testManager(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(home, fmt.Sprintf("mosaic-test-%d", os.Getpid()))
	state := filepath.Join(top, "state")
	hidden := filepath.Join(state, "mosaic", "claims")
	sibling := filepath.Join(top, "sibling")
	readOnly := filepath.Join(top, "ro")
	inner := filepath.Join(readOnly, "inner")
	hidden2 := filepath.Join(inner, "queue")
	for _, d := range []string{hidden, sibling, hidden2} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chmod(readOnly, 0o755)
		for _, d := range []string{top, top + ".x"} {
			os.RemoveAll(d)
		}
	})
	if err := os.WriteFile(filepath.Join(hidden, "real"), []byte("real"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := xdg.ConfigHome()
	if err != nil {
		t.Fatal(err)
	}
	e := launchEngine(t, m, fmt.Sprintf(renameProbes, shellQuote(top), shellQuote(state), shellQuote(filepath.Dir(hidden)),
		shellQuote(hidden), shellQuote(cfg), shellQuote(sibling), shellQuote(readOnly), shellQuote(inner)), hidden, hidden2)
	got := e.expect(t, "engine", "ready", "escape move-top", "escape move-state", "escape move-mosaic", "escape move-config",
		"escape forge", "escape move-under-read-only", "escape move-sibling")
	if got["escape move-sibling"] != "0" {
		t.Fatalf("a tool could not move a directory of its own (%q): the attempts prove nothing", got["escape move-sibling"])
	}
	for _, n := range []string{"move-top", "move-state", "move-mosaic", "move-config", "forge", "move-under-read-only"} {
		if got["escape "+n] != "1" {
			t.Errorf("a tool could %s (%q)", n, got["escape "+n])
		}
	}
	ents, err := os.ReadDir(hidden)
	if err != nil || len(ents) != 1 || ents[0].Name() != "real" {
		t.Errorf("the hidden directory outside holds %v (%v), not only its own file", ents, err)
	}
}
