package scopes

import (
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKillPhaseThawsOnFailure: a kill phase that gives up after it froze
// the engine cgroup leaves the cgroup thawed, the engine answering, and a
// later stop still proves. The wait for frozen 1 cannot be made to fail on
// demand, so a fault point fails it after the cgroup did report frozen 1.
func TestKillPhaseThawsOnFailure(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	errInjected := errors.New("injected: cgroup.events unreadable")
	for _, tc := range []struct {
		name  string
		fault func(f *faults, fail func() error)
	}{
		{"wait for frozen 1 fails", func(f *faults, fail func() error) { f.afterFrozen = fail }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, setsidEngine)
			got := e.expect(t, "engine", "setsid", "ready")
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
			cg := e.Cohort.Cgroup
			frozenAtFault := false
			tc.fault(&m.faults, func() error {
				ev, err := fs.events(cg)
				frozenAtFault = err == nil && ev.Frozen == 1
				return errInjected
			})
			res := e.Kill(ctxT(t), StopOptions{Stop: "stop-thaw"})
			m.faults = faults{}
			if !frozenAtFault {
				t.Fatal("the fault ran while the cgroup was not frozen: nothing shown")
			}
			if res.Outcome != Uncertain || !strings.Contains(res.Reason, errInjected.Error()) {
				t.Fatalf("outcome %s (%s), want uncertain with the injected failure", res.Outcome, res.Reason)
			}
			if b, err := fs.read(e.Cohort.ScopeCgroup, "cgroup.freeze"); err != nil || strings.TrimSpace(string(b)) != "0" {
				t.Fatalf("cgroup.freeze is %q (%v) after the kill phase gave up: the engine is left frozen", b, err)
			}
			if ev, ok, err := fs.waitEvents(cg, time.Now().Add(10*time.Second), func(e cgEvents) bool { return e.Frozen == 0 }); !ok {
				t.Fatalf("cgroup.events %+v (%v): still frozen", ev, err)
			}
			if !eng.alive(t) || !child.alive(t) {
				t.Fatal("a member died although nothing was killed")
			}
			e.Stdin.WriteString("thawed?\n")
			if l := e.line(t); l != "thawed?" {
				t.Fatalf("engine answered %q", l)
			}
			res = e.Stop(ctxT(t), StopOptions{Stop: "stop-thaw-again"})
			assertProvenStop(t, res, eng, child)
		})
	}
}

// TestToolThawDoesNotUndoFreeze: a tool owns the engine cgroup's files
// (same uid, delegated) and writes 0 to its cgroup.freeze; the kill phase
// still sees the cohort frozen, enumerates it and proves the stop. A tool
// wins the race against the freeze write only now and then, so a fault
// point makes that write right after the kill phase's freeze.
func TestToolThawDoesNotUndoFreeze(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"kill phase only", 0},
		{"term then kill", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Members that ignore SIGTERM, so the TERM phase leaves them
			// for the kill phase.
			e := launchEngine(t, m, stubbornEngine)
			got := e.expect(t, "engine", "stubborn", "ready")
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["stubborn"])
			var thawErr error
			m.faults.afterFreeze = func() { thawErr = fs.write(e.Cohort.Cgroup, "cgroup.freeze", "0") }
			t.Cleanup(func() { m.faults = faults{} })
			res := e.Stop(ctxT(t), StopOptions{Stop: "stop-thawed", Grace: tc.grace, KillTimeout: 3 * time.Second})
			if thawErr != nil {
				t.Fatalf("the tool's write of 0 to the engine's cgroup.freeze failed: %v", thawErr)
			}
			assertProvenStop(t, res, eng, child)
			requireProof(t, res)
		})
	}
}

