package protocol

// Record names: the "record" field of every line the server sends (a
// client's lines name their kind in "type", see the Cmd constants).
const (
	RecordWelcome = "welcome"
	RecordRefusal = "refusal"
	RecordBinding = "binding"
	RecordControl = "control"
	RecordStop    = "stop"
	RecordNotice  = "notice"
	// RecordEvent is the value of Event.Record: every stream record names
	// its variant so a client can switch on it without guessing from field
	// shapes.
	RecordEvent        = "event"
	RecordObserved     = "observed"
	RecordPage         = "page"
	RecordReceipt      = "receipt"
	RecordConfirmation = "confirmation"
	RecordEligibility  = "eligibility"
	// RecordEffectReport is not a line of its own: it is the "effects"
	// field of a stop.
	RecordEffectReport = "effectReport"
	RecordQueue        = "queue"
)

// Notice kinds: the "kind" of a notice record.
const (
	// NoticeDialog: a native Pi dialog, shown disabled; nothing answers it.
	NoticeDialog = "dialog"
	// NoticeForeignWriter: someone else wrote the session file; admission
	// closes and clients must re-read.
	NoticeForeignWriter = "foreign-writer"
	// NoticeLostPlace: this connection read too slowly and lost events; it
	// must observe again.
	NoticeLostPlace = "lost-place"
	// NoticeReconcile: the server asks for a re-read.
	NoticeReconcile = "reconcile"
	// NoticeRestarted: the controller restarted and re-attached to the
	// running engine; control did not survive, and stream events before
	// the re-attachment are not replayed (the binding's restart says more).
	NoticeRestarted = "restarted"
)

// Approval records (an approval's projection, and its resolution).
const (
	// RecordApproval is a native decision as the current controller
	// generation projects it: pending, disabled, uncertain or superseded.
	RecordApproval = "approval"
	// RecordApprovalResolved says a decision was answered (who decided,
	// what), or resolved natively; every client gets it.
	RecordApprovalResolved = "approval-resolved"
)

// Notice kinds for the engine's fire-and-forget user-interface updates:
// shown inert, never acted on.
const (
	NoticeNotify     = "notify"      // a notification (level in detail)
	NoticeStatus     = "status"      // a status slot set or cleared
	NoticeWidget     = "widget"      // a widget's lines set or cleared
	NoticeTitle      = "title"       // the engine asked for a window title
	NoticeEditorText = "editor-text" // the engine offered composer text; never written into one
)
