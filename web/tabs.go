package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// TabGrace is how long a tab's conversation connection outlives its event
// stream. A browser whose stream broke (a network blip, a phone waking
// up) reconnects within it to the same connection, so it keeps control
// and its place; after it the connection is closed, and control (which a
// disconnect never releases) stays with the closed connection until
// someone takes it.
const TabGrace = 30 * time.Second

// ParkFor is how long a tab whose connection was closed (its grace ran
// out, or the controller went away) keeps its place — the transcript the
// page shows, its approvals and queue — for the page to come back to. A
// page that reconnects within it gets a new connection that observes from
// the last event the page holds, so the controller's replay ring fills in
// exactly what was missed; when the ring no longer holds it, the page is
// read again and says so. maxParked bounds the places one session keeps.
const (
	ParkFor   = 10 * time.Minute
	maxParked = MaxTabs
)

// recordReconcile is the page record that says the page was read again
// because the replay ring no longer held what it missed.
const recordReconcile = "web-reconcile"

// maxOutbox bounds the records kept for a tab's stream.
const maxOutbox = 512

// tab is one browser tab's view of one conversation: its own protocol
// connection (an observer until it takes control), the client library's
// transcript of it, and the records to forward.
type tab struct {
	id, session, conv string
	c                 *client.Client
	tr                *client.Transcript
	ctx               context.Context
	cancel            context.CancelFunc

	mu     sync.Mutex
	follow terminal.Follow
	older  terminal.Older
	cursor string // reads the page before the oldest held
	// widen is how many parts the person read back above the page: the
	// stream's window (maxShownItems) grows by them, so what was asked
	// for is shown.
	widen    int
	outbox   []json.RawMessage
	dropped  uint64 // records dropped off the front of outbox
	lastStop json.RawMessage
	// approvals are the native decisions the page shows (approvals.go).
	approvals []*heldApproval
	// approvalSeq numbers the held decisions' keys (approvalchange.go).
	approvalSeq uint64
	// queue is the newest prompt queue read (queue.go), nil before the
	// first.
	queue    *queueView
	changed  chan struct{}
	attached int
	left     time.Time
	dead     string // why the connection ended, once it has
	// done is closed when read has folded the connection's last record.
	done     chan struct{}
	parkedAt time.Time
	// parkedWhy says why the connection was closed when the tab was
	// parked; closedWhy is the same carried into the resumed tab, so the
	// page can say why it observes on a new connection.
	parkedWhy, closedWhy string
}

type tabs struct {
	s      *Server
	mu     sync.Mutex
	m      map[string]*tab
	parked map[string]*tab // closed tabs that keep their place (ParkFor)
}

