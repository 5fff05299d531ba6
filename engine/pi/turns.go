package pi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TurnState is a snapshot of the tracker for the controller.
type TurnState struct {
	Fenced    bool             `json:"fenced"`
	Running   bool             `json:"running"`
	Uncertain bool             `json:"uncertain"`
	Reasons   []string         `json:"reasons,omitempty"`
	Slot      *engine.Dispatch `json:"slot,omitempty"`
	// Last is the item that held the slot most recently, after release.
	Last *engine.Dispatch `json:"last,omitempty"`
	// Runs counts agent_start; Ends counts agent_end since the last settle.
	Runs      int        `json:"runs"`
	Ends      int        `json:"ends"`
	WillRetry bool       `json:"willRetry"`
	Settles   int        `json:"settles"`
	Queue     QueueState `json:"queue"`
	// ExternalUser counts user messages that were not the slot's item.
	ExternalUser int             `json:"externalUser"`
	OpenTools    []engine.Effect `json:"openTools,omitempty"`
}

// QueueState is Pi's last reported native queue (queue_update).
type QueueState struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

// tracker follows runs and the dispatch slot from the native stream in
// wire order. It does no I/O; Conn feeds it under its lock.
type tracker struct {
	slot      *engine.Dispatch
	last      *engine.Dispatch
	fenced    bool
	stopping  bool
	running   bool
	runs      int
	ends      int
	willRetry bool
	settles   int
	queue     QueueState
	external  int
	open      map[string]engine.Effect
	uncertain bool
	reasons   []string
}

// maxReasons bounds the reasons a tracker keeps for being uncertain.
const maxReasons = 16

func newTracker() *tracker { return &tracker{open: make(map[string]engine.Effect)} }

// claim takes the dispatch slot for a prompt or refuses. A run visible on
// the stream (agent_start until agent_settled, retries included) is busy:
// Mosaic never queues into Pi (no streamingBehavior).
func (t *tracker) claim(id, text string) error {
	switch {
	case t.fenced || t.uncertain:
		return protocol.Refuse(protocol.CodeFenced, "admission to the engine is closed")
	case t.slot != nil:
		return protocol.Refuse(protocol.CodeBusy, "a prompt already holds the dispatch slot")
	case t.running:
		return protocol.Refuse(protocol.CodeBusy, "the engine is running")
	}
	t.slot = &engine.Dispatch{RequestID: id, Text: text, Receipt: engine.ReceiptPending}
	return nil
}

// respond applies a prompt response. Pi answers once preflight passes,
// normally before agent_start (rpc-mode.js:298-318).
func (t *tracker) respond(n *native) {
	s := t.slot
	if s == nil || n.Command != "prompt" || n.ID != s.RequestID {
		return
	}
	if n.Success != nil && *n.Success {
		if s.Receipt == engine.ReceiptPending || s.Receipt == protocol.ReceiptDeliveryUnknown {
			s.Receipt = protocol.ReceiptAcknowledged
		}
		return
	}
	s.Receipt, s.Evidence = protocol.ReceiptFailed, n.Error
	t.release()
}

// lost marks the slot's delivery unknown (write failure or timeout). The
// slot stays held: Pi may still have the text.
func (t *tracker) lost(id string) {
	if t.slot != nil && t.slot.RequestID == id && t.slot.Receipt == engine.ReceiptPending {
		t.slot.Receipt = protocol.ReceiptDeliveryUnknown
	}
}

func (t *tracker) release() {
	if t.slot != nil {
		t.last, t.slot = t.slot, nil
	}
}

// markUncertain records that the binding lost information.
func (t *tracker) markUncertain(reason string) {
	t.uncertain = true
	if len(t.reasons) < maxReasons { // the engine causes them at will
		t.reasons = append(t.reasons, reason)
	}
}

