package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// Event names a kind of audited decision; it is the MOSAIC_EVENT field.
type Event string

// Audited event kinds.
const (
	Start      Event = "start"      // the controller is serving
	Stop       Event = "stop"       // the controller stops serving
	Connect    Event = "connect"    // a client connected (peer credentials read)
	Hello      Event = "hello"      // a client's hello was accepted
	Refusal    Event = "refusal"    // anything refused, with MOSAIC_REFUSAL
	Disconnect Event = "disconnect" // a client went away

	Admission    Event = "admission"    // a command was admitted
	Receipt      Event = "receipt"      // a receipt was issued or revised
	Takeover     Event = "takeover"     // control changed hands
	Transition   Event = "transition"   // a binding or stop state changed
	Proof        Event = "proof"        // a cohort or boot proof was recorded
	Confirmation Event = "confirmation" // a confirmation was issued, answered or used
	Launch       Event = "launch"       // an engine execution was launched
	Foreign      Event = "foreign"      // a foreign writer appended to the session
)

// messageIDs are stable journald MESSAGE_IDs, one per event kind: never
// change a published one, add new kinds with fresh random IDs.
var messageIDs = map[Event]string{
	Start:      "9c753fd6c21a419b9449c377682266ce",
	Stop:       "b9b32963fd434412a2eb3a84a1e5ec17",
	Connect:    "a153224599504e699b12f7e1ebbdb46c",
	Hello:      "e8e56a1e55b04767a85bd32ecf7d03db",
	Refusal:    "22dbbcc40a23478aa737edaf547c6b0d",
	Disconnect: "9c9ba9116af34819b5790ba601b6da37",

	Admission:    "6afe62bf1aa942d68488da45a063898b",
	Receipt:      "aabd788c8977477da8b2cded3b293845",
	Takeover:     "362918a79db34a5280a5ae9573cafe07",
	Transition:   "204970fd173a4cd9a79b1866707741ae",
	Proof:        "54eaf4b398ba420dae7752f9b1e70904",
	Confirmation: "9aeb19a2f50f4e36b31d4c91ff829ebe",
	Launch:       "8cd0ab1ca3d141f8a6468d9de90d4eae",
	Foreign:      "e5d5480d32d54289a100d23c58e3bf34",
}

// MessageID returns the journald MESSAGE_ID of an event kind.
func MessageID(e Event) string { return messageIDs[e] }

// Entry is one audited decision.
type Entry struct {
	Event      Event
	Message    string // the human line (MESSAGE)
	Connection string // MOSAIC_CONNECTION, when a connection is involved
	Peer       *Peer  // MOSAIC_PEER_UID and MOSAIC_PEER_PID, when known
	Refusal    string // MOSAIC_REFUSAL, the refusal code
	// Engine names what the engine's own output caused (an approval
	// opened, or settled by the engine), MOSAIC_ENGINE_CAUSED: the engine
	// repeats it at will, so it is counted like a peer's entries.
	Engine string
	// Fields are further MOSAIC_ fields, named without the prefix.
	Fields map[string]string
}

// Peer is a client's identity as the kernel reported it (SO_PEERCRED).
type Peer struct {
	UID int
	PID int
}

// Logger audits the decisions of one conversation's controller. It is
// safe for concurrent use.
type Logger struct {
	conversation string
	mu           sync.Mutex
	fallback     io.Writer // nil when the journal is used
	send         func(msg string, p journal.Priority, vars map[string]string) error
	agg          *aggregator
}

// Option configures a Logger.
type Option func(*Logger)

// WithAggregation sets how many entries of one (event, refusal code) a
// peer's connections may cause per window before they are counted instead
// of written (defaults Burst and Window). burst < 1 is taken as 1.
func WithAggregation(burst int, window time.Duration) Option {
	return func(l *Logger) {
		if burst < 1 {
			burst = 1
		}
		l.agg.burst, l.agg.window = burst, window
	}
}

// withSend replaces journal.Send (tests).
func withSend(send func(string, journal.Priority, map[string]string) error) Option {
	return func(l *Logger) { l.send, l.fallback = send, nil }
}

