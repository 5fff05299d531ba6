package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// WaitBound returns once a binding was read (here from an observe, since
// the fake server, like a server that predates the initial binding, sends
// none after its welcome), fails when ctx ends first, and fails when the
// connection ends unbound.
func TestWaitBound(t *testing.T) {
	f := newFake(t, nil)
	c := dial(t, f, Options{})
	short, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
	defer cancel()
	if _, err := c.WaitBound(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitBound with no binding: %v, want the context's deadline", err)
	}
	got := make(chan State, 1)
	go func() {
		s, err := c.WaitBound(testContext(t))
		if err != nil {
			t.Errorf("WaitBound: %v", err)
		}
		got <- s
	}()
	if _, err := c.Observe(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !s.Bound || s.Generation != 1 || s.Execution != "x-1" {
		t.Fatalf("WaitBound returned %+v", s)
	}
	if _, err := c.WaitBound(testContext(t)); err != nil {
		t.Fatalf("WaitBound once bound: %v", err)
	}

	unbound := dial(t, f, Options{})
	unbound.Close()
	if _, err := unbound.WaitBound(testContext(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitBound on a closed connection: %v, want ErrClosed", err)
	}
}

// TestCommandWaitsForStart: after a welcome that says the controller is
// starting, a command waits for the binding that follows the start
// instead of refusing ErrNotBound, and then names its generation; ctx
// still bounds the wait.
func TestCommandWaitsForStart(t *testing.T) {
	start := make(chan struct{})
	f := newFake(t, func(f *fakeServer) { f.starting = start })
	c := dial(t, f, Options{})
	if !c.Welcome().Starting {
		t.Fatal("the welcome did not say starting")
	}
	short, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Takeover(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("takeover before the start finished, under a short ctx: %v, want its deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Takeover(testContext(t))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("takeover returned %v before the binding came", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(start)
	if err := <-done; err != nil {
		t.Fatalf("takeover after the start: %v", err)
	}
	if s := c.State(); s.Mode != ModeController || s.Generation != 2 {
		t.Fatalf("state after the takeover: %+v", s)
	}
}