// TestKillPhaseKillsWhatNeverFroze: a cohort that never reports frozen 1
// (a task asleep where the freezer cannot reach it, such as a tool's read
// of its own FUSE mount) is still killed: the stop ends uncertain, since
// nothing was enumerated, but no member outlives it, and the next stop
// proves the cohort ended. The wait cannot be made to time out on demand,
// so a fault point ends it as the deadline would.
func TestKillPhaseKillsWhatNeverFroze(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, stubbornEngine)
	got := e.expect(t, "engine", "stubborn", "ready")
	eng, child := e.pin(t, got["engine"]), e.pin(t, got["stubborn"])
	m.faults.afterFrozen = func() error { return errNotFrozen }
	t.Cleanup(func() { m.faults = faults{} })
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-unfrozen", Grace: 100 * time.Millisecond})
	m.faults = faults{}
	if res.Outcome != Uncertain || !strings.Contains(res.Reason, errNotFrozen.Error()) {
		t.Fatalf("outcome %s (%s), want uncertain: the cohort never froze", res.Outcome, res.Reason)
	}
	eng.waitDead(t)
	child.waitDead(t)
	res = e.Stop(ctxT(t), StopOptions{Stop: "stop-unfrozen-again"})
	assertProvenStop(t, res, eng, child)
}

// TestKillPhaseFreezesOnlyALiveCohort: a cohort with members left is
// enumerated under the scope's freeze; one a TERM phase emptied is
// enumerated without it (nothing is left to fork), and both stops prove.
func TestKillPhaseFreezesOnlyALiveCohort(t *testing.T) {
	m := testManager(t)
	for _, tc := range []struct {
		name    string
		script  string
		pins    []string
		grace   time.Duration
		freezes int
	}{
		{"members ignore SIGTERM", stubbornEngine, []string{"engine", "stubborn"}, 100 * time.Millisecond, 1},
		{"kill phase only", setsidEngine, []string{"engine", "setsid"}, 0, 1},
		{"TERM phase emptied the cgroup", setsidEngine, []string{"engine", "setsid"}, 10 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, tc.script)
			got := e.expect(t, append(tc.pins, "ready")...)
			var pins []pinned
			for _, name := range tc.pins {
				pins = append(pins, e.pin(t, got[name]))
			}
			freezes := 0
			m.faults.afterFreeze = func() { freezes++ }
			t.Cleanup(func() { m.faults = faults{} })
			res := e.Stop(ctxT(t), StopOptions{Stop: "stop-freezes", Grace: tc.grace})
			m.faults = faults{}
			assertProvenStop(t, res, pins...)
			requireProof(t, res)
			if freezes != tc.freezes {
				t.Fatalf("the kill phase froze the scope %d time(s), want %d", freezes, tc.freezes)
			}
		})
	}
}

