package scopes

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"
)

// launchPairs is how many launches of each kind one op of
// BenchmarkLaunchVsSystemdRun times.
const launchPairs = 8

// BenchmarkLaunchVsSystemdRun compares Launch (held child, anchor, scope
// job, sub-cgroups, confirmation, release) of /bin/true until the engine
// has exited, with `systemd-run --user --scope true` in the same run,
// interleaved. Teardown of our scope is not timed. The confinement probe
// is paid once per boot (probemark.go), so at most by the first launch
// in a fresh sandbox, which is normally the unreported run of b.N = 1.
// Each op is launchPairs pairs, the order turning each pair: `make bench`
// runs two ops, and two launches of about 8 ms each on two shared CPUs
// left the ratio to whichever was preempted.
func BenchmarkLaunchVsSystemdRun(b *testing.B) {
	m := testManager(b)
	if _, err := exec.LookPath("systemd-run"); err != nil {
		b.Skip("no systemd-run")
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	ctx := context.Background()
	var ours, base time.Duration
	b.ResetTimer()
	launch := func() {
		conv, exe := ids(b)
		t0 := time.Now()
		h, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"true"}, Stderr: devnull})
		if err != nil {
			b.Fatal(err)
		}
		<-h.Done()
		ours += time.Since(t0)
		b.StopTimer()
		h.Abandon(ctx)
		h.Stdin.Close()
		h.Stdout.Close()
		b.StartTimer()
	}
	systemdRun := func() {
		t0 := time.Now()
		if out, err := exec.Command("systemd-run", "--user", "--scope", "--quiet", "--collect", "true").CombinedOutput(); err != nil {
			b.Fatalf("systemd-run: %v %s", err, out)
		}
		base += time.Since(t0)
	}
	for i := 0; i < b.N*launchPairs; i++ {
		if i%2 == 0 {
			launch()
			systemdRun()
		} else {
			systemdRun()
			launch()
		}
	}
	n := float64(b.N * launchPairs)
	b.ReportMetric(float64(ours.Nanoseconds())/n, "ns/launch")
	b.ReportMetric(float64(base.Nanoseconds())/n, "ns/systemd-run")
	b.ReportMetric(float64(ours)/float64(base), "x-vs-systemd-run")
}

// treeEngine spawns 200 sleeps, half of them through setsid, then becomes
// cat: 201 processes in the engine cgroup.
const treeEngine = `i=0; while [ $i -lt 100 ]; do ` +
	`sleep 300 </dev/null >/dev/null 2>&1 & setsid sleep 300 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; ` +
	`echo "ready 1"; exec cat`

