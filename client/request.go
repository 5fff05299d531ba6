package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/internal/ids"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Reply is the record that answered one request: exactly one field is set,
// the one named by Record.
type Reply struct {
	Record       string
	Observed     *protocol.Observed
	Control      *protocol.ControlRecord
	Receipt      *protocol.Receipt
	Confirmation *protocol.Confirmation
	Eligibility  *protocol.Eligibility
	Page         *protocol.PageRecord
	Approval     *protocol.Approval
	Queue        *protocol.Queue
	// Raw is the reply line, for a command this client has no shape for.
	Raw []byte
}

// OutcomeError reports a request that was sent (or may have been) and
// whose reply never arrived: the connection ended, or ctx ended first.
// Whether the server dispatched it is unknown, and that is never a reason
// to send it again as new: Resend asks about this exact Command (same
// request id, retry:true), and the server answers with its existing
// receipt, or receipt-unknown if it never admitted it or restarted since.
type OutcomeError struct {
	Command protocol.Command
	Err     error
}

func (e *OutcomeError) Error() string {
	return fmt.Sprintf("outcome of %s request %s unknown: %v", e.Command.Type, e.Command.Request, e.Err)
}

// Unwrap returns why the reply was lost.
func (e *OutcomeError) Unwrap() error { return e.Err }

// pending is one request waiting for its reply.
type pending struct {
	cmd  protocol.Command
	done chan result // buffered: the read loop never waits for a waiter
}

type result struct {
	reply *Reply
	err   error
}

func (p *pending) resolve(r *Reply, err error) { p.done <- result{r, err} }

// Do sends cmd and waits for its reply. It fills cmd.Request with a fresh
// id when empty and sends everything else exactly as given: the typed
// methods (Prompt, Takeover, ...) build the command from the connection's
// state and are what most callers want. Do is for commands this package has
// no method for and for tests of the protocol itself.
func (c *Client) Do(ctx context.Context, cmd protocol.Command) (*Reply, error) {
	if cmd.Request == "" {
		cmd.Request = newRequestID()
	}
	return c.do(ctx, cmd)
}

// Resend asks again about a request whose outcome was lost (see
// OutcomeError), on this connection or a new one: the same command with the
// same request id, marked retry. The server returns the reply it recorded
// without dispatching a second time; the same id with other content
// refuses conflicting-request, and a request it does not know (never
// admitted, or the controller restarted) refuses receipt-unknown.
func (c *Client) Resend(ctx context.Context, cmd protocol.Command) (*Reply, error) {
	if cmd.Request == "" {
		return nil, errors.New("resend: the command has no request id")
	}
	cmd.Retry = true
	return c.do(ctx, cmd)
}

// do registers cmd under its request id, writes it and waits.
func (c *Client) do(ctx context.Context, cmd protocol.Command) (*Reply, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s not sent: %w", cmd.Type, context.Cause(ctx))
	}
	line, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.Type, err)
	}
	p := &pending{cmd: cmd, done: make(chan result, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%s not sent: %w", cmd.Type, err)
	}
	if _, dup := c.pending[cmd.Request]; dup {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s not sent: request %s is already waiting on this connection", cmd.Type, cmd.Request)
	}
	c.pending[cmd.Request] = p
	c.mu.Unlock()

	if n, err := c.write(ctx, cmd.Request, line); err != nil {
		if n == 0 {
			c.forget(cmd.Request)
			return nil, fmt.Errorf("%s not sent: %w", cmd.Type, err)
		}
		if r := c.answerOfBrokenWrite(ctx); r != nil {
			c.forget(cmd.Request)
			return nil, refusalOf(r)
		}
		return nil, &OutcomeError{Command: cmd, Err: err}
	}
	select {
	case r := <-p.done:
		return r.reply, r.err
	case <-ctx.Done():
		// The entry stays: a late reply is still recognised as ours (and
		// an observed keeps its fromSeq on Updates).
		return nil, &OutcomeError{Command: cmd, Err: context.Cause(ctx)}
	}
}

func (c *Client) forget(request string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, request)
}

// write sends one line of request. Cancellation reaches a blocked write through the
// deadline; any failure ends the connection, since a partial line would
// desynchronise the stream. n is what reached the socket.
func (c *Client) write(ctx context.Context, request string, line []byte) (n int, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.unaddressed, c.lastWrite = nil, request
	c.mu.Unlock()
	dl, _ := ctx.Deadline() // zero: no deadline
	c.conn.SetWriteDeadline(dl)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		c.conn.SetWriteDeadline(time.Unix(1, 0))
	})
	n, err = c.conn.Write(append(line, '\n'))
	if !stop() {
		<-fired // the poisoned deadline must not outlive this write
	}
	if err != nil {
		err = ctxErr(ctx, fmt.Errorf("write to %s: %w", c.path, err))
		if n == 0 || ctx.Err() != nil {
			c.end(err)
		} else {
			c.halfClose(err)
		}
	}
	return n, err
}

// drainWait bounds how long a client whose write failed part way reads on
// for the server's answer before it gives the connection up.
const drainWait = 5 * time.Second

// halfClose ends a connection whose write failed part way, but only on the
// writing side: the server may have refused the line and closed (it stops
// reading at its line cap, so the rest of the write fails), and its
// refusal is still to be read. The read loop ends the connection at the
// server's EOF, or at the read deadline set here.
func (c *Client) halfClose(cause error) {
	cw, ok := c.conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil || c.conn.SetReadDeadline(time.Now().Add(drainWait)) != nil {
		c.end(cause)
	}
}

// answerOfBrokenWrite waits for the read loop to end after a write that
// failed part way and returns the refusal that named no request, if the
// server sent one: a line it could not read is the partial one, so that
// refusal is the request's answer, not an unknown outcome. A partial line
// is never dispatched (the server reads whole lines only).
func (c *Client) answerOfBrokenWrite(ctx context.Context) *protocol.RefusalRecord {
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unaddressed
}

// newRequestID returns a request id unique for the actor in practice:
// 128 random bits, so ids never collide across connections or restarts of
// this client.
func newRequestID() string {
	return ids.New("r-", 16)
}
