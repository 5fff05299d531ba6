package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// TestExternalScopeStopRealPi is the way back from an engine scope that
// `systemctl --user stop` ended behind mosaic's back, with the real Pi
// and the stub model, as a user types it: recover refuses and names the
// command to run; `mosaicctl stop` ends stopped with a proof on the basis
// cgroup-removed that `mosaicctl proof verify` accepts; recover launches
// a new execution and a prompt is answered. On a build without that basis
// the stop ended uncertain ("cgroup absent") and recover refused for good.
func TestExternalScopeStopRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "deadends", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Hello ", "from the stub."}},
	}})
	bin, id := pc.bin, pc.id
	if r := run(t, bin, "prompt", "--take", id, "say hello"); r.code != 0 || r.stdout != "Hello from the stub.\n" {
		t.Fatalf("prompt --take: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st := readStatus(t, bin, id)
	if st.Scope == nil || st.Scope.ActiveState != "active" {
		t.Fatalf("status of a running conversation: %+v", st)
	}
	mustRun(t, "systemctl", "--user", "stop", st.Scope.Name)
	for i := 0; ; i++ {
		st = readStatus(t, bin, id)
		if st.Binding != nil && st.Binding.State == "uncertain" {
			break
		}
		if i == 300 {
			t.Fatalf("binding after the scope was stopped from outside: %+v; want uncertain", st.Binding)
		}
		time.Sleep(100 * time.Millisecond)
	}

	r := run(t, bin, "recover", "--take", id)
	wantRefusal(t, r, "stop-proof")
	if !strings.Contains(r.stderr, "mosaicctl stop --take --yes "+id) {
		t.Fatalf("recover's refusal names no way out: %q", r.stderr)
	}
	proof := filepath.Join(t.TempDir(), "proof.json")
	if r := run(t, bin, "stop", "--take", "--yes", "--proof", proof, id); r.code != 0 {
		t.Fatalf("stop --yes after the scope was stopped from outside: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	out := mustRun(t, bin, "proof", "verify", proof)
	if !strings.Contains(out, "verified: all") || !strings.Contains(out, "cgroup-removed") || !strings.Contains(out, "known-deaths") {
		t.Fatalf("proof verify said %q; want verified, on the basis cgroup-removed", out)
	}
	if b, err := os.ReadFile(proof); err != nil || !strings.Contains(string(b), `"basis":"cgroup-removed"`) {
		t.Fatalf("proof file %s: %v", b, err)
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 || !strings.Contains(r.stdout, "launched: execution ") {
		t.Fatalf("recover --take: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, bin, "prompt", "--take", id, "again"); r.code != 0 || r.stdout != "Plain answer to: again\n" {
		t.Fatalf("prompt after recover: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestTrapInAgentDirDoesNotBlockRecover: a directory of mode 000 with
// an entry in an engine's agent directory, which a plain removal cannot
// empty, made every later recover refuse `malformed: ... permission
// denied` for good. A tool can no longer reach the directory (its path is
// masked, and Pi reaches it only through a descriptor the tool shell does
// not pass on: TestToolCannotPlantPiCredentials), but the engine itself
// can leave one there (a reviewed extension, or its tools where they are
// not nested), so the test leaves it after the stop. Recover gives the
// owner back access, empties the directory and launches.
func TestTrapInAgentDirDoesNotBlockRecover(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	plant := `d=${PI_CODING_AGENT_DIR:?}; mkdir -p "$d/trap/x" && chmod 000 "$d/trap"; echo "planted $?" > planted.txt`
	entry, _ := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Planting."}, Tool: &stubmodel.ToolCall{Command: plant}},
		{Text: []string{"Planted."}},
	}})
	id, proj, _ := startConversation(t, bin, "agenttrap", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	if r := run(t, bin, "prompt", "--take", id, "plant"); r.code != 0 {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "planted.txt")); string(b) == "planted 0\n" {
		t.Fatalf("a tool planted its trap in its engine's agent directory: planted.txt %q", b)
	}
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	state, err := xdg.StateHome()
	if err != nil {
		t.Fatal(err)
	}
	trap := filepath.Join(state, "mosaic", "agent", id, "trap")
	if err := os.MkdirAll(filepath.Join(trap, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(trap, 0); err != nil {
		t.Fatal(err)
	}
	if r := run(t, bin, "recover", "--take", id); r.code != 0 || !strings.Contains(r.stdout, "launched: execution ") {
		t.Fatalf("recover --take after a mode-000 directory: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(trap); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the tool's directory is still in the agent directory: %v", err)
	}
	if r := run(t, bin, "prompt", "--take", id, "again"); r.code != 0 {
		t.Fatalf("prompt after recover: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
