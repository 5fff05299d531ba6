package terminal

import (
	"bytes"
	"fmt"

	"github.com/mosaic-agents/mosaic/client"
)

// reasons are the words a marker shows for a client.Transcript reason.
var reasons = map[string]string{
	client.ReasonNotQuiet:     "the page was read while a run was visible: near here a message may repeat or be missing (re-read after the run settles)",
	client.ReasonGap:          "events are missing here",
	client.ReasonNewExecution: "a new execution started",
	client.ReasonConflict:     "an event repeated with different content",
	client.ReasonLostPlace:    "this client fell behind the stream",
	client.ReasonReplayMissed: "the replay window no longer reached this client's place",
	client.ReasonServer:       "the controller asked for a re-read",
}

// reasonText returns the words for a reason, or the reason itself.
func reasonText(r string) string {
	if s := reasons[r]; s != "" {
		return s
	}
	return r
}

// FromView builds the Transcript of a client library view: the history
// page under a marker saying what is above it, a seam marker when the
// page and the events may not join, the events from v.From on, and a tail
// marker when the stream broke after them. The view's order, deduplication
// and markers are the client library's; the terminal and any other
// renderer of the library build the same Transcript from the same View,
// so they show the same lines (E7).
func FromView(v client.View) *Transcript { return Compose(Older{}, v) }

// Compose is FromView with the older history o read back above the
// view's page: its parts and the page's are added as one page, so the
// lines are those of the branch from o.From on, each entry once.
func Compose(o Older, v client.View) *Transcript {
	t := &Transcript{}
	t.init()
	if len(v.History) > 0 {
		if p, err := v.Page(); err != nil {
			t.notice(err.Error())
		} else {
			t.addPages(o, p)
		}
	}
	if v.SeamMarker != "" {
		t.Mark(reasonText(v.SeamMarker))
	}
	for _, e := range v.Events {
		t.Apply(e)
	}
	t.tail(v)
	return t
}

func (t *Transcript) tail(v client.View) {
	if v.TailMarker != "" {
		t.Mark(fmt.Sprintf("%s; %d later events held until the page is re-read", reasonText(v.TailMarker), v.Held))
	}
}

// Follow keeps the Transcript of successive views of one
// client.Transcript and the older history above them: equal to Compose of
// the latest, built by folding in only the events appended since the
// previous view (a streamed delta costs one event, not the conversation),
// and rebuilt when anything else changed (older history, a new page, a
// seam, a marker).
type Follow struct {
	t     *Transcript
	last  client.View
	older Older
}

// Update returns the Transcript for o above v.
func (f *Follow) Update(o Older, v client.View) *Transcript {
	l, lo := f.last, f.older
	if f.t == nil || l.TailMarker != "" || l.SeamMarker != v.SeamMarker || l.Execution != v.Execution ||
		l.From != v.From || len(v.Events) < len(l.Events) || !bytes.Equal(l.History, v.History) ||
		lo.From != o.From || len(lo.Parts) != len(o.Parts) || lo.Loading != o.Loading {
		f.t = Compose(o, v)
	} else {
		for _, e := range v.Events[len(l.Events):] {
			f.t.Apply(e)
		}
		f.t.tail(v)
	}
	f.last, f.older = v, o
	return f.t
}
