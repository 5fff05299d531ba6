package protocol

import "encoding/json"

// EventKind names what an Event does to a client's view. Kinds are stable
// wire names; a client that meets a kind it does not know treats the event
// like an unavailable one (shows a gap, never guesses).
type EventKind string

// The event kinds an engine adapter produces.
const (
	// EventMessageStart opens a message (user, assistant or toolResult)
	// under a fresh message key; later events address it by that key.
	EventMessageStart EventKind = "message-start"
	// EventTextDelta appends Text to fragment Fragment of text block Block.
	EventTextDelta EventKind = "text-delta"
	// EventThinkingDelta appends Text to a reasoning block.
	EventThinkingDelta EventKind = "thinking-delta"
	// EventToolCallDelta appends a chunk of a tool call's JSON arguments as
	// the model streams them. It is provisional: message-end replaces it.
	EventToolCallDelta EventKind = "toolcall-delta"
	// EventToolStart says a tool began executing: from here until a
	// tool-end its effects are in flight (a stop in between makes them
	// uncertain).
	EventToolStart EventKind = "tool-start"
	// EventToolUpdate carries the tool's accumulated partial result. It
	// replaces the previous update for the same call; it never appends.
	EventToolUpdate EventKind = "tool-update"
	// EventToolEnd carries the tool's final result and replaces any update.
	EventToolEnd EventKind = "tool-end"
	// EventMessageEnd is the authoritative copy of a message part. It
	// replaces provisional deltas for that part (UpdateMode is replace).
	EventMessageEnd EventKind = "message-end"
	// EventRunSettled says the engine will not continue by itself (no retry,
	// no queued continuation). It is not a stop and proves no termination.
	EventRunSettled EventKind = "run-settled"
	// EventUnavailable marks something the adapter saw but cannot show: an
	// unknown native event, an unsupported one, or a line it could not
	// frame or decode. It never carries the native payload.
	EventUnavailable EventKind = "unavailable"
	// EventNativeUI marks where the engine asked its user interface for
	// something (a dialog or a fire-and-forget update). It carries only
	// the method in Native; what it asked travels as an approval or a
	// notice record, shown inert.
	EventNativeUI EventKind = "native-ui"
)

// UpdateMode says how an event's content combines with what a client holds
// for the same address.
type UpdateMode string

// Update modes.
const (
	// UpdateAppend appends to the addressed block fragment (text and
	// reasoning deltas, tool-call argument chunks).
	UpdateAppend UpdateMode = "append"
	// UpdateReplace replaces the addressed part or tool result.
	UpdateReplace UpdateMode = "replace"
)

// Stable reasons carried by unavailable events.
const (
	// ReasonUnknownNative: the engine sent an event type the adapter does
	// not know (it may be newer than the pin).
	ReasonUnknownNative = "unknown-native-event"
	// ReasonUnsupportedNative: a known native event the adapter does not
	// render (dialogs, extension errors, bash output, ...).
	ReasonUnsupportedNative = "unsupported-native-event"
	// ReasonLineTooLong: an engine line exceeded the framing bound; its
	// content is lost and the binding is uncertain.
	ReasonLineTooLong = "line-too-long"
	// ReasonUndecodable: an engine line was not a JSON object with a type.
	ReasonUndecodable = "undecodable-line"
	// ReasonUnknownBlock: a content block of a type the adapter does not know.
	ReasonUnknownBlock = "unknown-block"
	// ReasonDuplicateID: the engine asked again under the id of a decision
	// it holds open; the first keeps the id and the repeat is never
	// answerable, so an answer cannot land on a request nobody saw.
	ReasonDuplicateID = "duplicate-id"
	// ReasonOutputLost: the engine wrote faster than the controller read
	// and events past the adapter's byte bound were dropped; the stream has
	// a hole and the binding is uncertain.
	ReasonOutputLost = "output-lost"
	// ReasonStdinBroken: a write to the engine's stdin missed its
	// deadline (the engine stopped reading) or failed part way; nothing
	// more is written to the engine, every later command is refused and
	// the binding is uncertain.
	ReasonStdinBroken = "stdin-broken"
)

