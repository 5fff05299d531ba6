package scopes

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"golang.org/x/sys/unix"
)

// runPID1 is the held child's life after a confined release: it stays PID 1
// of the engine's pid namespace and starts the engine as its child. The
// engine is not PID 1 itself because PID 1 gets only the signals it has a
// handler for (a shell or Node engine would ignore the TERM phase's SIGTERM)
// and inherits every orphan to reap. So this process forwards SIGTERM,
// SIGINT and SIGHUP to the engine, reaps every child, and exits with the
// engine's status as soon as the engine exits (a signal N becomes 128+N):
// the launcher's Done and ExitErr keep meaning the engine's exit. When it
// exits the kernel kills whatever is left in the namespace, so no tool
// child outlives its engine; a stop still proves that only by observation.
//
// Except inside a stop's grace. The TERM phase gives every process of the
// cohort until its deadline, and the engine, signalled with its tools, is
// often the first to exit: the namespace's end would SIGKILL the tools
// still in their grace (a build writing out, a git command removing its
// lock). Before it signals, the controller writes the TERM phase's
// deadline on the stop pipe (stopFD, Handle.noticeStop). Until then this
// process sends the TERM phase's SIGTERM to every process of the
// namespace, in one system call (the controller's pidfds reach the
// members it enumerated, one by one, each preempting the next call as it
// exits), and outlives the engine until it has no child left (every
// orphan of the namespace is its child) or the deadline passes, then
// exits with the engine's status. Only the controller can say so: a
// SIGTERM that a tool sends this process outside a stop goes to the
// engine alone, and a deadline passed, as after a stop that ended
// uncertain, holds nothing.
//
// It runs on the main thread (locked by this package's init), which is in
// the engine's cgroup namespace and drops its privileges before the fork,
// so the engine inherits both.
func runPID1(r release, handed []int) {
	if err := dropPrivileges(); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic held child: %v\n", err)
		os.Exit(125)
	}
	// SIGCHLD has a channel of its own: a full channel drops a signal, and
	// a flood of signals a tool sends this process must not drop the
	// engine's exit. One slot is enough, since each wake reaps all.
	sigs, chld := make(chan os.Signal, 16), make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	signal.Notify(chld, unix.SIGCHLD)
	files := []uintptr{0, 1, 2}
	for _, fd := range handed {
		files = append(files, uintptr(fd))
	}
	pid, err := syscall.ForkExec(r.Path, r.Argv, &syscall.ProcAttr{Env: r.Env, Files: files})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic held child: exec %s: %v\n", r.Path, err)
		os.Exit(127)
	}
	// The engine's alone: this process stays in its pid namespace.
	closeAll(handed)
	// Only the engine holds its pipes: its stdout reaches EOF when it ends.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		unix.Dup3(int(null.Fd()), 0, 0)
		unix.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	stop := stopNotices{readable: unix.SetNonblock(stopFD, true) == nil}
	ended := -1                   // the engine's status, once reaped inside a stop's grace
	var graceEnd <-chan time.Time // while the namespace outlives the engine
	var noneLeft <-chan struct{}
	for {
		select {
		case <-graceEnd:
			os.Exit(ended)
		case <-noneLeft:
			os.Exit(ended)
		case s := <-sigs:
			left := stop.left()
			switch {
			case s == unix.SIGTERM && left > 0:
				unix.Kill(-1, unix.SIGTERM)
				if ended >= 0 {
					// A later TERM phase (a resumed stop's, K10)
					// signalled its tools again: they have its grace.
					graceEnd = time.After(left)
				}
			case ended < 0: // a reaped engine's pid may be another's now
				unix.Kill(pid, s.(syscall.Signal))
			}
		case <-chld:
			if ended >= 0 {
				continue // reapRest reaps now
			}
			st, reaped := reapAll(pid)
			if !reaped {
				continue
			}
			left := stop.left()
			if left <= 0 {
				os.Exit(st)
			}
			ended, graceEnd, noneLeft = st, time.After(left), reapRest()
		}
	}
}

// reapAll reaps every child that has exited and returns the engine's
// status (a signal N as 128+N) if the engine was among them.
func reapAll(engine int) (status int, reaped bool) {
	for {
		var ws unix.WaitStatus
		w, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err != nil || w <= 0 {
			return status, reaped
		}
		switch {
		case w != engine:
		case ws.Exited():
			status, reaped = ws.ExitStatus(), true
		case ws.Signaled():
			status, reaped = 128+int(ws.Signal()), true
		}
	}
}

// reapRest leaves the reaping of every child that exits from now on to
// the kernel (SIGCHLD ignored), so that the burst of a TERM phase's exits
// wakes nothing here, and returns a channel closed once no child is left:
// every orphan of the namespace is this process's child, so nothing of
// the namespace is left then.
func reapRest() <-chan struct{} {
	signal.Ignore(unix.SIGCHLD)
	none := make(chan struct{})
	go func() {
		defer close(none)
		for {
			// Those that exited before SIGCHLD was ignored first.
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil && err != unix.EINTR {
				return // ECHILD
			}
		}
	}()
	return none
}

// stopNotices are the deadlines the controller wrote on the stop pipe:
// each a TERM phase's end, 8 bytes of CLOCK_BOOTTIME nanoseconds (little
// endian), written whole (a pipe write of at most PIPE_BUF bytes is
// atomic). The time namespace is the controller's: the confinement makes
// none.
type stopNotices struct {
	until    uint64
	readable bool // stopFD is non-blocking: a read never holds up the loop
}

// left reads the notices written since, without waiting, and returns how
// long the latest deadline is ahead (0 or less: no stop's grace runs).
func (n *stopNotices) left() time.Duration {
	var b [8 * 16]byte
	for n.readable {
		k, err := unix.Read(stopFD, b[:])
		if err != nil || k <= 0 {
			break
		}
		for i := 0; i+8 <= k; i += 8 {
			n.until = max(n.until, binary.LittleEndian.Uint64(b[i:]))
		}
	}
	return time.Duration(int64(n.until) - int64(procfs.BoottimeNanos()))
}
