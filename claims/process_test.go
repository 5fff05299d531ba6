package claims

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Child processes: the test binary re-executed with MOSAIC_CLAIMS_CHILD.
const (
	envChild   = "MOSAIC_CLAIMS_CHILD"
	envRoot    = "MOSAIC_CLAIMS_ROOT"
	envCrashAt = "MOSAIC_CLAIMS_CRASH_AT"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envChild) {
	case "":
		os.Exit(m.Run())
	case "acquire":
		os.Exit(childAcquire())
	case "scenario":
		os.Exit(childScenario())
	default:
		os.Exit(3)
	}
}

// childAcquire waits on the barrier (fd 3 reaching EOF), then acquires.
func childAcquire() int {
	barrier := os.NewFile(3, "barrier")
	io.Copy(io.Discard, barrier)
	s, err := Open(os.Getenv(envRoot))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c, err := s.Acquire(context.Background(), testRequest(testKeys()))
	if err != nil {
		fmt.Println("refused", protocol.CodeOf(err), err)
		return 0
	}
	fmt.Println("won", c.Record().Claim)
	return 0
}

// W1: real processes race for the same keys; exactly one wins.
func TestAcquireRaceProcesses(t *testing.T) {
	const children = 8
	for round := range 5 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			root := t.TempDir()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			for range children {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envChild+"=acquire", envRoot+"="+root)
				cmd.ExtraFiles = []*os.File{r}
				out := new(strings.Builder)
				cmd.Stdout, cmd.Stderr = out, out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, out)
			}
			r.Close()
			w.Close() // release the barrier
			won, refused := 0, 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v\n%s", err, outs[i])
				}
				switch f := strings.Fields(outs[i].String()); {
				case len(f) >= 2 && f[0] == "won":
					won++
				case len(f) >= 2 && f[0] == "refused" && f[1] == protocol.CodeAlreadyActive:
					refused++
				default:
					t.Errorf("child said %q", outs[i])
				}
			}
			if won != 1 || refused != children-1 {
				t.Fatalf("%d won, %d refused already-active", won, refused)
			}
			st := mustCurrent(t, openStore(t, root, LocalHost()), testKeys())
			if st.Seat == nil || st.Session == nil || !sameRevision(*st.Seat, *st.Session) || st.Seat.Revision != 1 {
				t.Fatalf("keys after race: %+v %+v", st.Seat, st.Session)
			}
		})
	}
}

// scenario is the child's sequence of claim operations; want is the
// (claim number, seq, state) recorded after each step.
var scenarioWant = []sig{
	{0, 0, ""}, // before step 1: free
	{1, 1, Reserved},
	{1, 2, Reserved}, // launch begun
	{1, 3, Active},
	{1, 4, Stopping},
	{1, 5, Stopped},
	{1, 6, Reserved}, // resume
	{1, 7, Stopped},  // abandon before launching
	{2, 1, Reserved}, // a new claim
	{2, 2, Reserved},
	{2, 3, Active},
	{2, 4, Uncertain},
}

