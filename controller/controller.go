package controller

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/internal/ids"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// Actor is the one actor of this build: every peer that passes the uid
// check is the local operator (brief §1 "Actor").
const Actor = "local-operator"

// Config is what a controller needs. Conversation, Claims, Scopes and
// Audit are required.
type Config struct {
	Conversation *conversations.Conversation
	Claims       *claims.Store
	Scopes       *scopes.Manager
	Audit        *audit.Logger
	// Spec builds the engine's command for an execution. nil means the
	// Spec of the conversation's engine (engineOf: the pinned Pi or
	// Claude Code); tests put a fake Pi here, behind the same seal. The
	// pipes are opened by the conversation's engine either way.
	Spec func(cv *conversations.Conversation) (engine.Spec, error)
	// Load re-reads the conversation's settings at each launch and
	// recover, so `conv add --replace` applies at the next launch; nil
	// means Conversation as given, for the controller's life.
	Load func() (*conversations.Conversation, error)
	// Grace is the TERM phase of a force stop before the kill phase.
	Grace time.Duration
	// CommandTimeout bounds engine commands (0: engine defaults).
	CommandTimeout time.Duration
	// AbortTimeout bounds an interrupt's abort (0: engine default).
	AbortTimeout time.Duration
	// ConfirmTTL is how long an issued confirmation stays valid.
	ConfirmTTL time.Duration
	// PollInterval is how often the session file is checked for a
	// foreign writer.
	PollInterval time.Duration
	// RecordRetry bounds the backoff between attempts to write a stopped
	// revision the claim store refused (0: 5 s).
	RecordRetry time.Duration
	// EngineMaxLine and EngineLineLimit are the engine framing bounds
	// (engine.Options.MaxLine and LineLimit; 0: the engine defaults).
	EngineMaxLine   int
	EngineLineLimit int64
	// EngineMaxQueued bounds the bytes of engine events held between the
	// adapter and the pump (engine.Options.MaxQueued; 0: the engine
	// default); past it events are lost and the binding turns uncertain.
	EngineMaxQueued int64
	// EngineStdinTimeout bounds how long a record's write to the engine's
	// stdin may go without progress (engine.Options.StdinTimeout; 0:
	// engine.DefaultStdinTimeout, 30 s). An engine that reads nothing of
	// it for longer stopped reading: nothing more is written to it and the binding turns
	// uncertain (stdinbroken.go).
	EngineStdinTimeout time.Duration
	// EngineStderr receives the engine's stderr lines, rate-limited and
	// prefixed with the execution (nil: the controller's own stderr, the
	// journal under systemd).
	EngineStderr io.Writer
	// FDStore keeps each launched engine's pipes and pidfd across a
	// controller restart (nil: none, the engine ends with the controller).
	FDStore FDStore
	// Kept are the descriptors a previous controller kept, by store name
	// (LISTEN_FDNAMES): Start re-attaches to their engine (resume.go).
	Kept map[string]*os.File
}

