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

// engineConn is what the controller drives of a running engine: the
// seam's Driver, whatever the engine kind (Pi's *pi.Conn, Claude Code's
// *claude.Conn), as its Engine's Open returned it. What only one engine
// can do is asked for with a type assertion on the Driver
// (sessionProbe, dialogCanceller, dialogForgetter below; initializer,
// claudeResyncer, piResyncer and promptLedger in engine.go), so no
// engine carries methods it must refuse.
// Alternative weighed: one wider interface with Pi's load checks and
// dialog calls, refused by the others (what this replaced: every new
// engine had to learn Pi's names to say no).
type engineConn = engine.Driver

var (
	_ engineConn      = (*pi.Conn)(nil)
	_ engineConn      = (*claude.Conn)(nil)
	_ sessionProbe    = (*pi.Conn)(nil)
	_ dialogCanceller = (*pi.Conn)(nil)
	_ dialogForgetter = (*pi.Conn)(nil)
)

// sessionProbe is Pi's get_state and get_entries: the load check (K8),
// the re-attach check after a restart and the foreign-writer watch ask the
// engine what it holds of its session file. Claude Code has no such
// command; its K8 check reads the transcript (claudeLoadCheck).
type sessionProbe interface {
	GetStateWithin(ctx context.Context, timeout time.Duration) (pi.State, error)
	GetEntriesWithin(ctx context.Context, since string, timeout time.Duration) (pi.Entries, error)
}

// errNotPi is a Pi-only command asked of another engine.
var errNotPi = errors.New("not a Pi engine")

// probe returns x's engine as a sessionProbe, or errNotPi naming what
// was asked.
func probe(x *execution, what string) (sessionProbe, error) {
	if p, ok := x.conn.(sessionProbe); ok {
		return p, nil
	}
	return nil, fmt.Errorf("%s: %w", what, errNotPi)
}

// dialogCanceller is an engine that can cancel its open dialogs natively
// (Pi's extension_ui_response {"cancelled":true}); a force stop does so
// before it signals the cohort. Claude has no native cancel of a
// permission request: its interrupt withdraws them and a force stop ends
// the CLI.
type dialogCanceller interface {
	Cancel() ([]string, error)
}

// dialogForgetter is an engine whose dialogs time out natively (Pi):
// Forget drops one without writing, freeing its place.
type dialogForgetter interface {
	Forget(id string)
}

// forgotten is the set of decisions the controller closed without an
// answer (a native timeout passed, or the engine closed the approval);
// the engine may still list them as pending. Its own lock: it is read
// with and without Controller.mu.
type forgotten struct {
	mu  sync.Mutex
	ids map[string]bool
}

// forget closes decision id without answering it.
func (x *execution) forget(id string) {
	if f, ok := x.conn.(dialogForgetter); ok {
		f.Forget(id)
		return
	}
	x.forgot.mu.Lock()
	defer x.forgot.mu.Unlock()
	if x.forgot.ids == nil {
		x.forgot.ids = map[string]bool{}
	}
	x.forgot.ids[id] = true
}

// open reports whether decision d still waits for an answer here.
func (x *execution) open(d engine.NativeDecision) bool {
	x.forgot.mu.Lock()
	defer x.forgot.mu.Unlock()
	return d.State == engine.DecisionPending && !x.forgot.ids[d.ID]
}

// openDecisions counts the pending decisions not forgotten.
func (x *execution) openDecisions() int {
	n := 0
	for _, d := range x.conn.Decisions() {
		if x.open(d) {
			n++
		}
	}
	return n
}

// decisionOpen reports whether decision id is pending and not forgotten.
func (x *execution) decisionOpen(id string) bool {
	for _, d := range x.conn.Decisions() {
		if d.ID == id {
			return x.open(d)
		}
	}
	return false
}

// answer sends choice for decision id with Decide: a choice not offered
// is engine.ErrAnswerShape, a decision the engine no longer holds (never
// raised, answered, withdrawn or forgotten) engine.ErrDialogClosed;
// nothing is written for either.
func (x *execution) answer(id, choice string, timeout time.Duration) error {
	if !x.decisionOpen(id) {
		return fmt.Errorf("answer %s: %w", id, engine.ErrDialogClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := x.conn.Decide(ctx, id, choice)
	switch protocol.CodeOf(err) {
	case protocol.CodeUnsupported:
		return fmt.Errorf("answer %s %q: %v: %w", id, choice, err, engine.ErrAnswerShape)
	case protocol.CodeNoTurn, protocol.CodeConflictingRequest:
		return fmt.Errorf("answer %s: %v: %w", id, err, engine.ErrDialogClosed)
	}
	return err
}

// cancelDecisions cancels the open dialogs natively where the engine can
// and returns their ids.
func (x *execution) cancelDecisions() []string {
	if c, ok := x.conn.(dialogCanceller); ok {
		ids, _ := c.Cancel()
		return ids
	}
	return nil
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

// watchDecisions projects an engine's permission requests as approvals
// from Decisions: a new pending request opens one, a request the engine
// withdrew (Claude's control_cancel_request) resolves it natively. It
// ends when the engine's output ends. Pi's dialogs are projected from
// their native-ui events instead (pump.go), which carry the whole request
// (form, timeout, whether a run raised it) in wire order.
func (c *Controller) watchDecisions(x *execution, d engine.Driver) {
	seen := map[string]string{}
	for {
		ch := d.Changed()
		decs := d.Decisions()
		for _, dec := range decs {
			was, ok := seen[dec.ID]
			seen[dec.ID] = dec.State
			switch {
			case !ok && dec.State == engine.DecisionPending:
				c.dialogOpened(x, decisionUI(dec, d.Turn().Running))
			case ok && was == engine.DecisionPending && dec.State == engine.DecisionCancelled:
				c.decisionWithdrawn(x, dec)
			}
		}
		if len(seen) > len(decs) { // the driver forgot settled ones: so do we
			kept := make(map[string]bool, len(decs))
			for _, dec := range decs {
				kept[dec.ID] = true
			}
			for id, was := range seen {
				if kept[id] {
					continue
				}
				delete(seen, id)
				if was == engine.DecisionPending {
					// Forgotten only once settled, and not through us
					// (an answer resolves its approval first): withdrawn.
					c.decisionWithdrawn(x, engine.NativeDecision{ID: id})
				}
			}
		}
		select {
		case <-ch:
		case <-d.Done():
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
	c.nativeChangeLocked(a, protocol.ApprovalResolvedNatively, "the engine withdrew the request (an interrupt or the turn's end)")
}

// commandTimeout bounds one engine command the controller sends itself.
func (c *Controller) commandTimeout() time.Duration {
	if c.cfg.CommandTimeout > 0 {
		return c.cfg.CommandTimeout
	}
	return engine.DefaultCommandTimeout
}
