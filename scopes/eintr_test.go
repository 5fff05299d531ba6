package scopes

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestPidfdPollsIgnoreSignals: a poll of a pidfd interrupted by a signal
// says nothing about the process. The test binary gets SIGCHLD from its
// children and SIGURG from the Go scheduler at any moment, and a
// zero-timeout poll that finds nothing ready while one is pending returns
// -1 (EINTR). The test helper read that -1 as "exited" and called a living
// escaped anchor dead (a CI failure of TestRemovedCgroupNeedsKnownDeaths:
// "the escaped anchor died: the test proves nothing"). pidfdExited, which
// the stop's death probes use, reads only readiness and stays right; it
// is held to it here too. Under a storm of SIGCHLD both must keep giving
// the process's real state, for a living and an exited (unreaped) one.
func TestPidfdPollsIgnoreSignals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alive bool
	}{{"alive", true}, {"exited", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			p := pin(t, strconv.Itoa(cmd.Process.Pid))
			if !tc.alive {
				p.kill()
				p.waitDead(t) // a zombie: its pidfd polls readable
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
						syscall.Kill(os.Getpid(), syscall.SIGCHLD)
					}
				}
			}()
			defer func() { close(stop); <-done }()
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
				if got := p.alive(t); got != tc.alive {
					t.Fatalf("pinned.alive says %t for pid %d, want %t", got, p.pid, tc.alive)
				}
				if got := pidfdExited(p.fd); got == tc.alive {
					t.Fatalf("pidfdExited says %t for pid %d, want %t", got, p.pid, !tc.alive)
				}
			}
		})
	}
}
