package protocol

import "encoding/json"

// Commands a client sends after its hello. Each carries a client request
// id ("request"), unique per connection attempt; the dedup key is (actor,
// conversation, request) for the life of one controller incarnation.
const (
	CmdObserve                = "observe"
	CmdPrompt                 = "prompt"
	CmdTakeover               = "takeover"
	CmdAcquireRecoveryControl = "acquire-recovery-control"
	CmdInterrupt              = "interrupt"
	CmdForceStop              = "force-stop"
	CmdRecover                = "recover"
	CmdLaunch                 = "launch"
	CmdIssueConfirmation      = "issue-confirmation"
	CmdAnswerConfirmation     = "answer-confirmation"
	CmdApproval               = "approval"
	CmdEditQueued             = "edit-queued"
	CmdCancelQueued           = "cancel-queued"
	CmdResumeQueue            = "resume-queue"
)

// Command is every client command in one closed shape: fields a command
// does not use must be absent (strict decoding refuses unknown fields, and
// each command checks that it got what it needs).
type Command struct {
	Type    string `json:"type"`
	Request string `json:"request"`
	// Generation is the controller generation the client believes current
	// (prompt, interrupt, force-stop, recover, launch) or expects to replace
	// (takeover, acquire-recovery-control).
	Generation *int64 `json:"generation,omitempty"`
	// Execution is the execution the client targets (prompt, interrupt,
	// force-stop); a command for another execution refuses target.
	Execution string `json:"execution,omitempty"`
	// Text is a prompt's whole text: one JSON string, one engine record.
	Text string `json:"text,omitempty"`
	// Operation names what a confirmation is for: force-stop, recover or
	// acquire-recovery-control.
	Operation string `json:"operation,omitempty"`
	// Confirmation is the id of an answered confirmation (force-stop,
	// recover, acquire-recovery-control) or the one being answered.
	Confirmation string `json:"confirmation,omitempty"`
	// Answer is the exact answer to a confirmation: "confirm" or "decline".
	Answer string `json:"answer,omitempty"`
	// Eligibility is the id of a recover eligibility record (launch).
	Eligibility string `json:"eligibility,omitempty"`
	// FromSeq asks observe to replay the current execution's events after
	// this sequence number (0: from the start of the replay window).
	FromSeq *uint64 `json:"fromSeq,omitempty"`
	// Cursor asks observe for the history page before the one the cursor
	// came with (older parts), answered by a PageRecord; the connection's
	// event subscription is untouched. Not combined with FromSeq.
	Cursor string `json:"cursor,omitempty"`
	// Approval, Choice and Decision answer a native dialog (approval):
	// Approval is the current projection id, Choice exactly one of its
	// choices, Decision (optional) the native decision it must belong to.
	Decision string `json:"decision,omitempty"`
	Choice   string `json:"choice,omitempty"`
	Approval string `json:"approval,omitempty"`
	// Item names a queued item (edit-queued, cancel-queued) and Revision
	// the item revision the client saw: the command is a compare-and-set.
	Item     string `json:"item,omitempty"`
	Revision *int   `json:"revision,omitempty"`
	// Retry marks a resend of a request whose outcome the client lost. A
	// retry the controller does not know (it restarted since) refuses
	// receipt-unknown instead of dispatching again.
	Retry bool `json:"retry,omitempty"`
}

// Binding is the public projection of the controller's binding: what a
// client needs to address commands and show state, never private paths of
// other conversations.
type Binding struct {
	Record       string `json:"record"` // "binding"
	Conversation string `json:"conversation"`
	State        string `json:"state"`
	// Admission is open when a prompt may be admitted now.
	Admission string `json:"admission"` // "open" or "closed"
	// AdmissionReason says why admission is closed.
	AdmissionReason string `json:"admissionReason,omitempty"`
	Execution       string `json:"execution,omitempty"`
	Generation      int64  `json:"generation"`
	// Controller is the connection holding control, "" when none.
	Controller string `json:"controller,omitempty"`
	// ControllerConnected is false once the controller's connection is
	// gone (control is not released by a disconnect).
	ControllerConnected bool   `json:"controllerConnected"`
	SessionID           string `json:"sessionId,omitempty"`
	Leaf                string `json:"leaf,omitempty"`
	Engine              string `json:"engine,omitempty"` // e.g. "pi 0.85.1"
	Cohort              string `json:"cohort,omitempty"` // "scope" or "pgroup"
	Scope               string `json:"scope,omitempty"`  // the engine's scope unit
	EngineState         string `json:"engineState"`      // idle, busy, fenced, none
	// Unconfined says why the execution's engine runs without confinement
	// (no namespaces or masks of its own): its tools can leave the cohort,
	// so no stop of it is ever proven. Absent when confined.
	Unconfined string `json:"unconfined,omitempty"`
	// Reconcile asks clients to re-read history (foreign writer, gap, ...).
	Reconcile bool `json:"reconcile,omitempty"`
	// LastStop is the latest stop record id, if any.
	LastStop string `json:"lastStop,omitempty"`
	// LateEvents counts output of replaced executions that arrived late
	// and was dropped, never rendered (H14).
	LateEvents uint64 `json:"lateEvents,omitempty"`
	// EngineEnd says why the current execution's engine is gone or never
	// opened admission: set when it exited without a stop or failed its
	// load check; absent otherwise.
	EngineEnd *EngineEnd `json:"engineEnd,omitempty"`
	// PendingApprovals counts the approvals the controller may answer now.
	PendingApprovals int `json:"pendingApprovals,omitempty"`
	// Restart is set when this controller re-attached to an engine a
	// previous controller launched (a controller restart); absent
	// otherwise.
	Restart *Restart `json:"restart,omitempty"`
}

