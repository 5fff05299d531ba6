package client

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Connection modes, as the server names them.
const (
	ModeObserver   = "observer"
	ModeController = "controller"
)

// State is what this connection knows of the conversation, as of the last
// record it read. Commands address the server with it (generation,
// execution), so a stale State shows up as a stale-generation or target
// refusal, never as a silent misdirection.
type State struct {
	Conversation string
	Connection   string // this connection's id, from the welcome
	Server       string
	// Mode is this connection's own mode: observer or controller.
	Mode string
	// Bound is false until a binding (broadcast or in an observed reply)
	// has been read: before that Generation and Execution mean nothing.
	Bound      bool
	Generation int64
	Execution  string
	// Controller is the connection holding control, "" when none.
	Controller string
	// Binding is the latest binding record read, nil before the first.
	Binding *protocol.Binding
	// Queue is the latest prompt queue read (a queue record, or the one
	// inside observed), nil before the first.
	Queue *protocol.Queue
}

// State returns a copy of the connection's state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	if s.Binding != nil {
		b := *s.Binding
		s.Binding = &b
	}
	return s
}

// WaitBound waits until the connection has read a binding and returns the
// state then. The controller sends one right after the welcome (after its
// start-up, when the welcome says Starting), so a
// one-shot client (stop, prompt) calls WaitBound after Dial instead of
// observing; commands sent before it may refuse ErrNotBound. It fails when
// ctx ends or the connection ends first (a server that sends no binding
// until asked needs an Observe).
func (c *Client) WaitBound(ctx context.Context) (State, error) {
	select {
	case <-c.bound:
		return c.State(), nil
	case <-ctx.Done():
		return c.State(), fmt.Errorf("wait for the binding: %w", context.Cause(ctx))
	case <-c.done:
		// A binding read just before the end still counts.
		select {
		case <-c.bound:
			return c.State(), nil
		default:
		}
		return c.State(), fmt.Errorf("wait for the binding: %w", c.Err())
	}
}

// note folds a record into the state. Records arrive in the server's order
// on one connection, so the latest always wins. Called with c.mu held.
func (c *Client) note(u *Update) {
	s := &c.state
	switch {
	case u.Binding != nil:
		c.bind(*u.Binding)
	case u.Observed != nil:
		c.bind(u.Observed.Binding)
		if q := u.Observed.Queue; q != nil {
			s.Queue = q
		}
	case u.Queue != nil:
		// A command's reply carries the queue as it was when the command
		// committed; a broadcast of a later change may have come first.
		// Never go back to an older revision.
		if s.Queue == nil || u.Queue.Revision >= s.Queue.Revision {
			s.Queue = u.Queue
		}
	case u.Control != nil:
		// The mode follows from the controller's id rather than the
		// record's own mode field, which is right only for the
		// connection the record was first sent to.
		s.Generation = u.Control.Generation
		s.Controller = u.Control.Controller
		s.Mode = c.modeOf(s.Controller)
		if s.Binding != nil {
			s.Binding.Generation, s.Binding.Controller = s.Generation, s.Controller
		}
	}
}

func (c *Client) bind(b protocol.Binding) {
	s := &c.state
	if !s.Bound {
		close(c.bound)
	}
	s.Bound = true
	s.Binding = &b
	s.Generation = b.Generation
	s.Execution = b.Execution
	s.Controller = b.Controller
	s.Mode = c.modeOf(b.Controller)
}

func (c *Client) modeOf(controller string) string {
	if controller != "" && controller == c.state.Connection {
		return ModeController
	}
	return ModeObserver
}
