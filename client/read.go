package client

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/mosaic-agents/mosaic/protocol"
)

// run reads server lines until the connection ends.
func (c *Client) run(lines *protocol.LineReader) {
	for {
		if !lines.Ready() {
			// The next line is not here yet and reading it may block:
			// the events read so far go out first.
			c.flushEvents()
		}
		line, err := lines.Next()
		if err != nil {
			c.flushEvents()
			c.end(c.readErr(err))
			return
		}
		if err := c.receive(line); err != nil {
			c.flushEvents()
			c.end(err)
			return
		}
	}
}

// eventBatch is the most events the read loop holds before it queues
// them.
const eventBatch = 256

// holdEvent keeps an event for the next flushEvents.
func (c *Client) holdEvent(ev *protocol.Event, raw []byte) {
	c.events = append(c.events, eventItem(ev, raw))
	if len(c.events) == eventBatch {
		c.flushEvents()
	}
}

// flushEvents queues the events the read loop holds, in one lock.
func (c *Client) flushEvents() {
	if len(c.events) > 0 {
		c.updates.pushEvents(c.events)
		clear(c.events)
		c.events = c.events[:0]
	}
}

func (c *Client) readErr(err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the server closed %s", ErrClosed, c.path)
	case errors.Is(err, net.ErrClosed):
		return ErrClosed
	case errors.Is(err, protocol.ErrLineTooLong):
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return fmt.Errorf("read from %s: %w", c.path, err)
}

// receive decodes one line, folds it into the state, answers the request
// it replies to, and queues it for Updates — in that order, so a caller
// whose Takeover returned already sees itself as controller in State.
func (c *Client) receive(line []byte) error {
	// An event answers no request and changes no State: nothing below
	// applies to it. The read loop queues the events of what one read
	// brought together (flushEvents), before any other record and
	// before it may block. Most come from the one-pass decoder, without
	// an Update of their own.
	if ev, ok := c.lines.event(line); ok {
		if err := c.checkRun(ev); err != nil {
			return err
		}
		c.holdEvent(ev, line)
		return nil
	}
	u, err := c.lines.record(line)
	if err != nil {
		return err
	}
	if u.Record == protocol.RecordWelcome {
		return fmt.Errorf("%w: a second welcome", ErrProtocol)
	}
	if u.Event != nil {
		if err := c.checkRun(u.Event); err != nil {
			return err
		}
		c.holdEvent(u.Event, u.Raw)
		return nil
	}
	c.flushEvents()
	c.mu.Lock()
	var p *pending
	if u.Refusal != nil && u.request() == "" {
		c.unaddressed = u.Refusal
	}
	if id := u.request(); id != "" {
		if q, ok := c.pending[id]; ok && answers(q.cmd.Type, u.Record) {
			p = q
			delete(c.pending, id)
			u.Reply, u.Retry = true, q.cmd.Retry
			if q.cmd.Type == protocol.CmdObserve && q.cmd.FromSeq != nil {
				from := *q.cmd.FromSeq
				u.FromSeq = &from
			}
		}
	}
	if !u.Retry {
		c.note(&u)
	}
	var follow chan *protocol.Receipt
	if p == nil && u.Receipt != nil {
		follow = c.follows[u.Receipt.Request]
	}
	c.mu.Unlock()
	if follow != nil {
		// The read loop never blocks on a waiter: when its buffer is full
		// the oldest revision goes, never the newest.
		for sent := false; !sent; {
			select {
			case follow <- u.Receipt:
				sent = true
			default:
				select {
				case <-follow:
				default:
				}
			}
		}
	}
	if p != nil {
		p.resolve(replyOf(&u))
	}
	c.updates.push(u)
	return nil
}

// checkRun refuses a run of deltas on a connection that did not ask for
// runs, or one the protocol does not allow.
func (c *Client) checkRun(ev *protocol.Event) error {
	switch {
	case ev.Texts == nil:
		return nil
	case c.welcome.Protocol < protocol.RunsSince:
		return fmt.Errorf("%w: a run of deltas (seq %d) on a connection in protocol %d", ErrProtocol, ev.Seq, c.welcome.Protocol)
	}
	if err := protocol.CheckRun(ev); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// answers says whether a record of kind can be the reply to a command of
// type cmd. A record carrying a request id of another kind (a control
// broadcast naming a takeover, say) is not taken for the reply.
func answers(cmd, kind string) bool {
	switch kind {
	case protocol.RecordRefusal:
		return true
	case protocol.RecordObserved, protocol.RecordPage:
		return cmd == protocol.CmdObserve
	case protocol.RecordControl:
		return cmd == protocol.CmdTakeover || cmd == protocol.CmdAcquireRecoveryControl
	case protocol.RecordReceipt:
		return cmd == protocol.CmdPrompt || cmd == protocol.CmdInterrupt ||
			cmd == protocol.CmdForceStop || cmd == protocol.CmdLaunch || !known(cmd)
	case protocol.RecordConfirmation:
		return cmd == protocol.CmdIssueConfirmation || cmd == protocol.CmdAnswerConfirmation
	case protocol.RecordEligibility:
		return cmd == protocol.CmdRecover
	case protocol.RecordApprovalResolved:
		return cmd == protocol.CmdApproval
	case protocol.RecordQueue:
		return cmd == protocol.CmdEditQueued || cmd == protocol.CmdCancelQueued || cmd == protocol.CmdResumeQueue
	}
	return !known(cmd)
}

// known lists the commands whose reply kind this client knows.
func known(cmd string) bool {
	switch cmd {
	case protocol.CmdObserve, protocol.CmdTakeover, protocol.CmdAcquireRecoveryControl,
		protocol.CmdPrompt, protocol.CmdInterrupt, protocol.CmdForceStop, protocol.CmdLaunch,
		protocol.CmdIssueConfirmation, protocol.CmdAnswerConfirmation, protocol.CmdRecover, protocol.CmdApproval,
		protocol.CmdEditQueued, protocol.CmdCancelQueued, protocol.CmdResumeQueue:
		return true
	}
	return false
}

// replyOf turns the answering record into the waiter's result.
func replyOf(u *Update) (*Reply, error) {
	if u.Refusal != nil {
		return nil, refusalOf(u.Refusal)
	}
	return &Reply{Record: u.Record, Observed: u.Observed, Control: u.Control, Receipt: u.Receipt,
		Confirmation: u.Confirmation, Eligibility: u.Eligibility, Page: u.Page, Approval: u.Approval, Queue: u.Queue, Raw: u.Raw}, nil
}
