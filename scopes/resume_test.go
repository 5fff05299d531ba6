package scopes

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dupFile returns a second descriptor of f, as the fd store hands one
// back: without f.Fd, which would make a non-blocking f (the engine's
// stdin, the stop pipe) blocking for good.
func dupFile(t *testing.T, f *os.File) *os.File {
	t.Helper()
	var nfd int
	if err := fdDo(f, func(fd int) (err error) {
		nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(nfd), f.Name())
}

// TestResumeProvesTheEngine: Resume re-attaches only through a pidfd that
// proves the recorded engine alive, and then talks to the engine through
// the very pipes the launch made; a pidfd of another process, a recorded
// start time that differs and a dead engine are each refused
// ErrNotResumable, and a resumed handle's Done closes when the engine
// exits, though this process is not its parent.
func TestResumeProvesTheEngine(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, echoEngine)
	e.expect(t, "ready")
	kept := func(t *testing.T, pidfd *os.File) Kept {
		t.Helper()
		return Kept{Stdin: dupFile(t, e.Stdin), Stdout: dupFile(t, e.Stdout), PidFD: pidfd}
	}
	pidfd, err := e.EnginePidFD()
	if err != nil {
		t.Fatal(err)
	}
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	skewed := e.Cohort
	skewed.StartTime++
	for _, tc := range []struct {
		name   string
		cohort Cohort
		pidfd  *os.File
	}{
		{"another process's pidfd", e.Cohort, os.NewFile(uintptr(self), "pidfd:self")},
		{"start time differs", skewed, dupFile(t, pidfd)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kept(t, tc.pidfd)
			defer k.Close()
			if _, err := m.Resume(tc.cohort, k); !errors.Is(err, ErrNotResumable) {
				t.Fatalf("Resume: %v; want ErrNotResumable", err)
			}
		})
	}
	k := kept(t, dupFile(t, pidfd))
	h, err := m.Resume(e.Cohort, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stdin.WriteString("same pipe\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(h.Stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "same pipe" {
		t.Fatalf("read %q, %v through the resumed pipes", line, err)
	}
	select {
	case <-h.Done():
		t.Fatal("a resumed handle is done while its engine runs")
	default:
	}
	if err := unix.PidfdSendSignal(int(pidfd.Fd()), unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed handle never saw the engine exit")
	}
	<-e.Done()
	dead := kept(t, pidfd)
	defer dead.Close()
	if _, err := m.Resume(e.Cohort, dead); !errors.Is(err, ErrNotResumable) {
		t.Fatalf("Resume of a dead engine: %v; want ErrNotResumable", err)
	}
}