// TestKillPhaseThawsWhenItEndsUncertain: a kill phase that gives up after
// its cgroup.kill leaves the scope thawed and the anchor alive; the
// members are dead, and the next stop proves the cohort ended. It gives
// up when the read of cgroup.events after the deaths fails, when the
// engine cgroup stays populated after every listed death (a process of
// the user outside the cohort moved one in after the cgroup.kill), and
// when the scope's own cgroup.kill is refused. None of these can be made
// to happen on demand, so a fault point makes each, and records that the
// scope was still frozen there.
func TestKillPhaseThawsWhenItEndsUncertain(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	errInjected := errors.New("injected failure")
	for _, tc := range []struct {
		name string
		// arm sets the fault, which calls atFault; it returns the
		// processes the next stop must also prove dead.
		arm  func(t *testing.T, e *engine, atFault func()) []pinned
		want string // in the reason or the notes
		// unlisted: the members died before any phase listed them, so
		// the next stop proves the cohort without naming them
		unlisted bool
	}{
		{"cgroup.events unreadable after the deaths", func(t *testing.T, e *engine, atFault func()) []pinned {
			m.faults.afterKill = func() error { atFault(); return errInjected }
			return nil
		}, errInjected.Error(), false},
		{"engine cgroup stays populated", func(t *testing.T, e *engine, atFault func()) []pinned {
			in := startIntruder(t)
			m.faults.afterCgroupKill = func() { atFault(); moveInto(t, fs, e.Cohort.Cgroup, in) }
			return []pinned{in}
		}, "cgroup populated 1", false},
		{"scope's cgroup.kill refused", func(t *testing.T, e *engine, atFault func()) []pinned {
			m.faults.refuseRelease = func() error { atFault(); return errInjected }
			return nil
		}, errInjected.Error(), false},
		{"scope left frozen by a phase whose controller died", func(t *testing.T, e *engine, atFault func()) []pinned {
			// What that phase left: the members killed, the engine
			// cgroup empty, the scope frozen with the anchor in it. This
			// phase takes the emptied path and never freezes.
			if err := fs.write(e.Cohort.Cgroup, "cgroup.kill", "1"); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := fs.waitEvents(e.Cohort.Cgroup, time.Now().Add(10*time.Second), func(e cgEvents) bool { return e.Populated == 0 }); !ok {
				t.Fatalf("the engine cgroup did not empty: %v", err)
			}
			if err := fs.write(e.Cohort.ScopeCgroup, "cgroup.freeze", "1"); err != nil {
				t.Fatal(err)
			}
			m.faults.afterKill = func() error { atFault(); return errInjected }
			return nil
		}, errInjected.Error(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, stubbornEngine)
			got := e.expect(t, "engine", "stubborn", "ready")
			pins := []pinned{e.pin(t, got["engine"]), e.pin(t, got["stubborn"])}
			anchor := pin(t, strconv.Itoa(e.Cohort.AnchorPID))
			frozenAtFault := false
			extra := tc.arm(t, e, func() { frozenAtFault = scopeFreeze(fs, e) == "1" })
			t.Cleanup(func() { m.faults = faults{} })
			res := e.Kill(ctxT(t), StopOptions{Stop: "stop-uncertain", KillTimeout: time.Second})
			m.faults = faults{}
			if !frozenAtFault {
				t.Fatal("the scope was not frozen when the phase gave up: nothing shown")
			}
			if why := res.Reason + "; " + strings.Join(res.Notes, "; "); res.Outcome != Uncertain || !strings.Contains(why, tc.want) {
				t.Fatalf("outcome %s (%s), want uncertain with %q", res.Outcome, why, tc.want)
			}
			if f := scopeFreeze(fs, e); f != "0" {
				t.Fatalf("the scope's cgroup.freeze is %q after the kill phase gave up: the anchor is left frozen", f)
			}
			if ev, ok, err := fs.waitEvents(e.Cohort.ScopeCgroup, time.Now().Add(10*time.Second), func(e cgEvents) bool { return e.Frozen == 0 }); !ok {
				t.Fatalf("the scope's cgroup.events %+v (%v): still frozen", ev, err)
			}
			if !anchor.alive(t) {
				t.Fatal("the anchor died, though the phase kept the scope")
			}
			for _, p := range pins {
				p.waitDead(t)
			}
			res = e.Kill(ctxT(t), StopOptions{Stop: "stop-uncertain-again"})
			if tc.unlisted {
				pins = nil
			}
			assertProvenStop(t, res, append(pins, extra...)...)
			requireProof(t, res)
		})
	}
}