func launchTree(b *testing.B, m *Manager) *engine {
	b.Helper()
	e := launchEngine(b, m, treeEngine)
	e.expect(b, "ready")
	for range 500 {
		if ms, err := e.Members(); err == nil && len(ms) >= 201 {
			return e
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("tree of 201 processes did not appear")
	return nil
}

// stopRounds is how many rounds one op of BenchmarkForceStop200 times:
// `make bench` runs two ops, and with three rounds an op (six stops a
// run) the row read 1.80 and 1.49 in two runs a minute apart.
const stopRounds = 5

// BenchmarkForceStop200 times a force stop of a 201-process tree (half of
// it setsid) to a verified observation: TERM then kill phase, and the kill
// phase alone, against a bare cgroup.kill plus waiting for populated 0 on
// an identical tree, in the same run.
//
// Each round launches the three trees untimed and lets the machine settle
// before each is timed: the launches leave work in the user manager (three
// scopes, their jobs and cgroup events), and so does a stop (the unit's
// end and collection), which held the next stop's questions to it for up
// to 180 ms in some rounds, while the bare kill asks the manager nothing.
// The order turns each round. Besides the means, x-median is the median
// over rounds of each round's stop ÷ bare, which one stalled round does
// not move. ns-user/stop and ns-sys/stop are this process's CPU time
// during the whole stop, the part of it the tree's exits compete with.
// Each op is stopRounds rounds: `make bench` runs two ops.
func BenchmarkForceStop200(b *testing.B) {
	m := testManager(b)
	fs, err := m.cgroupFS()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var full, killOnly, bare time.Duration
	var cpuU, cpuS time.Duration
	var round [3]time.Duration
	var ratios []float64
	timed := []func(e *engine){
		func(e *engine) {
			u0, s0 := cpuSpent()
			t0 := time.Now()
			res := e.Stop(ctx, StopOptions{Stop: "bench", Grace: 5 * time.Second})
			round[0] = time.Since(t0)
			u1, s1 := cpuSpent()
			cpuU, cpuS = cpuU+u1-u0, cpuS+s1-s0
			if res.Outcome != Stopped || len(res.Observation.Members) < 201 {
				b.Fatalf("stop: %s (%s), %d members", res.Outcome, res.Reason, len(res.Observation.Members))
			}
		},
		func(e *engine) {
			t0 := time.Now()
			res := e.Stop(ctx, StopOptions{Stop: "bench"})
			round[1] = time.Since(t0)
			if res.Outcome != Stopped || len(res.Observation.Members) < 201 {
				b.Fatalf("kill phase: %s (%s), %d members", res.Outcome, res.Reason, len(res.Observation.Members))
			}
		},
		func(e *engine) {
			t0 := time.Now()
			if err := fs.write(e.Cohort.Cgroup, "cgroup.kill", "1"); err != nil {
				b.Fatal(err)
			}
			if _, ok, err := fs.waitEvents(e.Cohort.Cgroup, time.Now().Add(10*time.Second), func(e cgEvents) bool { return e.Populated == 0 }); !ok || err != nil {
				b.Fatalf("bare kill: %v", err)
			}
			round[2] = time.Since(t0)
		},
	}
	b.ResetTimer()
	for i := 0; i < b.N*stopRounds; i++ {
		b.StopTimer()
		es := []*engine{launchTree(b, m), launchTree(b, m), launchTree(b, m)}
		for j := range timed {
			k := (i + j) % len(timed)
			time.Sleep(150 * time.Millisecond)
			b.StartTimer()
			timed[k](es[k])
			b.StopTimer()
		}
		full, killOnly, bare = full+round[0], killOnly+round[1], bare+round[2]
		ratios = append(ratios, float64(round[0])/float64(round[2]))
		for _, e := range es {
			e.Abandon(ctx)
		}
		b.StartTimer()
	}
	n := float64(b.N * stopRounds)
	b.ReportMetric(float64(full.Nanoseconds())/n, "ns/stop")
	b.ReportMetric(float64(cpuU.Nanoseconds())/n, "ns-user/stop")
	b.ReportMetric(float64(cpuS.Nanoseconds())/n, "ns-sys/stop")
	b.ReportMetric(float64(killOnly.Nanoseconds())/n, "ns/kill-phase")
	b.ReportMetric(float64(bare.Nanoseconds())/n, "ns/bare-kill")
	b.ReportMetric(float64(full)/float64(bare), "x-stop-vs-bare")
	b.ReportMetric(float64(killOnly)/float64(bare), "x-kill-vs-bare")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-median")
}

// cpuSpent is the CPU time this process has used so far, in user space
// and in the kernel: around a stop, what the controller's side of it
// costs on CPUs that the tree's exits need too.
func cpuSpent() (user, sys time.Duration) {
	var r unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano()), time.Duration(r.Stime.Nano())
}

// BenchmarkLaunchConfinedVsUnconfined measures what confinement adds to a
// launch of /bin/true until the engine has exited: the same Launch with
// and without Config.NoConfinement, interleaved in one run so both see the
// same machine. (The one-time probe of the first confined launch is not
// timed.)
func BenchmarkLaunchConfinedVsUnconfined(b *testing.B) {
	confined := testManager(b)
	unconfined := NewManager(Config{NoConfinement: true})
	b.Cleanup(unconfined.Close)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	ctx := context.Background()
	if ok, why := confined.confinementAvailable(ctx); !ok {
		b.Skip(why)
	}
	launch := func(m *Manager) time.Duration {
		conv, exe := ids(b)
		t0 := time.Now()
		h, err := m.Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"true"}, Stderr: devnull})
		if err != nil {
			b.Fatal(err)
		}
		<-h.Done()
		d := time.Since(t0)
		b.StopTimer()
		h.Abandon(ctx)
		h.Stdin.Close()
		h.Stdout.Close()
		b.StartTimer()
		return d
	}
	var with, without time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		with += launch(confined)
		without += launch(unconfined)
	}
	n := float64(b.N)
	b.ReportMetric(float64(with.Nanoseconds())/n, "ns/confined")
	b.ReportMetric(float64(without.Nanoseconds())/n, "ns/unconfined")
	b.ReportMetric(float64(with)/float64(without), "x-confined")
}

