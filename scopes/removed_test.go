package scopes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// systemctl runs `systemctl --user args…` as the test's user.
func systemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("systemctl", append([]string{"--user"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("systemctl --user %v: %v %s", args, err, out)
	}
}

// reattached returns a handle on e's cohort as a restarted controller
// would have it: from the JSON record, through another Manager.
func reattached(t *testing.T, e *engine) *Handle {
	t.Helper()
	rec, _ := json.Marshal(e.Cohort)
	var c Cohort
	if err := json.Unmarshal(rec, &c); err != nil {
		t.Fatal(err)
	}
	m2 := NewManager(Config{})
	t.Cleanup(m2.Close)
	return m2.Reattach(c)
}

// assertRemovedProof checks a stop that rests on the cgroup's removal:
// stopped, basis cgroup-removed, the engine and anchor each observed dead,
// a proof that verifies offline, and every pinned process dead.
func assertRemovedProof(t *testing.T, res StopResult, seen string, pins ...pinned) {
	t.Helper()
	if res.Outcome != Stopped {
		t.Fatalf("outcome %s (%s), want stopped on the cgroup's removal; notes %v", res.Outcome, res.Reason, res.Notes)
	}
	o := res.Observation
	if o.Basis != proofs.BasisCgroupRemoved || o.CgroupPresent || o.Removal == nil || o.Removal.Seen != seen || o.CgroupID == 0 {
		t.Fatalf("observation %+v removal %+v; want basis cgroup-removed, seen %s", o, o.Removal, seen)
	}
	roles := map[string]bool{}
	for _, k := range o.Removal.Known {
		roles[k.Role] = true
		if k.DiedAt == 0 || k.DiedAt > o.ObservedAt {
			t.Fatalf("known death %+v not observed before the observation at %d", k, o.ObservedAt)
		}
	}
	if !roles[proofs.RoleEngine] || !roles[proofs.RoleAnchor] {
		t.Fatalf("known deaths %+v; want the engine and the anchor", o.Removal.Known)
	}
	requireProof(t, res)
	p, _ := proofs.NewCohortProof(o)
	if p.Basis != proofs.BasisCgroupRemoved || p.Removal == nil {
		t.Fatalf("the proof does not state its basis: %+v", p)
	}
	for _, p := range pins {
		if p.alive(t) {
			t.Fatalf("stopped while pid %d is alive", p.pid)
		}
	}
}

// TestRemovedScopeIsProof: a scope that systemd already stopped and
// removed (`systemctl --user stop`, `systemctl --user kill
// --signal=KILL`) is evidence, not a wall: the stop, by this handle or by
// a restarted controller's, ends stopped on the basis cgroup-removed, and
// the setsid tool child the launcher never knew is dead with it. On a
// build without that basis every such stop ended uncertain "cgroup
// absent".
func TestRemovedScopeIsProof(t *testing.T) {
	m := testManager(t)
	for _, tc := range []struct {
		name     string
		external []string
		reattach bool
	}{
		{"systemctl stop", []string{"stop"}, false},
		{"systemctl kill KILL", []string{"kill", "--signal=KILL"}, false},
		{"systemctl kill KILL, restarted controller", []string{"kill", "--signal=KILL"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, setsidEngine)
			got := e.expect(t, "engine", "setsid", "ready")
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
			systemctl(t, append(tc.external, e.Cohort.Unit)...)
			waitUnitGone(t, m, e.Cohort)
			child.waitDead(t)
			h := e.Handle
			if tc.reattach {
				h = reattached(t, e)
			}
			res := h.Stop(ctxT(t), StopOptions{Stop: "stop-removed", Grace: 100 * time.Millisecond})
			assertRemovedProof(t, res, proofs.RemovedENOENT, eng, child)
			// A second stop says the same: it never becomes a wall.
			again := h.Kill(ctxT(t), StopOptions{Stop: "stop-again"})
			assertRemovedProof(t, again, proofs.RemovedENOENT)
		})
	}
}

// TestRemovedWhileAsked (mutant 293): the kill phase reads the cohort's
// cgroups while its question to the manager is out, and systemd may end,
// remove and collect the scope in between (a restarted controller's stop
// right after `systemctl kill`). The answer, the unit gone, postdates
// the read that found the cgroup present: the cgroups are read again
// after it, and the removal proves the stop. With the earlier read kept,
// the stop ended uncertain ("invocation \"\" (inactive)").
func TestRemovedWhileAsked(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, setsidEngine)
	got := e.expect(t, "engine", "setsid", "ready")
	eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
	h := reattached(t, e)
	// No hold: a unit held for the stop is never collected under it, and
	// the question would name the ended invocation (hold_identity_test.go).
	h.m.holder.Close()
	read := make(chan struct{})
	h.m.faults.beforeAsk = func() { <-read }
	h.m.faults.afterPrefetch = func() {
		defer close(read)
		systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
		waitUnitGone(t, m, e.Cohort)
		child.waitDead(t)
	}
	res := h.Kill(ctxT(t), StopOptions{Stop: "stop-while-asked"})
	assertRemovedProof(t, res, proofs.RemovedENOENT, eng, child)
}

