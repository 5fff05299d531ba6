package engine

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// ReceiptPending is the dispatch slot's state from the write of a prompt
// until Pi answers it; the other states a slot takes are the receipt
// states of protocol (acknowledged, failed, delivery-unknown).
const ReceiptPending = "pending"

// Native queue states recorded in a TurnProof.
const (
	// QueueCleared: clear_queue answered; its texts are in the proof.
	QueueCleared = "cleared"
	// QueueUnknown: clear_queue failed or timed out (N5).
	QueueUnknown = "unknown"
)

// Dispatch is the one Mosaic prompt that holds the dispatch slot.
type Dispatch struct {
	// RequestID is the engine command id the prompt was sent with.
	RequestID string `json:"requestId"`
	Text      string `json:"text"`
	Receipt   string `json:"receipt"`
	// Evidence is Pi's own error text when it refused the prompt.
	Evidence string `json:"evidence,omitempty"`
	// Started is set once Pi emitted the user message carrying Text.
	Started bool `json:"started"`
	// Unconsumed is set when clear_queue returned Text exactly once: the
	// item was proven unconsumed. The receipt stays acknowledged (R3-1.3).
	Unconsumed bool `json:"unconsumed,omitempty"`
}

// QueuedText is one text clear_queue returned, with the queue it was in.
type QueuedText struct {
	Queue string `json:"queue"` // steering or followUp
	Text  string `json:"text"`
}

// Effect is a tool execution that started and has not ended.
type Effect struct {
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// State is "uncertain": killing or aborting is never rollback.
	State string `json:"state"`
}

// TurnProof is the native-turn reconciliation an interrupt produces
// (brief §3, R3-1). It is evidence, not a verdict: Uncertain says the stop
// must stay uncertain and admission closed.
type TurnProof struct {
	StopRef   string `json:"stopRef"`
	Execution string `json:"execution"`
	// InterruptedRun is the ordinal (from 1) of the run active when the
	// interrupt began, or 0 when none was visible.
	InterruptedRun int `json:"interruptedRun"`
	// Dispatch is the slot's item as the proof leaves it, if there was one.
	Dispatch *Dispatch `json:"dispatch,omitempty"`
	// ItemsMatched lists the Mosaic item clear_queue returned exactly once.
	ItemsMatched []QueuedText `json:"itemsMatched"`
	// External lists returned texts that match no Mosaic item: held by the
	// engine, not sent by Mosaic, shown read-only and never resent.
	External []QueuedText `json:"external"`
	// Ambiguous lists returned texts that may be the Mosaic item but do
	// not prove it (twice, or a near match): attributed to nobody (N4).
	Ambiguous []QueuedText `json:"ambiguous"`
	// NativeQueue is cleared or unknown.
	NativeQueue string `json:"nativeQueue"`
	// AbortAcknowledged is set when Pi answered the abort (it answers after
	// the run settled).
	AbortAcknowledged bool `json:"abortAcknowledged"`
	// Effects lists tool executions started and never ended: uncertain.
	Effects []Effect `json:"effects"`
	// TerminalReason is the engine's own word for how the interrupted
	// turn ended, where it has one (Claude's result.terminal_reason).
	TerminalReason string `json:"terminalReason,omitempty"`
	// CancelledDialogs lists the native dialogs the interrupt cancelled
	// right after writing abort (their native request ids).
	CancelledDialogs []string `json:"cancelledDialogs,omitempty"`
	Uncertain        bool     `json:"uncertain"`
	// Reasons says why the proof is uncertain, one stable phrase each.
	Reasons []string `json:"reasons,omitempty"`
}

// TurnState is a snapshot of the tracker for the controller.
type TurnState struct {
	Fenced    bool      `json:"fenced"`
	Running   bool      `json:"running"`
	Uncertain bool      `json:"uncertain"`
	Reasons   []string  `json:"reasons,omitempty"`
	Slot      *Dispatch `json:"slot,omitempty"`
	// Last is the item that held the slot most recently, after release.
	Last *Dispatch `json:"last,omitempty"`
	// Runs counts agent_start; Ends counts agent_end since the last settle.
	Runs      int        `json:"runs"`
	Ends      int        `json:"ends"`
	WillRetry bool       `json:"willRetry"`
	Settles   int        `json:"settles"`
	Queue     QueueState `json:"queue"`
	// ExternalUser counts user messages that were not the slot's item.
	ExternalUser int      `json:"externalUser"`
	OpenTools    []Effect `json:"openTools,omitempty"`
}

// QueueState is Pi's last reported native queue (queue_update).
type QueueState struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

// tracker follows runs and the dispatch slot from the native stream in
// wire order. It does no I/O; Conn feeds it under its lock.
type tracker struct {
	slot      *Dispatch
	last      *Dispatch
	fenced    bool
	stopping  bool
	running   bool
	runs      int
	ends      int
	willRetry bool
	settles   int
	queue     QueueState
	external  int
	open      map[string]Effect
	uncertain bool
	reasons   []string
}

func newTracker() *tracker { return &tracker{open: make(map[string]Effect)} }

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
	t.slot = &Dispatch{RequestID: id, Text: text, Receipt: ReceiptPending}
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
		if s.Receipt == ReceiptPending || s.Receipt == protocol.ReceiptDeliveryUnknown {
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
	if t.slot != nil && t.slot.RequestID == id && t.slot.Receipt == ReceiptPending {
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
	t.reasons = append(t.reasons, reason)
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
		t.open[n.ToolCallID] = Effect{CallID: n.ToolCallID, Name: n.ToolName, State: "uncertain"}
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

func (t *tracker) effects() []Effect {
	out := make([]Effect, 0, len(t.open))
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
func matchQueue(item *Dispatch, q QueueState) (matched, external, ambiguous []QueuedText) {
	matched, external, ambiguous = []QueuedText{}, []QueuedText{}, []QueuedText{}
	var like []QueuedText
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

func queued(q QueueState) []QueuedText {
	all := make([]QueuedText, 0, len(q.Steering)+len(q.FollowUp))
	for _, s := range q.Steering {
		all = append(all, QueuedText{Queue: "steering", Text: s})
	}
	for _, s := range q.FollowUp {
		all = append(all, QueuedText{Queue: "followUp", Text: s})
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
