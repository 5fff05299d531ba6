package scopes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// Engine scripts. Each prints its own cgroup first, from the engine
// process itself ($$), then the pids the test pins, then echoes stdin.
const (
	printCgroup = `echo "cgroup $(sed -n 's/^0:://p' /proc/$$/cgroup)"; echo "engine $$"; `
	// K1: a tool child that calls setsid, plus a plain background child.
	setsidEngine = printCgroup +
		`setsid sh -c 'echo "setsid $$"; exec sleep 300' </dev/null & ` +
		`sleep 300 </dev/null >/dev/null & ` +
		`echo "ready 1"; exec cat`
	// K3: every member ignores SIGTERM (SIG_IGN is inherited).
	stubbornEngine = `trap "" TERM; ` + printCgroup +
		`setsid sh -c 'echo "stubborn $$"; exec sleep 300' </dev/null & ` +
		`echo "ready 1"; exec cat`
	echoEngine = printCgroup + `echo "ready 1"; exec cat`
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireProof turns a stopped observation into a proofs.CohortProof and
// verifies it offline, as `mosaicctl proof verify` would.
func requireProof(t *testing.T, res StopResult) {
	t.Helper()
	p, err := proofs.NewCohortProof(res.Observation)
	if err != nil {
		t.Fatalf("proofs.NewCohortProof refused a stopped observation: %v", err)
	}
	body, err := proofs.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, rep, err := proofs.VerifyBytes(body); err != nil || !rep.OK() {
		t.Fatalf("proof does not verify: %v %v", err, rep.Err())
	}
}

// TestLaunchConfirmsScopeBeforeEngineRuns: the engine's first act is to
// print its own cgroup, which must already be the scope's engine cgroup.
func TestLaunchConfirmsScopeBeforeEngineRuns(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, echoEngine)
	got := e.expect(t, "cgroup", "engine", "ready")
	requireConfined(t, e)
	c := e.Cohort
	// Inside its cgroup namespace the engine's cgroup is the root; from
	// here it is the scope's engine cgroup.
	if got["cgroup"] != "/" {
		t.Fatalf("engine sees itself in cgroup %q, want / (a cgroup namespace rooted at %s)", got["cgroup"], c.Cgroup)
	}
	if c.Confinement.CgroupRoot != c.Cgroup {
		t.Fatalf("cgroup namespace rooted at %q, want %q", c.Confinement.CgroupRoot, c.Cgroup)
	}
	if cg, err := procfs.Cgroup2(c.PID); err != nil || cg != c.Cgroup {
		t.Fatalf("engine started in %q (%v), want the scope's engine cgroup %q", cg, err, c.Cgroup)
	}
	if path.Base(c.ScopeCgroup) != c.Unit || c.Cgroup != c.ScopeCgroup+"/"+EngineSubgroup {
		t.Fatalf("cohort %+v", c)
	}
	if c.Kind != proofs.KindScope || len(c.InvocationID) != 32 || !proofs.ValidBootID(c.BootID) || c.StartTime == 0 {
		t.Fatalf("cohort %+v", c)
	}
	st, err := m.bus.unitState(ctxT(t), c.Unit)
	if err != nil || st.ActiveState != "active" || st.InvocationID != c.InvocationID {
		t.Fatalf("unit state %+v, %v", st, err)
	}
	if cg, _ := procfs.Cgroup2(c.AnchorPID); cg != c.ScopeCgroup+"/"+AnchorSubgroup {
		t.Fatalf("anchor in %q", cg)
	}
	// Stdin stays open and the engine answers.
	e.Stdin.WriteString("hello\n")
	if l := e.line(t); l != "hello" {
		t.Fatalf("echo: %q", l)
	}
}

// TestK1ScopeStopKillsSetsidChild: a tool child that called setsid is
// still in the scope, is killed, and the stop is proven.
func TestK1ScopeStopKillsSetsidChild(t *testing.T) {
	m := testManager(t)
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"term then kill", 2 * time.Second},
		{"kill phase only", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, setsidEngine)
			got := e.expect(t, "cgroup", "engine", "setsid", "ready")
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
			if cg, err := procfs.Cgroup2(child.pid); err != nil || cg != e.Cohort.Cgroup {
				t.Fatalf("setsid child in %q (%v), want %s", cg, err, e.Cohort.Cgroup)
			}
			res := e.Stop(ctxT(t), StopOptions{Stop: "stop-k1", Grace: tc.grace})
			assertProvenStop(t, res, eng, child)
			// The engine (sh exec'd into cat), the setsid child and the
			// background sleep, at least.
			if len(res.Observation.Members) < 3 {
				t.Fatalf("membership %+v: want engine, setsid child, sleep", res.Observation.Members)
			}
			requireProof(t, res)
		})
	}
}

