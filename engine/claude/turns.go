package claude

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// tracker follows turns and the dispatch slot from the frames in wire
// order. A turn is visible from the slot item's command_lifecycle
// started (or any system/init, status or stream frame) to its result.
type tracker struct {
	slot      *engine.Dispatch
	last      *engine.Dispatch
	fenced    bool
	stopping  bool
	running   bool
	runs      int
	results   int
	settles   int // run-settled events queued on Events
	lastTerm  string
	lastError bool
	uncertain bool
	reasons   []string
	open      map[string]engine.Effect
	acked     chan struct{} // closed when the slot item is queued natively
	settle    chan struct{} // closed (and replaced) at every result
	closed    bool
}

func newTracker() *tracker {
	return &tracker{open: make(map[string]engine.Effect), settle: make(chan struct{})}
}

func (t *tracker) markUncertain(reason string) {
	t.uncertain = true
	if len(t.reasons) < 16 {
		t.reasons = append(t.reasons, reason)
	}
}

// claim takes the slot for a prompt with command uuid id.
func (t *tracker) claim(id, text string) error {
	switch {
	case t.closed:
		return protocol.Refuse(protocol.CodeEngineGone, "the engine is gone")
	case t.fenced:
		return protocol.Refuse(protocol.CodeFenced, "an interrupt or stop is running")
	case t.running || t.slot != nil:
		return protocol.Refuse(protocol.CodeBusy, "a turn is running; the controller's queue holds the prompt")
	}
	t.slot = &engine.Dispatch{RequestID: id, Text: text, Receipt: engine.ReceiptPending}
	t.acked = make(chan struct{})
	return nil
}

func (t *tracker) release() {
	if t.slot != nil {
		d := *t.slot
		t.last = &d
	}
	t.slot = nil
}

// notTurn are the system frames the CLI writes outside a turn too: the
// CLI answers an initialize on a session it holds (a controller's
// re-attach) with background_tasks_changed after the control_response,
// and taken for a turn's start that left the binding busy for good (no
// result follows), every prompt queued behind it.
var notTurn = map[string]bool{"session_state_changed": true, "background_tasks_changed": true}

func (t *tracker) observe(f *frame) {
	switch f.Type {
	case "command_lifecycle":
		t.lifecycle(f)
	case "system", "stream_event", "assistant":
		if f.Type == "system" && notTurn[f.Subtype] {
			return
		}
		if !t.running {
			t.running = true
			t.runs++
		}
	case "user":
		for _, b := range hclaude.Blocks(messageContent(f)) {
			if b.Type == "tool_result" {
				delete(t.open, b.ToolUseID)
			}
		}
	}
	if f.Type == "assistant" {
		for _, b := range hclaude.Blocks(messageContent(f)) {
			if b.Type == "tool_use" {
				if !engine.StartEffect(t.open, b.ID, b.Name) {
					t.markUncertain(fmt.Sprintf("the engine started more tools than the %d tracked in flight, or one with an id or name too long to keep", engine.MaxOpenEffects))
				}
			}
		}
	}
}

func (t *tracker) lifecycle(f *frame) {
	s := t.slot
	if s == nil || f.CommandUUID != s.RequestID {
		return
	}
	switch f.State {
	case "queued":
		if s.Receipt == engine.ReceiptPending {
			s.Receipt = protocol.ReceiptAcknowledged
			close(t.acked)
		}
	case "started":
		s.Started = true
		if !t.running {
			t.running = true
			t.runs++
		}
	case "cancelled":
		if !s.Started {
			s.Unconsumed = true
		}
		t.release()
	case "completed":
		t.release()
	}
}

// settled records a result: the turn ended and the CLI will not go on by
// itself (no queue: the controller never sends during a turn).
func (t *tracker) settled(f *frame) {
	t.running = false
	t.results++
	t.lastTerm, t.lastError = f.TerminalReason, f.IsError
	if s := t.slot; s != nil && (s.Started || s.Receipt == protocol.ReceiptAcknowledged) {
		t.release()
	}
	close(t.settle)
	t.settle = make(chan struct{})
}

// gone records the end of the output: nothing more will be acknowledged.
func (t *tracker) gone() {
	t.closed = true
	t.running = false
	close(t.settle)
	t.settle = make(chan struct{})
}

func (t *tracker) effects() []engine.Effect {
	out := make([]engine.Effect, 0, len(t.open))
	for _, e := range t.open {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CallID < out[j].CallID })
	return out
}

// Turn returns the tracker in engine-neutral terms.
func (c *Conn) Turn() engine.TurnSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tr
	s := engine.TurnSummary{
		Fenced: t.fenced, Running: t.running, Uncertain: t.uncertain,
		Reasons: append([]string(nil), t.reasons...), OpenTools: t.effects(),
		Settles: t.settles,
	}
	if t.slot != nil {
		d := *t.slot
		s.Slot = &d
	}
	for _, d := range c.dec {
		if d.State == engine.DecisionPending {
			s.Waiting = true
		}
	}
	return s
}

// messageContent is the raw content of an assistant or user frame.
func messageContent(f *frame) []byte {
	var m apiMessage
	if len(f.Message) == 0 || json.Unmarshal(f.Message, &m) != nil {
		return nil
	}
	return m.Content
}