// Restart describes a controller's re-attachment to a running engine
// after a controller restart: the execution, claim and generation are
// the ones before; control, connections, receipts and the replay ring are
// not.
type Restart struct {
	// At is when this controller re-attached (RFC 3339, UTC).
	At string `json:"at"`
	// Resume counts the re-attachments to this execution (1 for the
	// first restart); event seqs of this controller start above
	// Resume<<32, so a seq of an earlier controller never names one of
	// this one's.
	Resume uint64 `json:"resume"`
	// SkippedBytes is the engine output skipped to find a line boundary:
	// the tail of a line the previous controller began reading, or a
	// whole line. Never parsed; more than zero means stream events were
	// lost (the session file still holds what Pi persisted).
	SkippedBytes int64 `json:"skippedBytes"`
	// RunInProgress is true when a run was in progress at re-attachment.
	RunInProgress bool `json:"runInProgress"`
}

// EngineEnd is what a user needs to see why an engine did not run: its
// exit status and the last lines of its stderr.
type EngineEnd struct {
	Execution string `json:"execution"`
	// Status is the exit status as the kernel reported it ("exit status
	// 1", "signal: killed"); empty while the engine still runs.
	Status string `json:"status,omitempty"`
	// Preflight is the load check's failure, when that is what happened.
	Preflight string `json:"preflight,omitempty"`
	// Stderr holds the last lines of the engine's stderr (at most 20 and
	// about 4 KiB, each cut to 512 bytes), oldest first, as UTF-8 text
	// that a client must still make inert before showing it.
	Stderr []string `json:"stderr,omitempty"`
	// StderrCut says earlier lines were let go.
	StderrCut bool `json:"stderrCut,omitempty"`
}

// ControlRecord answers a takeover or recovery-control acquisition and is
// broadcast to every connection when control changes.
type ControlRecord struct {
	Record     string `json:"record"` // "control"
	Request    string `json:"request,omitempty"`
	Generation int64  `json:"generation"`
	Controller string `json:"controller"`
	// Mode is this connection's mode after the change.
	Mode string `json:"mode"`
	// Revoked names the connection that lost control, if any.
	Revoked string `json:"revoked,omitempty"`
}

// Receipt records the outcome of one admitted request. It is revised
// monotonically; an exact retry returns the current revision.
type Receipt struct {
	Record     string `json:"record"` // "receipt"
	ID         string `json:"id"`
	Request    string `json:"request"`
	Command    string `json:"command"`
	State      string `json:"state"`
	Revision   int    `json:"revision"`
	Execution  string `json:"execution,omitempty"`
	Generation int64  `json:"generation"`
	Actor      string `json:"actor"`
	Connection string `json:"connection"`
	// Evidence is the engine's own words, e.g. its refusal text (N6).
	Evidence string `json:"evidence,omitempty"`
	// Reason qualifies the state (interrupted, run-overlap, ...).
	Reason string `json:"reason,omitempty"`
	// Digest is the SHA-256 of the canonical command fingerprint.
	Digest string `json:"digest"`
	// Stop names the stop record of an interrupt or force stop.
	Stop string `json:"stop,omitempty"`
	// Item is the queue item a prompt became; AfterSeq, once dispatched,
	// the execution's newest event seq when it was written to the engine
	// (its turn's events come after it).
	Item     string `json:"item,omitempty"`
	AfterSeq uint64 `json:"afterSeq,omitempty"`
}

