package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Engine kinds a conversation can name (conv add --engine-kind).
const (
	KindPi     = "pi"
	KindClaude = "claude"
)

// Engine is the seam the controller drives: one value per conversation
// and engine kind, built from the conversation's config. It covers the
// launch (pin and seal), the session identity and the history reader;
// Open wraps a started engine's pipes in a Driver for everything live.
// docs/engines.md says how Pi and Claude Code each fill it.
type Engine interface {
	// Kind is KindPi or KindClaude.
	Kind() string
	// CheckPin re-verifies the pinned executable (W9, L7) and refuses
	// engine-pin-mismatch; Spec calls it too, so nothing launches
	// unpinned.
	CheckPin(ctx context.Context) error
	// Spec returns the sealed program, argv, environment and directory
	// (unsealed-engine or engine-pin-mismatch otherwise). resume says the
	// session already exists and must be continued, not created.
	Spec(ctx context.Context, resume bool) (Spec, error)
	// SessionKey is the claim's session key: Pi's session file path,
	// Claude's session UUID.
	SessionKey() string
	// Open starts reading a launched engine's stdout (r) and writing its
	// stdin (w). The caller owns the process and its scope.
	Open(r io.Reader, w io.WriteCloser, opts Options) (Driver, error)
	// History reads the session the binding names, and only that file.
	History(ctx context.Context) (History, error)
}

// Driver is one running engine: framing, commands, the event mapping,
// the turn tracker, the interrupt with its turn proof, and native
// decisions (dialogs and permission requests).
type Driver interface {
	// Events are the protocol event records, in wire order; closed after
	// the engine's output ended and every event was delivered.
	Events() <-chan protocol.Event
	Done() <-chan struct{}
	Err() error
	// Prompt sends one prompt only when no turn runs and no prompt holds
	// the slot (busy otherwise): the controller's queue stays the only
	// queue.
	Prompt(ctx context.Context, text string) (Dispatch, error)
	// Interrupt fences the engine, stops the turn natively and returns
	// the proof of what happened to the dispatched item.
	Interrupt(ctx context.Context, stopRef string) (TurnProof, error)
	// Turn is a snapshot of the tracker in engine-neutral terms.
	Turn() TurnSummary
	// Decisions lists the native decisions the engine waits on or
	// resolved during this execution.
	Decisions() []NativeDecision
	// Decide answers one pending decision with one of its choices, once.
	Decide(ctx context.Context, id, choice string) error
	// Changed is closed (and replaced) whenever a decision is added or
	// resolved.
	Changed() <-chan struct{}
	// StdinBroken returns the write that broke the engine's stdin (it
	// missed Options.StdinTimeout or was cut short; a *StdinError), nil
	// while it is whole. Once broken, nothing more is written and every
	// command is refused engine-gone; the adapter queued an unavailable
	// event with reason stdin-broken when it broke.
	StdinBroken() error
	// Close closes the engine's stdin (both engines exit at EOF once the
	// turn ends; Claude stays for background tasks: force stop is the
	// scope's job).
	Close() error
}

// TurnSummary is what the controller reads of a tracker, whatever the
// engine.
type TurnSummary struct {
	Fenced    bool      `json:"fenced"`
	Running   bool      `json:"running"`
	Uncertain bool      `json:"uncertain"`
	Reasons   []string  `json:"reasons,omitempty"`
	Slot      *Dispatch `json:"slot,omitempty"`
	OpenTools []Effect  `json:"openTools,omitempty"`
	// Waiting says a native decision is pending (waiting-for-approval).
	Waiting bool `json:"waiting,omitempty"`
	// Settles counts the run-settled events of this Driver, each counted
	// before it is queued on Events: the controller's queue waits until
	// its pump published as many, so an engine must count here or the
	// queue dispatches into a turn the pump has not seen end.
	Settles int `json:"settles,omitempty"`
}