func newTabs(s *Server) *tabs {
	t := &tabs{s: s, m: map[string]*tab{}, parked: map[string]*tab{}}
	go t.reap()
	return t
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// open dials the conversation for a new tab of session ss and starts
// reading it. The tab observes at once: its first page and the live
// events arrive on its stream.
func (ts *tabs) open(ctx context.Context, session, conv string) (*tab, error) {
	if n := ts.ofSession(session); n >= MaxTabs {
		return nil, protocol.Refuse(protocol.CodeWebTab, "this browser session has %d conversation tabs open (at most %d); close some, or wait %s after closing for their connections to end", n, MaxTabs, TabGrace)
	}
	c, err := ts.dial(ctx, conv)
	if err != nil {
		return nil, err
	}
	t := &tab{id: newID(), session: session, conv: conv, tr: client.NewTranscript()}
	ts.start(t, c)
	ts.s.logf("tab %s: session %s opened conversation %s as connection %s", t.id, session, conv, c.Welcome().Connection)
	go t.observe(func(ctx context.Context) error { _, err := c.Observe(ctx); return err })
	return t, nil
}

// resume gives a parked tab a new connection under the same id. The new
// connection observes from the last event the transcript holds: the
// controller replays what followed from its ring, and the transcript drops
// what it already has, so the page gets neither a duplicate nor a hole.
// When the ring no longer reaches that far (or the execution changed),
// the transcript starts over from a fresh page and read marks it
// (recordReconcile).
func (ts *tabs) resume(ctx context.Context, p *tab) (*tab, error) {
	if n := ts.ofSession(p.session); n >= MaxTabs {
		ts.keep(p) // its place stays for when a tab closes
		return nil, protocol.Refuse(protocol.CodeWebTab, "this browser session has %d conversation tabs open (at most %d); close some, or wait %s after closing for their connections to end", n, MaxTabs, TabGrace)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c, err := ts.dial(ctx, p.conv)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	t := &tab{id: p.id, session: p.session, conv: p.conv, tr: p.tr, follow: p.follow, older: p.older, cursor: p.cursor, widen: p.widen,
		lastStop: p.lastStop, approvals: p.approvals, approvalSeq: p.approvalSeq, queue: p.queue, closedWhy: p.parkedWhy}
	p.mu.Unlock()
	// How the page resumes is decided by what it held when it was parked,
	// read before the new connection's records are folded: the first is a
	// binding, and one naming a new execution, folded first, would ask for
	// a fresh page, so the tab would be read again without the replay
	// missing and without the page being told (recordReconcile).
	w, next := t.tr.Pending(), t.tr.Next()
	ts.start(t, c)
	if next > 0 && (!w.Observe || w.Resume) {
		ts.s.logf("tab %s: resumed on connection %s from seq %d", t.id, c.Welcome().Connection, next-1)
		go t.observe(func(ctx context.Context) error { _, err := c.ObserveFrom(ctx, next-1); return err })
	} else {
		ts.s.logf("tab %s: reopened on connection %s with a fresh page", t.id, c.Welcome().Connection)
		go t.observe(func(ctx context.Context) error { _, err := c.Observe(ctx); return err })
	}
	return t, nil
}

func (ts *tabs) dial(ctx context.Context, conv string) (*client.Client, error) {
	path, err := ts.s.socket(ctx, conv)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Dial(dctx, path, client.Options{Name: "mosaic-web", Runs: true})
}

// start registers t on connection c and starts reading it.
func (ts *tabs) start(t *tab, c *client.Client) {
	t.c = c
	t.ctx, t.cancel = context.WithCancel(ts.s.ctx)
	t.changed, t.done = make(chan struct{}, 1), make(chan struct{})
	ts.mu.Lock()
	ts.m[t.id] = t
	ts.mu.Unlock()
	go t.read()
}

func (t *tab) observe(do func(context.Context) error) {
	if err := do(t.ctx); err != nil {
		t.push(map[string]any{"record": "web-error", "message": terminal.SanitizeLine(err.Error())})
	}
}

// unpark takes the parked tab id of session on conversation conv.
func (ts *tabs) unpark(id, session, conv string) *tab {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	p := ts.parked[id]
	if p == nil || p.session != session || p.conv != conv {
		return nil
	}
	delete(ts.parked, id)
	return p
}

// park closes t's connection, for the reason why, and keeps its place
// for ParkFor.
func (ts *tabs) park(t *tab, why string) {
	t.mu.Lock()
	t.parkedWhy = why
	t.mu.Unlock()
	ts.drop(t)
	ts.keep(t)
}

// keep holds t's place. Each session keeps at most maxParked places, its
// oldest going first: one session's pages cannot push out another's.
func (ts *tabs) keep(t *tab) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.parkedAt = time.Now()
	ts.parked[t.id] = t
	for {
		var oldest *tab
		n := 0
		for _, p := range ts.parked {
			if p.session != t.session {
				continue
			}
			n++
			if oldest == nil || p.parkedAt.Before(oldest.parkedAt) {
				oldest = p
			}
		}
		if n <= maxParked {
			return
		}
		delete(ts.parked, oldest.id)
	}
}

// get returns the tab id of session on conversation conv.
func (ts *tabs) get(id, session, conv string) *tab {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil || t.session != session || t.conv != conv {
		return nil
	}
	return t
}

// MaxTabs bounds the conversation tabs (and so the protocol connections)
// one browser session holds: a page that reconnects in a loop cannot
// exhaust a controller's connections.
const MaxTabs = 32

func (ts *tabs) ofSession(session string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, t := range ts.m {
		if t.session == session {
			n++
		}
	}
	return n
}

func (ts *tabs) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.m)
}

