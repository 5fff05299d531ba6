package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// hideEngine tries to read a file the controller keeps in a hidden
// directory, to plant one beside it, and to plant one in a hidden
// directory that did not exist before the launch; each line says 0 when
// the attempt succeeded.
const hideEngine = `
probe() { if eval "$2" >/dev/null 2>&1; then echo "$1 0"; else echo "$1 1"; fi; }
probe read 'cat %[1]s/revision.json'
probe list 'test -n "$(ls -A %[1]s)"'
probe forge 'echo forged > %[1]s/r9.json'
probe late 'echo forged > %[2]s/item.json'
echo ready 1
exec sleep 300
`

// TestHiddenStateUnreachable: a directory of the controller's own state
// named in Spec.Hide (the claims, the queue) can be neither read nor
// written by the engine, also when it did not exist until the launch; the
// files outside stay as they were.
func TestHiddenStateUnreachable(t *testing.T) {
	m := testManager(t)
	state := t.TempDir()
	claims, queue := filepath.Join(state, "claims"), filepath.Join(state, "queue", "late")
	if err := os.Mkdir(claims, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(claims, "revision.json"), []byte(`{"state":"active"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := launchEngine(t, m, fmt.Sprintf(hideEngine, claims, queue), claims, queue)
	got := e.expect(t, "read", "list", "forge", "late", "ready")
	for _, k := range []string{"read", "list", "forge", "late"} {
		if got[k] == "0" {
			t.Errorf("the engine could %s in a hidden directory", k)
		}
	}
	if !e.Cohort.Confinement.Confined {
		t.Fatalf("engine not confined: %s", e.Cohort.Confinement.Reason)
	}
	for _, d := range []string{claims, queue} {
		if !slices.Contains(e.Cohort.Confinement.Masked, d) {
			t.Errorf("%s not among the recorded masks %v", d, e.Cohort.Confinement.Masked)
		}
	}
	for _, f := range []string{filepath.Join(claims, "r9.json"), filepath.Join(queue, "item.json")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was planted from inside the engine", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(claims, "revision.json")); err != nil || string(b) != `{"state":"active"}` {
		t.Errorf("the hidden revision changed: %q, %v", b, err)
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-hide", Grace: time.Second})
}
