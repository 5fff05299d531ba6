package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// engineConn is what the controller drives of a running engine: Pi's
// *pi.Conn as it is, and Claude Code's *claude.Conn through
// claudeConn. The Pi names stay (State, Answer, dialogs) so that Pi's
// code paths are unchanged; docs/engines.md says what moving Pi behind
// engine.Driver still takes. The two Get*Within calls are Pi's load and
// re-attach checks; a Claude engine refuses them (its K8 check reads the
// transcript, claudeLoadCheck).
type engineConn interface {
	Events() <-chan protocol.Event
	Done() <-chan struct{}
	Close() error
	State() pi.TurnState
	Prompt(ctx context.Context, text string) (engine.Dispatch, error)
	Interrupt(ctx context.Context, stopRef string) (engine.TurnProof, error)
	Answer(id, choice string) error
	Cancel() ([]string, error)
	Forget(id string)
	OpenDialogs() int
	DialogOpen(id string) bool
	GetStateWithin(ctx context.Context, timeout time.Duration) (pi.State, error)
	GetEntriesWithin(ctx context.Context, since string, timeout time.Duration) (pi.Entries, error)
}

var (
	_ engineConn = (*pi.Conn)(nil)
	_ engineConn = (*claudeConn)(nil)
)

// errNotPi is a Pi-only command asked of another engine.
var errNotPi = errors.New("not a Pi engine")

// claudeConn drives Claude Code through the engine seam's Driver: its
// permission requests are the decisions the approvals project (allow-once
// and deny only, as a select of those two labels), answered with Decide.
type claudeConn struct {
	*claude.Conn
	answerTimeout time.Duration
	events        chan protocol.Event
	mu            sync.Mutex
	// forgotten are decisions the controller closed without an answer.
	forgotten map[string]bool
	// settles counts the run-settled events handed to the pump: Pi's
	// TurnState.Settles, which the queue compares with what the pump
	// published before it dispatches the next item.
	settles int
}

func newClaudeConn(c *claude.Conn, timeout time.Duration) *claudeConn {
	cc := &claudeConn{Conn: c, answerTimeout: timeout, forgotten: map[string]bool{}, events: make(chan protocol.Event)}
	go cc.forward()
	return cc
}

// forward hands the engine's events on, counting each run-settled before
// the pump can see it.
func (c *claudeConn) forward() {
	defer close(c.events)
	for ev := range c.Conn.Events() {
		if ev.Kind == protocol.EventRunSettled {
			c.mu.Lock()
			c.settles++
			c.mu.Unlock()
		}
		c.events <- ev
	}
}

// Events are the engine's events, in wire order.
func (c *claudeConn) Events() <-chan protocol.Event { return c.events }

// State maps the seam's TurnSummary onto the fields the controller reads
// of Pi's TurnState; Claude has no native queue (the controller's queue
// is the only one) and no run counters.
func (c *claudeConn) State() pi.TurnState {
	t := c.Turn()
	c.mu.Lock()
	defer c.mu.Unlock()
	return pi.TurnState{Fenced: t.Fenced, Running: t.Running, Uncertain: t.Uncertain, Reasons: t.Reasons,
		Slot: t.Slot, OpenTools: t.OpenTools, Settles: c.settles}
}

// Answer is Decide: a choice not offered is ErrAnswerShape, a decision
// the engine withdrew or never raised ErrDialogClosed.
func (c *claudeConn) Answer(id, choice string) error {
	if !c.DialogOpen(id) {
		return fmt.Errorf("answer %s: %w", id, pi.ErrDialogClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.answerTimeout)
	defer cancel()
	err := c.Decide(ctx, id, choice)
	switch protocol.CodeOf(err) {
	case protocol.CodeUnsupported:
		return fmt.Errorf("answer %s %q: %w", id, choice, pi.ErrAnswerShape)
	case protocol.CodeNoTurn, protocol.CodeConflictingRequest:
		return fmt.Errorf("answer %s: %v: %w", id, err, pi.ErrDialogClosed)
	}
	return err
}

// Cancel cancels nothing: Claude has no native cancel of a permission
// request; its interrupt withdraws them (control_cancel_request) and a
// force stop ends the CLI. The decisions stay for the stop to report.
func (c *claudeConn) Cancel() ([]string, error) { return nil, nil }

// Forget closes a decision without answering it.
func (c *claudeConn) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgotten[id] = true
}

// OpenDialogs counts the pending decisions not forgotten.
func (c *claudeConn) OpenDialogs() int {
	n := 0
	for _, d := range c.Decisions() {
		if c.open(d) {
			n++
		}
	}
	return n
}

// DialogOpen reports whether decision id is pending and not forgotten.
func (c *claudeConn) DialogOpen(id string) bool {
	for _, d := range c.Decisions() {
		if d.ID == id {
			return c.open(d)
		}
	}
	return false
}

func (c *claudeConn) open(d engine.NativeDecision) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return d.State == engine.DecisionPending && !c.forgotten[d.ID]
}

func (c *claudeConn) GetStateWithin(context.Context, time.Duration) (pi.State, error) {
	return pi.State{}, fmt.Errorf("get_state: %w", errNotPi)
}

func (c *claudeConn) GetEntriesWithin(context.Context, string, time.Duration) (pi.Entries, error) {
	return pi.Entries{}, fmt.Errorf("get_entries: %w", errNotPi)
}

// decisionUI is the approval form of a permission request: a select of
// exactly the choices the adapter offers (allow-once and deny, or deny
// alone for a request framing cut), titled with the tool and what it
// asks; the input is untrusted render data and is shown, never run here.
func decisionUI(d engine.NativeDecision, inRun bool) *protocol.NativeUI {
	title := d.ToolName
	if d.Title != "" {
		title += ": " + d.Title
	}
	msg := string(d.Input)
	if d.Message != "" {
		msg = d.Message + "\n" + msg
	}
	return &protocol.NativeUI{ID: d.ID, Method: protocol.FormSelect, Title: title, Message: msg,
		Options: append([]string(nil), d.Choices...), InRun: inRun}
}

// watchDecisions projects Claude's permission requests as approvals: a
// new pending request opens one, a request the CLI withdrew
// (control_cancel_request) resolves it natively. It ends when the
// engine's output ends.
func (c *Controller) watchDecisions(x *execution, cc *claudeConn) {
	seen := map[string]string{}
	for {
		ch := cc.Changed()
		for _, d := range cc.Decisions() {
			was, ok := seen[d.ID]
			seen[d.ID] = d.State
			switch {
			case !ok && d.State == engine.DecisionPending:
				c.dialogOpened(x, decisionUI(d, cc.Turn().Running))
			case ok && was == engine.DecisionPending && d.State == engine.DecisionCancelled:
				c.decisionWithdrawn(x, d)
			}
		}
		select {
		case <-ch:
		case <-cc.Done():
			return
		}
	}
}

// decisionWithdrawn settles the approval of a request the CLI withdrew:
// its own cancel is the native evidence; nobody chose.
func (c *Controller) decisionWithdrawn(x *execution, d engine.NativeDecision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := x.approvals.byDecision(d.ID)
	if a == nil || !live(a.rec.State) {
		return
	}
	a.rec.Evidence = "control_cancel_request: the engine withdrew the permission request"
	c.changeLocked(a, protocol.ApprovalResolvedNatively, "the engine withdrew the request (an interrupt or the turn's end)")
}
