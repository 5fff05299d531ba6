package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Reasons a Transcript puts a marker in its view or asks for an observe.
const (
	// ReasonNotQuiet: the page was cut while a run was visible, so near the
	// seam a message may repeat or be missing; the page is re-read after
	// the next run-settled.
	ReasonNotQuiet = "seam-not-quiet"
	// ReasonGap: an event's seq skipped ahead; later events are held.
	ReasonGap = "gap"
	// ReasonNewExecution: events (or a binding) of another execution: a new
	// epoch, never concatenated to the old one.
	ReasonNewExecution = "new-execution"
	// ReasonConflict: an event repeated a held (execution, seq) with
	// different content.
	ReasonConflict = "conflicting-repeat"
	// ReasonLostPlace: the connection (or this client's queue) fell behind
	// and gets no events until it resumes.
	ReasonLostPlace = "lost-place"
	// ReasonReplayMissed: a resume asked for events the replay window no
	// longer holds.
	ReasonReplayMissed = "replay-missed"
	// ReasonServer: the server asked for a re-read (a reconcile notice or
	// refusal, a foreign writer, a binding that says reconcile).
	ReasonServer = "server-reconcile"
	// ReasonCompact: the transcript held CompactEvents events past its
	// page at a run's end; a fresh page holds them, and holding them as
	// events too would grow with the conversation. No marker: the page
	// read again joins the stream at a quiet seam.
	ReasonCompact = "compact"
)

// CompactEvents is how many events a Transcript holds past its page before
// it asks, at the next run-settled, for a fresh page (ReasonCompact): a
// client that stays attached to a long conversation then holds one page
// (bounded by the server) and the events of at most this many plus the run
// in progress, and every Snapshot copies no more than that.
const CompactEvents = 4096

// Want is what a Transcript needs from the server to stay correct.
type Want struct {
	// Observe is set when an observe is needed.
	Observe bool
	// Resume asks for ObserveFrom(FromSeq) (replay of what is missing)
	// rather than a fresh page.
	Resume  bool
	FromSeq uint64
	Reason  string
}

// View is a copy of what a Transcript holds, for rendering: the page, then
// the events after it in order, with markers where the two may not join.
type View struct {
	// History is the page from the last fresh observe, as the server sent it.
	History json.RawMessage
	// SeamMarker is set (a Reason) when the page and the events may
	// overlap or miss something at the seam.
	SeamMarker string
	// Execution is the execution the events belong to.
	Execution string
	// From is the seq the events start at: the seam's replayStart, the
	// first event that follows the page on the connection.
	From uint64
	// Events are the execution's events after the page, contiguous by seq
	// and deduplicated.
	Events []protocol.Event
	// TailMarker is set (a Reason) when the stream broke after Events:
	// what follows is held, not shown, until the transcript re-observes.
	TailMarker string
	// Held counts the events received past the TailMarker.
	Held int
}

// Page decodes the history page (the JSON of a history.Page).
func (v View) Page() (*history.Page, error) {
	if len(v.History) == 0 {
		return nil, errors.New("no history page: the transcript was never observed")
	}
	var p history.Page
	if err := json.Unmarshal(v.History, &p); err != nil {
		return nil, fmt.Errorf("decode history page: %w", err)
	}
	return &p, nil
}

// Transcript joins a history page and the live event stream by the seam
// rules: (execution, seq) identifies an event; an identical repeat is
// dropped; a repeat with other content, a gap or a new execution puts a
// marker after what is held and holds what follows — never concatenated —
// until the transcript is observed again. It keeps data only; it is the one
// model of order, deduplication and seams, and a renderer
// (terminal.FromView) shows a View of it without applying them again.
//
// Feed it every Update of a Client, in order; it is safe for concurrent
// use, so a renderer may take Snapshots from another goroutine.
type Transcript struct {
	mu        sync.Mutex
	observed  bool
	history   json.RawMessage
	execution string
	base      uint64 // seq of events[0]; earlier seqs are in the page
	events    []protocol.Event
	seam      string
	tail      string
	held      int
	reread    bool // re-read the page after the next run-settled
	reconcile bool // the last binding read said reconcile
	want      Want
}

// NewTranscript returns an empty transcript that needs a fresh observe.
func NewTranscript() *Transcript {
	return &Transcript{want: Want{Observe: true}}
}

// Update folds one record of the stream into the transcript. It returns a
// Want with Observe set only when a new need arises, so calling Reobserve
// on each such Want asks once per need; Pending reports the current one.
func (t *Transcript) Update(u Update) Want {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case u.Event != nil:
		var w Want
		for d := range u.Event.Deltas() {
			// A run is applied as the deltas it stands for, one by one:
			// the seam rules and a conflict's comparison are per seq.
			if got := t.apply(d); got != (Want{}) {
				w = got
			}
		}
		return w
	case u.Observed != nil:
		return t.observe(u.Observed, u.FromSeq)
	case u.Notice != nil:
		return t.notice(u.Notice)
	case u.Binding != nil:
		return t.binding(u.Binding)
	case u.Refusal != nil && u.Refusal.Reconcile:
		return t.mark(ReasonServer, Want{Observe: true, Reason: ReasonServer})
	}
	return Want{}
}

// Pending returns the observe the transcript still waits for, if any.
func (t *Transcript) Pending() Want {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.want
}

// Snapshot returns a copy of the transcript's content.
func (t *Transcript) Snapshot() View {
	t.mu.Lock()
	defer t.mu.Unlock()
	return View{
		History:    append(json.RawMessage(nil), t.history...),
		SeamMarker: t.seam,
		Execution:  t.execution,
		From:       t.base,
		Events:     append([]protocol.Event(nil), t.events...),
		TailMarker: t.tail,
		Held:       t.held,
	}
}

