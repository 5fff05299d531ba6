package scopes

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
// Except during a stop: the TERM phase gives every process of the cohort
// its grace, and the engine, signalled with its tools, is often the first
// to exit; the namespace's end would then SIGKILL the tools still in
// their grace (a build, a git command cleaning its lock). So when the
// controller wrote on the stop pipe (stopFD) before its signals, this
// process outlives the engine until it has no child left (every orphan
// of the namespace is its child), then exits with the engine's status;
// the kill phase after the grace takes what is left. Only the controller
// can say so: a SIGTERM that a tool sends this process is forwarded to
// the engine as any other, and the namespace still ends with the engine.
//
// It runs on the main thread (locked by this package's init), which is in
// the engine's cgroup namespace and drops its privileges before the fork,
// so the engine inherits both.
func runPID1(r release) {
	if err := dropPrivileges(); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic held child: %v\n", err)
		os.Exit(125)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	pid, err := syscall.ForkExec(r.Path, r.Argv, &syscall.ProcAttr{Env: r.Env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic held child: exec %s: %v\n", r.Path, err)
		os.Exit(127)
	}
	// Only the engine holds its pipes: its stdout reaches EOF when it ends.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		unix.Dup3(int(null.Fd()), 0, 0)
		unix.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	ended := -1 // the engine's status, once reaped during a stop
	for s := range sigs {
		if s != unix.SIGCHLD {
			if ended < 0 { // a reaped engine's pid may be another's now
				unix.Kill(pid, s.(syscall.Signal))
			}
			continue
		}
		for {
			var ws unix.WaitStatus
			w, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.ECHILD && ended >= 0 {
				os.Exit(ended)
			}
			if err != nil || w <= 0 {
				break
			}
			if w != pid {
				continue
			}
			switch {
			case ws.Exited():
				ended = ws.ExitStatus()
			case ws.Signaled():
				ended = 128 + int(ws.Signal())
			default:
				continue
			}
			if !stopBegan() {
				os.Exit(ended)
			}
		}
	}
}

// stopBegan reads whether the controller wrote on the stop pipe, without
// waiting.
func stopBegan() bool {
	var b [1]byte
	if err := unix.SetNonblock(stopFD, true); err != nil {
		return false
	}
	n, _ := unix.Read(stopFD, b[:])
	return n == 1
}
