package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestServiceEndingVerbs: each systemctl verb on an idle
// conversation's units, against systemd's job at the controller's
// SIGTERM. A restart of the service or of its socket keeps the engine
// (same execution, same scope, claim active); a stop of the socket alone
// or a kill outside a job hibernates it with a proof.
func TestServiceEndingVerbs(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	for _, v := range []struct {
		name    string
		args    func(id string) []string
		restart bool
	}{
		{"restart", func(id string) []string { return []string{"restart", "mosaic-conv@" + id + ".service"} }, true},
		{"try-restart", func(id string) []string { return []string{"try-restart", "mosaic-conv@" + id + ".service"} }, true},
		{"reload-or-restart", func(id string) []string { return []string{"reload-or-restart", "mosaic-conv@" + id + ".service"} }, true},
		{"socket restart", func(id string) []string { return []string{"restart", "mosaic-conv@" + id + ".socket"} }, true},
		{"socket stop", func(id string) []string { return []string{"stop", "mosaic-conv@" + id + ".socket"} }, false},
		{"kill", func(id string) []string { return []string{"kill", "mosaic-conv@" + id + ".service"} }, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			id, path, _, _ := fakeConversation(t, bin, "verbs-"+strings.ReplaceAll(v.name, " ", "-"), stubmodel.Script{})
			before := promptOnce(t, ctx, path, "before")
			start := time.Now()
			mustRun(t, "systemctl", append([]string{"--user"}, v.args(id)...)...)
			t.Logf("%s took %v", v.name, time.Since(start))
			if v.restart {
				b, _ := currentBinding(t, ctx, path)
				if b.Execution != before.Execution || b.State != protocol.BindingActive || b.Restart == nil {
					t.Fatalf("after %s: binding %+v (restart %+v); want execution %s re-attached", v.name, b, b.Restart, before.Execution)
				}
				if n := engineScopes(t, id); n != 1 {
					t.Fatalf("%d engine scopes after %s", n, v.name)
				}
				return
			}
			waitFor(t, func() bool { return engineScopes(t, id) == 0 })
			st := claimOf(t, bin, id)
			if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated") {
				t.Fatalf("claim after %s: %+v; want stopped, proven, hibernated", v.name, st.Claim)
			}
			t.Logf("claim reason: %s", st.Claim.Reason)
		})
	}
}