// escape moves pid out of the scope into a new cgroup beside it (the
// user owns that subtree), as an agent's tool child can do without a
// cgroup namespace, and returns that cgroup's path for cleanup.
func escape(t *testing.T, fs *cgroupFS, c Cohort, p pinned) {
	t.Helper()
	// Beside app-mosaic.slice, not in it: systemd stops that slice (and
	// kills all below it) once its last unit is gone, which would take the
	// escapee with it whenever the slice is collected first.
	dir := path.Join(path.Dir(path.Dir(c.ScopeCgroup)), fmt.Sprintf("escape-%d.scope", p.pid))
	full := filepath.Join(fs.mount, dir)
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		for range 200 {
			if os.Remove(full) == nil || errors.Is(os.Remove(full), os.ErrNotExist) {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
	})
	if err := fs.write(dir, "cgroup.procs", fmt.Sprint(p.pid)); err != nil {
		t.Fatalf("move pid %d out of the scope: %v", p.pid, err)
	}
	if cg, err := procfs.Cgroup2(p.pid); err != nil || cg != dir {
		t.Fatalf("pid %d in %q (%v), want %s", p.pid, cg, err, dir)
	}
}

// TestRemovedCgroupNeedsKnownDeaths (mutant 15): the removal of the
// cgroup proves nothing about a known member that left it first. The
// anchor (a known member that, unlike the engine, lives outside the
// engine's pid namespace, so the namespace's end does not take it along)
// is moved out of its scope, the scope is killed and removed; the stop
// must end uncertain naming the living anchor, never stopped, by this
// handle and by a restarted controller's.
func TestRemovedCgroupNeedsKnownDeaths(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	for _, reattach := range []bool{false, true} {
		t.Run(fmt.Sprintf("reattached=%t", reattach), func(t *testing.T) {
			e := launchEngine(t, m, echoEngine)
			e.expect(t, "engine", "ready")
			anchor := pin(t, fmt.Sprint(e.Cohort.AnchorPID))
			escape(t, fs, e.Cohort, anchor)
			systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
			waitUnitGone(t, m, e.Cohort)
			h := e.Handle
			if reattach {
				h = reattached(t, e)
			}
			res := h.Stop(ctxT(t), StopOptions{Stop: "stop-escaped", Grace: 100 * time.Millisecond})
			anchorAlive := fmt.Sprintf("%s pid %d ", proofs.RoleAnchor, anchor.pid)
			if res.Outcome == Stopped || !strings.Contains(res.Reason, ErrKnownMemberAlive.Error()) || !strings.Contains(res.Reason, anchorAlive) {
				t.Fatalf("outcome %s (%s); want uncertain naming %q alive: the anchor left the cgroup before it was removed", res.Outcome, res.Reason, anchorAlive)
			}
			if !anchor.alive(t) {
				t.Fatal("the escaped anchor died: the test proves nothing")
			}
			if _, err := proofs.NewCohortProof(res.Observation); err == nil {
				t.Fatal("a proof was built from the observation of a living engine")
			}
		})
	}
}

