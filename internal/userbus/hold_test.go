package userbus

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestHolderCloseDuringSilentDial: a Holder whose bus accepts and never
// answers does not hold up Close (a Manager closing) for the dial's
// timeout, the hold in progress fails, and a Holder closed refuses later
// holds without dialling.
func TestHolderCloseDuringSilentDial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	t.Cleanup(func() {
		ln.Close()
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	h := NewHolder("unix:path=" + path)
	h.timeout = 2 * time.Second
	held := make(chan error, 1)
	go func() {
		_, err := h.Hold(context.Background(), "x.scope")
		held <- err
	}()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold never dialled")
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("Close waits for a dial the bus does not answer")
	}
	select {
	case err := <-held:
		if err == nil {
			t.Fatal("a hold on a bus that never answered succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hold still waits after the dial's timeout")
	}
	if _, err := h.Hold(context.Background(), "x.scope"); !errors.Is(err, errHolderClosed) {
		t.Fatalf("a hold after Close = %v, want %v", err, errHolderClosed)
	}
}