// Native decision choices. Only these two are ever offered for a
// permission request: a choice that widens permissions (always allow,
// add a rule, change the mode, add a directory) is never projected, and
// there is no invented cancel.
const (
	ChoiceAllowOnce = "allow-once"
	ChoiceDeny      = "deny"
)

// ErrDialogClosed is returned by Decide for a decision that is not
// pending: never raised, already answered, cancelled or withdrawn.
// Nothing was written.
var ErrDialogClosed = errors.New("native dialog is not open")

// ErrAnswerShape is returned by Decide for a choice that is not one of
// the decision's exact native choices. Nothing was written: pinned Pi
// validates no answer (it hands a confirm the string "yes"), so the
// adapter must.
var ErrAnswerShape = errors.New("not one of the dialog's native choices")

// Native decision states.
const (
	DecisionPending   = "pending"
	DecisionAnswered  = "answered"
	DecisionCancelled = "cancelled"
)

// NativeDecision is the engine-neutral shape of a native approval: what
// the approval record projects. The controller allocates projection ids;
// ID here is the native decision identity, stable for the execution.
type NativeDecision struct {
	// ID is the native decision identity: for Claude the control request
	// id and the tool_use_id ("<request_id>/<tool_use_id>").
	ID string `json:"id"`
	// Kind is "permission" (Claude can_use_tool) or the form of a Pi
	// dialog (confirm, select, input, editor).
	Kind string `json:"kind"`
	// ToolName, ToolUseID and Input describe the tool call asking;
	// Input is the model's input, untrusted render data.
	ToolName  string          `json:"toolName,omitempty"`
	ToolUseID string          `json:"toolUseId,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Title and Message are the engine's texts (description, decision
	// reason), untrusted render data.
	Title   string `json:"title,omitempty"`
	Message string `json:"message,omitempty"`
	// Choices are exactly the answers Decide accepts.
	Choices []string `json:"choices"`
	State   string   `json:"state"`
	// Answer is the choice sent (answered) or why it resolved
	// (cancelled: "control_cancel_request").
	Answer string `json:"answer,omitempty"`
}

// MaxDecisionBytes bounds the bytes an adapter holds for the native
// decisions of one execution (Pi's open dialogs, Claude's permission
// requests): every string it keeps of them (ids, texts, choices, a
// tool's input) as decoded, after framing cut the line. Each adapter
// also bounds their count (256), but a count alone let an engine hold
// 256 of the largest a line carries: a reduced line keeps 2 MiB of
// strings, and a byte of invalid UTF-8 decodes to three, so 6 MiB a Pi
// dialog and 12 MiB a Claude request (its ids are held twice), 1536 MiB
// and 3072 MiB measured. 16 MiB is the count times 64 KiB, the most
// text the controller shows whole and lets a user answer; a dialog
// recorded from pinned Pi holds at most 287 bytes and a permission
// request from pinned Claude Code at most 293, so a real user never
// meets it. Past it a request is refused as one past the count is.
const MaxDecisionBytes = 16 << 20

// History is a read-only view of the engine's own session record, in
// engine-neutral terms.
type History interface {
	// SessionKey names the session read (Engine.SessionKey).
	SessionKey() string
	// New says the file does not exist yet: a conversation with no turn.
	New() bool
	// DefaultLeaf is the leaf the engine continues on resume.
	DefaultLeaf() string
	// Leaves lists every branch's leaf, the default one included.
	Leaves() []string
	// Messages returns the rendered messages from the root to leaf ("":
	// the default leaf); unknown-branch for a leaf not in Leaves.
	Messages(leaf string) ([]HistoryMessage, error)
}

// HistoryMessage is one rendered message of a branch.
type HistoryMessage struct {
	ID     string           `json:"id"`
	Parent string           `json:"parent,omitempty"`
	Role   string           `json:"role"`
	Blocks []protocol.Block `json:"content"`
	// Tool is set on toolResult messages.
	Tool *protocol.Tool `json:"tool,omitempty"`
}
