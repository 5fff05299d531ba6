package fakepi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// bashResult is what the bash tool produced.
type bashResult struct {
	text    string
	isError bool
}

// runBash runs command with `bash -c` as Pi's bash tool does: for real, in
// its own process group (so an abort kills the group, while a `setsid`
// child escapes it, as under the real Pi), output streamed to onOutput as
// the accumulated text. It returns when the shell exits, not when every
// holder of its output pipe has closed it: a background `setsid sleep 300`
// keeps the pipe open and must not hold the tool, as it does not in Pi.
func runBash(ctx context.Context, command, dir string, started func(pid int), onOutput func(acc string)) (bashResult, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return bashResult{}, fmt.Errorf("bash pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = dir
	cmd.Stdin = nil
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return bashResult{}, fmt.Errorf("start bash: %w", err)
	}
	w.Close()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	chunks := make(chan []byte, 64)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				chunks <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	if started != nil {
		started(cmd.Process.Pid)
	}

	acc := ""
	take := func(b []byte) {
		acc += string(b)
		if onOutput != nil {
			onOutput(acc)
		}
	}
	var waitErr error
	aborted := false
loop:
	for {
		select {
		case b, ok := <-chunks:
			if !ok {
				chunks = nil
				continue
			}
			take(b)
		case waitErr = <-exited:
			break loop
		case <-ctx.Done():
			aborted = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-exited
			break loop
		}
	}
	// Drain what the shell wrote before it exited; stop at a short quiet
	// period because a detached child may hold the pipe open for ever.
	_ = r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	for chunks != nil {
		b, ok := <-chunks
		if !ok {
			break
		}
		take(b)
	}

	appendStatus := func(text, status string) string {
		if text == "" {
			return status
		}
		return text + "\n\n" + status
	}
	if aborted {
		return bashResult{text: appendStatus(acc, "Command aborted"), isError: true}, nil
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		code := ee.ExitCode()
		out := acc
		if out == "" {
			out = "(no output)"
		}
		return bashResult{text: appendStatus(out, fmt.Sprintf("Command exited with code %d", code)), isError: true}, nil
	}
	if waitErr != nil {
		return bashResult{}, fmt.Errorf("bash: %w", waitErr)
	}
	if acc == "" {
		acc = "(no output)"
	}
	return bashResult{text: acc}, nil
}