// Next returns the seq the transcript expects next, and the last seq it
// holds is Next()-1: what ObserveFrom takes after a lost place.
func (t *Transcript) Next() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next()
}

func (t *Transcript) next() uint64 { return t.base + uint64(len(t.events)) }

// observe applies an observed reply.
//
// A resume (fromSeq set) is clean when it continues what the transcript
// holds: the same execution, no server-side reconcile, and a replay window
// that still reaches fromSeq+1. Then the page and the events stay and the
// replay continues them. (The seam's own reconcile flag is not used here:
// the server sets it whenever a run is visible, which matters for a new
// page, not for a resume that keeps the old one.)
//
// Anything else starts over from the new page. The events continue at the
// seam's ReplayStart: after a quiet cut the page holds every event up to
// ReplayUntil, so that is ReplayUntil+1; after a cut that is not quiet the
// server replays the running turn from its last settled run, and the seam
// marker stays until a quiet re-read after the next run-settled. (A seam
// without ReplayStart, from a server older than the field, is read as
// continuing at ReplayUntil+1.) A resume that was not clean also asks for
// a fresh page, because its replay overlaps this one with events that
// cannot be matched to it.
func (t *Transcript) observe(obs *protocol.Observed, fromSeq *uint64) Want {
	t.reconcile = obs.Binding.Reconcile
	if fromSeq != nil && t.observed && !obs.Binding.Reconcile && obs.Seam.Execution == t.execution &&
		(obs.Seam.ReplayFrom == 0 || *fromSeq+1 >= obs.Seam.ReplayFrom) && *fromSeq < t.next() {
		if t.want.Observe && !t.want.Resume {
			return Want{} // a fresh observe is still owed; keep holding
		}
		t.tail, t.held, t.want = "", 0, Want{}
		return Want{}
	}
	t.observed = true
	t.history = obs.History
	t.execution = obs.Seam.Execution
	t.base = obs.Seam.ReplayStart
	if t.base == 0 {
		t.base = obs.Seam.ReplayUntil + 1
	}
	t.events = nil
	t.tail, t.held, t.seam = "", 0, ""
	t.want, t.reread = Want{}, false
	if fromSeq != nil {
		return t.mark(ReasonReplayMissed, Want{Observe: true, Reason: ReasonReplayMissed})
	}
	if !obs.Seam.Quiet || obs.Seam.Reconcile {
		t.seam, t.reread = ReasonNotQuiet, true
	}
	return Want{}
}

// apply adds one event under the seam rules.
func (t *Transcript) apply(ev protocol.Event) Want {
	if !t.observed || t.tail != "" {
		t.held++
		return Want{}
	}
	if ev.Execution != t.execution {
		t.held++
		return t.mark(ReasonNewExecution, Want{Observe: true, Reason: ReasonNewExecution})
	}
	next := t.next()
	switch {
	case ev.Seq < t.base:
		return Want{} // before the cut: the page holds it
	case ev.Seq < next:
		if bytes.Equal(canonical(ev), canonical(t.events[ev.Seq-t.base])) {
			return Want{} // identical repeat
		}
		t.held++
		return t.mark(ReasonConflict, Want{Observe: true, Reason: ReasonConflict})
	case ev.Seq > next:
		t.held++
		return t.mark(ReasonGap, Want{Observe: true, Resume: true, FromSeq: next - 1, Reason: ReasonGap})
	}
	t.events = append(t.events, ev)
	switch {
	case ev.Kind != protocol.EventRunSettled:
	case t.reread:
		t.reread = false
		return t.ask(Want{Observe: true, Reason: ReasonNotQuiet})
	case len(t.events) >= CompactEvents:
		return t.ask(Want{Observe: true, Reason: ReasonCompact})
	}
	return Want{}
}

func (t *Transcript) notice(n *protocol.Notice) Want {
	switch n.Kind {
	case protocol.NoticeLostPlace:
		if !t.observed {
			return t.ask(Want{Observe: true, Reason: ReasonLostPlace})
		}
		return t.mark(ReasonLostPlace, Want{Observe: true, Resume: true, FromSeq: t.next() - 1, Reason: ReasonLostPlace})
	case protocol.NoticeReconcile, protocol.NoticeForeignWriter:
		return t.mark(ReasonServer, Want{Observe: true, Reason: ReasonServer})
	}
	return Want{}
}

func (t *Transcript) binding(b *protocol.Binding) Want {
	was := t.reconcile
	t.reconcile = b.Reconcile
	switch {
	case !t.observed:
		return Want{}
	case b.Execution != "" && b.Execution != t.execution:
		return t.mark(ReasonNewExecution, Want{Observe: true, Reason: ReasonNewExecution})
	case b.Reconcile && !was:
		return t.mark(ReasonServer, Want{Observe: true, Reason: ReasonServer})
	}
	return Want{}
}

// mark puts a marker after the events (the first reason stays) and asks
// for w.
func (t *Transcript) mark(reason string, w Want) Want {
	if t.tail == "" {
		t.tail = reason
	}
	return t.ask(w)
}

// ask records w as the pending need and returns it if it is new. A fresh
// observe supersedes a resume; nothing supersedes a fresh observe.
func (t *Transcript) ask(w Want) Want {
	switch {
	case t.want.Observe && !t.want.Resume:
		return Want{}
	case t.want.Observe && w.Resume:
		return Want{}
	}
	t.want = w
	return w
}

// canonical returns the bytes an event is compared by: its re-encoding, so
// two deliveries of one record compare equal whatever the server's
// spacing, and any difference in content does not. It is computed when a
// repeat arrives (rare: an overlapping replay), not kept per event.
func canonical(ev protocol.Event) []byte {
	b, _ := json.Marshal(ev) // an Event always encodes
	return b
}
