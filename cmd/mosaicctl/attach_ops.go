package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// act does what a key asked for. Requests go to the current connection;
// their outcomes come back as notices.
func (a *attacher) act(act terminal.Action, text string) {
	switch act {
	case terminal.ActQuit:
		a.quit = true
	case terminal.ActReconnect:
		a.reconnect()
	case terminal.ActOlder:
		a.pageBack()
	case terminal.ActSend:
		a.prompt(text)
	case terminal.ActTakeControl:
		a.takeover()
	case terminal.ActInterrupt:
		a.request("interrupt", func(ctx context.Context, c *client.Client) (string, error) {
			r, err := c.Interrupt(ctx)
			if err != nil {
				return "", err
			}
			return "interrupt: " + receiptText(r), nil
		})
	case terminal.ActForceStop:
		a.confirmation(protocol.CmdForceStop)
	case terminal.ActRecover:
		a.confirmation(protocol.CmdRecover)
	case terminal.ActConfirm:
		a.answer(true)
	case terminal.ActDecline:
		a.answer(false)
	case terminal.ActApprove:
		a.approve(text)
	case terminal.ActResumeQueue:
		a.request("resume the queue", func(ctx context.Context, c *client.Client) (string, error) {
			q, err := c.ResumeQueue(ctx)
			if err != nil {
				return "", err
			}
			if q.NotPaused {
				return "the queue was not paused: nothing to resume", nil
			}
			return "queue resumed", nil
		})
	case terminal.ActCancelQueued:
		if chip, ok := a.scr.Chips.Selected(); ok {
			a.request("cancel "+chip.ID, func(ctx context.Context, c *client.Client) (string, error) {
				if _, err := c.CancelQueued(ctx, chip.ID, chip.Revision); err != nil {
					return "", err
				}
				return "cancelled " + chip.ID, nil
			})
		}
	case terminal.ActEditQueued:
		if chip, ok := a.scr.Chips.Editing(); ok {
			a.scr.EditDone()
			a.request("edit "+chip.ID, func(ctx context.Context, c *client.Client) (string, error) {
				if _, err := c.EditQueued(ctx, chip.ID, chip.Revision, text); err != nil {
					return "", err
				}
				return "edited " + chip.ID, nil
			})
		}
	}
}

// chips shows the queue's waiting items under the composer.
func (a *attacher) chips() {
	q := a.c.State().Queue
	if q == nil || !a.connected { // a queue read before a disconnect is stale, and nothing can act on it
		a.scr.Chips.Set(nil, "")
		return
	}
	var items []terminal.Chip
	for _, it := range q.Items {
		if client.Waiting(it.State) {
			items = append(items, terminal.Chip{ID: it.ID, Revision: it.Revision, State: it.State, Text: it.Text})
		}
	}
	paused := ""
	if q.Paused {
		paused = q.PauseReason
	}
	a.scr.Chips.Set(items, paused)
}

// request runs one command on the current connection and shows its
// outcome, or says there is no connection to run it on.
func (a *attacher) request(name string, f func(context.Context, *client.Client) (string, error)) {
	c := a.online(name)
	if c == nil {
		return
	}
	a.scr.SetNotice(name + "…")
	a.async(func(ctx context.Context) func() {
		msg, err := f(ctx, c)
		if err != nil {
			return a.noticeOf(name, err)
		}
		return func() { a.scr.SetNotice(msg) }
	})
}

// takeover asks for control. While admission is closed (fenced) an
// ordinary takeover is refused and the controller points to recovery
// control: the terminal then asks for that confirmation instead, so the
// operator of a conversation whose controller is gone can still force stop
// and recover.
func (a *attacher) takeover() {
	c := a.online("takeover")
	if c == nil {
		return
	}
	a.scr.SetNotice("takeover…")
	a.async(func(ctx context.Context) func() {
		r, err := c.Takeover(ctx)
		if protocol.CodeOf(err) == protocol.CodeFenced {
			return func() { a.confirmation(protocol.CmdAcquireRecoveryControl) }
		}
		if err != nil {
			return a.noticeOf("takeover", err)
		}
		return func() { a.scr.SetNotice("took control at generation " + strconv.FormatInt(r.Generation, 10)) }
	})
}

