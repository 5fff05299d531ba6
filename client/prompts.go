package client

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Enqueue sends text as this connection's controller, addressed to the
// execution and generation last seen, and returns as soon as the
// controller queued it durably: the receipt says queued and names the
// item. The item's later receipt revisions (dispatched, acknowledged,
// failed, delivery-unknown, cancelled, draft, ...) reach this connection
// as receipt records on Updates, and every client sees the queue in
// queue records (State().Queue). A refusal (text-policy, queue-full,
// not-controller, ...) means nothing was queued: the text is still the
// caller's.
func (c *Client) Enqueue(ctx context.Context, text string) (*protocol.Receipt, error) {
	cmd, err := c.command(ctx, protocol.CmdPrompt, true)
	if err != nil {
		return nil, err
	}
	cmd.Text = text
	return c.receipt(ctx, cmd)
}

// Prompt is Enqueue, then waits for the item's turn to be answered by the
// engine: the receipt it returns says acknowledged, failed (the engine's
// words in Evidence), delivery-unknown, or how the item left the queue
// without being sent (cancelled, dispatch-refused, draft). When ctx ends
// first it returns the newest receipt seen with ctx's error: the item is
// still queued or dispatched, and must never be sent again as new.
func (c *Client) Prompt(ctx context.Context, text string) (*protocol.Receipt, error) {
	cmd, err := c.command(ctx, protocol.CmdPrompt, true)
	if err != nil {
		return nil, err
	}
	cmd.Text = text
	ch := make(chan *protocol.Receipt, 16)
	c.mu.Lock()
	c.follows[cmd.Request] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.follows, cmd.Request)
		c.mu.Unlock()
	}()
	rc, err := c.receipt(ctx, cmd)
	if err != nil {
		return nil, err
	}
	for Waiting(rc.State) {
		select {
		case next := <-ch:
			if next.Revision > rc.Revision {
				rc = next
			}
		case <-ctx.Done():
			return rc, fmt.Errorf("prompt %s is %s: %w", rc.Item, rc.State, context.Cause(ctx))
		case <-c.done:
			return rc, &OutcomeError{Command: cmd, Err: fmt.Errorf("the connection ended while item %s was %s: %w", rc.Item, rc.State, c.Err())}
		}
	}
	return rc, nil
}

// Waiting reports whether a prompt receipt's state still waits for the
// engine: queued or dispatched.
func Waiting(state string) bool {
	return state == protocol.ReceiptQueued || state == protocol.ReceiptDispatched
}

// EditQueued replaces the text of queued item id, which the caller saw at
// revision rev, by text: the controller keeps the earlier text and
// answers the queue as it now is. It refuses stale-item when the item
// moved on, item-dispatched when the dispatch won the race.
func (c *Client) EditQueued(ctx context.Context, id string, rev int, text string) (*protocol.Queue, error) {
	cmd, err := c.command(ctx, protocol.CmdEditQueued, false)
	if err != nil {
		return nil, err
	}
	cmd.Item, cmd.Revision, cmd.Text = id, &rev, text
	return c.queueReply(ctx, cmd)
}

// CancelQueued cancels queued item id at revision rev (refusals as
// EditQueued's).
func (c *Client) CancelQueued(ctx context.Context, id string, rev int) (*protocol.Queue, error) {
	cmd, err := c.command(ctx, protocol.CmdCancelQueued, false)
	if err != nil {
		return nil, err
	}
	cmd.Item, cmd.Revision = id, &rev
	return c.queueReply(ctx, cmd)
}

// ResumeQueue lifts the queue's pause (after an interrupt, a takeover or
// a restart): its items are then sent in order under this controller.
func (c *Client) ResumeQueue(ctx context.Context) (*protocol.Queue, error) {
	cmd, err := c.command(ctx, protocol.CmdResumeQueue, false)
	if err != nil {
		return nil, err
	}
	return c.queueReply(ctx, cmd)
}

func (c *Client) queueReply(ctx context.Context, cmd protocol.Command) (*protocol.Queue, error) {
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Type, err)
	}
	if r.Queue == nil {
		return nil, fmt.Errorf("%s: %w: the reply is a %s record, not a queue", cmd.Type, ErrProtocol, r.Record)
	}
	return r.Queue, nil
}