// BenchmarkPinMembers pins 200 sleeping children of the benchmark, as a
// TERM phase or a frozen enumeration does: by the cgroup's path alone
// (/proc/<pid>/cgroup, then signal 0 through the pidfd) and with its id
// (the pidfd's PIDFD_GET_INFO where the kernel has it), interleaved in
// one run. A member in a sub-cgroup, which this does not measure, costs
// the pidfd's question on top of the path's way.
func BenchmarkPinMembers(b *testing.B) {
	var pids []int
	for range 200 {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	cg := cgroupOf(b, pids[0])
	pin := func(within cgroupRef) time.Duration {
		t0 := time.Now()
		for _, p := range pinAll(pids, &Cohort{Cgroup: within.Path, CgroupID: within.ID}) {
			if p.err != nil {
				b.Fatal(p.err)
			}
			p.m.close()
		}
		return time.Since(t0)
	}
	var byPath, byID time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first: the first warms /proc's dentries.
		if i%2 == 0 {
			byPath += pin(cgroupRef{Path: cg.Path})
			byID += pin(cg)
		} else {
			byID += pin(cg)
			byPath += pin(cgroupRef{Path: cg.Path})
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(byPath.Nanoseconds())/n, "ns/pin-by-path")
	b.ReportMetric(float64(byID.Nanoseconds())/n, "ns/pin-by-id")
	b.ReportMetric(float64(byID)/float64(byPath), "x-by-path")
}

// BenchmarkUnitState compares unitState (three small reads in flight at
// once) with GetAll of the Unit interface plus the Scope's Result, the
// read it replaced, on a live scope, interleaved in one run.
func BenchmarkUnitState(b *testing.B) {
	m := testManager(b)
	e := launchEngine(b, m, `echo "ready 1"; exec cat`)
	e.expect(b, "ready")
	ctx := context.Background()
	unit := e.Cohort.Unit
	getAll := func() error {
		return m.bus.do(ctx, func(c *sddbus.Conn) error {
			if _, err := c.GetUnitPropertiesContext(ctx, unit); err != nil {
				return err
			}
			_, err := scopeResult(ctx, c, unit)
			return err
		})
	}
	var ours, base time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		st, err := m.bus.unitState(ctx, unit)
		if err != nil || st.InvocationID != e.Cohort.InvocationID || st.ActiveState != "active" {
			b.Fatalf("unitState: %+v, %v", st, err)
		}
		ours += time.Since(t0)
		t0 = time.Now()
		if err := getAll(); err != nil {
			b.Fatal(err)
		}
		base += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/n, "ns/unit-state")
	b.ReportMetric(float64(base.Nanoseconds())/n, "ns/getall")
	b.ReportMetric(float64(ours)/float64(base), "x-getall")
}