// Event is one record of an execution's ordered live stream.
//
// (Execution, Seq) identifies an event: Seq starts at 1 for every execution
// incarnation and increases by one per event, so a consumer can deduplicate
// overlap and detect gaps. Optional fields are omitted when empty; Block,
// Fragment and Part are pointers because zero is a real ordinal.
type Event struct {
	Record    string    `json:"record"`
	Kind      EventKind `json:"kind"`
	Execution string    `json:"execution"`
	Seq       uint64    `json:"seq"`

	// Message is the message key, stable within the execution; it is
	// allocated at message-start before the engine persists anything.
	// Tool events carry the key of the assistant message that called them.
	Message string `json:"message,omitempty"`
	// Role is the native message role: user, assistant or toolResult.
	Role string `json:"role,omitempty"`

	// Block is the content block ordinal within the message (from zero).
	Block *int `json:"block,omitempty"`
	// BlockType is text, thinking or toolCall.
	BlockType string `json:"blockType,omitempty"`
	// Fragment counts deltas within a block from zero, contiguously.
	Fragment *int `json:"fragment,omitempty"`
	// LastFragment is set on the event that closes a block.
	LastFragment bool `json:"lastFragment,omitempty"`

	UpdateMode UpdateMode `json:"updateMode,omitempty"`
	// Part and LastPart address the part of a final message this event
	// replaces. The adapter emits one part per message; a transport that
	// splits large messages renumbers them.
	Part     *int `json:"part,omitempty"`
	LastPart bool `json:"lastPart,omitempty"`

	// Text is the delta (append) or nothing; final content is in Content.
	Text string `json:"text,omitempty"`
	// Texts carries a run of deltas of one block instead of Text: Texts[i]
	// is the delta of seq Seq+i and fragment Fragment+i (runs.go). Only a
	// connection whose hello named RunsSince or later receives runs.
	Texts []string `json:"texts,omitempty"`
	// Content is the authoritative content of a message-end.
	Content []Block `json:"content,omitempty"`
	// StopReason is the native stop reason of an assistant message-end.
	StopReason string `json:"stopReason,omitempty"`
	// Tool describes a tool call (tool-start/update/end, toolcall-delta,
	// and a toolResult message-end).
	Tool *Tool `json:"tool,omitempty"`

	// Reason is a stable code on unavailable events.
	Reason string `json:"reason,omitempty"`
	// Native is the native event type that caused an unavailable event,
	// cut to a bounded length. It is a label, never the payload.
	Native string `json:"native,omitempty"`
	// Dropped counts the engine events an output-lost event stands for:
	// dropped past the adapter's byte bound, none of them delivered.
	Dropped uint64 `json:"dropped,omitempty"`

	// Truncated is set when the engine's line was too large to carry
	// whole: strings of this event were cut (Text, a block's content, a
	// tool's args or result) or elements left out. What was cut is never
	// shown as whole; the message's full content is in the history pages
	// once the engine persisted it.
	Truncated bool `json:"truncated,omitempty"`

	// UI is the engine's parsed user-interface request behind a native-ui
	// event, for the controller only: it never travels on the wire.
	UI *NativeUI `json:"-"`
}

// NativeUI is one user-interface request of an engine, as its adapter
// parsed it: a dialog that waits for one answer (confirm, select, input,
// editor) or a fire-and-forget update (notify, status, widget, title,
// editor text). Every string is untrusted render data, verbatim.
type NativeUI struct {
	// ID is the engine's own request id: the native decision identity of
	// a dialog, echoed in the one answer.
	ID     string `json:"id"`
	Method string `json:"method"`
	Title  string `json:"title,omitempty"`
	// Message is a confirm's message, an input's placeholder, an editor's
	// prefill, a notification, a status or editor text.
	Message string `json:"message,omitempty"`
	// Options are a select's labels, or a widget's lines.
	Options []string `json:"options,omitempty"`
	// TimeoutMS is the dialog's native timeout (0: none).
	TimeoutMS int64 `json:"timeoutMs,omitempty"`
	// Key names a status or widget slot; Level a notification's type.
	Key   string `json:"key,omitempty"`
	Level string `json:"level,omitempty"`
	// Clear is set when a status or widget update removes its slot.
	Clear bool `json:"clear,omitempty"`
	// InRun is set when a run was visible as the request arrived: the run
	// cannot settle while the dialog is open.
	InRun bool `json:"inRun,omitempty"`
	// Cut is set when framing cut any of the request's text: it cannot be
	// shown whole, so it must not be answered.
	Cut bool `json:"cut,omitempty"`
}

// Dialog methods an engine's NativeUI may carry that wait for an answer.
const (
	FormConfirm = "confirm"
	FormSelect  = "select"
	FormInput   = "input"
	FormEditor  = "editor"
)

// IsForm reports whether a native UI method is a dialog that waits for
// one answer.
func IsForm(method string) bool {
	switch method {
	case FormConfirm, FormSelect, FormInput, FormEditor:
		return true
	}
	return false
}

// Block is one content block of a final message.
type Block struct {
	// Type is text, thinking, toolCall, image or unavailable.
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ToolCallID, ToolName and Args are set on toolCall blocks.
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// MimeType is set on image blocks; the image bytes are not streamed.
	MimeType string `json:"mimeType,omitempty"`
	// Truncated is set on a live block whose text or arguments were cut
	// (see Event.Truncated); history blocks are never truncated.
	Truncated bool `json:"truncated,omitempty"`
}

// Tool identifies a tool call and carries what the engine reported about it.
type Tool struct {
	CallID string          `json:"callId"`
	Name   string          `json:"name,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	// Result is the accumulated partial result (tool-update) or the final
	// result (tool-end), as the engine's JSON.
	Result  json.RawMessage `json:"result,omitempty"`
	IsError bool            `json:"isError,omitempty"`
}

// Ordinal returns a pointer to n, for Block, Fragment and Part.
func Ordinal(n int) *int { return &n }
