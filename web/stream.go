package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// heartbeat keeps a quiet stream open through proxies and is when a
// stream notices that its session was revoked.
const heartbeat = 5 * time.Second

// flushEvery bounds how often a streaming turn is sent: deltas that
// arrive within it go out together.
const flushEvery = 50 * time.Millisecond

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (e *sse) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return nil
}

func (e *sse) flush() error { return e.rc.Flush() }

// stateView is what the page needs of the connection's state: the view's
// generation and execution are what its commands assert.
type stateView struct {
	Conversation        string              `json:"conversation"`
	Tab                 string              `json:"tab"`
	Connection          string              `json:"connection"`
	Mode                string              `json:"mode"`
	Bound               bool                `json:"bound"`
	Generation          int64               `json:"generation"`
	Execution           string              `json:"execution"`
	Controller          string              `json:"controller"`
	ControllerConnected bool                `json:"controllerConnected"`
	State               string              `json:"state"`
	Admission           string              `json:"admission"`
	AdmissionReason     string              `json:"admissionReason"`
	EngineState         string              `json:"engineState"`
	PendingApprovals    int                 `json:"pendingApprovals"`
	Engine              string              `json:"engine"`
	Scope               string              `json:"scope"`
	LastStop            string              `json:"lastStop"`
	EngineEnd           *protocol.EngineEnd `json:"engineEnd"`
	More                bool                `json:"more"`
	Loading             bool                `json:"loading"`
	Dead                string              `json:"dead"`
	// Closed says why this tab's previous connection was closed, when
	// the tab resumed on a new one.
	Closed string `json:"closed"`
}

func (t *tab) stateLocked() stateView {
	st := t.c.State()
	v := stateView{Conversation: t.conv, Tab: t.id, Connection: st.Connection, Mode: st.Mode, Bound: st.Bound,
		Generation: st.Generation, Execution: st.Execution, Controller: st.Controller,
		More: t.cursor != "", Loading: t.older.Loading, Dead: t.dead, Closed: t.closedWhy}
	if b := st.Binding; b != nil {
		v.ControllerConnected = b.ControllerConnected
		v.State, v.Admission, v.AdmissionReason = b.State, b.Admission, terminal.SanitizeLine(b.AdmissionReason)
		v.EngineState, v.Engine, v.Scope, v.LastStop = b.EngineState, terminal.SanitizeLine(b.Engine), b.Scope, b.LastStop
		v.PendingApprovals = b.PendingApprovals
		if b.EngineEnd != nil {
			e := *b.EngineEnd
			e.Status = terminal.SanitizeLine(e.Status)
			e.Stderr = sanitizeAll(e.Stderr)
			v.EngineEnd = &e
		}
	}
	return v
}

func sanitizeAll(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = terminal.SanitizeLine(l)
	}
	return out
}

