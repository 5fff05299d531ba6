package scopes

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
