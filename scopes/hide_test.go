package scopes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// shProbe defines probe NAME COMMAND for the engines' scripts: it prints
// "NAME 0" when COMMAND succeeded, "NAME 1" when it failed.
const shProbe = `probe() { if eval "$2" >/dev/null 2>&1; then echo "$1 0"; else echo "$1 1"; fi; }
`

// hideEngine tries to read a file the controller keeps in a hidden
// directory, to plant one beside it, and to plant one in a hidden
// directory that did not exist before the launch; each line says 0 when
// the attempt succeeded.
const hideEngine = shProbe + `
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
	requireConfined(t, e)
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

// keepEngine reads its own directory under a hidden one, writes there,
// tries to read and list a sibling's and the hidden parent, and to plant
// a directory beside its own; each line says 0 when the attempt
// succeeded.
const keepEngine = shProbe + `
probe own 'cat %[1]s/config/own.json'
probe write 'echo mine > %[1]s/config/new.json'
probe sibling 'cat %[2]s/config/secret.json'
probe list 'ls -A %[3]s | grep -qv "^%[4]s$"'
probe plant 'mkdir %[3]s/planted'
echo ready 1
exec sleep 300
`

// TestKeptDirectoryOnly: a directory under a hidden one named in
// Spec.Keep (a conversation's own Claude configuration among every
// conversation's) stays readable and writable, and the engine sees
// nothing else of the hidden directory: not a sibling's files, not its
// name, and it cannot plant one.
func TestKeptDirectoryOnly(t *testing.T) {
	m := testManager(t)
	all := filepath.Join(t.TempDir(), "claude")
	own, sibling := filepath.Join(all, "conv-own"), filepath.Join(all, "conv-sibling")
	for _, f := range []string{filepath.Join(own, "config", "own.json"), filepath.Join(sibling, "config", "secret.json")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(`{"k":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := launchKeeping(t, m, fmt.Sprintf(keepEngine, own, sibling, all, "conv-own"), []string{all}, []string{own})
	got := e.expect(t, "own", "write", "sibling", "list", "plant", "ready")
	requireConfined(t, e)
	if got["own"] != "0" || got["write"] != "0" {
		t.Errorf("the engine lost its own directory: read %s, write %s", got["own"], got["write"])
	}
	for _, k := range []string{"sibling", "list", "plant"} {
		if got[k] == "0" {
			t.Errorf("the engine could %s beside its own directory", k)
		}
	}
	if b, err := os.ReadFile(filepath.Join(own, "config", "new.json")); err != nil || string(b) != "mine\n" {
		t.Errorf("the engine's write to its own directory did not land: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(all, "planted")); err == nil {
		t.Error("a directory was planted beside the kept one")
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-keep", Grace: time.Second})
}

// TestKeptDirectoryRefused: a kept directory that is missing or not
// absolute refuses the launch before anything runs; one under no hidden
// directory is reachable anyway and left out of the plan.
func TestKeptDirectoryRefused(t *testing.T) {
	d := t.TempDir()
	for name, tc := range map[string]struct{ hide, keep []string }{
		"missing":  {[]string{d}, []string{filepath.Join(d, "gone")}},
		"relative": {[]string{d}, []string{"rel"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := keptDirs(tc.hide, tc.keep); !errors.Is(err, ErrConfinement) {
				t.Fatalf("keptDirs(%v, %v) = %v, want ErrConfinement", tc.hide, tc.keep, err)
			}
		})
	}
	if got, err := keptDirs([]string{filepath.Join(d, "a")}, []string{d}); err != nil || len(got) != 0 {
		t.Fatalf("a kept directory under no hidden one: %v, %v; want it left out", got, err)
	}
}

// bindHelper is the sandbox's root helper that binds a directory of the
// test user's at a second place under /mnt (contrib/sandbox/inner.sh).
const bindHelper = "/usr/local/sbin/mosaic-sandbox-bind"

// TestHiddenStateUnreachableThroughAnotherMount: a hidden directory is
// masked wherever a mount shows it, not only at its path: with the
// directory above it bound at a second place (as a bind of /home
// elsewhere does), the engine reads nothing of it there either, and the
// second place is among the recorded masks.
func TestHiddenStateUnreachableThroughAnotherMount(t *testing.T) {
	m := testManager(t)
	if _, err := os.Stat(bindHelper); err != nil {
		sandboxtest.Unavailable(t, "no %s in this sandbox: %v", bindHelper, err)
	}
	state := t.TempDir()
	claims := filepath.Join(state, "claims")
	if err := os.Mkdir(claims, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(claims, "revision.json"), []byte(`{"state":"active"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	alias := fmt.Sprintf("/mnt/mosaic-alias-%d", os.Getpid())
	if out, err := exec.Command("sudo", "-n", bindHelper, state, alias).CombinedOutput(); err != nil {
		t.Fatalf("bind %s at %s: %v\n%s", state, alias, err, out)
	}
	t.Cleanup(func() { exec.Command("sudo", "-n", bindHelper, "-u", alias).Run() })
	seen := filepath.Join(alias, "claims")
	if _, err := os.ReadFile(filepath.Join(seen, "revision.json")); err != nil {
		t.Fatalf("the second mount does not show the claims: %v", err)
	}
	e := launchEngine(t, m, fmt.Sprintf(hideEngine, seen, filepath.Join(alias, "queue")), claims)
	got := e.expect(t, "read", "list", "forge", "late", "ready")
	for _, k := range []string{"read", "list", "forge"} {
		if got[k] == "0" {
			t.Errorf("the engine could %s in the hidden directory through its second mount %s", k, seen)
		}
	}
	requireConfined(t, e)
	if !slices.Contains(e.Cohort.Confinement.Masked, seen) {
		t.Errorf("%s not among the recorded masks %v", seen, e.Cohort.Confinement.Masked)
	}
	if !slices.Contains(Unseen(claims), seen) {
		t.Errorf("Unseen(%s) leaves out its second mount %s", claims, seen)
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-alias", Grace: time.Second})
}