// convStream is a tab's event stream: the tab's id, then the state, the
// transcript's items (only those that changed since the last send) and the
// records to show, as they happen. ?tab= (or Last-Event-ID) reattaches to
// a tab still in its grace period: the same connection, so control and
// place are kept, and the page is sent whole again.
func (s *Server) convStream(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.guard(w, r)
	if !ok {
		return
	}
	conv := r.PathValue("id")
	if !conversations.ValidID(conv) {
		http.NotFound(w, r)
		return
	}
	id := r.URL.Query().Get("tab")
	if id == "" {
		id, _, _ = strings.Cut(r.Header.Get("Last-Event-ID"), ":")
	}
	t := s.tabs.get(id, ss.ID, conv)
	if t == nil {
		var err error
		if p := s.tabs.unpark(id, ss.ID, conv); p != nil {
			t, err = s.tabs.resume(r.Context(), p)
		} else {
			t, err = s.tabs.open(r.Context(), ss.ID, conv)
		}
		if err != nil {
			s.refuse(w, r, http.StatusBadGateway, err)
			return
		}
	}
	t.mu.Lock()
	t.attached++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.attached--
		t.left = time.Now()
		t.mu.Unlock()
	}()
	e := startSSE(w)
	var (
		sent     []terminal.Item
		sentFrom int
		last     []byte
		sentAps  map[string]string
		sentQ    *queueView
		pos      = uint64(0)
		version  = 0
	)
	t.mu.Lock()
	pos = t.dropped + uint64(len(t.outbox))
	if t.lastStop != nil {
		// A reattached or new stream still shows the latest stop and its proof.
		pos--
		if len(t.outbox) == 0 || !bytes.Equal(t.outbox[len(t.outbox)-1], t.lastStop) {
			pos++
			e.send("record", t.lastStop)
		}
	}
	t.mu.Unlock()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		t.mu.Lock()
		items := t.follow.Update(t.older, t.tr.Snapshot()).Items()
		from := t.windowFromLocked(len(items))
		st := t.stateLocked()
		var aps *approvalsChange
		aps, sentAps = t.approvalsChangeLocked(sentAps)
		q := t.queue
		var recs []json.RawMessage
		if start := pos; start < t.dropped {
			recs = append(recs, mustJSON(map[string]any{"record": "web-error", "message": fmt.Sprintf("%d records were dropped before this page read them", t.dropped-start)}))
			pos = t.dropped
		}
		recs = append(recs, t.outbox[pos-t.dropped:]...)
		pos = t.dropped + uint64(len(t.outbox))
		t.mu.Unlock()

		version++
		if b, _ := json.Marshal(st); !bytes.Equal(b, last) {
			last = b
			e.send("state", st)
		}
		if aps != nil {
			// Only the views that changed; a reattached page gets the
			// whole set the same way as a fresh one.
			e.send("approvals", aps)
		}
		if q != nil && (sentQ == nil || q.Revision > sentQ.Revision) {
			// Only a newer revision: the page never sees the queue go
			// back to an older one. A reattached stream sends it whole.
			sentQ = q
			e.send("queue", q)
		}
		if patch := diff(sent, sentFrom, items, from); patch != nil {
			sent, sentFrom = patch.next, patch.From
			fmt.Fprintf(e.w, "id: %s:%d\n", t.id, version)
			e.send("items", patch)
		}
		for _, rec := range recs {
			e.send("record", rec)
		}
		if err := e.flush(); err != nil {
			return
		}
		if st.Dead != "" {
			// The connection is gone (the controller restarted or
			// exited): the page reconnects, and its tab resumes on a new
			// connection from its place (an observer again).
			s.tabs.park(t, st.Dead)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.ctx.Done():
			e.send("gone", map[string]string{"message": "this tab's conversation connection was closed"})
			e.flush()
			return
		case <-t.changed:
			time.Sleep(flushEvery)
		case <-beat.C:
			if _, _, err := s.session(r); err != nil {
				e.send("gone", map[string]any{"message": "this browser session was revoked or expired: run `mosaicctl web` to log in again", "final": true})
				e.flush()
				s.tabs.drop(t)
				return
			}
			if s.peerGone(e, r) {
				s.tabs.drop(t)
				return
			}
			fmt.Fprint(e.w, ": heartbeat\n\n")
		}
	}
}

// maxShownItems is the window of newest items a stream holds for its
// page (more when the person read older history back: tab.widen). The
// engine's output is endless; a tab that sent every item would grow the
// page's DOM with it for as long as the tab stays open.
const maxShownItems = 1000

// windowFromLocked is the first of n items the stream holds for the page.
func (t *tab) windowFromLocked(n int) int {
	return max(0, n-maxShownItems-t.widen)
}

// patch is the change from the items a stream sent to the current ones:
// the new count, the first index of the window the page holds (those
// before it leave the page), and the items in the window that differ, by
// index.
type patch struct {
	N    int                        `json:"n"`
	From int                        `json:"from"`
	Set  map[string]json.RawMessage `json:"set"`
	next []terminal.Item
}

// diff finds the items that changed since sent and encodes only those.
// Every delta of a streamed answer wakes each open tab's stream, so the
// cost of a diff must follow the change, not the conversation: encoding
// every item to compare it cost the whole transcript per delta per tab.
// Items are compared as they are: an unchanged item comes back from the
// terminal's line cache with the very lines it had (a change renders new
// lines and never edits old ones), so comparing it costs a comparison of
// a few string headers.
//
// Only the window from from on is sent; an item below the window the page
// held before (sentFrom) was let go there, so it is sent again when the
// window moves back over it.
func diff(sent []terminal.Item, sentFrom int, items []terminal.Item, from int) *patch {
	p := &patch{N: len(items), From: from, Set: map[string]json.RawMessage{}, next: items}
	for i := from; i < len(items); i++ {
		if i < sentFrom || i >= len(sent) || !sameItem(sent[i], items[i]) {
			p.Set[strconv.Itoa(i)] = mustJSON(items[i])
		}
	}
	if len(p.Set) == 0 && len(items) == len(sent) && sent != nil && from == sentFrom {
		return nil
	}
	return p
}

func sameItem(a, b terminal.Item) bool {
	return a.Kind == b.Kind && a.Role == b.Role && a.Open == b.Open && slices.Equal(a.Lines, b.Lines)
}
