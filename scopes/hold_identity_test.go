package scopes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
	"time"
)

// TestHoldKeepsNoEndedInvocationOurs: the stop's reference
// keeps the unit loaded after its invocation ends, and a loaded unit goes
// on answering our InvocationID. identify and unitOurs ask that id alone
// (ourInvocation) to tie the cgroup path to the cohort; where no cgroup id
// was recorded (a cohort rebuilt from an older claim, CohortOf) it is the
// only tie. Here the invocation ends while held (the unit killed from
// outside), a same-uid process re-creates the path and puts a process
// there, and then the kill phase runs: it must leave that process alone
// and not prove a stop of it. Without the hold the unit is collected and
// the phase ends uncertain, touching nothing; so must a TERM phase, and
// the kill phase with it held.
func TestHoldKeepsNoEndedInvocationOurs(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	e := launchEngine(t, m, `echo "ready 1"; exec sleep 300`)
	e.expect(t, "ready")
	h := reattached(t, e)
	h.Cohort.CgroupID = 0 // a claim that recorded no cgroup id
	h.holdUnit()          // as a TERM phase does at its start
	defer h.letUnitGo()
	// The hold's answer is out on a goroutine: give it time (a cohort
	// holdUnit declines to hold has none to wait for).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if refs, _ := unitRefs(t, m, e.Cohort.Unit); len(refs) == 1 {
			break
		}
	}
	systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(fs.mount, e.Cohort.Cgroup))
		st, _ := m.bus.unitState(ctxT(t), e.Cohort.Unit)
		if os.IsNotExist(err) && st.inactive() {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("unit %s never ended: %+v", e.Cohort.Unit, st)
		}
	}
	imp := exec.Command("systemd-run", "--user", "--scope", "--unit=hold-impostor.scope",
		"--slice="+path.Base(path.Dir(e.Cohort.ScopeCgroup)), "sleep", "300")
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imp.Process.Kill(); imp.Wait() })
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _ := m.bus.unitState(ctxT(t), "hold-impostor.scope"); st.ActiveState == "active" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the impostor's scope never started")
		}
	}
	impostor := pin(t, fmt.Sprint(imp.Process.Pid))
	for _, d := range []string{e.Cohort.ScopeCgroup, e.Cohort.Cgroup} {
		if err := os.Mkdir(filepath.Join(fs.mount, d), 0o755); err != nil {
			t.Fatalf("re-create %s: %v", d, err)
		}
	}
	t.Cleanup(func() {
		impostor.kill()
		impostor.waitDead(t)
		os.Remove(filepath.Join(fs.mount, e.Cohort.Cgroup))
		os.Remove(filepath.Join(fs.mount, e.Cohort.ScopeCgroup))
	})
	if err := fs.write(e.Cohort.Cgroup, "cgroup.procs", fmt.Sprint(impostor.pid)); err != nil {
		t.Fatalf("move the impostor to %s: %v", e.Cohort.Cgroup, err)
	}
	if inv, err := m.bus.invocationID(context.Background(), e.Cohort.Unit); err == nil && inv == e.Cohort.InvocationID {
		t.Logf("the ended, held unit still answers our invocation %s", inv)
	}
	if tr := h.Term(ctxT(t), 100*time.Millisecond); tr.Outcome != Uncertain || len(tr.Signalled) != 0 || !impostor.alive(t) {
		t.Errorf("a TERM phase at the re-created path: %s (%s), signalled %v, impostor alive %v", tr.Outcome, tr.Reason, tr.Signalled, impostor.alive(t))
	}
	res := h.Kill(ctxT(t), StopOptions{Stop: "stop-held-ended"})
	if !impostor.alive(t) {
		t.Errorf("the kill phase killed a process at the re-created path (outcome %s, %s)", res.Outcome, res.Reason)
	}
	if res.Outcome == Stopped {
		t.Errorf("a stop was proven of a cgroup that is not the cohort's: %+v", res.Observation)
	}
}