// TestServiceStopLeavesOrphan: a controller that adopted an
// orphan (W6: a cohort whose controller was lost, so no controller holds
// its stdin) must not end it when its service stops: the brief lets only
// a confirmed force stop of that cohort move it on (§2 "Same boot, engine
// alive"), and the service's stop takes nothing from the orphan that
// would end it anyway (the fd store holds none of its descriptors).
func TestServiceStopLeavesOrphan(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// An engine that outlives the end of its stdin (the agent decides):
	// the fake Pi, then a sleep in its place.
	entry, _ := fakeEngine(t, stubmodel.Script{})
	sh, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	sh = []byte(strings.Replace(string(sh), "\nexec ", "\n", 1) + "exec sleep 600\n")
	if err := os.WriteFile(entry, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	id, _, path := startConversation(t, bin, "orphan-stop", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc, sock := "mosaic-conv@"+id+".service", "mosaic-conv@"+id+".socket"
	logOnFailure(t, svc)
	promptOnce(t, ctx, path, "hi")
	scope := readStatus(t, bin, id).Scope.Name
	loseController(t, svc, sock)
	mustRun(t, "systemctl", "--user", "start", sock)
	// The next controller adopts the orphan: uncertain, no launch.
	b, _ := currentBinding(t, ctx, path)
	if b.State != protocol.BindingUncertain {
		t.Fatalf("binding after the lost controller: %+v; want uncertain (an orphan)", b)
	}
	before := claimOf(t, bin, id).Claim
	mustRun(t, "systemctl", "--user", "stop", svc)
	if got := unitProp(t, scope, "ActiveState"); got != "active" {
		t.Errorf("the orphan's scope %s is %q after a stop of the service: an unconfirmed force stop of an orphan", scope, got)
	}
	if st := claimOf(t, bin, id).Claim; st == nil || st.State != before.State {
		t.Errorf("claim after a stop of the service: %+v; want %s as before (only a confirmed force stop moves an orphan on)", st, before.State)
	}
}

// TestServiceStopTiming: how long `systemctl --user stop`
// takes against TimeoutStopSec=10s when the engine (the adversary) makes
// the controller's stop as slow as it can: it ignores the end of its
// stdin and SIGTERM, so the hibernate waits the grace for EOF and then
// the TERM phase's grace before the kill phase.
func TestServiceStopTiming(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, path, svc, stdinLog := fakeConversation(t, bin, "stop-timing", stubmodel.Script{})
	promptOnce(t, ctx, path, "hi")
	// The engine does not exit at the end of its stdin.
	if err := liveControl(t, stdinLog).Arm(ctx, fakepi.PointStdinEOF); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustRun(t, "systemctl", "--user", "stop", svc)
	took := time.Since(start)
	st := claimOf(t, bin, id).Claim
	t.Logf("systemctl --user stop took %v; claim %+v", took, st)
	t.Logf("journal:\n%s", run(t, "journalctl", "--user", "-u", svc, "-o", "short-precise", "--no-pager").stdout)
	if st == nil || st.State != claims.Stopped {
		t.Fatalf("claim %+v after the stop (took %v)", st, took)
	}
}

// TestClaudeServiceStop: an idle Claude conversation's
// service stopped hibernates with a proof and wakes on the next client,
// whether or not its controller was restarted (re-attached) before. After
// a restart the CLI answers the re-attach's initialize with a
// control_response and then a system/background_tasks_changed frame,
// which the turn tracker took for a turn starting: the binding stayed
// busy for good, a prompt stayed queued, and the stop of the service
// force stopped the idle conversation (recover) instead of hibernating.
func TestClaudeServiceStop(t *testing.T) {
	sandboxtest.Require(t)
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted %v", restart), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			r := newClaudeRig(t, fmt.Sprintf("cstop-%v", restart))
			logOnFailure(t, r.svc)
			before := promptOnce(t, ctx, r.path, "before the stop")
			if restart {
				mustRun(t, "systemctl", "--user", "restart", r.svc)
				var b protocol.Binding
				waitFor(t, func() bool { b, _ = currentBinding(t, ctx, r.path); return b.EngineState == "idle" })
				if b.Execution != before.Execution {
					t.Fatalf("restart: execution %s, was %s", b.Execution, before.Execution)
				}
				pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
				promptOnce(t, pctx, r.path, "after the restart")
				pcancel()
			}
			mustRun(t, "systemctl", "--user", "stop", r.svc)
			st := claimOf(t, r.bin, r.id)
			if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated") {
				t.Fatalf("claim after the service stopped: %+v; want hibernated", st.Claim)
			}
			var b protocol.Binding
			waitFor(t, func() bool { b, _ = currentBinding(t, ctx, r.path); return b.State == protocol.BindingActive })
			if b.Execution == before.Execution || b.SessionID != before.SessionID {
				t.Fatalf("woke as %+v", b)
			}
			promptOnce(t, ctx, r.path, "after the wake")
		})
	}
}

// TestServiceStopAfterRestart: an idle conversation whose
// controller was restarted (re-attached through the fd store), then
// stopped, hibernates as one never restarted does.
func TestServiceStopAfterRestart(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, path, svc, _ := fakeConversation(t, bin, "stop-after-restart", stubmodel.Script{})
	before := promptOnce(t, ctx, path, "hi")
	mustRun(t, "systemctl", "--user", "restart", svc)
	if b, _ := currentBinding(t, ctx, path); b.Execution != before.Execution || b.State != protocol.BindingActive {
		t.Fatalf("restart: %+v", b)
	}
	mustRun(t, "systemctl", "--user", "stop", svc)
	st := claimOf(t, bin, id)
	if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated") {
		t.Fatalf("claim after restart then stop: %+v; want hibernated", st.Claim)
	}
}