func (ts *tabs) drop(t *tab) {
	ts.mu.Lock()
	delete(ts.m, t.id)
	ts.mu.Unlock()
	t.cancel()
	t.c.Close()
}

func (ts *tabs) closeSession(session string) {
	ts.mu.Lock()
	for id, p := range ts.parked {
		if p.session == session {
			delete(ts.parked, id)
		}
	}
	var list []*tab
	for _, t := range ts.m {
		if t.session == session {
			list = append(list, t)
		}
	}
	ts.mu.Unlock()
	for _, t := range list {
		ts.drop(t)
	}
}

func (ts *tabs) closeAll() {
	ts.mu.Lock()
	var list []*tab
	for _, t := range ts.m {
		list = append(list, t)
	}
	ts.mu.Unlock()
	for _, t := range list {
		ts.drop(t)
	}
}

// reap closes tabs whose stream has been gone for TabGrace.
func (ts *tabs) reap() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ts.s.ctx.Done():
			return
		case <-tick.C:
		}
		ts.mu.Lock()
		for id, p := range ts.parked {
			if time.Since(p.parkedAt) > ParkFor {
				delete(ts.parked, id)
			}
		}
		var list []*tab
		for _, t := range ts.m {
			t.mu.Lock()
			if t.attached == 0 && time.Since(t.left) > ts.s.grace() {
				list = append(list, t)
			}
			t.mu.Unlock()
		}
		ts.mu.Unlock()
		for _, t := range list {
			ts.s.logf("tab %s: no stream for %s: closing its connection and keeping its place", t.id, ts.s.grace())
			ts.park(t, fmt.Sprintf("the page had no event stream for %s", ts.s.grace()))
		}
	}
}

// read folds every record of the connection into the transcript and the
// outbox, asking for the observe the transcript wants (a resume from the
// replay ring after a lost place, a fresh page after a gap).
func (t *tab) read() {
	defer close(t.done)
	for u := range t.c.Updates() {
		w := t.tr.Update(u)
		if w.Observe {
			go t.c.Reobserve(t.ctx, w)
		}
		t.mu.Lock()
		if w.Reason == client.ReasonReplayMissed {
			t.pushLocked(mustJSON(map[string]any{"record": recordReconcile, "reason": w.Reason,
				"message": "this page was away longer than the controller's replay window reaches (or the engine changed meanwhile): the conversation was read again from its history"}))
		}
		if u.Observed != nil {
			t.observedApprovalsLocked(u.Observed.Approvals)
			t.holdQueueLocked(u.Observed.Queue)
		}
		switch {
		case u.Approval != nil:
			t.holdApprovalLocked(u.Approval)
		case u.Queue != nil:
			t.holdQueueLocked(u.Queue)
		case u.Observed != nil && u.FromSeq == nil:
			// A fresh page: what was read back above the old one does
			// not join it.
			t.older, t.cursor, t.widen = terminal.Older{}, u.Observed.Cursor, 0
		case u.Stop != nil:
			t.lastStop = stopView(u.Stop)
			t.pushLocked(t.lastStop)
		case u.Notice != nil:
			t.pushLocked(noticeRecord(u.Notice))
		case u.Refusal != nil && !u.Reply:
			// A refusal no command of this tab asked for (the
			// controller's word on the connection): shown as attach
			// shows it.
			t.pushLocked(refusalRecord(u.Refusal))
		case u.Event == nil && u.Binding == nil && u.Control == nil && u.Observed == nil && u.Page == nil &&
			u.Receipt == nil && u.Confirmation == nil && u.Eligibility == nil && u.Refusal == nil:
			// A record this server does not know (a newer controller's):
			// shown as inert text, never interpreted.
			t.pushLocked(unknownRecord(u.Record, u.Raw))
		}
		t.mu.Unlock()
		t.signal()
	}
	t.mu.Lock()
	t.dead = "the conversation connection ended"
	if err := t.c.Err(); err != nil {
		t.dead = terminal.SanitizeLine(err.Error())
	}
	t.mu.Unlock()
	t.signal()
}