// TestK2ProcessGroupFallbackNeverStopped: without a user manager the
// engine runs in a process group; a setsid child escapes it and the stop
// ends uncertain, never stopped.
func TestK2ProcessGroupFallbackNeverStopped(t *testing.T) {
	noBus := "unix:path=" + filepath.Join(t.TempDir(), "no-bus")
	t.Run("refused without fallback", func(t *testing.T) {
		m := NewManager(Config{BusAddress: noBus})
		defer m.Close()
		_, err := m.Launch(ctxT(t), Spec{Conversation: "c", Execution: "e", Argv: []string{"true"}})
		if !errors.Is(err, ErrNoUserManager) || !strings.Contains(err.Error(), "dbus-user-session") {
			t.Fatalf("err %v, want ErrNoUserManager with a hint", err)
		}
	})
	m := NewManager(Config{BusAddress: noBus, Fallback: true})
	defer m.Close()
	e := launchEngine(t, m, setsidEngine)
	if e.Cohort.Kind != proofs.KindProcessGroup || !strings.Contains(e.Cohort.Reason, "never stopped") {
		t.Fatalf("cohort %+v: want a process-group binding that says so", e.Cohort)
	}
	got := e.expect(t, "engine", "setsid", "ready")
	eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
	t.Cleanup(child.kill)
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-k2", Grace: time.Second})
	if res.Outcome != Uncertain || !strings.Contains(res.Reason, "never stopped") {
		t.Fatalf("outcome %s (%s), want uncertain", res.Outcome, res.Reason)
	}
	if res.Observation.Kind != proofs.KindProcessGroup || res.Observation.MembershipComplete {
		t.Fatalf("observation %+v", res.Observation)
	}
	eng.waitDead(t)
	if !child.alive(t) {
		t.Fatalf("the setsid child died; K2 expects it to escape the process group")
	}
	if _, err := proofs.NewCohortProof(res.Observation); !errors.Is(err, proofs.ErrProcessGroup) {
		t.Fatalf("proofs accepted a process-group observation: %v", err)
	}
}

// TestK3SigtermIgnoredNotProven: members that ignore SIGTERM survive the
// TERM phase, which never proves anything; only the kill phase does.
func TestK3SigtermIgnoredNotProven(t *testing.T) {
	m := testManager(t)
	t.Run("phases", func(t *testing.T) {
		e := launchEngine(t, m, stubbornEngine)
		got := e.expect(t, "engine", "stubborn", "ready")
		eng, child := e.pin(t, got["engine"]), e.pin(t, got["stubborn"])
		term := e.Term(ctxT(t), 300*time.Millisecond)
		if term.Outcome != Stopping || term.Emptied {
			t.Fatalf("TERM phase: %+v, want stopping, not emptied", term)
		}
		// A second TERM phase (a retried escalation) is still not a proof.
		if again := e.Term(ctxT(t), 100*time.Millisecond); again.Outcome != Stopping {
			t.Fatalf("second TERM phase: %+v", again)
		}
		if len(term.Signalled) < 2 {
			t.Fatalf("TERM acknowledged for %d members, want the engine and the stubborn child: %+v", len(term.Signalled), term)
		}
		if !eng.alive(t) || !child.alive(t) {
			t.Fatalf("a member that ignores SIGTERM died")
		}
		res := e.Kill(ctxT(t), StopOptions{Stop: "stop-k3"})
		assertProvenStop(t, res, eng, child)
		requireProof(t, res)
	})
	t.Run("stop", func(t *testing.T) {
		e := launchEngine(t, m, stubbornEngine)
		got := e.expect(t, "engine", "stubborn", "ready")
		eng, child := e.pin(t, got["engine"]), e.pin(t, got["stubborn"])
		res := e.Stop(ctxT(t), StopOptions{Stop: "stop-k3", Grace: 300 * time.Millisecond})
		if res.Term == nil || len(res.Term.Signalled) == 0 {
			t.Fatalf("no TERM phase ran: %+v", res.Term)
		}
		assertProvenStop(t, res, eng, child)
	})
}