// observe applies one native event.
func (t *tracker) observe(n *native) {
	switch n.Type {
	case "agent_start":
		t.running = true
		t.runs++
	case "agent_end":
		t.ends++
		t.willRetry = n.WillRetry
	case "agent_settled":
		// One settle may follow several agent_end (retries, queued
		// continuations). It ends the run, never the cohort.
		t.running, t.ends, t.willRetry = false, 0, false
		t.settles++
		if s := t.slot; s != nil && !t.stopping && (s.Started || s.Receipt == protocol.ReceiptAcknowledged) {
			t.release()
		}
	case "message_start":
		msg, err := decodeMessage(n.Message)
		if err != nil || msg.Role != "user" {
			return
		}
		if s := t.slot; s != nil && !s.Started && s.Receipt != protocol.ReceiptFailed && sameText(msg.text(), s.Text, n.cut("/message/content")) {
			s.Started = true
			return
		}
		t.external++
	case "queue_update":
		t.queue = QueueState{Steering: n.Steering, FollowUp: n.FollowUp}
	case "tool_execution_start":
		if !engine.StartEffect(t.open, n.ToolCallID, n.ToolName) {
			t.markUncertain(fmt.Sprintf("the engine started more tools than the %d tracked in flight, or one with an id or name too long to keep", engine.MaxOpenEffects))
		}
	case "tool_execution_end":
		delete(t.open, n.ToolCallID)
	}
}

// adopt takes the run state from a get_state answer (n) when the tracker
// joined an engine's output in the middle (Conn.Resync): a run that began
// before is running until its agent_settled, which follows in wire order.
func (t *tracker) adopt(n *native) {
	var st struct {
		IsStreaming bool `json:"isStreaming"`
	}
	if n.Success == nil || !*n.Success || json.Unmarshal(n.Data, &st) != nil {
		t.markUncertain("the engine's run state could not be read after a controller restart")
		return
	}
	t.running = st.IsStreaming
}

func (t *tracker) effects() []engine.Effect {
	out := make([]engine.Effect, 0, len(t.open))
	for _, e := range t.open {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CallID < out[j].CallID })
	return out
}

func (t *tracker) snapshot() TurnState {
	st := TurnState{
		Fenced: t.fenced, Running: t.running, Uncertain: t.uncertain,
		Reasons: append([]string(nil), t.reasons...),
		Runs:    t.runs, Ends: t.ends, WillRetry: t.willRetry, Settles: t.settles,
		Queue:        t.queue,
		ExternalUser: t.external,
		OpenTools:    t.effects(),
	}
	if t.slot != nil {
		d := *t.slot
		st.Slot = &d
	}
	if t.last != nil {
		d := *t.last
		st.Last = &d
	}
	return st
}

// matchQueue applies R3-1 rules 2-4 to the texts clear_queue returned.
// item is the dispatched item that has not started (nil if none). An
// exact single match is the item (matched). Texts that are neither it nor
// like it are external. When the item's text comes back twice, or only a
// near match does, nothing is attributed: those texts are ambiguous and
// the item's delivery is unknown (N4).
func matchQueue(item *engine.Dispatch, q QueueState) (matched, external, ambiguous []engine.QueuedText) {
	matched, external, ambiguous = []engine.QueuedText{}, []engine.QueuedText{}, []engine.QueuedText{}
	var like []engine.QueuedText
	exact := 0
	for _, e := range queued(q) {
		switch {
		case item != nil && e.Text == item.Text:
			exact++
			like = append(like, e)
		case item != nil && nearMatch(e.Text, item.Text):
			like = append(like, e)
		default:
			external = append(external, e)
		}
	}
	if exact == 1 && len(like) == 1 {
		return append(matched, like...), external, ambiguous
	}
	return matched, external, append(ambiguous, like...)
}

func queued(q QueueState) []engine.QueuedText {
	all := make([]engine.QueuedText, 0, len(q.Steering)+len(q.FollowUp))
	for _, s := range q.Steering {
		all = append(all, engine.QueuedText{Queue: "steering", Text: s})
	}
	for _, s := range q.FollowUp {
		all = append(all, engine.QueuedText{Queue: "followUp", Text: s})
	}
	return all
}

// nearMatch is a text that could be the item after some transformation
// Pi or an extension might apply: trimmed, case-folded, or contained.
func nearMatch(a, b string) bool {
	ta, tb := strings.TrimSpace(a), strings.TrimSpace(b)
	if ta == "" || tb == "" {
		return false
	}
	return strings.EqualFold(ta, tb) || strings.Contains(a, tb) || strings.Contains(b, ta)
}

// sameText reports whether a user message's text is the slot's text. A
// prompt is at most 262144 characters, but its JSON form may pass the
// framing's string bound (escaped control characters), so a message whose
// text framing cut matches when it is a non-empty prefix of the slot's.
func sameText(got, want string, cut bool) bool {
	if !cut {
		return got == want
	}
	return got != "" && strings.HasPrefix(want, got)
}
