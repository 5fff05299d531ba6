package protocol

// Refusal codes. Every code a mosaic program refuses with is declared here
// and nowhere else, so a client, the CLI and the docs share one spelling;
// codes_test.go holds this list against docs/protocol.md and README.md and
// keeps literals of these codes out of the rest of the module. A code is
// stable once published.

// Transport: framing, the hello, the connection's bounds (docs/protocol.md
// §1-§3).
const (
	CodeMalformed       = "malformed"        // not strict JSON, or not a known record shape
	CodeInvalidUTF8     = "invalid-utf8"     // a line that is not UTF-8
	CodeLineTooLong     = "line-too-long"    // a line over the cap; the connection closes
	CodeHelloRequired   = "hello-required"   // the first line was not a hello
	CodeDuplicateHello  = "duplicate-hello"  // a second hello on one connection
	CodeProtocolVersion = "protocol-version" // a hello naming an unsupported protocol
	CodePeerUID         = "peer-uid"         // the peer runs as another user
	CodeUnknownCommand  = "unknown-command"  // a record type this server does not serve
	CodeUnknownConv     = "unknown-conversation"
	CodeConfiguration   = "configuration"   // a conversation config that does not hold
	CodeServerShutdown  = "server-shutdown" // the controller is stopping
	// CodeTooManyConnections: the connection cap is reached; the refused
	// connection is closed right after this line.
	CodeTooManyConnections = "too-many-connections"
	// CodeHelloTimeout: no complete hello within the hello timeout, or no
	// byte within the idle timeout before it; the connection is closed.
	CodeHelloTimeout = "hello-timeout"
	// CodeBuffersFull: the bytes held for unfinished lines across all
	// connections reached their cap; the connection that needed more is
	// closed.
	CodeBuffersFull = "buffers-full"
)

// Control: who may act, on what, and whether a prompt is admitted
// (docs/protocol.md §4-§6).
const (
	CodeNotController      = "not-controller"
	CodeStaleGeneration    = "stale-generation" // also a claim handle that lost a race
	CodeRevoked            = "revoked"
	CodeTarget             = "target" // another execution; a claim's conversation, branch or leaf
	CodeFenced             = "fenced"
	CodeBusy               = "busy"
	CodeTextPolicy         = "text-policy"
	CodeDraft              = "draft"
	CodePreflight          = "preflight"
	CodeConflictingRequest = "conflicting-request"
	CodeReceiptUnknown     = "receipt-unknown"
	CodeRequestPending     = "request-pending"
	CodeNoTurn             = "no-turn"
	CodeAlreadyController  = "already-controller"
	CodeControllerPresent  = "controller-present"
	CodeEnginePeer         = "engine-peer"
	CodeConfirmation       = "confirmation"
	CodeDispatchRefused    = "dispatch-refused"
	CodeUnsupported        = "unsupported-capability"
	CodeNoEngine           = "no-engine"
	// Approvals (docs/protocol.md §6): the answer to a native decision.
	CodeApprovalUnknown    = "approval-unknown"    // no such approval
	CodeApprovalSuperseded = "approval-superseded" // an older projection: answer the current one
	CodeApprovalClosed     = "approval-closed"     // resolved, uncertain, disabled or past its deadline
	CodeApprovalChoice     = "approval-choice"     // not exactly one of the native choices
	CodeApprovalConflict   = "approval-conflict"   // answered already, with another choice
	// The durable queue (docs/protocol.md "prompt", "edit-queued").
	CodeQueueFull      = "queue-full"      // the queue holds its maximum of items or bytes
	CodeUnknownItem    = "unknown-item"    // no such queue item
	CodeStaleItem      = "stale-item"      // the item's revision is not the one named
	CodeItemDispatched = "item-dispatched" // the item left the queue first (dispatch won)
	CodeQueueStore     = "queue-store"     // the queue cannot be written durably
	CodeEditLimit      = "edit-limit"      // the item holds its maximum of edits or bytes
)

// The engine connection. A prompt Pi refused or may not hold becomes a
// receipt (failed, delivery-unknown), not a refusal.
const (
	CodeEngineGone      = "engine-gone"      // the engine connection is closed
	CodeEngineRefused   = "engine-refused"   // Pi answered the prompt with an error
	CodeDeliveryUnknown = "delivery-unknown" // written; whether Pi holds it is not known
	CodeUnsealedEngine  = "unsealed-engine"  // the engine's argv or environment is not sealed
)

// Recovery and the writer claim (docs/recovery.md).
const (
	CodeStopProof         = "stop-proof"          // no verified proof for stopped or resume
	CodeEligibility       = "eligibility"         // a missing, used or stale eligibility
	CodePinMismatch       = "engine-pin-mismatch" // the engine is not the pinned one (W9)
	CodeLaunchFailed      = "launch-failed"       // the new execution did not start
	CodeAlreadyActive     = "already-active"      // another writer holds the claim (W1, W2, W4)
	CodeUnsafeReplacement = "unsafe-replacement"  // W3, corrupt records
	CodeClaimState        = "claim-state"         // a transition not allowed from this state
	CodeClaimStore        = "claim-store"         // the store cannot be read or written
	// CodeEnvFile: a Claude conversation's env file is not 0600, not
	// the user's, a symlink, or names a variable outside the allow-list.
	CodeEnvFile = "env-file"
)