func childScenario() int {
	crashAt, _ := strconv.Atoi(os.Getenv(envCrashAt))
	hits := 0
	s, err := Open(os.Getenv(envRoot), WithFault(func(point, path string) error {
		hits++
		if hits == crashAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx := context.Background()
	self, err := LocalHost().Self()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	engine := self // the "engine" dies with this process
	engine.Cgroup = testCgroup
	var c *Claim
	keys := testKeys()
	steps := []func() error{
		func() (err error) { c, err = s.Acquire(ctx, testRequest(keys)); return err },
		func() error { return c.BeginLaunch(ctx) },
		func() error { return c.Activate(ctx, engine) },
		func() error { return c.BeginStop(ctx, "force stop") },
		func() error { return c.Conclude(ctx, liveObservation(c.Record())) },
		func() (err error) {
			req := testRequest(keys)
			req.Execution = "exec-2"
			c, err = s.Resume(ctx, req)
			return err
		},
		func() error { return c.Abandon(ctx, "launch failed") },
		func() (err error) { c, err = s.Acquire(ctx, testRequest(keys)); return err },
		func() error { return c.BeginLaunch(ctx) },
		func() error { return c.Activate(ctx, engine) },
		func() error { return c.MarkUncertain(ctx, "lost the engine") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			fmt.Println("error", i+1, err)
			return 1
		}
		fmt.Println("done", i+1)
	}
	fmt.Println("hits", hits)
	return 0
}

// liveObservation is a complete observation of an engine that is this
// very process, with times on its real boot clock.
func liveObservation(rec Record) proofs.Observation {
	obs := observation(rec)
	if rec.Engine == nil {
		return obs
	}
	start := rec.Engine.StartTime * 10_000_000 // USER_HZ 100
	obs.Members = obs.Members[:1]
	obs.Members[0].DiedAt = start + 1_000_000_000
	obs.ObservedAt = start + 2_000_000_000
	return obs
}

// W5: the controller is SIGKILLed at every fault point of every step of
// acquire, transition, stop, resume and release. After each crash a new
// controller must find the old state or the new one, never two
// non-stopped claims, never a lost claim, and must be able to recover.
func TestCrashAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per fault point")
	}
	for n := 1; ; n++ {
		root := t.TempDir()
		done, finished, out := runScenario(t, root, n)
		if finished {
			if done != len(scenarioWant)-1 {
				t.Fatalf("scenario finished after %d steps:\n%s", done, out)
			}
			if n < 50 {
				t.Fatalf("only %d fault points hit; the hook is not wired", n-1)
			}
			t.Logf("crashed at each of %d fault points", n-1)
			return
		}
		t.Run(fmt.Sprintf("crash-%03d-after-step-%d", n, done), func(t *testing.T) {
			checkAfterCrash(t, root, done)
		})
	}
}

func runScenario(t *testing.T, root string, crashAt int) (done int, finished bool, out string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=scenario", envRoot+"="+root, envCrashAt+"="+strconv.Itoa(crashAt))
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "done" {
			done, _ = strconv.Atoi(f[1])
		}
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return done, false, b.String()
		}
	}
	if err != nil {
		t.Fatalf("scenario child at crash %d: %v\n%s", crashAt, err, b.String())
	}
	return done, true, b.String()
}

func checkAfterCrash(t *testing.T, root string, done int) {
	ctx := context.Background()
	s := openStore(t, root, LocalHost())
	st, err := s.Current(ctx, testKeys())
	if err != nil {
		t.Fatalf("store unreadable after crash: %v", err)
	}
	if st.Seat != nil && st.Session != nil && st.Seat.Claim != st.Session.Claim && !free(st.Seat) && !free(st.Session) {
		t.Fatalf("two non-stopped claims: %+v / %+v", st.Seat, st.Session)
	}
	if st.Seat != nil && st.Session != nil && st.Seat.Claim == st.Session.Claim && !sameRevision(*st.Seat, *st.Session) {
		t.Fatalf("keys disagree after settling: %+v / %+v", st.Seat, st.Session)
	}
	got := signature(t, s, st.Seat)
	old, new := scenarioWant[done], scenarioWant[min(done+1, len(scenarioWant)-1)]
	if got != old && got != new {
		t.Fatalf("recorded %+v; want the old %+v or the new %+v", got, old, new)
	}
	// A new controller recovers: classify, then prove the dead cohort.
	rec, err := s.Recover(ctx, testKeys())
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if rec.Claim != nil && !free(&rec.Claim.rec) {
		if rec.Verdict != VerdictObserve {
			t.Fatalf("verdict %s for a dead engine in %s", rec.Verdict, rec.Claim.Record().State)
		}
		if err := rec.Claim.Conclude(ctx, liveObservation(rec.Claim.Record())); err != nil {
			t.Fatalf("conclude: %v", err)
		}
	}
	if _, err := s.Acquire(ctx, testRequest(testKeys())); err != nil {
		t.Fatalf("acquire after recovery: %v", err)
	}
}

type sig struct {
	claim int
	seq   uint64
	state State
}

// signature maps a record to (claim number by first appearance under the
// seat key, seq, state).
func signature(t *testing.T, s *Store, rec *Record) sig {
	t.Helper()
	if rec == nil {
		return sig{}
	}
	sl, err := readSlot(s.seatDir(testKeys().Seat), kindSeat)
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]int{}
	for _, r := range sl.revs {
		if _, ok := order[r.Claim]; !ok {
			order[r.Claim] = len(order) + 1
		}
	}
	return sig{order[rec.Claim], rec.Seq, rec.State}
}
