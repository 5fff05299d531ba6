package scopes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

func TestMain(m *testing.M) {
	MaybeRunHeld()
	serveFUSEIfAsked()
	tryFUSEIfAsked()
	tryUnixIfAsked()
	os.Exit(m.Run())
}

// testManager returns a Manager on the sandbox's user manager (skipping
// outside the sandbox).
func testManager(t testing.TB) *Manager {
	t.Helper()
	sandboxtest.Require(t)
	m := NewManager(Config{})
	t.Cleanup(m.Close)
	return m
}

var seq int

// ids returns a fresh conversation and execution id for one test.
func ids(t testing.TB) (string, string) {
	seq++
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return "conv-" + name, fmt.Sprintf("exec-%d-%d", os.Getpid(), seq)
}

// engine is a launched test engine with a line reader on its stdout.
type engine struct {
	*Handle
	out *bufio.Reader
}

// launchEngine launches `sh -c script` and registers cleanup that kills
// whatever is left, without proving anything.
func launchEngine(t testing.TB, m *Manager, script string, hide ...string) *engine {
	t.Helper()
	return launchKeeping(t, m, script, hide, nil)
}

// launchKeeping is launchEngine with kept directories (Spec.Keep).
func launchKeeping(t testing.TB, m *Manager, script string, hide, keep []string) *engine {
	t.Helper()
	return launchWith(t, m, script, func(s *Spec) { s.Hide, s.Keep = hide, keep })
}

// launchWith launches script with the Spec edit changed.
func launchWith(t testing.TB, m *Manager, script string, edit func(*Spec)) *engine {
	t.Helper()
	conv, exe := ids(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Conversation: conv, Execution: exe, Argv: []string{"sh", "-c", script}, Stderr: os.Stderr,
		Resources: Resources{MemoryMax: 1 << 30, TasksMax: 1024, CPUQuota: 200}}
	edit(&spec)
	h, err := m.Launch(ctx, spec)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	t.Cleanup(func() {
		h.Abandon(context.Background())
		h.Close()
	})
	return &engine{Handle: h, out: bufio.NewReader(h.Stdout)}
}

// requireConfined fails the test (never skips it) when its engine runs
// without its namespaces: what the test checks of them would go unproven.
func requireConfined(t testing.TB, e *engine) {
	t.Helper()
	if !e.Cohort.Confinement.Confined {
		t.Fatalf("engine not confined: %s", e.Cohort.Confinement.Reason)
	}
}

// line reads one line of engine output, failing after 20 s.
func (e *engine) line(t testing.TB) string {
	t.Helper()
	e.Stdout.SetReadDeadline(time.Now().Add(20 * time.Second))
	l, err := e.out.ReadString('\n')
	if err != nil {
		t.Fatalf("engine output: %v (partial %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

// expect reads lines until one has each of the prefixes, returning the
// rest of each such line by prefix.
func (e *engine) expect(t testing.TB, prefixes ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for len(got) < len(prefixes) {
		l := e.line(t)
		for _, p := range prefixes {
			if v, ok := strings.CutPrefix(l, p+" "); ok {
				got[p] = v
			}
		}
	}
	return got
}

// pinned is a pidfd a test opens on a process it expects to die (or not).
type pinned struct {
	pid int
	fd  int
}

// pin pins a process the engine named by its pid inside the engine's
// own pid namespace.
func (e *engine) pin(t testing.TB, pidText string) pinned {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(pidText))
	if err != nil {
		t.Fatalf("pid %q: %v", pidText, err)
	}
	host, err := e.HostPID(pid)
	if err != nil {
		t.Fatalf("pid %d inside the engine: %v", pid, err)
	}
	return pin(t, strconv.Itoa(host))
}

func pin(t testing.TB, pidText string) pinned {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(pidText))
	if err != nil {
		t.Fatalf("pid %q: %v", pidText, err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return pinned{pid, fd}
}

// waitReaped waits up to 10 s for the pinned process to be reaped (its
// pidfd then answers PIDFD_GET_INFO with ESRCH), not only to exit.
func (p pinned) waitReaped(t testing.TB) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
		switch err := unix.IoctlPidfdInfo(p.fd, &info); {
		case errors.Is(err, unix.ESRCH):
			return
		case err != nil: // no PIDFD_GET_INFO (Linux < 6.13): the exit, and a moment for its reaper
			p.waitDead(t)
			time.Sleep(100 * time.Millisecond)
			return
		}
	}
	t.Fatalf("pid %d not reaped after 10 s", p.pid)
}

// alive reports whether the pinned process has not exited.
func (p pinned) alive(t testing.TB) bool {
	t.Helper()
	return !p.exited(t, 0)
}

// kill SIGKILLs the pinned process (cleanup of escapees).
func (p pinned) kill() { unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0) }