// Stop is one stop record: interrupt or force stop, with its transitions.
type Stop struct {
	Record      string `json:"record"` // "stop"
	ID          string `json:"id"`
	Kind        string `json:"kind"` // "interrupt" or "force-stop"
	Execution   string `json:"execution"`
	State       string `json:"state"` // fenced, cancelling, stopping, reconciled, uncertain, stopped, superseded
	Predecessor string `json:"predecessor,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// ProofDigest names the cohort or boot proof that allowed stopped.
	ProofDigest string `json:"proofDigest,omitempty"`
	// Proof is the proof itself (cohortProof or bootProof record).
	Proof json.RawMessage `json:"proof,omitempty"`
	// TurnProof is the interrupt's native-turn reconciliation.
	TurnProof json.RawMessage `json:"turnProof,omitempty"`
	// Effects lists tool calls started and not ended at stop time.
	Effects *EffectReport `json:"effects,omitempty"`
	// ApprovalDisposition is resolved, or uncertain when a native dialog
	// was seen during the execution.
	ApprovalDisposition string `json:"approvalDisposition,omitempty"`
	// CancelledDialogs are the native decisions whose open dialogs the
	// stop chain cancelled itself (after the abort, or before the TERM).
	CancelledDialogs []string `json:"cancelledDialogs,omitempty"`
	// QueueDrafts lists the queue items a force stop turned into
	// recovered drafts; QueueFailures those it could not (damaged).
	QueueDrafts   []string `json:"queueDrafts,omitempty"`
	QueueFailures []string `json:"queueFailures,omitempty"`
}

// EffectReport lists the disposition of every tool invocation at a stop.
type EffectReport struct {
	Record      string   `json:"record"` // "effectReport"
	Uncertain   []Effect `json:"uncertain"`
	Completed   int      `json:"completed"`
	Disposition string   `json:"disposition"` // "reconciled" or "uncertain"
}

// Effect is one tool invocation whose effect is not known.
type Effect struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	// Reason: started-without-end (killing never counts as rollback), or
	// stream-not-observed (no call id: the stop was made by a controller
	// that never read the engine's stream, so open calls are unknown).
	Reason string `json:"reason"`
}

// Confirmation is a short-lived, single-use confirmation bound to the
// connection incarnation, the target, the operation and the stop context.
type Confirmation struct {
	Record      string `json:"record"` // "confirmation"
	ID          string `json:"id"`
	Request     string `json:"request,omitempty"`
	Operation   string `json:"operation"`
	State       string `json:"state"` // issued, answered, declined, used, expired
	Connection  string `json:"connection"`
	Execution   string `json:"execution,omitempty"`
	Generation  int64  `json:"generation"`
	StopContext string `json:"stopContext,omitempty"`
	// Intent is the exact text a person confirms, e.g. what will be stopped.
	Intent  string `json:"intent"`
	Expires string `json:"expires"` // RFC 3339
	Digest  string `json:"digest"`
}

// Eligibility says a recovery may launch a new execution.
type Eligibility struct {
	Record       string `json:"record"` // "eligibility"
	ID           string `json:"id"`
	Request      string `json:"request,omitempty"`
	Conversation string `json:"conversation"`
	Stop         string `json:"stop"`
	ProofDigest  string `json:"proofDigest"`
	SessionID    string `json:"sessionId"`
	Leaf         string `json:"leaf"`
	Generation   int64  `json:"generation"`
}

// Observed answers observe: the binding, a history page read from the
// session file, and the seam between that page and the live stream.
type Observed struct {
	Record  string          `json:"record"` // "observed"
	Request string          `json:"request"`
	Binding Binding         `json:"binding"`
	History json.RawMessage `json:"history"`
	Seam    Seam            `json:"seam"`
	// Cursor, present when the branch has parts before this page, is what
	// observe takes as cursor to read the page before it.
	Cursor string `json:"cursor,omitempty"`
	// Approvals are the current projections of the decisions still open
	// (pending, disabled or uncertain), so a client that attaches late
	// sees them.
	Approvals []Approval `json:"approvals,omitempty"`
	// Queue is the prompt queue as of this observe.
	Queue *Queue `json:"queue,omitempty"`
}

// PageRecord answers an observe with a cursor: the history page that ends
// where the cursor's page began, from the same snapshot, so paging back
// has no gap and no overlap whatever the session file did meanwhile.
type PageRecord struct {
	Record  string          `json:"record"` // "page"
	Request string          `json:"request"`
	History json.RawMessage `json:"history"`
	// Cursor reads the page before this one; absent at the first part.
	Cursor string `json:"cursor,omitempty"`
}

// Seam describes how the history page joins the live stream.
type Seam struct {
	Execution string `json:"execution,omitempty"`
	// Replay is "available" when the controller will replay the events
	// of the current execution from ReplayFrom; events before it are gone.
	Replay      string `json:"replay"`
	ReplayFrom  uint64 `json:"replayFrom"`
	ReplayUntil uint64 `json:"replayUntil"`
	// ReplayStart is the seq of the first event that follows this record
	// on the connection, replayed or live: every event of the execution
	// from it on comes, none before it.
	ReplayStart uint64 `json:"replayStart"`
	// Quiet is true when no run was visible and no prompt held the slot
	// as the page was read: nothing can be missing at the seam.
	Quiet bool `json:"quiet"`
	// Reconcile asks the client to re-read the page after the next
	// run-settled (the cut was not quiet or the replay window was missed).
	Reconcile bool `json:"reconcile"`
}

// Notice is a server-origin message: a dialog shown disabled, a reconcile
// marker, a foreign writer, a slow observer that lost its place.
type Notice struct {
	Record  string          `json:"record"` // "notice"
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}
