package scopes

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/owner"
)

// TestAnchorIgnoresStopSignals: the anchor outlives the signals a stop
// of the unit (`systemctl --user stop`: SIGTERM, then SIGHUP with
// SendSIGHUP) or a terminal sends, so the scope, and the engine cgroup
// in it, stay until a kill phase has observed that cgroup empty and
// killed the anchor itself; then a stop still proves the cohort ended.
func TestAnchorIgnoresStopSignals(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, `echo "ready 1"; exec cat`)
	e.expect(t, "ready")
	fd, err := unix.PidfdOpen(e.Cohort.AnchorPID, 0)
	if err != nil {
		t.Fatalf("pidfd of the anchor %d: %v", e.Cohort.AnchorPID, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGPIPE} {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
			t.Fatalf("%v to the anchor: %v", sig, err)
		}
	}
	// A death shows on the pidfd as POLLIN; none may come.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int((300 * time.Millisecond).Milliseconds())); err != nil || n != 0 {
		t.Fatalf("the anchor died of a stop's signals (poll %d, %v): the scope would end before the engine cgroup is observed", n, err)
	}
	res := e.Stop(context.Background(), StopOptions{Stop: "anchor", Grace: time.Second})
	if res.Outcome != Stopped {
		t.Fatalf("stop after the signals: %s (%s)", res.Outcome, res.Reason)
	}
}

// TestAnchorSaysReadyOnlyWithSleep: the anchor script says ready, and
// stays, only when the sleep it is given is there to exec; one that is
// not makes it exit 127 without a word, so awaitReady refuses the launch
// (errAnchorSilent) instead of a scope whose anchor died at once.
func TestAnchorSaysReadyOnlyWithSleep(t *testing.T) {
	sleep, err := anchorSleep()
	if err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name, sleep string
		ready       bool
	}{
		{"sleep", sleep, true},
		{"missing", "/nonexistent/sleep", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command("/bin/sh", "-c", anchorScript, "mosaic-anchor", tc.sleep)
			cmd.ExtraFiles = []*os.File{w}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			said, _ := io.ReadAll(r) // EOF once fd 3 is closed: before exec, or at exit
			if got := string(said) == roleAnchor; got != tc.ready {
				t.Fatalf("the anchor given %s said %q; want ready %v", tc.sleep, said, tc.ready)
			}
			if tc.ready {
				return
			}
			if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 127 {
				t.Fatalf("the anchor without sleep ended %v; want exit status 127", err)
			}
		})
	}
}

// TestAnchorSleepNeverFromPath: the anchor's sleep is never found by
// PATH, whose directories the user, and so a confined engine, may write
// (~/.local/bin): a sleep put there would run unconfined, outside the
// cohort, as the next launch's anchor. Only a file the user cannot
// replace, in directories the user cannot write, is taken.
func TestAnchorSleepNeverFromPath(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "sleep")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	got, err := anchorSleep()
	if got == own || err == nil && !owner.BeyondUser(got) {
		t.Fatalf("anchorSleep with PATH=%s holding a sleep: %q, %v; want one of %v, beyond the user", dir, got, err, anchorSleeps)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{own, os.Getuid() == 0}, // the test's own file: beyond the user only for root
		{"/bin/sh", true},
		{dir, false}, // a directory is no program
	} {
		if got := owner.BeyondUser(tc.path); got != tc.want {
			t.Errorf("owner.BeyondUser(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
