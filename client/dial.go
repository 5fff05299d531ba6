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
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil || !errors.Is(err, syscall.EAGAIN) {
			return conn, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: the socket's listen queue stayed full until the dial gave up (something floods it; try again)", err)
		case <-t.C:
		}
	}
}
