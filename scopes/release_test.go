package scopes

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// exited reports whether pid has exited, every thread of it, so that
// none holds its descriptors any more (a zombie leader may still have
// threads exiting, holding them).
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return strings.HasPrefix(rest, "Z") && err == nil && len(tasks) <= 1
}

// TestReleaseAfterRecord: what a launch returns when its go-ahead to the
// held child fails after BeforeRelease recorded the cohort (the
// controller's incarnation). A write of the go-ahead fails only when no
// process holds the release pipe's read end (EPIPE): the held child died
// without reading it, so the engine never runs and never can, and the
// launch undoes its scope (no handle is owed: nothing of the engine may
// run). A close that fails once the go-ahead is written (none on Linux
// does; a fault here) lets go of the descriptor all the same, so the
// child reads the go-ahead and runs the engine: the launch hands over its
// handle, and a stop proves the cohort ended. Before, that launch
// returned an error and no handle and undid its scope with the engine
// released: it killed the held child's pid only, so an unconfined
// engine's forks ran on in a scope nobody held.
func TestReleaseAfterRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		killHeld bool  // BeforeRelease kills the held child
		closeErr error // the release pipe's close fails after the go-ahead
	}{
		{name: "held child gone", killHeld: true},
		{name: "close fails after the go-ahead", closeErr: errors.New("test: close of the release pipe failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManager(t)
			if tc.closeErr != nil {
				m.faults.goAheadClose = func() error { return tc.closeErr }
			}
			conv, exe := ids(t)
			marker := filepath.Join(t.TempDir(), "ran")
			var seen Cohort
			h, err := m.Launch(ctxT(t), Spec{Conversation: conv, Execution: exe, Stderr: os.Stderr,
				Argv: []string{"sh", "-c", "touch " + marker + "; echo ran 1; exec cat"},
				BeforeRelease: func(c Cohort) error {
					seen = c
					if tc.killHeld {
						syscall.Kill(c.PID, syscall.SIGKILL)
						for !exited(c.PID) {
							time.Sleep(time.Millisecond)
						}
					}
					return nil
				}})
			if tc.killHeld {
				if !errors.Is(err, syscall.EPIPE) || h != nil {
					t.Fatalf("launch: handle %t, %v; want EPIPE and no handle", h != nil, err)
				}
				waitUnitGone(t, m, seen)
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the engine ran although its go-ahead was never read")
				}
				return
			}
			if err != nil {
				t.Fatalf("launch: %v; want the handle of the released engine", err)
			}
			t.Cleanup(func() { h.Close() })
			(&engine{Handle: h, out: bufio.NewReader(h.Stdout)}).expect(t, "ran")
			res := h.Stop(ctxT(t), StopOptions{Stop: "s", Grace: time.Second})
			if res.Outcome != Stopped {
				t.Fatalf("stop: %s (%s)", res.Outcome, res.Reason)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the engine did not run: %v", err)
			}
		})
	}
}

// TestSlowLaunchStillReleases: the release is written as soon as the held
// child starts, bounded by the job timeout in case the child never reads
// it; the later lines (placed, go) must not inherit that deadline. Here
// the whole launch takes longer than the job timeout, each of its waits
// within it: the engine still runs.
func TestSlowLaunchStillReleases(t *testing.T) {
	sandboxtest.Require(t)
	const timeout = time.Second
	m := NewManager(Config{JobTimeout: timeout})
	t.Cleanup(m.Close)
	e := launchWith(t, m, "echo ran 1; exec cat", func(s *Spec) {
		s.BeforeRelease = func(Cohort) error {
			time.Sleep(timeout + timeout/2)
			return nil
		}
	})
	e.expect(t, "ran")
}

// TestLargeReleaseLaunches: a release larger than a pipe holds (64 KiB)
// is written before the held child reads anything; the launch still
// completes once the child reads it, and the engine gets all of it.
func TestLargeReleaseLaunches(t *testing.T) {
	m := testManager(t)
	big := strings.Repeat("x", 60<<10)
	e := launchWith(t, m, `echo ran ${#A}${#B}${#C}; exec cat`, func(s *Spec) {
		s.Env = append(os.Environ(), "A="+big, "B="+big, "C="+big)
	})
	if got := e.expect(t, "ran")["ran"]; got != "614406144061440" {
		t.Fatalf("engine saw lengths %q, want 61440 each", got)
	}
}
