package web_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"
)

// TestWebIdleExit: Serve returns once no browser is attached (socket
// activation starts it again), and not while a page holds a stream open.
func TestWebIdleExit(t *testing.T) {
	o := noConversations
	o.Idle = 200 * time.Millisecond
	srv, l, s := newServer(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)

	// A page attached before the server could go idle: its stream holds
	// the server up.
	go func() { done <- srv.Serve(ctx, l) }()
	c := browser(t)
	s.login(t, c)
	r, err := c.Get(s.base + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(r.Body).ReadString('\n')
	if err != nil || line != "event: rows\n" {
		t.Fatalf("stream began %q, %v", line, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) while a page held a stream open", err)
	case <-time.After(5 * o.Idle):
	}
	r.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("idle exit: %v", err)
		}
	case <-time.After(time.Minute): // a bound against a hang
		t.Fatal("Serve did not return with no browser attached")
	}
	if _, err := http.Get(s.base + "/"); err == nil {
		t.Error("the listener still answers after the idle exit")
	}
}
