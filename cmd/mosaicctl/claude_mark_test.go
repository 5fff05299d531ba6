package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestClaudeSecondCrashKeepsTheMark: a tool forges an
// assistant line in the middle of a turn whose tool keeps running; the
// watch calls it another writer's (uncertain) and vouched only for the
// bytes before it. The controller is killed: the next one finds the
// claim uncertain, drops the engine's descriptors and adopts the engine
// as an orphan with the mark's bytes. That controller is killed too,
// before anyone force stops:
// the third still finds the mark, which stays in the fd store until the
// execution's stop is recorded, and its force stop records the bytes
// before the forged line. Before (helper 149's review), the adopting
// controller had dropped the mark with the engine's descriptors: the
// third adopted with no bytes, the stop recorded none, and the recover
// took the file as an older claim's ("the same session and leaf"),
// sending the forged line to the model unnamed.
func TestClaudeSecondCrashKeepsTheMark(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "cmark2crash")
	session := promptOnce(t, ctx, r.path, "hello there").SessionID
	p, _ := promptAwaitingApproval(t, r.bin, r.id, "please BASH{"+forgeAssistant+"; sleep 600}", r.fake)
	if res := run(t, r.bin, "approve", "--take", r.id, "--yes"); res.code != 0 {
		t.Fatalf("approve --yes: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	defer p.Process.Kill()
	awaitUncertain(t, ctx, r.path, "the forged assistant line did not close admission")
	adopted := func() int {
		return strings.Count(run(t, "bash", "-c", "journalctl --user --no-pager -o cat -u "+r.svc).stdout, "restart found execution")
	}
	for i := 1; i <= 2; i++ {
		mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", r.svc)
		waitFor(t, func() bool { return adopted() >= i })
		time.Sleep(time.Second)
	}
	if n := engineScopes(t, r.id); n == 0 {
		t.Fatalf("the engine's scope is gone: the test did not test a live orphan")
	}
	if res := run(t, r.bin, "stop", "--take", "--yes", r.id); res.code != 0 {
		t.Fatalf("stop of the orphan: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	stoppedVouched(t, r.id, forgedCut(t, r, session, forgedUUID), true)
	// After a force stop, bytes past the vouched ones are not refused
	// (refusesChange): the recover's intent names them as checked by
	// nobody, and the recover verb is the operator's consent to them.
	if res := run(t, r.bin, "recover", "--take", r.id); res.code == 0 && !strings.Contains(res.stdout, "the history changed since the stop") {
		t.Errorf("recover launched on the forged assistant line without naming it:\n%s", res.stdout)
	}
}

// TestClaudeEngineExitThenRestartKeepsTheMark: a tool's
// forged attachment is in the transcript, unproven; then the engine dies
// (its scope killed) while the controller runs, and the claim goes
// uncertain, waiting for a force stop. A plain `systemctl --user
// restart` of the controller then hands nothing over in the claim
// (Handover skips an exited engine), but the mark stays in the fd store
// with the engine's descriptors gone: the next controller adopts with
// its bytes, its proven stop records them and drops the mark. Before
// (helper 149's review), the engine's exit dropped the mark with its
// descriptors (unkeep), and the stop recorded no bytes.
func TestClaudeEngineExitThenRestartKeepsTheMark(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "cmarkexit")
	session := forgedAndRead(t, ctx, r)
	mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", engineScope(t, r))
	awaitUncertain(t, ctx, r.path, "the engine's death did not leave the binding uncertain")
	mustRun(t, "systemctl", "--user", "restart", r.svc)
	// The restarted controller may prove the empty cohort's end by itself.
	if res := run(t, r.bin, "stop", "--take", "--yes", r.id); res.code != 0 && !strings.Contains(res.stderr, "already stopped with a proof") {
		t.Fatalf("stop: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	cut := forgedCut(t, r, session, forgedLine)
	stoppedVouched(t, r.id, cut, false)
	// The proven stop drops the mark: nothing of the execution stays kept.
	waitFor(t, func() bool { return unitProp(t, r.svc, "NFileDescriptorStore") == "0" })
	if res := run(t, r.bin, "recover", "--take", r.id); res.code == 0 && !strings.Contains(res.stdout, "the history changed since the stop") {
		t.Errorf("recover launched on the forged attachment without naming it:\n%s", res.stdout)
	}
}

// stoppedVouched checks that every stopped revision of id's claim vouched
// for the cut bytes before a forged line (at most them, with atMost).
func stoppedVouched(t *testing.T, id string, cut int, atMost bool) {
	t.Helper()
	stopped := 0
	claimRevisions(t, id, func(path string, rev map[string]json.RawMessage) {
		if string(rev["state"]) != `"stopped"` {
			return
		}
		stopped++
		var v struct{ Size *int }
		if err := json.Unmarshal(rev["vouched"], &v); err != nil || v.Size == nil || *v.Size > cut || !atMost && *v.Size != cut {
			t.Errorf("the stopped revision %s vouched for %s; want the %d bytes before the forged line (at most: %v)", path, rev["vouched"], cut, atMost)
		}
	})
	if stopped == 0 {
		t.Fatal("no stopped revision")
	}
}

// awaitUncertain waits for the binding of the conversation at path to
// be uncertain, failing with why when ctx ends first.
func awaitUncertain(t *testing.T, ctx context.Context, path, why string) {
	t.Helper()
	for {
		b, _ := currentBinding(t, ctx, path)
		if b.State == protocol.BindingUncertain {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %+v", why, b)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
