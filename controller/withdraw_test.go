package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
	"github.com/mosaic-agents/mosaic/scopes"
)

// engineAt makes the rig's engine the file at path (a copy of the fake,
// made by the test), without changing the argv the claim pins: a test
// removes the file to make the launch fail after the claim is taken, as
// an engine binary or interpreter that vanished or was replaced does.
func engineAt(path string) func(*Config) {
	return func(cfg *Config) {
		orig := cfg.Spec
		cfg.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
			s, err := orig(cv)
			if err != nil {
				return s, err
			}
			s.Path, s.Args = path, append([]string{path}, s.Args[1:]...)
			return s, nil
		}
	}
}

// copyFake puts a copy of the fake engine at path.
func copyFake(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(sandboxtest.Bin(t, "fakepi"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// wantWithdrawn checks that c's claim is stopped with a withdrawn proof
// of the scope unit it names, that verifies, and the binding stopped.
func wantWithdrawn(t *testing.T, c *Controller) {
	t.Helper()
	c.mu.Lock()
	binding, reason := c.st.binding, c.st.reason
	var rec claims.Record
	if c.st.claim != nil {
		rec = c.st.claim.Record()
	}
	c.mu.Unlock()
	if binding != protocol.BindingStopped || rec.State != claims.Stopped || rec.Proof == nil || rec.Proof.Type != claims.ProofWithdrawn {
		t.Fatalf("after a launch that failed before release: binding %s (%s), claim %s; want stopped, withdrawn", binding, reason, rec.State)
	}
	if err := claims.Proven(&rec); err != nil {
		t.Fatalf("withdrawn revision does not verify: %v", err)
	}
	if !strings.Contains(string(rec.Proof.Body), `"unit":"mosaic-engine-`) {
		t.Fatalf("withdrawn proof names no scope unit: %s", rec.Proof.Body)
	}
}

// TestFailedLaunchIsWithdrawn: the engine's binary is gone when the
// launch looks it up, after the claim was taken and the launch began. No
// engine ran (no incarnation was recorded), and the user manager lists no
// scope for the execution, so the launch is withdrawn: the binding is
// stopped with a withdrawn proof, not a cohort proof. Once the binary is
// back, recover launches on the same leaf and a prompt is answered. On a
// build without the withdrawal the claim stayed uncertain with nothing a
// stop could prove, recover refused and a restart found it the same.
func TestFailedLaunchIsWithdrawn(t *testing.T) {
	dir := sandboxDir(t)
	bin := filepath.Join(dir, "engine")
	r := newRigAt(t, dir, plainScript, engineAt(bin), nil) // no file at bin: the launch fails
	wantWithdrawn(t, r.ctrl)
	copyFake(t, bin)
	backAfterWithdrawal(t, r)
}

// TestRestartWithdrawsLaunchCutShort: a controller died after it began a
// launch and before it recorded the engine's incarnation (its scope never
// got as far, or is gone). The next controller withdraws the launch
// instead of adopting an uncertain claim it can neither stop nor prove,
// and recover launches again on the same leaf.
func TestRestartWithdrawsLaunchCutShort(t *testing.T) {
	dir := sandboxDir(t)
	crashMidLaunch := func(cfg *Config) { cutShort(t, cfg) }
	r := newRigAt(t, dir, plainScript, crashMidLaunch, nil)
	wantWithdrawn(t, r.ctrl)
	backAfterWithdrawal(t, r)
}

// TestLaunchWithLiveScopeKilledAndWithdrawn: as
// TestRestartWithdrawsLaunchCutShort, but a unit of the execution's scope
// name still runs a process, as a launch cut short after the scope was
// created leaves its held child and anchor waiting in it for good. Its
// launcher is gone and it never released an engine, so the restart kills
// what the scope holds, sees the unit dead and withdraws: the
// conversation is not left uncertain with a scope nobody stops.
func TestLaunchWithLiveScopeKilledAndWithdrawn(t *testing.T) {
	dir := sandboxDir(t)
	var live liveScope
	crashMidLaunch := func(cfg *Config) { live = cutShortLive(t, cfg) }
	r := newRigAt(t, dir, plainScript, crashMidLaunch, nil)
	wantWithdrawn(t, r.ctrl)
	live.wantKilled(t)
	r.ctrl.mu.Lock()
	reason := r.ctrl.st.reason
	r.ctrl.mu.Unlock()
	if !strings.Contains(reason, "killed what its scope held") {
		t.Fatalf("admission says %q; want it to say mosaic killed what the scope held", reason)
	}
	backAfterWithdrawal(t, r)
}

// TestForceStopWithdrawsUnreleasedLaunch: as
// TestLaunchWithLiveScopeKilledAndWithdrawn, but the restart's own
// withdrawal failed (here: the first one is made to fail, as a user
// manager that did not answer in time does), leaving the binding
// uncertain with no engine cohort known. A confirmed force stop from the
// controller connection does what a restart would: it kills what the
// scope holds, reads the unit dead and withdraws, and its receipt says
// stopped on the withdrawn record. On a build without that the force
// stop was refused no-engine, naming a restart of the controller.
//
// A prompt an earlier controller left queued (a stop a restart inferred
// keeps them) becomes a recovered draft, listed in the stop, as at every
// force stop (docs/queue.md); on a build whose withdrawing force stop
// skipped the drafts it stayed queued behind the stopped binding, paused,
// and held back the next execution's prompts.
func TestForceStopWithdrawsUnreleasedLaunch(t *testing.T) {
	dir := sandboxDir(t)
	var live liveScope
	var queued string
	crashMidLaunch := func(cfg *Config) {
		live = cutShortLive(t, cfg)
		queued = queueOnDisk(t, cfg, "queued before the crash")
	}
	failOnce := func(c *Controller) {
		failed := false
		c.test.withdrawFault = func() error {
			if failed {
				return nil
			}
			failed = true
			return errors.New("test: the user manager did not answer")
		}
	}
	r := newRigAt(t, dir, plainScript, crashMidLaunch, failOnce)
	r.waitBinding("uncertain")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.recoveryControl(ctl)
	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != protocol.ReceiptStopped || !strings.Contains(fmt.Sprint(rc["reason"]), "no cohort proof") {
		t.Fatalf("force stop of a launch that never released its engine: %v; want stopped on the withdrawn record", rc)
	}
	wantWithdrawn(t, r.ctrl)
	live.wantKilled(t)
	r.ctrl.mu.Lock()
	it, s := r.ctrl.itemLocked(queued), *r.ctrl.st.stop
	r.ctrl.mu.Unlock()
	if it == nil || it.State != protocol.ReceiptDraft || !contains(s.QueueDrafts, queued) {
		t.Fatalf("after the withdrawing force stop the queued item is %+v, stop drafts %v; want a draft, listed", it, s.QueueDrafts)
	}
	wayBack(t, r, ctl, gen)
}

// queueOnDisk writes a queued prompt into cfg's queue store, as a
// controller that admitted it and ended before it was sent leaves it, and
// returns its id.
func queueOnDisk(t *testing.T, cfg *Config, text string) string {
	t.Helper()
	st, err := queue.Open(filepath.Join(filepath.Dir(cfg.Claims.Root()), "queue"), cfg.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	it := qfItem(1, text)
	if err := st.Write(it); err != nil {
		t.Fatal(err)
	}
	return it.ID
}

// liveScope is a unit of a cut-short execution's scope name that still
// runs a process, as a launch cut short after the scope was created
// leaves its held child and anchor waiting in it for good.
type liveScope struct {
	unit    string
	sleeper *exec.Cmd
}

// cutShortLive is cutShort with the execution's scope left alive.
func cutShortLive(t *testing.T, cfg *Config) liveScope {
	t.Helper()
	cv := cfg.Conversation
	cutShort(t, cfg)
	unit, err := scopes.UnitName(cv.ID, "e-cutshort")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("systemd-run", "--user", "--scope", "--quiet", "--unit="+unit, "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("systemctl", "--user", "stop", unit).Run() })
	for i := 0; ; i++ {
		out, _ := exec.Command("systemctl", "--user", "is-active", unit).Output()
		if strings.TrimSpace(string(out)) == "active" {
			break
		} else if i == 500 {
			t.Fatalf("scope %s never became active: %s", unit, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return liveScope{unit: unit, sleeper: sleeper}
}

// wantKilled checks that the withdrawal killed the scope's process and
// left its unit not active.
func (l liveScope) wantKilled(t *testing.T) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- l.sleeper.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Fatalf("the process in %s exited cleanly; want it killed by the withdrawal", l.unit)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the process in %s still runs after the withdrawal", l.unit)
	}
	if out, _ := exec.Command("systemctl", "--user", "is-active", l.unit).Output(); strings.TrimSpace(string(out)) == "active" {
		t.Fatalf("%s is still active after the withdrawal", l.unit)
	}
}

// TestEngineInterpreterGoneIsStoppable: the engine is a script whose
// interpreter is gone. The launch finds the file, records the incarnation
// and releases the held child, whose exec then fails: the engine was
// released, so this is no withdrawal but a stop, and the force stop proves
// the (empty) cohort ended; with the interpreter back, recover launches.
func TestEngineInterpreterGoneIsStoppable(t *testing.T) {
	dir := sandboxDir(t)
	bin, interp := filepath.Join(dir, "engine"), filepath.Join(dir, "interp")
	if err := os.WriteFile(bin, []byte("#!"+interp+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRigAt(t, dir, plainScript, engineAt(bin), nil)
	r.waitBinding("uncertain")
	r.ctrl.mu.Lock()
	rec := r.ctrl.st.claim.Record()
	r.ctrl.mu.Unlock()
	if rec.Engine == nil || rec.State == claims.Stopped {
		t.Fatalf("claim %s engine %+v: the engine was released, so its incarnation must be recorded and only a stop may end it", rec.State, rec.Engine)
	}
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.recoveryControl(ctl)
	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != protocol.ReceiptStopped {
		t.Fatalf("force stop of an engine whose interpreter is gone: %v", rc)
	}
	// The interpreter is back: a shell script that runs the fake.
	copyFake(t, filepath.Join(dir, "fake"))
	if err := os.WriteFile(interp, []byte("#!/bin/sh\nshift\nexec "+filepath.Join(dir, "fake")+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wayBack(t, r, ctl, gen)
}

// cutShort leaves in cfg's claim store what a controller that died after
// it began a launch (BeginLaunch) and before it recorded the incarnation
// leaves: the claim is written by this process, which crashedHost (the
// store cfg gets) says is gone.
func cutShort(t *testing.T, cfg *Config) {
	t.Helper()
	store, err := claims.Open(cfg.Claims.Root(), claims.WithHost(crashedHost{claims.LocalHost()}))
	if err != nil {
		t.Fatal(err)
	}
	cv := cfg.Conversation
	spec, err := cfg.Spec(cv)
	if err != nil {
		t.Fatal(err)
	}
	keys := claims.Keys{Seat: claims.SeatKey{Seat: cv.Seat, Project: cv.Project, Workspace: cv.Workspace}, Session: "new:" + cv.ID}
	ctx := context.Background()
	cl, err := store.Acquire(ctx, claims.Request{Keys: keys, Binding: "b-dead", Harness: cv.Kind(), Conversation: cv.ID,
		Branch: "main", Pins: pinsOf(cv, spec), Execution: "e-cutshort"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginLaunch(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Claims = store
}

// sandboxDir is a fresh directory for a rig, its path resolved; the test
// needs the sandbox.
func sandboxDir(t *testing.T) string {
	t.Helper()
	sandboxtest.Require(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// backAfterWithdrawal recovers a withdrawn launch and checks that the new
// execution answers. A stopped binding is fenced: recovery control, as
// after any stop.
func backAfterWithdrawal(t *testing.T, r *rig) {
	t.Helper()
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	wayBack(t, r, ctl, r.recoveryControl(ctl))
}

// TestForceStopWithdrawsFailedRelaunch: as
// TestForceStopWithdrawsUnreleasedLaunch, but the launch that never
// released its engine is a relaunch (recover, launch) after a proven
// stop, in this controller: the execution it last ran, stopped with its
// cohort proof, is not the claim's. The force stop withdraws the
// relaunch's claim; it neither signals the old execution's scope nor
// offers the old cohort's proof to the new claim. On a build that kept
// the stopped execution as the current one, the force stop took the
// cohort path against it, the claim refused the proof of another
// execution, and the stop ended uncertain, naming the old execution, with
// the conversation left uncertain as before.
func TestForceStopWithdrawsFailedRelaunch(t *testing.T) {
	dir := sandboxDir(t)
	bin := filepath.Join(dir, "engine")
	copyFake(t, bin)
	var armed atomic.Bool
	failArmed := func(c *Controller) {
		c.test.withdrawFault = func() error {
			if armed.Swap(false) {
				return errors.New("test: the user manager did not answer")
			}
			return nil
		}
	}
	r := newRigAt(t, dir, plainScript, engineAt(bin), failArmed)
	r.waitBinding("active")
	first := r.execution()
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	cf := ctl.confirm("force-stop", gen)
	if rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != protocol.ReceiptStopped {
		t.Fatalf("force stop of the first execution: %v", rc)
	}

	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	rcf := ctl.confirm("recover", gen)
	el := ctl.must(map[string]any{"type": "recover", "request": "rv1", "generation": gen, "confirmation": rcf}, "eligibility")
	ctl.refused(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, protocol.CodeLaunchFailed)
	r.waitBinding("uncertain")
	r.ctrl.mu.Lock()
	relaunch := r.ctrl.st.claim.Record().Execution
	r.ctrl.mu.Unlock()
	if relaunch == first {
		t.Fatalf("the relaunch's claim names execution %s, the first one", first)
	}

	gen = r.generation()
	cf = ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f2", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != protocol.ReceiptStopped || rc["execution"] != relaunch || !strings.Contains(fmt.Sprint(rc["reason"]), "no cohort proof") {
		t.Fatalf("force stop of a relaunch that never released its engine: %v; want stopped on the withdrawn record of execution %s", rc, relaunch)
	}
	wantWithdrawn(t, r.ctrl)
	copyFake(t, bin)
	wayBack(t, r, ctl, gen)
}