// Controller is the state machine of one conversation: binding, control,
// admission, dispatch, stops and recovery. Every state change happens under
// mu; the dispatch lock serialises what must not interleave with an engine
// write (a prompt's admission-to-acknowledgement, a takeover's commit, an
// interrupt's fence; never the interrupt's wait for the engine).
type Controller struct {
	cfg Config
	bus *bus
	log *audit.Logger

	dispatch sync.Mutex
	claimMu  sync.Mutex     // one claim transition at a time: a Claim is not safe for concurrent use
	writes   sync.WaitGroup // claim writes started in the background (markUncertainLocked, retryProof)
	closing  chan struct{}  // closed by Close: background retries give up
	closed   sync.Once
	stopping tally // stops running off the read loops; Close waits for them
	// crashed is the mark a previous controller kept of the claim's
	// execution (markkeep.go): set by resume, read by the re-attach or
	// adopt that follows, during start only.
	crashed *crashMark
	authMu  sync.Mutex // the auth relay apart from the engine agent directory's rebuild
	// authMasks are what an engine launched now could not read of the
	// user's files (authMasksNow): the user's auth.json is never read or
	// written where it leads into one (openUserAuth). authMasksAt is when
	// they were computed. Guarded by authMu.
	authMasks   []string
	authMasksAt time.Time

	mu    sync.Mutex
	conns map[string]*conn
	st    state

	dedup *dedupIndex
	q     *promptQueue
	confs map[string]*confirmation
	elig  *index[*eligibility]   // bounded: maxEligibilities
	stops *index[*protocol.Stop] // bounded: maxStops
	// cursors are the history page cursors handed to connections.
	cursors *cursors
	// readers bounds concurrent session reads of observes; lastSnap is the
	// latest snapshot they read, shared while the file is unchanged, and
	// lastClaude the latest Claude transcript, which the next follows.
	readers    chan struct{}
	snapMu     sync.Mutex
	lastSnap   *history.Snapshot
	lastClaude *hclaude.Transcript

	// hibernated is closed when the idle policy ended the engine with a
	// proof: the controller's process should exit (hibernate.go).
	hibernated chan struct{}
	// pollNow asks the session watch for a poll before its tick
	// (shutdown.go's awaitChecked); one pending ask is enough.
	pollNow chan struct{}
	// cmds is the command table, built once by New.
	cmds map[string]handler
	// test holds the hooks tests set; all nil in production.
	test hooks
}

// hooks are the points where a test makes a race land exactly: each runs
// when set, and none is set outside tests.
type hooks struct {
	// afterAdmit runs between a prompt's admission and its dispatch.
	afterAdmit func()
	// beforeKill runs in a force stop after the claim recorded stopping
	// and before any signal: a test stops the controller there to model
	// a crash mid-stop (K10). A crashed controller waits for nothing, so
	// Close does not wait for it.
	beforeKill func()
	// inKill runs where beforeKill does, but inside what Close waits for:
	// a test shuts the controller down there.
	inKill func()
	// beforeClaimStop runs in a force stop before the claim records
	// stopping: a test looks there at what clients were told.
	beforeClaimStop func()
	// beforeRetry runs before each background attempt to write a held
	// proof, so a test can hold the retries back.
	beforeRetry func()
	// afterInterrupt runs in an interrupt after the engine answered and
	// before the outcome is recorded, so an engine exit can land there.
	afterInterrupt func()
	// beforeAnswer runs in an approval answer after its checks and before
	// the engine write, with the dispatch lock held and mu released.
	beforeAnswer func()
	// afterQueued runs once an admitted prompt's first revision is
	// durable, before it is published; beforeDispatch before the
	// dispatched revision is written; afterDispatchRecord after it is
	// durable and before the engine write. A test stops the controller at
	// each to model a crash there.
	afterQueued    func()
	beforeDispatch func()
	// beforeReply runs once a command's handler returned, before its
	// reply is queued for the connection.
	beforeReply         func()
	afterDispatchRecord func()
	// queueFault sees every fault point of every queue revision write.
	queueFault func(point, path string) error
	// withdrawFault, when set, runs before a withdrawal reads the scope
	// unit; its error fails the withdrawal, as a user manager that does
	// not answer does.
	withdrawFault func() error
	// openFault, when set, runs before the engine's pipes are wrapped in
	// its driver, at a launch (the engine already released) and at a
	// re-attach; its error fails the open, as an adapter that refuses the
	// pipes does.
	openFault func() error
	// pumpEvent runs before the pump hands on each engine event, so a
	// test can hold the pump back while the engine writes.
	pumpEvent func(d engine.Driver)
	// recheckPolls, when set, replaces the session watch's recheckPolls,
	// so a test can leave the stat fields alone to show a change.
	recheckPolls int
}

// run calls a hook that is set.
func run(hook func()) {
	if hook != nil {
		hook()
	}
}

