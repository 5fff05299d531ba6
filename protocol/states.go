package protocol

// The states and kinds records carry. Several words recur across sets
// ("uncertain", "stopped", "fenced"); each set names its own so a reader
// sees which field a value belongs to.

// Binding states.
const (
	BindingLaunching = "launching" // claim reserved, engine starting, admission closed
	BindingActive    = "active"    // engine running, bound to the pinned session and leaf
	BindingStopping  = "stopping"  // a stop chain is running
	BindingUncertain = "uncertain" // something is not known; admission closed
	BindingStopped   = "stopped"   // stopped with a proof
	BindingIdle      = "idle"      // no engine and no claim: a launch may start one
)

// Receipt states.
const (
	ReceiptAcknowledged    = "acknowledged"     // the engine accepted the prompt
	ReceiptFailed          = "failed"           // the engine refused it; evidence holds its text
	ReceiptDeliveryUnknown = "delivery-unknown" // written, outcome not known
	ReceiptReconciled      = "reconciled"       // an interrupt settled with a trusted turn proof
	ReceiptStopped         = "stopped"          // a force stop ended with a cohort proof
	ReceiptUncertain       = "uncertain"        // a stop ended without proof
	ReceiptLaunched        = "launched"         // a launch started a new execution
	// Queue item states, which are the receipt states of a prompt.
	ReceiptQueued          = "queued"           // durably admitted, waiting for its turn
	ReceiptDispatched      = "dispatched"       // being written to the engine
	ReceiptDelivered       = "delivered"        // a restart found it in the session file
	ReceiptCancelled       = "cancelled"        // cancelled while queued
	ReceiptDispatchRefused = "dispatch-refused" // the recheck before the write refused it
	ReceiptDraft           = "draft"            // a force stop recovered it as a draft; never resent
	ReceiptRecoveryFailed  = "recovery-failed"  // its stored content is damaged
)

// Admission of a binding: open when a prompt may be admitted now.
const (
	AdmissionOpen   = "open"
	AdmissionClosed = "closed"
)

// Stop kinds (Stop.Kind): the command that started the stop.
const (
	StopInterrupt = CmdInterrupt
	StopForce     = CmdForceStop
	// KindHibernate: the idle policy's stop (conv add --idle-stop); it
	// ends stopped with a cohort proof, or uncertain. Not a command, so
	// not named Stop* (those are the command names).
	KindHibernate = "hibernate"
)

// Stop states (Stop.State), in the order a stop may pass them. The last
// four are terminal.
const (
	StopFenced     = "fenced"     // admission closed, nothing sent yet
	StopCancelling = "cancelling" // an interrupt: clear_queue, then abort
	StopStopping   = "stopping"   // a force stop: TERM, grace, freeze and kill
	StopReconciled = "reconciled" // an interrupt settled with a trusted turn proof
	StopUncertain  = "uncertain"  // ended without proof
	StopStopped    = "stopped"    // the cohort is gone, with a proof
	StopSuperseded = "superseded" // a force stop took over this one
)

// Confirmation states (Confirmation.State).
const (
	ConfirmationIssued   = "issued"
	ConfirmationAnswered = "answered"
	ConfirmationDeclined = "declined"
	ConfirmationUsed     = "used"
	ConfirmationExpired  = "expired"
)

// Dispositions of a stop's effects (EffectReport.Disposition) and of its
// native dialogs (Stop.ApprovalDisposition).
const (
	DispositionReconciled = "reconciled" // every tool call that started ended
	DispositionUncertain  = "uncertain"  // some did not, or a dialog was seen
	DispositionResolved   = "resolved"   // no native dialog was seen
)

// Approval states (Approval.State).
const (
	ApprovalPending    = "pending"    // open, answerable by the current controller
	ApprovalDisabled   = "disabled"   // shown with a reason, never answered (input, editor, cut text)
	ApprovalResolved   = "resolved"   // answered once; the native response was written
	ApprovalUncertain  = "uncertain"  // deadline, interrupt, stop or engine exit: outcome not known
	ApprovalSuperseded = "superseded" // an older projection: a takeover re-projected the decision
	// ApprovalResolvedNatively: the engine closed the dialog without a
	// client choice (its timeout, an abort); Evidence says what showed it.
	ApprovalResolvedNatively = "resolved-natively"
)

// EngineIdle is the binding's engineState while no turn runs and no
// prompt holds the engine's slot: an interrupt then has nothing to stop.
const EngineIdle = "idle"

// EngineWaitingForApproval is the binding's engineState while a run
// waits on an approval nobody has answered.
const EngineWaitingForApproval = "waiting-for-approval"