// TestRemovedIdentity: absence is a proof only when it is this
// execution's cgroup that went. A cgroup re-created at the same path
// after the removal is told apart by its id (stopped, seen replaced); a
// cgroup present with our id is never taken as removed, even when the
// recorded invocation does not match; an engine cgroup missing while our
// invocation still runs is not a removal systemd made.
func TestRemovedIdentity(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("path re-created after the removal", func(t *testing.T) {
		e := launchEngine(t, m, setsidEngine)
		got := e.expect(t, "engine", "setsid", "ready")
		eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
		systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
		waitUnitGone(t, m, e.Cohort)
		for _, d := range []string{e.Cohort.ScopeCgroup, e.Cohort.Cgroup} {
			if err := os.Mkdir(filepath.Join(fs.mount, d), 0o755); err != nil {
				t.Fatalf("re-create %s: %v", d, err)
			}
		}
		t.Cleanup(func() {
			os.Remove(filepath.Join(fs.mount, e.Cohort.Cgroup))
			os.Remove(filepath.Join(fs.mount, e.Cohort.ScopeCgroup))
		})
		res := reattached(t, e).Stop(ctxT(t), StopOptions{Stop: "stop-recreated"})
		assertRemovedProof(t, res, proofs.RemovedReplaced, eng, child)
		if res.Observation.Removal.SeenCgroupID == e.Cohort.CgroupID {
			t.Fatalf("replaced with the same id %d", e.Cohort.CgroupID)
		}
	})
	t.Run("unit name and cgroup path taken by another invocation", func(t *testing.T) {
		// After the removal a process of the user starts a scope under the
		// same unit name and puts a live process at our exact engine
		// cgroup path. Ours is gone (seen replaced, another cgroup id);
		// the impostor is not ours and is never touched.
		e := launchEngine(t, m, setsidEngine)
		got := e.expect(t, "engine", "setsid", "ready")
		eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
		systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
		waitUnitGone(t, m, e.Cohort)
		imp := exec.Command("systemd-run", "--user", "--scope", "--unit="+e.Cohort.Unit, "-p", "Delegate=yes",
			"--slice="+path.Base(path.Dir(e.Cohort.ScopeCgroup)), "sleep", "300")
		if err := imp.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			exec.Command("systemctl", "--user", "kill", "--signal=KILL", e.Cohort.Unit).Run()
			imp.Wait()
		})
		var st UnitState
		for range 200 {
			if st, _ = m.bus.unitState(ctxT(t), e.Cohort.Unit); st.ActiveState == "active" {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if st.ActiveState != "active" || st.InvocationID == e.Cohort.InvocationID {
			t.Fatalf("impostor unit %+v", st)
		}
		impostor := pin(t, fmt.Sprint(imp.Process.Pid))
		if err := fs.mkdir(e.Cohort.ScopeCgroup, EngineSubgroup); err != nil {
			t.Fatal(err)
		}
		if err := fs.write(e.Cohort.Cgroup, "cgroup.procs", fmt.Sprint(impostor.pid)); err != nil {
			t.Fatalf("move the impostor to %s: %v", e.Cohort.Cgroup, err)
		}
		res := reattached(t, e).Stop(ctxT(t), StopOptions{Stop: "stop-impostor", Grace: 100 * time.Millisecond})
		assertRemovedProof(t, res, proofs.RemovedReplaced, eng, child)
		if !impostor.alive(t) {
			t.Fatal("the stop killed a process of another invocation")
		}
		if res.Observation.Removal.UnitInvocationID != st.InvocationID {
			t.Fatalf("removal %+v does not record the other invocation %s", res.Observation.Removal, st.InvocationID)
		}
	})
	t.Run("cgroup present with our id, known members dead, recorded invocation wrong", func(t *testing.T) {
		// Every known member dies (the engine's PID 1, so its whole pid
		// namespace, and the anchor) while the cgroup (ours, by id) still
		// holds a process: one a same-uid process outside moved in, since
		// nothing inside the confined engine outlives its namespace. A
		// record with a stale invocation id must not make that cgroup
		// look removed.
		e := launchEngine(t, m, echoEngine)
		e.expect(t, "engine", "ready")
		outside := exec.Command("sleep", "300")
		if err := outside.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
		child := pin(t, fmt.Sprint(outside.Process.Pid))
		if err := fs.write(e.Cohort.Cgroup, "cgroup.procs", fmt.Sprint(child.pid)); err != nil {
			t.Fatalf("move pid %d into the engine cgroup: %v", child.pid, err)
		}
		pin(t, fmt.Sprint(e.Cohort.PID)).kill()
		<-e.Done()
		anchor := pin(t, fmt.Sprint(e.Cohort.AnchorPID))
		anchor.kill()
		anchor.waitDead(t)
		c := e.Cohort
		c.InvocationID = strings.Repeat("0", 32)
		res := m.Reattach(c).Stop(ctxT(t), StopOptions{Stop: "stop-wrong-invocation"})
		if res.Outcome == Stopped || res.Observation.Basis == proofs.BasisCgroupRemoved || !child.alive(t) {
			t.Fatalf("outcome %s basis %q (%s), child alive %t; want uncertain, the cgroup ours and present", res.Outcome, res.Observation.Basis, res.Reason, child.alive(t))
		}
	})
	t.Run("engine cgroup missing while our invocation runs", func(t *testing.T) {
		e := launchEngine(t, m, echoEngine)
		got := e.expect(t, "engine", "ready")
		eng := e.pin(t, got["engine"])
		c := e.Cohort
		c.Cgroup += "-missing"
		res := m.Reattach(c).Stop(ctxT(t), StopOptions{Stop: "stop-absent", Grace: 100 * time.Millisecond})
		if res.Outcome == Stopped || res.Observation.CgroupPresent || !eng.alive(t) {
			t.Fatalf("outcome %s (%s), engine alive %t; want uncertain, engine untouched", res.Outcome, res.Reason, eng.alive(t))
		}
	})
}
