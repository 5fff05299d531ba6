package engine

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

// NewTurnProof is the proof an adapter's interrupt starts from: the list
// fields empty, not absent, so a proof always encodes them.
func NewTurnProof(stopRef, execution string) TurnProof {
	return TurnProof{StopRef: stopRef, Execution: execution,
		ItemsMatched: []QueuedText{}, External: []QueuedText{}, Ambiguous: []QueuedText{}}
}

// Doubt marks the proof uncertain for reason: an adapter's interrupt
// adds one reason for each thing it could not observe.
func (p *TurnProof) Doubt(reason string) {
	p.Uncertain = true
	p.Reasons = append(p.Reasons, reason)
}
