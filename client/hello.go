package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// handshake sends the hello and reads the welcome under ctx. It returns the
// line reader it used: bytes the server sent right after the welcome may
// already sit in its buffer, so the read loop must continue with it.
func handshake(ctx context.Context, conn net.Conn, name string, speaks, maxLine int) (protocol.Welcome, *protocol.LineReader, error) {
	var w protocol.Welcome
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	hello, err := json.Marshal(protocol.Hello{Type: "hello", Client: name, Protocol: speaks})
	if err != nil {
		return w, nil, fmt.Errorf("encode hello: %w", err)
	}
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		return w, nil, ctxErr(ctx, fmt.Errorf("send hello: %w", err))
	}
	lines := protocol.NewLineReader(conn, maxLine)
	line, err := lines.Next()
	if err != nil {
		return w, nil, ctxErr(ctx, fmt.Errorf("read welcome: %w", err))
	}
	u, err := decodeRecord(line)
	if err != nil {
		return w, nil, err
	}
	switch u.Record {
	case protocol.RecordWelcome:
		w = *u.Welcome
	case protocol.RecordRefusal:
		return w, nil, refusalOf(u.Refusal)
	default:
		return w, nil, fmt.Errorf("%w: the server answered the hello with a %q record", ErrProtocol, u.Record)
	}
	if w.Protocol != speaks {
		return w, nil, fmt.Errorf("%w: the server answered in protocol %d a hello in protocol %d", ErrProtocol, w.Protocol, speaks)
	}
	if !stop() {
		// ctx ended as the welcome arrived; the deadline may be poisoned.
		return w, nil, context.Cause(ctx)
	}
	conn.SetDeadline(time.Time{})
	return w, lines, nil
}

// ctxErr prefers ctx's error when ctx ended: a poisoned deadline is how
// cancellation reaches a blocked read or write, and "i/o timeout" would
// hide the real cause. The cause, when the caller gave one, says it in
// the caller's words (mosaicctl's "the --timeout of 2s passed").
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}