// online returns the connection a request goes to, or nil after saying
// there is none.
func (a *attacher) online(name string) *client.Client {
	if !a.connected {
		a.scr.SetNotice(name + ": not connected; Ctrl-O reconnects")
		return nil
	}
	return a.c
}

// prompt queues the composed text: it returns once the controller holds
// it durably, so the composer never waits for a turn. The composer
// already cleared it; its outcome is shown, and a lost one is never
// resent. The item's later states show in the queue line.
func (a *attacher) prompt(text string) {
	if !a.connected {
		// The composer sent it as the controller of a connection that has
		// just ended: nothing left this process.
		a.scr.Settle(terminal.Outcome{Kind: terminal.Refused, Code: "not connected (the text was not sent); Ctrl-O reconnects"})
		return
	}
	c := a.c
	a.prompts++
	a.async(func(ctx context.Context) func() {
		r, err := c.Enqueue(ctx, text)
		if protocol.CodeOf(err) == protocol.CodeNoEngine {
			err = withHint(err, "prompt", a.conv) // how to add one, on the notice line
		}
		o := outcomeOf(r, err)
		return func() {
			a.prompts--
			a.scr.Settle(o)
		}
	})
}

// outcomeOf maps a prompt's reply to the composer's outcome.
func outcomeOf(r *protocol.Receipt, err error) terminal.Outcome {
	var lost *client.OutcomeError
	var ref *protocol.Refusal
	switch {
	case errors.As(err, &lost):
		return terminal.Outcome{Kind: terminal.Lost}
	case errors.As(err, &ref):
		return terminal.Outcome{Kind: terminal.Refused, Code: ref.Code + ": " + ref.Message}
	case err != nil:
		return terminal.Outcome{Kind: terminal.Refused, Code: err.Error()}
	case r.State == protocol.ReceiptAcknowledged || client.Waiting(r.State):
		return terminal.Outcome{Kind: terminal.Admitted}
	case r.State == protocol.ReceiptFailed:
		return terminal.Outcome{Kind: terminal.Refused, Code: "the engine refused it: " + r.Evidence}
	}
	return terminal.Outcome{Kind: terminal.Lost} // delivery-unknown
}

// receiptText is a receipt in a few words.
func receiptText(r *protocol.Receipt) string {
	s := r.State
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	if r.Stop != "" {
		s += ", stop " + r.Stop
	}
	return s
}

// noticeOf shows a failed request: its refusal code and message, or
// outcome unknown when the reply was lost.
func (a *attacher) noticeOf(name string, err error) func() {
	var lost *client.OutcomeError
	var ref *protocol.Refusal
	n := name + ": " + err.Error()
	switch {
	case errors.As(err, &lost):
		n = name + ": " + terminal.OutcomeUnknown
	case errors.As(err, &ref):
		n = name + " refused: " + ref.Code + ": " + ref.Message
	}
	return func() { a.scr.SetNotice(n) }
}

// rereadNotice is shown from a Ctrl-O on a live connection until the page
// it re-reads is drawn, and rereadDone from then on.
const (
	rereadNotice = "re-reading the page"
	rereadDone   = "page re-read"
)

// reconnect re-reads the page, reconnecting first when the connection
// ended. The new connection is an observer: control is never retaken
// behind the operator's back.
func (a *attacher) reconnect() {
	if a.connected {
		a.use(a.c) // a fresh observe on the same connection
		a.scr.SetNotice(rereadNotice)
		return
	}
	old := a.c
	a.scr.SetNotice("reconnecting…")
	a.async(func(ctx context.Context) func() {
		c, err := old.Reconnect(ctx)
		if err != nil {
			return a.noticeOf("reconnect", err)
		}
		return func() {
			a.use(c)
			a.scr.SetNotice("reconnected as an observer")
		}
	})
}

// confirmation asks the controller for a confirmation of op and opens a
// dialog with exactly what it will act on.
func (a *attacher) confirmation(op string) {
	c := a.online(op)
	if c == nil {
		return
	}
	a.scr.SetNotice(op + ": asking for a confirmation…")
	a.async(func(ctx context.Context) func() {
		cf, err := c.IssueConfirmation(ctx, op)
		if err != nil {
			return a.noticeOf(op, err)
		}
		return func() {
			if c != a.c || !a.connected {
				return // issued to a connection that is gone
			}
			a.pending, a.pendingOn = cf, c
			a.scr.OpenDialog(dialogFor(cf, c.State()))
			a.scr.SetNotice("")
		}
	})
}