// New returns a Logger for a conversation. It writes to the journal when
// one is reachable and to stderr otherwise.
func New(conversation string, opts ...Option) *Logger {
	l := &Logger{conversation: conversation, send: journal.Send, agg: newAggregator()}
	if !journal.Enabled() {
		l.fallback = os.Stderr
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// NewWriter returns a Logger that writes JSON lines to w, for tests and
// for `serve --listen` outside systemd.
func NewWriter(conversation string, w io.Writer, opts ...Option) *Logger {
	l := &Logger{conversation: conversation, fallback: w, agg: newAggregator()}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Log writes one entry, or counts it when it is one of a peer's repeated
// entries beyond the window's burst. A decision first writes the counts
// of everything held back before it. An entry the journal refuses goes to
// stderr (as a JSON line with MOSAIC_JOURNAL_ERROR) rather than being
// lost.
func (l *Logger) Log(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if peerCaused(e) {
		admitted := l.agg.admit(e, l.summaryFunc())
		for _, s := range l.agg.takeReady() {
			l.writeLocked(s, journal.PriNotice)
		}
		if !admitted {
			return
		}
	} else {
		l.flushLocked()
	}
	prio := journal.PriNotice
	if peerCaused(e) {
		prio = journal.PriInfo
	}
	l.writeLocked(e, prio)
}

// Flush writes the counts held back so far; a controller calls it before
// it exits so that no count is lost.
func (l *Logger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *Logger) flushLocked() {
	for _, s := range l.agg.drain() {
		l.writeLocked(s, journal.PriNotice)
	}
}

// summaryFunc is what a window's timer calls when it ends.
func (l *Logger) summaryFunc() func(aggKey, *tally) {
	return func(k aggKey, t *tally) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if s, ok := l.agg.expire(k, t); ok {
			l.writeLocked(s, journal.PriNotice)
		}
	}
}

// peerCaused reports whether an entry is one a peer's connection or the
// engine's output causes and so may repeat at their will. Everything else
// is a decision.
func peerCaused(e Entry) bool {
	if e.Engine != "" {
		return true
	}
	switch e.Event {
	case Connect, Hello, Disconnect, Refusal:
		return e.Connection != ""
	case Receipt: // an exact retry: the same record again, nothing dispatched
		return e.Connection != "" && e.Fields["RETRY"] == "true"
	}
	return false
}

// writeLocked writes one entry: decisions and counts at notice, what a
// peer's connection caused at info (see the package doc).
func (l *Logger) writeLocked(e Entry, prio journal.Priority) {
	vars := l.fields(e)
	msg := bound(OneLine(e.Message), MaxMessage)
	out := l.fallback
	if out == nil {
		err := l.send(msg, prio, vars)
		if err == nil {
			return
		}
		// This entry goes to stderr; the next one tries the journal again
		// (journald restarts, a full socket buffer), so one failure does
		// not strip every later entry of its fields.
		vars["MOSAIC_JOURNAL_ERROR"] = bound(err.Error(), MaxField)
		out = os.Stderr
	}
	vars["MESSAGE"] = msg
	vars["PRIORITY"] = strconv.Itoa(int(prio))
	b, _ := json.Marshal(vars)
	fmt.Fprintf(out, "%s\n", b)
}

func (l *Logger) fields(e Entry) map[string]string {
	vars := map[string]string{
		"MESSAGE_ID":          messageIDs[e.Event],
		"MOSAIC_EVENT":        string(e.Event),
		"MOSAIC_CONVERSATION": bound(l.conversation, MaxField),
	}
	if e.Connection != "" {
		vars["MOSAIC_CONNECTION"] = bound(e.Connection, MaxField)
	}
	if e.Peer != nil {
		vars["MOSAIC_PEER_UID"] = strconv.Itoa(e.Peer.UID)
		vars["MOSAIC_PEER_PID"] = strconv.Itoa(e.Peer.PID)
	}
	if e.Refusal != "" {
		vars["MOSAIC_REFUSAL"] = bound(e.Refusal, MaxField)
	}
	if e.Engine != "" {
		vars["MOSAIC_ENGINE_CAUSED"] = bound(e.Engine, MaxField)
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validName(k) {
			continue // journald would refuse the whole entry
		}
		v := e.Fields[k]
		if k == "PROOF" {
			if len(v) > MaxProof {
				vars["MOSAIC_PROOF_OMITTED"] = strconv.Itoa(len(v))
				continue
			}
			vars["MOSAIC_PROOF"] = v
			continue
		}
		vars["MOSAIC_"+k] = bound(v, MaxField)
	}
	return vars
}