// state is the binding and control state; guarded by Controller.mu.
type state struct {
	binding    string // protocol.Binding* states
	admission  bool   // the controller's own gate; admissionLocked is what clients see
	reason     string // why admission is closed
	generation int64
	controller string // connection id, "" when none
	revoked    map[string]bool

	exec      *execution // the current execution, nil when none
	claim     *claims.Claim
	sessionID string
	leaf      string
	// written is the header id of a session file seen at the session path
	// during the current execution (claims.Record.Written): the stopped
	// revision carries it, so a restarted controller still knows a
	// session was written when the file has gone.
	written   string
	reconcile bool

	stop         *protocol.Stop // the running or last stop
	stopRunning  bool           // an interrupt or force stop is under way
	forceRunning bool           // a force stop is under way (one escalation at a time)
	// shown is the binding clients are shown while the binding is
	// stopping and the claim has not yet been asked to record it (the
	// binding before the stop); "" once it was (unrecorded.go).
	shown      string
	dialogSeen bool
	preflight  string // why the load check failed; prompts refuse preflight
	// pending is a cohort proof the claim store refused to record: the
	// cohort is proven gone, the claim not yet stopped (record.go).
	pending *pendingStop
	// hibernateWhy is how the conversation was idle when it last
	// hibernated ("idle for 5m0s"): its stopped revision's reason.
	hibernateWhy string
	// restart is set when this controller re-attached to a running
	// engine after a controller restart (resume.go).
	restart *protocol.Restart
}

// New returns a controller for cfg. Run starts it.
func New(cfg Config) *Controller {
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Second
	}
	if cfg.ConfirmTTL == 0 {
		cfg.ConfirmTTL = 2 * time.Minute
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	c := &Controller{
		cfg: cfg, bus: newBus(), log: cfg.Audit,
		conns: map[string]*conn{}, dedup: newDedupIndex(), q: newPromptQueue(),
		confs: map[string]*confirmation{}, elig: newIndex[*eligibility](maxEligibilities),
		stops: newIndex[*protocol.Stop](maxStops), cursors: newCursors(), closing: make(chan struct{}), hibernated: make(chan struct{}), pollNow: make(chan struct{}, 1), readers: make(chan struct{}, observeReaders),
		st: state{binding: protocol.BindingIdle, revoked: map[string]bool{}},
	}
	c.cmds = c.handlers()
	return c
}

// newID returns a random id with a prefix: k- connections, e- executions,
// s- stops, cf- confirmations, el- eligibility, rc- receipts.
func newID(prefix string) string {
	return ids.New(prefix, 8)
}

// bindingLocked projects the state for clients. Callers hold mu.
func (c *Controller) bindingLocked() protocol.Binding {
	b := protocol.Binding{
		Record: protocol.RecordBinding, Conversation: c.cfg.Conversation.ID, State: c.shownLocked(),
		Generation: c.st.generation,
		Controller: c.st.controller, SessionID: c.st.sessionID, Leaf: c.st.leaf,
		Reconcile: c.st.reconcile, EngineState: "none", LateEvents: c.bus.droppedLate(),
	}
	b.Admission, b.AdmissionReason = c.admissionFieldsLocked()
	if k := c.conns[c.st.controller]; k != nil {
		b.ControllerConnected = true
	}
	if c.st.stop != nil {
		b.LastStop = c.st.stop.ID
	}
	if x := c.st.exec; x != nil {
		b.Execution = x.id
		b.Engine = x.engineName
		if x.handle != nil { // nil only for an engine on bare pipes (tests)
			b.Cohort = string(x.handle.Cohort.Kind)
			b.Scope = x.handle.Cohort.Unit
			b.Unconfined = unconfined(x.handle.Cohort)
		}
		b.EngineState = x.engineState()
		b.EngineEnd = x.end
		b.PendingApprovals = c.pendingApprovalsLocked()
		if b.PendingApprovals > 0 && (b.EngineState == "busy" || b.EngineState == protocol.EngineIdle) {
			b.EngineState = protocol.EngineWaitingForApproval
		}
	}
	b.Restart = c.st.restart
	return b
}

// broadcastLocked sends v to every connection that said hello. Callers
// hold mu; sends are queued, never blocking on a client.
func (c *Controller) broadcastLocked(v any) {
	line, err := protocol.Line(v)
	if err != nil {
		return
	}
	for _, k := range c.conns {
		if k.hello {
			k.offer(line)
		}
	}
}

