package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// ErrNotBound is returned by commands that must name a generation before
// this connection has read any binding: observe first (or wait for a
// binding broadcast), so the command names what the server holds.
var ErrNotBound = errors.New("no binding read yet on this connection: observe first")

// Confirmation answers.
const (
	AnswerConfirm = "confirm"
	AnswerDecline = "decline"
)

// Observe asks for a fresh history page and the live events after it. The
// observed record is returned and also delivered on Updates, in order
// before the first event that follows it; feed a Transcript from Updates
// only, so the page and the events join in the server's order.
func (c *Client) Observe(ctx context.Context) (*protocol.Observed, error) {
	return c.observe(ctx, protocol.Command{Type: protocol.CmdObserve})
}

// ObserveFrom resumes after seq, the last sequence number of the current
// execution this client holds (0 when it holds none): the server replays
// the events after it that its replay window still holds, then live
// events. After a lost place this continues the stream without re-reading
// the page; the seam says reconcile when the window no longer reaches seq.
func (c *Client) ObserveFrom(ctx context.Context, seq uint64) (*protocol.Observed, error) {
	return c.observe(ctx, protocol.Command{Type: protocol.CmdObserve, FromSeq: &seq})
}

// OlderPage reads the history page before the one a cursor came with:
// pass the Cursor of an Observed reply, then of each PageRecord, until one
// has none (the first part of the branch). Pages come from the snapshot
// the observe read, so they join without gap or overlap; the event
// subscription is untouched. A cursor is bound to this connection and is
// replaced by the next Observe; a refusal (cursor-unknown, cursor-expired,
// cursor-foreign) says reconcile: observe again. The page is also
// delivered on Updates, where a Transcript ignores it.
func (c *Client) OlderPage(ctx context.Context, cursor string) (*protocol.PageRecord, error) {
	r, err := c.Do(ctx, protocol.Command{Type: protocol.CmdObserve, Cursor: cursor})
	if err != nil {
		return nil, fmt.Errorf("older page: %w", err)
	}
	if r.Page == nil {
		return nil, fmt.Errorf("older page: %w: the server answered with a %q record", ErrProtocol, r.Record)
	}
	return r.Page, nil
}

func (c *Client) observe(ctx context.Context, cmd protocol.Command) (*protocol.Observed, error) {
	r, err := c.Do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	return r.Observed, nil
}

// Reobserve performs what a Transcript asked for: nothing, a resume from
// w.FromSeq, or a fresh observe. The reply reaches the Transcript through
// Updates like any other.
func (c *Client) Reobserve(ctx context.Context, w Want) (*protocol.Observed, error) {
	switch {
	case !w.Observe:
		return nil, nil
	case w.Resume:
		return c.ObserveFrom(ctx, w.FromSeq)
	}
	return c.Observe(ctx)
}

// Takeover asks for control, naming the generation this connection
// believes current: if someone else took control since, it refuses
// stale-generation rather than overriding them. The control record comes
// back with the new generation; the previous controller becomes an observer.
func (c *Client) Takeover(ctx context.Context) (*protocol.ControlRecord, error) {
	cmd, err := c.command(ctx, protocol.CmdTakeover, false)
	if err != nil {
		return nil, err
	}
	return c.control(ctx, cmd)
}

// AcquireRecoveryControl binds this observer as controller while admission
// is closed and the previous controller is gone or revoked — the path when
// an ordinary takeover refuses fenced. It needs an answered confirmation
// for operation acquire-recovery-control; with confirmation "" it issues
// and confirms one first (see Confirm).
func (c *Client) AcquireRecoveryControl(ctx context.Context, confirmation string) (*protocol.ControlRecord, error) {
	id, err := c.confirmed(ctx, protocol.CmdAcquireRecoveryControl, confirmation)
	if err != nil {
		return nil, err
	}
	cmd, err := c.command(ctx, protocol.CmdAcquireRecoveryControl, false)
	if err != nil {
		return nil, err
	}
	cmd.Confirmation = id
	return c.control(ctx, cmd)
}

func (c *Client) control(ctx context.Context, cmd protocol.Command) (*protocol.ControlRecord, error) {
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Type, err)
	}
	return r.Control, nil
}

// Interrupt asks the engine to stop its current turn. The stop's
// transitions arrive as stop records on Updates; the receipt, once it has
// settled, says reconciled or uncertain and names the stop. A hang is what
// ForceStop is for.
func (c *Client) Interrupt(ctx context.Context) (*protocol.Receipt, error) {
	cmd, err := c.command(ctx, protocol.CmdInterrupt, false)
	if err != nil {
		return nil, err
	}
	return c.receipt(ctx, cmd)
}