// TestK4StopOneOfTwo: stopping one engine leaves the other running and
// answering.
func TestK4StopOneOfTwo(t *testing.T) {
	m := testManager(t)
	a := launchEngine(t, m, setsidEngine)
	b := launchEngine(t, m, setsidEngine)
	ga, gb := a.expect(t, "engine", "setsid", "ready"), b.expect(t, "engine", "setsid", "ready")
	if a.Cohort.Unit == b.Cohort.Unit {
		t.Fatalf("two engines share %s", a.Cohort.Unit)
	}
	pa := []pinned{a.pin(t, ga["engine"]), a.pin(t, ga["setsid"])}
	res := a.Stop(ctxT(t), StopOptions{Stop: "stop-k4", Grace: time.Second})
	assertProvenStop(t, res, pa...)
	for _, p := range []pinned{b.pin(t, gb["engine"]), b.pin(t, gb["setsid"])} {
		if !p.alive(t) {
			t.Fatalf("pid %d of the other engine died", p.pid)
		}
	}
	b.Stdin.WriteString("still there?\n")
	if l := b.line(t); l != "still there?" {
		t.Fatalf("other engine answered %q", l)
	}
	if ms, err := b.Members(); err != nil || len(ms) < 3 {
		t.Fatalf("other engine's members %v, %v", ms, err)
	}
}