func (t *tab) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tab) push(v any) {
	t.mu.Lock()
	t.pushLocked(mustJSON(v))
	t.mu.Unlock()
	t.signal()
}

func (t *tab) pushLocked(raw json.RawMessage) {
	t.outbox = append(t.outbox, raw)
	if n := len(t.outbox) - maxOutbox; n > 0 {
		t.outbox = append([]json.RawMessage(nil), t.outbox[n:]...)
		t.dropped += uint64(n)
	}
}

// older reads the page before the oldest held and puts it above.
func (t *tab) readOlder(ctx context.Context) error {
	t.mu.Lock()
	cur := t.cursor
	t.older.Loading = cur != ""
	if cur == "" {
		// Nothing older to read: the page asks for the items its
		// window let go (the whole history is held already).
		t.widen += maxShownItems
		t.mu.Unlock()
		t.signal()
		return nil
	}
	t.mu.Unlock()
	t.signal()
	p, err := t.c.OlderPage(ctx, cur)
	t.mu.Lock()
	defer t.signal()
	defer t.mu.Unlock()
	t.older.Loading = false
	if err != nil {
		return err
	}
	if t.cursor != cur {
		return nil // a fresh observe replaced the chain meanwhile
	}
	var page history.Page
	if err := json.Unmarshal(p.History, &page); err != nil {
		return fmt.Errorf("decode older page: %w", err)
	}
	t.older.Prepend(&page)
	t.widen += len(page.Parts)
	t.cursor = p.Cursor
	return nil
}

// noticeRecord is a controller notice as the page shows it: the line
// attach's notice row shows (terminal.NoticeLine: the kind, the message,
// an extension update's key and text), made inert and clipped
// (recordLine).
func noticeRecord(n *protocol.Notice) json.RawMessage {
	return mustJSON(map[string]any{"record": protocol.RecordNotice, "kind": recordLine(n.Kind),
		"message": recordLine(n.Message), "line": recordLine(terminal.NoticeLine(n))})
}

// refusalRecord is a refusal no command of the tab asked for (the
// controller's word on the connection), shown as attach shows it, made
// inert and clipped.
func refusalRecord(r *protocol.RefusalRecord) json.RawMessage {
	return mustJSON(map[string]any{"record": "refusal", "code": recordLine(r.Code),
		"line": recordLine("refused: " + r.Code + ": " + r.Message)})
}

// unknownRecord is a record this server does not know (a newer
// controller's, which may quote engine text), made inert and clipped.
func unknownRecord(kind string, raw []byte) json.RawMessage {
	return mustJSON(map[string]any{"record": "unknown", "kind": recordLine(kind),
		"text": recordLine(string(raw))})
}

// stopView is a stop record as the page shows it: the controller's
// record with every string that can carry engine text made inert.
func stopView(st *protocol.Stop) json.RawMessage {
	s := *st
	s.Reason = terminal.SanitizeLine(s.Reason)
	if s.Effects != nil {
		e := *s.Effects
		e.Uncertain = append([]protocol.Effect(nil), e.Uncertain...)
		for i := range e.Uncertain {
			e.Uncertain[i].Tool = terminal.SanitizeLine(e.Uncertain[i].Tool)
			e.Uncertain[i].CallID = terminal.SanitizeLine(e.Uncertain[i].CallID)
		}
		s.Effects = &e
	}
	s.TurnProof = nil
	if len(s.Proof) > 0 {
		// The proof is the controller's record; shown as text.
		s.Proof = mustJSON(terminal.SanitizeLine(string(s.Proof)))
	}
	return mustJSON(s)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"record": "web-error", "message": err.Error()})
	}
	return b
}