// dialogFor lists what the confirmation covers: the conversation, the
// execution and generation it is bound to, the engine's scope and cohort,
// the stop it follows, and the controller's own words (its intent).
func dialogFor(cf *protocol.Confirmation, st client.State) terminal.Dialog {
	b := st.Binding
	if b == nil {
		b = &protocol.Binding{}
	}
	fact := func(fs [][2]string, label, v string) [][2]string {
		if v == "" {
			return fs
		}
		return append(fs, [2]string{label, v})
	}
	var fs [][2]string
	fs = fact(fs, "conversation", st.Conversation)
	fs = fact(fs, "execution", cf.Execution)
	fs = fact(fs, "generation", strconv.FormatInt(cf.Generation, 10))
	d := terminal.Dialog{}
	switch cf.Operation {
	case protocol.CmdForceStop:
		d.Title = "force stop"
		fs = fact(fs, "scope", b.Scope)
		fs = fact(fs, "cohort", b.Cohort)
		fs = fact(fs, "unconfined", b.Unconfined)
		fs = fact(fs, "engine", b.Engine+" ("+b.EngineState+")")
		d.Question = "force stop this cohort? y confirms; n, Enter or Esc cancels"
	case protocol.CmdAcquireRecoveryControl:
		d.Title = "take recovery control"
		fs = fact(fs, "binding", b.State)
		fs = fact(fs, "admission", b.Admission+" ("+b.AdmissionReason+")")
		fs = fact(fs, "controller", b.Controller)
		if b.Controller != "" && !b.ControllerConnected {
			fs = fact(fs, "controller connected", "no")
		}
		d.Question = "take control while admission stays closed? y confirms; n, Enter or Esc cancels"
	default:
		d.Title = "recover"
		// No leaf fact: the intent names the leaf the file is on, which the
		// binding's may lag by a poll interval.
		fs = fact(fs, "session", b.SessionID)
		d.Question = "recover and launch a new execution? y confirms; n, Enter or Esc cancels"
	}
	fs = fact(fs, "stop", cf.StopContext)
	fs = fact(fs, "intent", cf.Intent)
	fs = fact(fs, "expires", cf.Expires)
	d.Facts = fs
	return d
}

// answer answers the open dialog's confirmation. Yes runs the operation:
// a force stop, or a recover followed by the launch it allows.
func (a *attacher) answer(yes bool) {
	cf, c := a.pending, a.pendingOn
	a.pending, a.pendingOn = nil, nil
	if cf == nil {
		return
	}
	if !yes {
		a.scr.SetNotice(cf.Operation + " cancelled")
		a.async(func(ctx context.Context) func() {
			c.AnswerConfirmation(ctx, cf.ID, client.AnswerDecline)
			return nil
		})
		return
	}
	a.scr.SetNotice(cf.Operation + "…")
	a.async(func(ctx context.Context) func() {
		if _, err := c.AnswerConfirmation(ctx, cf.ID, client.AnswerConfirm); err != nil {
			return a.noticeOf(cf.Operation, err)
		}
		if cf.Operation == protocol.CmdAcquireRecoveryControl {
			r, err := c.AcquireRecoveryControl(ctx, cf.ID)
			if err != nil {
				return a.noticeOf("recovery control", err)
			}
			n := "took recovery control at generation " + strconv.FormatInt(r.Generation, 10)
			return func() { a.scr.SetNotice(n) }
		}
		if cf.Operation == protocol.CmdForceStop {
			r, err := c.ForceStop(ctx, cf.ID)
			if err != nil {
				return a.noticeOf("force stop", err)
			}
			n := "force stop: " + receiptText(r)
			return func() { a.scr.SetNotice(n) }
		}
		el, err := c.Recover(ctx, cf.ID)
		if err != nil {
			return a.noticeOf("recover", err)
		}
		r, err := c.Launch(ctx, el.ID)
		if err != nil {
			return a.noticeOf("launch", err)
		}
		n := fmt.Sprintf("recovered after stop %s: launch %s", el.Stop, receiptText(r))
		return func() { a.scr.SetNotice(n) }
	})
}