// ForceStop stops the engine's whole cohort. It needs an answered
// confirmation for force-stop: pass one from IssueConfirmation and
// AnswerConfirmation (after showing its Intent to a person), or "" to
// issue and confirm one here, for callers that already have consent
// (`mosaicctl stop --yes`). The receipt says stopped (with a proof on the
// stop record) or uncertain.
func (c *Client) ForceStop(ctx context.Context, confirmation string) (*protocol.Receipt, error) {
	id, err := c.confirmed(ctx, protocol.CmdForceStop, confirmation)
	if err != nil {
		return nil, err
	}
	cmd, err := c.command(ctx, protocol.CmdForceStop, false)
	if err != nil {
		return nil, err
	}
	cmd.Confirmation = id
	return c.receipt(ctx, cmd)
}

// Recover asks whether a new execution may start after a proven stop; it
// launches nothing. The eligibility record is what Launch takes. The
// confirmation works as in ForceStop, for operation recover.
func (c *Client) Recover(ctx context.Context, confirmation string) (*protocol.Eligibility, error) {
	id, err := c.confirmed(ctx, protocol.CmdRecover, confirmation)
	if err != nil {
		return nil, err
	}
	cmd, err := c.command(ctx, protocol.CmdRecover, false)
	if err != nil {
		return nil, err
	}
	cmd.Confirmation = id
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	return r.Eligibility, nil
}

// Launch starts the new execution an eligibility record allows (its id),
// as the controller at the current generation. The new binding, generation
// +1, arrives as a binding record; the cancelled prompt is never replayed.
// The receipt says launched, or uncertain (with a reason) when the new
// engine did not become active.
func (c *Client) Launch(ctx context.Context, eligibility string) (*protocol.Receipt, error) {
	cmd, err := c.command(ctx, protocol.CmdLaunch, false)
	if err != nil {
		return nil, err
	}
	cmd.Eligibility = eligibility
	return c.receipt(ctx, cmd)
}

func (c *Client) receipt(ctx context.Context, cmd protocol.Command) (*protocol.Receipt, error) {
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Type, err)
	}
	return r.Receipt, nil
}

// IssueConfirmation asks the server for a single-use confirmation of
// operation (force-stop, recover or acquire-recovery-control). Its Intent
// says exactly what the operation will act on: show it to a person before
// answering. It is bound to this connection, the target execution and the
// stop context; reconnecting or a change of stop needs a new one.
func (c *Client) IssueConfirmation(ctx context.Context, operation string) (*protocol.Confirmation, error) {
	cmd, err := c.command(ctx, protocol.CmdIssueConfirmation, false)
	if err != nil {
		return nil, err
	}
	cmd.Operation = operation
	return c.confirmation(ctx, cmd)
}

// AnswerConfirmation answers confirmation id with AnswerConfirm or
// AnswerDecline.
func (c *Client) AnswerConfirmation(ctx context.Context, id, answer string) (*protocol.Confirmation, error) {
	return c.confirmation(ctx, protocol.Command{Type: protocol.CmdAnswerConfirmation,
		Request: newRequestID(), Confirmation: id, Answer: answer})
}

// Confirm issues a confirmation for operation and answers it confirm at
// once, returning its id. Use it only where consent was already given
// outside the protocol; otherwise show IssueConfirmation's Intent first.
func (c *Client) Confirm(ctx context.Context, operation string) (string, error) {
	issued, err := c.IssueConfirmation(ctx, operation)
	if err != nil {
		return "", err
	}
	answered, err := c.AnswerConfirmation(ctx, issued.ID, AnswerConfirm)
	if err != nil {
		return "", err
	}
	if answered.State != protocol.ConfirmationAnswered {
		return "", fmt.Errorf("confirm %s: confirmation %s is %s, not answered", operation, issued.ID, answered.State)
	}
	return issued.ID, nil
}

func (c *Client) confirmation(ctx context.Context, cmd protocol.Command) (*protocol.Confirmation, error) {
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Type, err)
	}
	return r.Confirmation, nil
}

// confirmed returns id, or a fresh confirmed one for operation when id is "".
func (c *Client) confirmed(ctx context.Context, operation, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	return c.Confirm(ctx, operation)
}

// command starts a command addressed with the connection's state: a fresh
// request id, the generation, and the execution when withExecution. Before
// the first binding it waits for it (under ctx) when the welcome said the
// controller is starting, since that binding is on its way; otherwise it
// refuses ErrNotBound at once.
func (c *Client) command(ctx context.Context, typ string, withExecution bool) (protocol.Command, error) {
	s := c.State()
	if !s.Bound && c.welcome.Starting {
		if _, err := c.WaitBound(ctx); err != nil {
			return protocol.Command{}, fmt.Errorf("%s: %w", typ, err)
		}
		s = c.State()
	}
	if !s.Bound {
		return protocol.Command{}, fmt.Errorf("%s: %w", typ, ErrNotBound)
	}
	gen := s.Generation
	cmd := protocol.Command{Type: typ, Request: newRequestID(), Generation: &gen}
	if withExecution {
		cmd.Execution = s.Execution
	}
	return cmd, nil
}
