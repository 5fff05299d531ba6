package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// backlogWait bounds how long a dial waits out a full listen backlog when
// ctx sets no earlier deadline.
const backlogWait = 10 * time.Second

// dialSocket connects to the Unix socket at path, waiting out a full listen
// backlog. A Unix socket's connect does not queue: with the listener's
// backlog full it fails at once with EAGAIN. That happens in a burst of
// connections, and when an engine's tools flood their own conversation's
// socket, which the controller drains within milliseconds by accepting
// and refusing what exceeds its connection cap; failing at once would let
// such a flood lock the operator out. Any other error ends the dial.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, backlogWait)
		defer cancel()
	}
	var d net.Dialer
	var full error // the last attempt's EAGAIN
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		conn, err := d.DialContext(ctx, "unix", path)
		switch {
		case err == nil:
			return conn, nil
		case errors.Is(err, syscall.EAGAIN):
			full = err
		default:
			return nil, dialFailure(err, full, ctx.Err())
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, stayedFull(full)
		case <-t.C:
		}
	}
}

// dialFailure is what an attempt's error err says of the dial: once the
// queue was found full (full), an attempt that failed after ctx ended is
// that queue staying full, not the context's own error (after a stall
// the timer and ctx.Done are both ready, and select may take the timer).
func dialFailure(err, full, ctxErr error) error {
	if full != nil && ctxErr != nil {
		return stayedFull(full)
	}
	return err
}

// stayedFull says that the listen queue, found full with eagain, stayed so.
func stayedFull(eagain error) error {
	return fmt.Errorf("%w: the socket's listen queue stayed full until the dial gave up (something floods it; try again)", eagain)
}
