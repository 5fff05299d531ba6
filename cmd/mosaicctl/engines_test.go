package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// TestNoEngineLeftUnseen: a controller lost without a stop of its engine
// (loseController: a crash whose restart never came) leaves the engine's
// scope running. `conv rm` and `uninstall` then refuse, naming the scope and the
// proven stop that works as typed; after it, both succeed. An engine scope
// no registered conversation owns shows in `status` with its fix and
// blocks `uninstall` too.
func TestNoEngineLeftUnseen(t *testing.T) {
	sandboxtest.Require(t)
	// The tool's setsid child outlives Pi, which exits at the end of its
	// stdin when the controller goes: it keeps the scope alive.
	pc := realPiConversation(t, "unseen", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"starting"}, Tool: &stubmodel.ToolCall{Command: "setsid sleep 600 >/dev/null 2>&1 &"}},
		{Text: []string{"started"}},
	}})
	bin, id := pc.bin, pc.id
	if r := run(t, bin, "prompt", id, "--take", "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, stderr %q", r.code, r.stderr)
	}
	scope := readStatus(t, bin, id).Scope.Name
	loseController(t, "mosaic-conv@"+id+".service", "mosaic-conv@"+id+".socket")
	if got := unitProp(t, scope, "ActiveState"); got != "active" {
		t.Fatalf("after stopping the socket and the service the scope %s is %q; the test needs it still running", scope, got)
	}

	advice := "`mosaicctl stop --take --yes " + id + "`"
	for _, args := range [][]string{{"conv", "rm", id}, {"uninstall"}} {
		r := run(t, bin, args...)
		wantRefusal(t, r, protocol.CodeEngineAlive)
		if !strings.Contains(r.stderr, scope) || !strings.Contains(r.stderr, advice) {
			t.Fatalf("%v with the engine running: %q; want the scope %s and %s named", args, r.stderr, scope, advice)
		}
	}
	if st := readStatus(t, bin, id); st.Scope == nil || st.Scope.Name != scope || st.Scope.ActiveState != "active" {
		t.Fatalf("status of the conversation whose controller is gone: %+v; want its engine scope, active", st.Scope)
	}

	// The advice, as typed.
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q", advice, r.code, r.stdout, r.stderr)
	}
	mustRun(t, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")

	// A scope of a conversation nobody registered: only systemctl stops it.
	stray, err := scopes.UnitName("pi-00000000000000000000", "x1")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("systemd-run", "--user", "--scope", "--unit", stray, "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run(t, "systemctl", "--user", "stop", stray); sleeper.Wait() })
	waitFor(t, func() bool { return unitProp(t, stray, "ActiveState") == "active" })

	table := mustRun(t, bin, "status")
	if !strings.Contains(table, stray) || !strings.Contains(table, "systemctl --user stop "+stray) {
		t.Fatalf("status does not list the stray engine scope %s with its fix:\n%s", stray, table)
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(mustRun(t, bin, "status", "--json")), "\n") {
		var u unseenScope
		if json.Unmarshal([]byte(l), &u) == nil && u.Scope.Name == stray {
			found = u.Conversation == "pi-00000000000000000000" && !u.Registered && u.Scope.ActiveState == "active"
		}
	}
	if !found {
		t.Fatalf("status --json has no unownedScope record for %s", stray)
	}
	r := run(t, bin, "uninstall")
	wantRefusal(t, r, protocol.CodeEngineAlive)
	if !strings.Contains(r.stderr, "`systemctl --user stop "+stray+"`") || strings.Contains(r.stderr, advice) {
		t.Fatalf("uninstall with a stray scope: %q; want only its systemctl stop named", r.stderr)
	}
	mustRun(t, "systemctl", "--user", "stop", stray)

	if r := run(t, bin, "conv", "rm", id); r.code != 0 {
		t.Fatalf("conv rm after the proven stop: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, bin, "uninstall"); r.code != 0 {
		t.Fatalf("uninstall after the proven stop: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAdviceWorksWhenOnlyTheScopeIsLeft: Pi exits when its controller is
// lost (the end of its stdin), but the scope lives on, held by its anchor. The
// advice of conv rm, typed as given, still ends in a proven stop, whether
// the verb stops the cohort itself or follows the stop a restarted
// controller already began; then conv rm succeeds.
func TestAdviceWorksWhenOnlyTheScopeIsLeft(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "leftover", stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"up"}}}})
	bin, id := pc.bin, pc.id
	if r := run(t, bin, "prompt", id, "--take", "hi"); r.code != 0 {
		t.Fatalf("prompt: exit %d, stderr %q", r.code, r.stderr)
	}
	scope := readStatus(t, bin, id).Scope.Name
	loseController(t, "mosaic-conv@"+id+".service", "mosaic-conv@"+id+".socket")
	r := run(t, bin, "conv", "rm", id)
	wantRefusal(t, r, protocol.CodeEngineAlive)
	if !strings.Contains(r.stderr, scope) {
		t.Fatalf("conv rm: %q; want the scope %s named", r.stderr, scope)
	}
	r = run(t, bin, "stop", "--take", "--yes", id)
	if r.code != 0 || !strings.Contains(r.stdout, "stopped: execution ") {
		t.Fatalf("the advised stop: exit %d, stdout %q, stderr %q; want stopped with a proof", r.code, r.stdout, r.stderr)
	}
	if st := readStatus(t, bin, id); st.Claim == nil || st.Claim.State != "stopped" || !st.Claim.Proven {
		t.Fatalf("claim after the advised stop: %+v; want stopped with a proof", st.Claim)
	}
	mustRun(t, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")
	if r := run(t, bin, "conv", "rm", id); r.code != 0 {
		t.Fatalf("conv rm after the advised stop: exit %d, stderr %q", r.code, r.stderr)
	}
}