// waitDead waits up to 10 s for the pinned process to exit.
func (p pinned) waitDead(t testing.TB) {
	t.Helper()
	if !p.exited(t, 10*time.Second) {
		t.Fatalf("pid %d still alive after 10 s", p.pid)
	}
}

// exited waits up to timeout for the pidfd to poll readable: the process
// exited. Only that readiness is an answer. A poll that a signal
// interrupts while nothing is ready returns -1 (EINTR), and the test
// binary gets SIGCHLD from its children and SIGURG from the Go scheduler
// at any moment, more often under load and -race: it is made again, never
// read as "exited" (which once called a living escaped anchor dead). Any
// other failure to poll (a closed pidfd polls POLLNVAL) fails the test
// rather than answer either way.
func (p pinned) exited(t testing.TB, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		wait := max(time.Until(deadline), 0)
		n, err := unix.Poll(fds, int((wait+time.Millisecond-1)/time.Millisecond))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			t.Fatalf("poll pidfd of pid %d: %v", p.pid, err)
		case n == 0:
			return false
		case fds[0].Revents&(unix.POLLIN|unix.POLLHUP) == 0:
			t.Fatalf("poll pidfd of pid %d: revents %#x, not readable", p.pid, fds[0].Revents)
		}
		return true
	}
}

// assertProvenStop checks a Stopped result against the kernel from the
// test's side: every pinned process is dead, the observation is complete
// and names them.
func assertProvenStop(t *testing.T, res StopResult, pins ...pinned) {
	t.Helper()
	if res.Outcome != Stopped {
		t.Fatalf("outcome %s (%s), want stopped; notes %v", res.Outcome, res.Reason, res.Notes)
	}
	assertEndObserved(t, res.Observation, pins...)
}

// assertEndedUnconfined is assertProvenStop for an unconfined cohort: the
// stop ends uncertain for the confinement alone, on an observation that
// would otherwise have proven it, and no proof is built from it.
func assertEndedUnconfined(t *testing.T, res StopResult, pins ...pinned) {
	t.Helper()
	_, unconfined := res.Observation.Confinement.Holds(res.Observation.Cgroup)
	if res.Outcome != Uncertain || unconfined == "" || res.Reason != unconfined {
		t.Fatalf("outcome %s (%s), want uncertain for the confinement alone (%q); notes %v", res.Outcome, res.Reason, unconfined, res.Notes)
	}
	assertEndObserved(t, res.Observation, pins...)
	if _, err := proofsFor(res); err == nil {
		t.Fatal("a proof was built from an unconfined engine's stop")
	}
}

// assertEndObserved checks a stop's observation against the kernel from
// the test's side: every pinned process is dead, the observation is
// complete and names them.
func assertEndObserved(t *testing.T, o proofs.Observation, pins ...pinned) {
	t.Helper()
	if !o.MembershipComplete || !o.CgroupPresent || o.Populated != 0 || o.ObservedAt == 0 {
		t.Fatalf("the end without a complete observation: %+v", o)
	}
	if o.ActiveState != "inactive" && o.ActiveState != "failed" {
		t.Fatalf("the end observed with unit %s", o.ActiveState)
	}
	for _, p := range pins {
		if p.alive(t) {
			t.Fatalf("the end observed while pid %d is alive", p.pid)
		}
		found := false
		for _, m := range o.Members {
			if m.PID == p.pid {
				found = true
				if !m.Died || m.DiedAt > o.ObservedAt || m.DiedAt < ticksToNanos(m.StartTime) {
					t.Fatalf("member %+v: death not observed before the observation at %d", m, o.ObservedAt)
				}
			}
		}
		if !found {
			t.Fatalf("pid %d missing from the membership %+v", p.pid, o.Members)
		}
	}
}

// ticksToNanos converts a start time in clock ticks to nanoseconds since
// boot.
func ticksToNanos(t uint64) uint64 {
	hz := procfs.ClockTicks()
	return t/hz*uint64(time.Second) + t%hz*uint64(time.Second)/hz
}

func pidfdOpen(pid int) (int, error) { return unix.PidfdOpen(pid, 0) }

func statUID(fi os.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Uid) }