// scopeFreeze reads the scope's cgroup.freeze ("" if unreadable).
// TestKillPhaseLeavesAnotherInvocationsScope (sandbox): a kill phase
// reads whether the scope at the cohort's path is frozen while it waits
// for the manager's word on the invocation; when that word names another
// invocation, the scope is not this phase's, and it ends uncertain
// without thawing it, as it touches nothing there.
func TestKillPhaseLeavesAnotherInvocationsScope(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	e := launchEngine(t, m, echoEngine)
	e.expect(t, "engine", "ready")
	if err := fs.write(e.Cohort.ScopeCgroup, "cgroup.freeze", "1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.write(e.Cohort.ScopeCgroup, "cgroup.freeze", "0") })
	c := e.Cohort
	c.InvocationID = strings.Repeat("0", 32)
	res := m.Reattach(c).Kill(ctxT(t), StopOptions{Stop: "stop-other-invocation", KillTimeout: time.Second})
	if res.Outcome != Uncertain {
		t.Fatalf("outcome %s (%s), want uncertain: the unit is another invocation", res.Outcome, res.Reason)
	}
	if got := scopeFreeze(fs, e); got != "1" {
		t.Fatalf("the scope of another invocation reads cgroup.freeze %q after the phase, want 1: it was thawed", got)
	}
}

func scopeFreeze(fs *cgroupFS, e *engine) string {
	b, err := fs.read(e.Cohort.ScopeCgroup, "cgroup.freeze")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// startIntruder starts a process outside the cohort, as a daemon of the
// user a tool asked would, for a fault point to move into the engine
// cgroup.
func startIntruder(t *testing.T) pinned {
	t.Helper()
	c := exec.Command("sleep", "300")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return pin(t, strconv.Itoa(c.Process.Pid))
}

// launchIntruded launches setsidEngine with its engine and setsid child
// pinned, and starts an intruder outside the cohort for a fault point to
// move into the engine cgroup.
func launchIntruded(t *testing.T, m *Manager) (fs *cgroupFS, e *engine, eng, child, in pinned) {
	t.Helper()
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	e = launchEngine(t, m, setsidEngine)
	got := e.expect(t, "engine", "setsid", "ready")
	return fs, e, e.pin(t, got["engine"]), e.pin(t, got["setsid"]), startIntruder(t)
}

// moveInto moves p into cgroup cg, as a process of the user outside the
// cohort can (same uid, no cgroup namespace).
func moveInto(t *testing.T, fs *cgroupFS, cg string, p pinned) {
	if err := fs.write(cg, "cgroup.procs", strconv.Itoa(p.pid)); err != nil {
		t.Errorf("move of pid %d into %s: %v", p.pid, cg, err)
	}
}

// TestKillPhaseFreezesACgroupJoinedWhileListed: an engine cgroup a TERM
// phase emptied is enumerated without the freeze only if it still reads
// populated 0 after the enumeration. A process moved in meanwhile (by a
// process of the user outside the cohort, a daemon a tool asked) sends
// the kill phase to the frozen enumeration, which names it in the
// membership, instead of a proof that lists the cgroup empty while it
// held a process. The move cannot be timed on demand, so a fault point
// makes it between the enumeration and the second read.
func TestKillPhaseFreezesACgroupJoinedWhileListed(t *testing.T) {
	m := testManager(t)
	fs, e, eng, child, in := launchIntruded(t, m)
	moves, freezes := 0, 0
	m.faults.whileEmptied = func() {
		if moves++; moves == 1 {
			moveInto(t, fs, e.Cohort.Cgroup, in)
		}
	}
	m.faults.afterFreeze = func() { freezes++ }
	t.Cleanup(func() { m.faults = faults{} })
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-joined", Grace: 10 * time.Second})
	m.faults = faults{}
	if moves == 0 {
		t.Fatal("the kill phase never listed the cgroup unfrozen: nothing shown")
	}
	assertProvenStop(t, res, eng, child, in)
	requireProof(t, res)
	if freezes != 1 {
		t.Fatalf("the kill phase froze the scope %d time(s) for a cgroup joined while it was listed, want 1", freezes)
	}
}

// TestKillPhaseListsAgainWhenFrozenLapses (mutants 370, 371): a task that
// joins the frozen engine cgroup while it is enumerated (moved in from
// outside the cohort, or, of the cohort, woken to die when the held child
// ends the pid namespace under a freeze that began past its hold) makes
// the cgroup read frozen 0 until it has frozen or exited. With the
// scope's freeze still in force the kill phase waits for frozen 1 and
// enumerates again, and proves the stop with the newcomer named, instead
// of ending uncertain or proving a membership read before it came. The
// kernel's window lasts microseconds, so a fault point moves a process in
// after the enumeration and has the read report frozen 0.
func TestKillPhaseListsAgainWhenFrozenLapses(t *testing.T) {
	m := testManager(t)
	fs, e, eng, child, in := launchIntruded(t, m)
	listed := 0
	m.faults.afterListed = func() bool {
		if listed++; listed == 1 {
			moveInto(t, fs, e.Cohort.Cgroup, in)
			return true
		}
		return false
	}
	t.Cleanup(func() { m.faults = faults{} })
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-lapsed", KillTimeout: 10 * time.Second})
	m.faults = faults{}
	if listed != 2 {
		t.Fatalf("the kill phase enumerated the frozen cgroup %d time(s), want 2: once, and again after the lapse", listed)
	}
	assertProvenStop(t, res, eng, child, in)
	requireProof(t, res)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "not frozen after the enumeration") }) {
		t.Fatalf("notes %q: none says the freeze lapsed", res.Notes)
	}
}