func waitUnitGone(t *testing.T, m *Manager, c Cohort) {
	t.Helper()
	for range 200 {
		st, err := m.bus.unitState(ctxT(t), c.Unit)
		if err == nil && st.InvocationID != c.InvocationID {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("unit %s did not go away", c.Unit)
}

// TestUnitExistsClash: a second launch of the same conversation and
// execution fails with ErrUnitExists, never runs its engine, and leaves the
// first alone.
func TestUnitExistsClash(t *testing.T) {
	m := testManager(t)
	a := launchEngine(t, m, echoEngine)
	a.expect(t, "ready")
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := m.Launch(ctxT(t), Spec{Conversation: a.Cohort.Conversation, Execution: a.Cohort.Execution,
		Argv: []string{"touch", marker}})
	if !errors.Is(err, ErrUnitExists) {
		t.Fatalf("second launch: %v, want ErrUnitExists", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the clashing engine ran")
	}
	a.Stdin.WriteString("first\n")
	if l := a.line(t); l != "first" {
		t.Fatalf("first engine answered %q", l)
	}
}

// TestJobNotDone: a start job that ends other than "done", or not in time,
// is an error and the engine never runs.
func TestJobNotDone(t *testing.T) {
	testManager(t) // skips outside the sandbox
	for _, tc := range []struct {
		name    string
		dep     []string // systemd-run args creating the dependency
		timeout time.Duration
		want    error
	}{
		{"dependency fails", []string{"--service-type=oneshot", "false"}, 10 * time.Second, ErrJobFailed},
		{"job hangs", []string{"--service-type=oneshot", "--no-block", "sleep", "2"}, 300 * time.Millisecond, ErrJobTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv, exe := ids(t)
			dep := "dep-" + exe + ".service"
			args := append([]string{"--user", "--quiet", "--unit=" + dep}, tc.dep...)
			exec.Command("systemd-run", args...).Run() // a failing dependency fails here too
			t.Cleanup(func() { exec.Command("systemctl", "--user", "reset-failed", dep).Run() })
			m := NewManager(Config{JobTimeout: tc.timeout})
			defer m.Close()
			m.extraProps = []sddbus.Property{
				{Name: "Requires", Value: dbus.MakeVariant([]string{dep})},
				{Name: "After", Value: dbus.MakeVariant([]string{dep})},
			}
			marker := filepath.Join(t.TempDir(), "ran")
			_, err := m.Launch(ctxT(t), Spec{Conversation: conv, Execution: exe, Argv: []string{"touch", marker}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("launch: %v, want %v", err, tc.want)
			}
			// Let a hanging job finish: the scope it starts has no live
			// pid, and the engine never ran.
			unit, _ := UnitName(conv, exe)
			for range 200 {
				if out, _ := exec.Command("systemctl", "--user", "is-active", dep).Output(); strings.TrimSpace(string(out)) != "activating" {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the engine ran although the job was not done")
			}
			if st, err := m.bus.unitState(ctxT(t), unit); err == nil && st.ActiveState == "active" {
				t.Fatalf("scope %s active after a failed launch: %+v", unit, st)
			}
		})
	}
}

// TestReattachResumesStop (K10 at this layer): a new controller with only
// the recorded Cohort (as JSON) resumes a stop whose TERM phase the old one
// ran, and proves it; a recorded engine start time that does not match is
// pid reuse: that pid is not signalled, and the stop still proves the
// cgroup empty.
func TestReattachResumesStop(t *testing.T) {
	m := testManager(t)
	for _, tc := range []struct {
		name      string
		skewStart bool
		claimOnly bool
	}{{"same incarnation", false, false}, {"pid reuse", true, false}, {"claim record only", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, stubbornEngine)
			got := e.expect(t, "engine", "stubborn", "ready")
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["stubborn"])
			rec, _ := json.Marshal(e.Cohort)
			var c Cohort
			if err := json.Unmarshal(rec, &c); err != nil {
				t.Fatal(err)
			}
			if tc.skewStart {
				c.StartTime++
			}
			if tc.claimOnly {
				var err error
				c, err = CohortOf(c.Conversation, c.Execution, c.BootID, c.PID, c.StartTime, c.Cgroup)
				if err != nil {
					t.Fatal(err)
				}
			}
			m2 := NewManager(Config{})
			defer m2.Close()
			h := m2.Reattach(c)
			term := h.Term(ctxT(t), 200*time.Millisecond)
			if tc.skewStart {
				joined := strings.Join(term.Notes, "\n")
				if !strings.Contains(joined, "pid reused") {
					t.Fatalf("pid reuse not recorded: %+v", term)
				}
				for _, s := range term.Signalled {
					if s.PID == c.PID {
						t.Fatalf("pid %d signalled although its start time differs", c.PID)
					}
				}
			}
			res := h.Kill(ctxT(t), StopOptions{Stop: "stop-k10"})
			if tc.claimOnly {
				// The claim alone does not record the confinement: the
				// cohort is killed, but nothing shows its processes stayed
				// inside, so the stop is not proven.
				if res.Outcome != Uncertain || !strings.Contains(res.Reason, "not recorded") {
					t.Fatalf("outcome %s (%s), want uncertain: confinement not recorded", res.Outcome, res.Reason)
				}
				eng.waitDead(t)
				child.waitDead(t)
				return
			}
			assertProvenStop(t, res, eng, child)
			requireProof(t, res)
		})
	}
}

// TestReconnectAfterClosedBus: the lazy connection is redialled after
// dbus.ErrClosed (the user manager or bus restarted under us).
func TestReconnectAfterClosedBus(t *testing.T) {
	m := testManager(t)
	a := launchEngine(t, m, echoEngine)
	a.expect(t, "ready")
	old, err := m.bus.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	b := launchEngine(t, m, echoEngine)
	b.expect(t, "ready")
	res := a.Stop(ctxT(t), StopOptions{Stop: "stop-reconnect", Grace: time.Second})
	if res.Outcome != Stopped {
		t.Fatalf("stop after reconnect: %s (%s)", res.Outcome, res.Reason)
	}
}

// TestBeforeRelease: the controller's hook runs with the confirmed cohort
// before the engine may exec; an error there means the engine never runs.
func TestBeforeRelease(t *testing.T) {
	m := testManager(t)
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%t", fail), func(t *testing.T) {
			conv, exe := ids(t)
			marker := filepath.Join(t.TempDir(), "ran")
			var seen Cohort
			h, err := m.Launch(ctxT(t), Spec{Conversation: conv, Execution: exe,
				Argv: []string{"sh", "-c", "touch " + marker + "; echo ran 1; exec cat"},
				BeforeRelease: func(c Cohort) error {
					seen = c
					if _, err := os.Stat(marker); err == nil {
						t.Errorf("engine ran before release")
					}
					if cg, err := procfs.Cgroup2(c.PID); err != nil || cg != c.Cgroup {
						t.Errorf("held child in %q (%v), want %s", cg, err, c.Cgroup)
					}
					if fail {
						return errors.New("claim store refused")
					}
					return nil
				}})
			if fail {
				if err == nil || !strings.Contains(err.Error(), "claim store refused") {
					t.Fatalf("launch: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("engine ran although BeforeRelease failed")
				}
				waitUnitGone(t, m, seen)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer h.Abandon(context.Background())
			defer h.Stdin.Close()
			if !reflect.DeepEqual(seen, h.Cohort) {
				t.Fatalf("hook saw %+v, handle has %+v", seen, h.Cohort)
			}
			(&engine{Handle: h, out: bufio.NewReader(h.Stdout)}).expect(t, "ran")
			res := h.Stop(ctxT(t), StopOptions{Stop: "s", Grace: time.Second})
			if res.Outcome != Stopped {
				t.Fatalf("%s: %s", res.Outcome, res.Reason)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("engine did not run: %v", err)
			}
		})
	}
}