// TestServiceStopOutlastsTimeoutStopSec: a stop of the service that an
// engine makes slow (it outlives the end of its stdin, so the hibernate
// waits its 3 s grace for EOF) still ends with its proof under a
// TimeoutStopSec shorter than that (2 s here): the controller asks the
// manager for its bound first (EXTEND_TIMEOUT_USEC), where the manager
// otherwise SIGKILLed it mid-stop and left the claim stopping.
func TestServiceStopOutlastsTimeoutStopSec(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, path, svc, stdinLog := fakeConversation(t, bin, "stop-overrun", stubmodel.Script{})
	home, _ := os.UserHomeDir()
	dropin := home + "/.config/systemd/user/" + svc + ".d"
	if err := os.MkdirAll(dropin, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dropin); run(t, "systemctl", "--user", "daemon-reload") })
	if err := os.WriteFile(dropin+"/short.conf", []byte("[Service]\nTimeoutStopSec=2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "systemctl", "--user", "daemon-reload")
	promptOnce(t, ctx, path, "hi")
	if err := liveControl(t, stdinLog).Arm(ctx, fakepi.PointStdinEOF); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustRun(t, "systemctl", "--user", "stop", svc)
	took := time.Since(start)
	if r := unitProp(t, svc, "Result"); r != "success" {
		t.Errorf("the service's result after the stop: %s; want success (not killed at its timeout)", r)
	}
	if st := claimOf(t, bin, id).Claim; st == nil || st.State != claims.Stopped || !st.Proven || !strings.Contains(st.Reason, "hibernated") {
		t.Fatalf("claim after a stop of %v under TimeoutStopSec=2s: %+v; want hibernated with a proof", took, st)
	}
}

// TestServiceStopWithScope: the user manager's end stops
// every unit at once, the engine's scope (DefaultDependencies: it
// conflicts with shutdown.target) beside the controller's service, with no
// order between them. Emulated by one `systemctl --user stop` of both: the
// claim must end stopped with a proof or uncertain, never more than was
// observed.
func TestServiceStopWithScope(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	for _, tool := range []bool{false, true} {
		t.Run(fmt.Sprintf("tool %v", tool), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			script := stubmodel.Script{}
			if tool {
				script.Turns = []stubmodel.Turn{{Text: []string{"running "}, Tool: &stubmodel.ToolCall{Command: "sleep 600"}}}
			}
			id, path, svc, _ := fakeConversation(t, bin, fmt.Sprintf("stop-scope-%v", tool), script)
			if tool {
				lib := activeLib(t, ctx, path)
				if _, err := lib.c.Takeover(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := lib.c.Prompt(ctx, "run the tool"); err != nil {
					t.Fatal(err)
				}
				waitFor(t, func() bool { return strings.Contains(strings.Join(lib.lines(), "\n"), "[tool bash running]") })
				lib.c.Close()
			} else {
				promptOnce(t, ctx, path, "hi")
			}
			scope := readStatus(t, bin, id).Scope.Name
			start := time.Now()
			// systemctl asks for the two stop jobs one after the other: the
			// controller's stop may have ended the scope, and the manager
			// collected it, before the second is asked for.
			if res := run(t, "systemctl", "--user", "stop", svc, scope); res.code != 0 && !strings.Contains(res.stderr, "not loaded") {
				t.Fatalf("systemctl --user stop %s %s: exit %d, %q", svc, scope, res.code, res.stderr)
			}
			st := claimOf(t, bin, id).Claim
			t.Logf("stop took %v; claim %+v", time.Since(start), st)
			switch {
			case st == nil:
				t.Fatal("no claim after the stop")
			case st.State == claims.Stopped && !st.Proven:
				t.Fatalf("claim %+v: stopped without a proof that verifies", st)
			case st.State != claims.Stopped && st.State != claims.Uncertain && st.State != "stopping":
				t.Fatalf("claim %+v after the stop; want stopped with a proof, uncertain or stopping", st)
			}
		})
	}
}
