package client

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenBacklog listens on path with a listen backlog of n, which
// net.Listen does not let a caller choose.
func listenBacklog(path string, n int) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, err
	}
	if err := unix.Listen(fd, n); err != nil {
		return nil, err
	}
	return net.FileListener(f)
}

// fillBacklog connects to path until the listener's backlog is full and a
// connect fails EAGAIN; the connections stay open until the test ends.
func fillBacklog(t *testing.T, path string) {
	t.Helper()
	for range 100 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the listen backlog never filled")
}

// TestDialWaitsOutAFullBacklog: with the listener's backlog full, a
// Unix connect fails at once (EAGAIN). Dial keeps trying until the
// listener accepts again, as the controller does within milliseconds of a
// connection flood, so a flood from the engine cannot lock the operator
// out; with no room before its context ends, it fails with the EAGAIN.
func TestDialWaitsOutAFullBacklog(t *testing.T) {
	accepting := make(chan struct{})
	f := newFake(t, func(f *fakeServer) { f.backlog, f.accepting = 1, accepting })
	open := sync.OnceFunc(func() { close(accepting) })
	t.Cleanup(open) // before the fake's own cleanup waits for its accept loop
	fillBacklog(t, f.path)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := Dial(ctx, f.path, Options{Name: "test"})
	cancel()
	if !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("Dial on a full backlog until its context ended: %v, want EAGAIN", err)
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, f.path, Options{Name: "test"})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Dial returned while the backlog was full: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	open()
	if err := <-done; err != nil {
		t.Fatalf("Dial once the listener accepted again: %v", err)
	}
}

// TestDialFailure: an attempt that fails once the context ended, after
// the queue was found full, is reported as the full queue (EAGAIN), as
// the wait's own end is; before the queue was found full, or while the
// context lives, an attempt's error is the dial's.
func TestDialFailure(t *testing.T) {
	eagain := &net.OpError{Op: "dial", Net: "unix", Err: syscall.EAGAIN}
	timeout := &net.OpError{Op: "dial", Net: "unix", Err: context.DeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name             string
		err, full, ctxEr error
		want             error
	}{
		{"timer taken after the deadline", timeout, eagain, context.DeadlineExceeded, syscall.EAGAIN},
		{"never full", timeout, nil, context.DeadlineExceeded, context.DeadlineExceeded},
		{"refused while the context lives", refused, eagain, nil, syscall.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dialFailure(tc.err, tc.full, tc.ctxEr); !errors.Is(got, tc.want) {
				t.Errorf("dialFailure = %v, want %v", got, tc.want)
			}
		})
	}
}
