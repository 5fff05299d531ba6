package protocol

// Approval is one native decision as a controller generation projects it
// (contract 004 nativeDecision/approval). It is engine-neutral: Decision
// is the engine's opaque decision identity, Choices the exact answers it
// takes. Title, Message and Choices are untrusted render data: a client
// shows them inert (markup, ANSI, bidi controls and newlines visible as
// such) and sends a choice back byte for byte.
type Approval struct {
	Record string `json:"record"` // "approval" or "approval-resolved"
	// ID is the projection id: new for every controller generation that
	// shows the decision. An answer names it.
	ID string `json:"id"`
	// Decision is the stable native decision identity (for Pi, the
	// extension_ui_request id); it never changes across takeovers.
	Decision   string `json:"decision"`
	Execution  string `json:"execution"`
	Generation int64  `json:"generation"`
	// Controller is the connection that may answer this projection.
	Controller string `json:"controller,omitempty"`
	// Form is the native dialog: confirm, select, input or editor.
	Form    string `json:"form"`
	Title   string `json:"title"`
	Message string `json:"message,omitempty"`
	// Choices are the exact answers the engine takes: "true" and "false"
	// for a confirm (a cancel would be false, so none is offered), the
	// exact labels for a select (Pi hands its extension undefined for a
	// cancel, whose meaning the extension alone decides, so none is
	// offered). Empty when the form cannot be answered.
	Choices []string `json:"choices"`
	State   string   `json:"state"`
	// Reason says why the approval is disabled, uncertain or superseded.
	Reason string `json:"reason,omitempty"`
	// Deadline (RFC 3339) is when the engine resolves the dialog by
	// itself; answers at or after it are refused.
	Deadline string `json:"deadline,omitempty"`
	// Supersedes is the projection this one replaced.
	Supersedes string `json:"supersedes,omitempty"`
	// Chosen and ResolvedBy say who answered what (approval-resolved).
	Chosen     string   `json:"chosen,omitempty"`
	ResolvedBy *Decider `json:"resolvedBy,omitempty"`
	// Cancelled says the controller cancelled the native dialog itself,
	// in an interrupt or force stop; the outcome is still uncertain.
	Cancelled bool `json:"cancelled,omitempty"`
	// Evidence is the native evidence a resolved-natively state rests on.
	Evidence string `json:"evidence,omitempty"`
	// Request is the client request that this record answers, if any.
	Request string `json:"request,omitempty"`
}

// Decider is who resolved an approval: the causal request and actor.
type Decider struct {
	Actor      string `json:"actor"`
	Connection string `json:"connection"`
	Request    string `json:"request"`
	Generation int64  `json:"generation"`
}
