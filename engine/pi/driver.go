package pi

import (
	"cmp"
	"context"
	"slices"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

var _ engine.Driver = (*Conn)(nil)

// Turn is the tracker in the seam's terms; Waiting says a dialog is open.
// State has the Pi-only counters (runs, retries, the native queue).
func (c *Conn) Turn() engine.TurnSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.tr.snapshot()
	return engine.TurnSummary{Fenced: st.Fenced, Running: st.Running, Uncertain: st.Uncertain, Reasons: st.Reasons,
		Slot: st.Slot, OpenTools: st.OpenTools, Settles: st.Settles, Waiting: len(c.dialogs) > 0}
}

// Decisions lists the dialogs open on the engine, in arrival order: Kind
// is the form (confirm, select, input, editor), Choices the exact native
// choices Decide accepts ("true" and "false" for a confirm, the labels
// for a select, none for input and editor, which are never answered).
// A dialog leaves the list when it is answered, cancelled or forgotten:
// Pi reports nothing of a dialog once it is resolved, so there is no
// resolved state to show.
func (c *Conn) Decisions() []engine.NativeDecision {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]engine.NativeDecision, 0, len(c.dialogs))
	for id, d := range c.dialogs {
		choices := []string{}
		if d.method == protocol.FormConfirm || d.method == protocol.FormSelect {
			choices = slices.Clone(d.options)
		}
		out = append(out, engine.NativeDecision{ID: id, Kind: d.method, Title: d.title, Message: d.message,
			Choices: choices, State: engine.DecisionPending})
	}
	slices.SortFunc(out, func(a, b engine.NativeDecision) int { return cmp.Compare(c.dialogs[a.ID].seq, c.dialogs[b.ID].seq) })
	return out
}

// Decide is Answer: the write is one short line, so ctx bounds nothing
// Pi could hold up.
func (c *Conn) Decide(_ context.Context, id, choice string) error { return c.Answer(id, choice) }

// Changed is closed (and replaced) whenever a dialog opens or closes.
func (c *Conn) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// wake tells Changed's waiters; c.mu is held.
func (c *Conn) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
}