// publishBindingLocked broadcasts the binding after a change.
func (c *Controller) publishBindingLocked() {
	c.broadcastLocked(c.bindingLocked())
}

// closeAdmissionLocked closes the controller's own admission gate with a
// reason. It only sets the state: callers publish the binding once their
// whole change is made.
func (c *Controller) closeAdmissionLocked(reason string) {
	c.st.admission = false
	c.st.reason = reason
}

// audit writes one journal entry for a decision.
func (c *Controller) audit(ev audit.Event, k *conn, msg string, fields map[string]string) {
	e := audit.Entry{Event: ev, Message: msg, Fields: fields}
	if k != nil {
		e.Connection, e.Peer = k.id, k.peer
	}
	c.log.Log(e)
}

// refuse is the one way a command is refused: a refusal record to the
// client and a journal entry with the code.
func (c *Controller) refuse(k *conn, request string, r *protocol.Refusal) {
	r = clipRefusal(r)
	c.log.Log(audit.Entry{Event: audit.Refusal, Connection: k.id, Peer: k.peer, Refusal: r.Code,
		Message: fmt.Sprintf("refused %s on connection %s: %s", r.Code, k.id, r.Message),
		Fields:  map[string]string{"REQUEST": request}})
	k.send(r.Record(request))
}

// attach registers a connection that said hello and sends it the binding
// at once, so a one-shot client knows generation, execution and state
// without observing. Under mu, so every later broadcast follows it.
// detach forgets the connection. A detached controller keeps control:
// disconnect never releases it (H11).
func (c *Controller) attach(k *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[k.id] = k
	c.offerLocked(k, c.bindingLocked())
	c.offerLocked(k, c.queueRecordForLocked(k))
	c.restartNoticeLocked(k)
}

func (c *Controller) detach(k *conn) {
	k.unsubscribe(c.bus)
	c.cursors.drop(k.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, k.id)
	// A gone connection's id is never used again: what is kept about it
	// only (revoked, confirmations bound to it) goes with it, so takeovers
	// by ever new connections do not grow the state.
	delete(c.st.revoked, k.id)
	c.dropConfirmationsLocked(k.id)
	if c.st.controller == k.id {
		c.publishBindingLocked() // controllerConnected is now false
	}
}

// markUncertainLocked records uncertain in the claim in the background:
// callers hold mu, under which no claim write may wait. Close waits for it.
func (c *Controller) markUncertainLocked(reason string) {
	if c.st.claim == nil {
		return
	}
	c.writes.Add(1)
	go func() {
		defer c.writes.Done()
		c.claimDo(func(cl *claims.Claim) error { return cl.MarkUncertain(context.Background(), reason) })
	}()
}

// claimDo runs one transition of the current claim, serialised with every
// other; it is a no-op without a claim.
func (c *Controller) claimDo(f func(*claims.Claim) error) error {
	c.mu.Lock()
	cl := c.st.claim
	c.mu.Unlock()
	if cl == nil {
		return nil
	}
	c.claimMu.Lock()
	defer c.claimMu.Unlock()
	return f(cl)
}

// tally counts work that Close waits for. Unlike a WaitGroup it may rise
// again from zero while Close waits: a stop steps aside for a test's
// crash hook and comes back when the hook returns.
type tally struct {
	mu   sync.Mutex
	n    int
	zero sync.Cond
}

func (t *tally) add(d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += d
	if t.n == 0 {
		t.zero.Broadcast()
	}
}

// wait returns once nothing is counted.
func (t *tally) wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.zero.L == nil {
		t.zero.L = &t.mu
	}
	for t.n > 0 {
		t.zero.Wait()
	}
}

// goStop runs f off the caller's goroutine, counted for Close: a shutdown
// lets a stop finish (its own timeouts bound it) instead of leaving the
// claim stopping and the receipt lost.
func (c *Controller) goStop(f func()) {
	c.stopping.add(1)
	go func() {
		defer c.stopping.add(-1)
		f()
	}()
}