// The history reader behind observe, and paging back with a cursor (each
// cursor code carries reconcile).
const (
	CodeUnsafePath       = "unsafe-path"       // a symlink, a swap, not a regular file, or no file
	CodeTooLarge         = "too-large"         // over the reader's size cap
	CodeNotAPiSession    = "not-a-pi-session"  // line 1 is not a Pi session header
	CodeIncompleteHeader = "incomplete-header" // line 1 is not complete yet
	CodeSourceReplaced   = "source-replaced"   // gone, another file or shorter since it was read
	CodeUnreadable       = "unreadable"        // the session file cannot be read or encoded
	CodeForeignProject   = "foreign-project"   // the session's cwd is outside the project
	CodeUnknownBranch    = "unknown-branch"    // the session has no such branch
	CodeCursorUnknown    = "cursor-unknown"
	CodeCursorExpired    = "cursor-expired"
	CodeCursorForeign    = "cursor-foreign"
	// CodeUnsupportedHarness: a Claude transcript written by another
	// Claude Code version than the pinned one (L2).
	CodeUnsupportedHarness = "unsupported-harness"
)

// Codes mosaicctl refuses with itself, before or instead of a request;
// they never travel on the socket (docs/cli.md). The CLI's verdict words
// for a command carried out that did not end as asked (outcome-unknown,
// truncated, audit-gap, ...) are not refusals and stay in cmd/mosaicctl.
const (
	// CodeUsage: a command line that cannot be run as typed: an unknown
	// command or flag, a missing required flag, the wrong number of
	// arguments. Nothing was done, so it exits 2 like every refusal.
	CodeUsage = "usage"
	// CodeConfirmationRequired: a verb that needs consent got none.
	CodeConfirmationRequired = "confirmation-required"
	// CodeDeclined: the person declined the confirmation; nothing was done.
	CodeDeclined = "declined"
	// CodeEngineAlive: `conv rm` or `uninstall` while an engine scope
	// lives: stopping a conversation's socket and service leaves its scope
	// running, and removing the conversation then would leave an engine
	// that nothing shows and nothing can stop with a proof.
	CodeEngineAlive = "engine-alive"
	// CodeConversationExists: `conv add` of an id already registered.
	CodeConversationExists = "conversation-exists"
	// CodeProofFile: `stop --proof FILE` cannot write FILE: its directory
	// is missing or not writable, or FILE is not a regular file; or
	// `proof verify FILE` cannot open it.
	CodeProofFile = "proof-file"
	// CodeProofFileSymlink: FILE is a symbolic link. Writing through it
	// would let whoever planted it choose which file the proof overwrites.
	CodeProofFileSymlink = "proof-file-symlink"
	// CodeServeFailed: `serve` could not start the controller for a
	// reason that carries no code of its own (journal only).
	CodeServeFailed = "serve-failed"
	// CodeSocketActive: `conv rm` of a conversation whose socket unit is
	// active, or `uninstall` while any conversation socket is: the units
	// would go while systemd still listens and activates with them.
	CodeSocketActive = "socket-active"
	// CodeStartLimit: systemd holds the conversation's units failed on a
	// start limit (its controller failed at start again and again), so
	// the socket refuses every client until `systemctl --user
	// reset-failed`; a client would otherwise see only a reset connection.
	CodeStartLimit = "start-limit"
)

// Codes of the web surface (mosaic-web, docs/web.md): what the HTTP server
// refuses before a request reaches any conversation socket. They travel in
// the server's JSON answers to the browser, never on a conversation socket.
const (
	// CodeWebHost: the request's Host is not one the server answers to
	// (DNS rebinding, or a proxy that forwards a name not configured).
	CodeWebHost = "web-host"
	// CodeWebAuth: no session cookie, or one that names no live session
	// (never issued, revoked, expired).
	CodeWebAuth = "web-auth"
	// CodeWebToken: a login token that is unknown, expired or already used.
	CodeWebToken = "web-token"
	// CodeWebOrigin: a state-changing request whose Origin is missing or
	// is not the page's own.
	CodeWebOrigin = "web-origin"
	// CodeWebCSRF: a state-changing request without the session's CSRF token.
	CodeWebCSRF = "web-csrf"
	// CodeWebTab: a command names a browser tab this session does not own
	// (closed, timed out, or another session's).
	CodeWebTab = "web-tab"
	// CodeWebPeer: the connection comes from inside an engine scope (the
	// agent's tools), or from a process the server cannot vouch for
	// (activation.Judge.JudgeConn); every request is refused, reads too.
	CodeWebPeer = "web-peer"
	// CodeWebBusy: the server is judging as many connections as it will at
	// once and this one waited too long for its turn; nothing was served.
	CodeWebBusy = "web-busy"
	// CodeWebFetchSite: a request with a session whose Sec-Fetch-Site is
	// not same-origin or none (another page, a same-site one on another
	// port included, made the browser send it), or absent.
	CodeWebFetchSite = "web-fetch-site"
)
