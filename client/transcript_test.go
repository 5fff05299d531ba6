package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Builders for the transcript's input, one Update each.

func ev(exec string, seq uint64, text string) Update {
	return Update{Record: protocol.RecordEvent, Event: &protocol.Event{Record: protocol.RecordEvent,
		Kind: protocol.EventTextDelta, Execution: exec, Seq: seq, Text: text}}
}

func settled(exec string, seq uint64) Update {
	return Update{Record: protocol.RecordEvent, Event: &protocol.Event{Record: protocol.RecordEvent,
		Kind: protocol.EventRunSettled, Execution: exec, Seq: seq}}
}

// obs is an observed reply whose window holds every seq up to until; from
// is nil for a fresh observe.
func obs(page, exec string, until uint64, quiet, reconcile bool, from *uint64) Update {
	first := uint64(0)
	if until > 0 {
		first = 1
	}
	return obsWindow(page, exec, first, until, quiet, reconcile, from)
}

func obsWindow(page, exec string, first, until uint64, quiet, reconcile bool, from *uint64) Update {
	return Update{Record: protocol.RecordObserved, FromSeq: from, Observed: &protocol.Observed{Record: protocol.RecordObserved,
		History: json.RawMessage(page), Binding: protocol.Binding{Execution: exec},
		Seam: protocol.Seam{Execution: exec, Replay: "available", ReplayFrom: first, ReplayUntil: until,
			ReplayStart: until + 1, Quiet: quiet, Reconcile: reconcile}}}
}

// startingAt sets where the events after an observed reply start: a cut
// that is not quiet replays the running turn from before ReplayUntil.
func startingAt(u Update, start uint64) Update {
	o := *u.Observed
	o.Seam.ReplayStart = start
	u.Observed = &o
	return u
}

func notice(kind string) Update {
	return Update{Record: protocol.RecordNotice, Notice: &protocol.Notice{Record: protocol.RecordNotice, Kind: kind}}
}

func binding(exec string, reconcile bool) Update {
	return Update{Record: protocol.RecordBinding, Binding: &protocol.Binding{Record: protocol.RecordBinding, Execution: exec, Reconcile: reconcile}}
}

func seq(n uint64) *uint64 { return &n }

// texts renders a view compactly: page|seam marker|event texts|tail marker+held.
func texts(v View) string {
	var b strings.Builder
	b.WriteString(string(v.History))
	if v.SeamMarker != "" {
		b.WriteString(" <" + v.SeamMarker + ">")
	}
	for _, e := range v.Events {
		fmt.Fprintf(&b, " %s%d", e.Text, e.Seq)
	}
	if v.TailMarker != "" {
		fmt.Fprintf(&b, " <%s+%d>", v.TailMarker, v.Held)
	}
	return b.String()
}

func TestTranscript(t *testing.T) {
	fresh := func(reason string) Want { return Want{Observe: true, Reason: reason} }
	resume := func(from uint64, reason string) Want {
		return Want{Observe: true, Resume: true, FromSeq: from, Reason: reason}
	}
	tests := []struct {
		name  string
		steps []Update
		wants []Want // the Want each step returned, in order; missing ones are Want{}
		view  string
	}{
		{
			name:  "page then contiguous events",
			steps: []Update{obs("P", "x", 2, true, false, nil), ev("x", 3, "a"), ev("x", 4, "b")},
			view:  "P a3 b4",
		},
		{
			name:  "events before the cut are in the page",
			steps: []Update{obs("P", "x", 2, true, false, nil), ev("x", 1, "old"), ev("x", 2, "old"), ev("x", 3, "a")},
			view:  "P a3",
		},
		{
			name:  "an identical repeat is dropped",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), ev("x", 2, "b"), ev("x", 1, "a")},
			view:  "P a1 b2",
		},
		{
			name:  "a repeat with other content marks and holds",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), ev("x", 1, "z"), ev("x", 2, "b")},
			wants: []Want{{}, {}, fresh(ReasonConflict), {}},
			view:  "P a1 <conflicting-repeat+2>",
		},
		{
			name:  "a gap is never concatenated and asks to resume",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), ev("x", 3, "c"), ev("x", 4, "d")},
			wants: []Want{{}, {}, resume(1, ReasonGap), {}},
			view:  "P a1 <gap+2>",
		},
		{
			name: "a clean resume after a gap continues the stream",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), ev("x", 3, "c"),
				obs("P2", "x", 3, true, false, seq(1)), ev("x", 2, "b"), ev("x", 3, "c")},
			wants: []Want{{}, {}, resume(1, ReasonGap)},
			view:  "P a1 b2 c3",
		},
		{
			name: "a new execution is a new epoch",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), ev("y", 1, "n"),
				obs("P2", "y", 1, true, false, nil), ev("y", 2, "m")},
			wants: []Want{{}, {}, fresh(ReasonNewExecution)},
			view:  "P2 m2",
		},
		{
			name:  "a binding naming another execution asks for a fresh page",
			steps: []Update{obs("P", "x", 0, true, false, nil), binding("y", false)},
			wants: []Want{{}, fresh(ReasonNewExecution)},
			view:  "P <new-execution+0>",
		},
		{
			name: "a cut that is not quiet re-reads after the next run-settled",
			steps: []Update{obs("P", "x", 0, false, true, nil), ev("x", 1, "a"), settled("x", 2),
				obs("P2", "x", 2, true, false, nil)},
			wants: []Want{{}, {}, fresh(ReasonNotQuiet), {}},
			view:  "P2",
		},
		{
			name: "a cut that is not quiet replays from the last settled run",
			steps: []Update{startingAt(obs("P", "x", 5, false, true, nil), 4), ev("x", 4, "a"), ev("x", 5, "b"), ev("x", 6, "c"),
				ev("x", 3, "old")},
			view: "P <seam-not-quiet> a4 b5 c6",
		},
		{
			name:  "a replay that does not start at replayStart is a gap",
			steps: []Update{startingAt(obs("P", "x", 5, false, true, nil), 4), ev("x", 5, "b"), ev("x", 6, "c")},
			wants: []Want{{}, resume(3, ReasonGap), {}},
			view:  "P <seam-not-quiet> <gap+2>",
		},
		{
			name:  "a cut that is not quiet and replays nothing continues after the window",
			steps: []Update{obs("P", "x", 5, false, true, nil), ev("x", 6, "c")},
			view:  "P <seam-not-quiet> c6",
		},
		{
			name: "a resume during a running turn is clean when the window reaches",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), notice(protocol.NoticeLostPlace),
				obsWindow("P2", "x", 1, 3, false, true, seq(1)), ev("x", 2, "b"), ev("x", 3, "c")},
			wants: []Want{{}, {}, resume(1, ReasonLostPlace)},
			view:  "P a1 b2 c3",
		},
		{
			name: "a resume while the server reconciles starts over",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), notice(protocol.NoticeLostPlace),
				{Record: protocol.RecordObserved, FromSeq: seq(1), Observed: &protocol.Observed{History: json.RawMessage("P2"),
					Binding: protocol.Binding{Execution: "x", Reconcile: true},
					Seam:    protocol.Seam{Execution: "x", ReplayFrom: 1, ReplayUntil: 1, Quiet: true}}}},
			wants: []Want{{}, {}, resume(1, ReasonLostPlace), fresh(ReasonReplayMissed)},
			view:  "P2 <replay-missed+0>",
		},
		{
			name:  "the seam marker stays until a quiet read",
			steps: []Update{obs("P", "x", 0, false, false, nil), ev("x", 1, "a")},
			view:  "P <seam-not-quiet> a1",
		},
		{
			name:  "lost place asks to resume from the last seq held",
			steps: []Update{obs("P", "x", 4, true, false, nil), ev("x", 5, "a"), notice(protocol.NoticeLostPlace), ev("x", 9, "late")},
			wants: []Want{{}, {}, resume(5, ReasonLostPlace), {}},
			view:  "P a5 <lost-place+1>",
		},
		{
			name: "a resume that missed the window starts over and asks for a fresh page",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), notice(protocol.NoticeLostPlace),
				obsWindow("P2", "x", 40, 50, true, true, seq(1)), ev("x", 40, "replayed")},
			wants: []Want{{}, {}, resume(1, ReasonLostPlace), fresh(ReasonReplayMissed), {}},
			view:  "P2 <replay-missed+1>",
		},
		{
			name:  "a fresh need is not replaced by a resume",
			steps: []Update{obs("P", "x", 0, true, false, nil), notice(protocol.NoticeForeignWriter), notice(protocol.NoticeLostPlace)},
			wants: []Want{{}, fresh(ReasonServer), {}},
			view:  "P <server-reconcile+0>",
		},
		{
			name: "a clean resume does not clear a fresh need",
			steps: []Update{obs("P", "x", 0, true, false, nil), ev("x", 1, "a"), notice(protocol.NoticeReconcile),
				obs("P", "x", 1, true, false, seq(1)), ev("x", 2, "b")},
			wants: []Want{{}, {}, fresh(ReasonServer)},
			view:  "P a1 <server-reconcile+1>",
		},
		{
			name:  "a binding that turns reconcile asks once",
			steps: []Update{obs("P", "x", 0, true, false, nil), binding("x", true), binding("x", true)},
			wants: []Want{{}, fresh(ReasonServer), {}},
			view:  "P <server-reconcile+0>",
		},
		{
			name: "a refusal that says reconcile asks for a fresh page",
			steps: []Update{obs("P", "x", 0, true, false, nil),
				{Record: protocol.RecordRefusal, Refusal: &protocol.RefusalRecord{Code: "target", Reconcile: true}}},
			wants: []Want{{}, fresh(ReasonServer)},
			view:  "P <server-reconcile+0>",
		},
		{
			name:  "events before any observe are held",
			steps: []Update{ev("x", 1, "a"), obs("P", "x", 1, true, false, nil), ev("x", 2, "b")},
			view:  "P b2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTranscript()
			if w := tr.Pending(); !w.Observe || w.Resume {
				t.Fatalf("a new transcript wants %+v, not a fresh observe", w)
			}
			for i, u := range tt.steps {
				got := tr.Update(u)
				var want Want
				if i < len(tt.wants) {
					want = tt.wants[i]
				}
				if got != want {
					t.Fatalf("step %d (%s): want %+v, got %+v", i, u.Record, want, got)
				}
			}
			if got := texts(tr.Snapshot()); got != tt.view {
				t.Fatalf("view %q, want %q", got, tt.view)
			}
		})
	}
}

func TestTranscriptSnapshotIsACopy(t *testing.T) {
	tr := NewTranscript()
	tr.Update(obs("P", "x", 0, true, false, nil))
	tr.Update(ev("x", 1, "a"))
	v := tr.Snapshot()
	v.Events[0].Text = "changed"
	v.History[0] = 'Q'
	if got := texts(tr.Snapshot()); got != "P a1" {
		t.Fatalf("the transcript changed through a snapshot: %q", got)
	}
	if tr.Next() != 2 {
		t.Fatalf("Next %d, want 2", tr.Next())
	}
}

func TestViewPage(t *testing.T) {
	tr := NewTranscript()
	if _, err := tr.Snapshot().Page(); err == nil {
		t.Fatal("a page before any observe")
	}
	tr.Update(obs(`{"session":"s","branch":"b","defaultBranch":"b","snapshot":"n","from":0,"parts":[{"entry":"n.1","kind":"message","role":"user","line":2,"part":0,"lastPart":true}],"more":false}`, "x", 3, true, false, nil))
	v := tr.Snapshot()
	p, err := v.Page()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Parts) != 1 || p.Parts[0].Role != "user" || v.From != 4 {
		t.Fatalf("page %+v, from %d", p, v.From)
	}
}

// TestTranscriptCompacts: past CompactEvents events a transcript asks for
// a fresh page at the next run-settled (never inside a run, where the cut
// would not be quiet), and the page read again replaces the events, so
// what it holds stays bounded however long the conversation.
func TestTranscriptCompacts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int // deltas before the run-settled
		want   Want
	}{
		{"below the bound", CompactEvents - 2, Want{}},
		{"at the bound", CompactEvents - 1, Want{Observe: true, Reason: ReasonCompact}},
		{"past the bound", 2 * CompactEvents, Want{Observe: true, Reason: ReasonCompact}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTranscript()
			tr.Update(obs("P", "x", 0, true, false, nil))
			for i := 1; i <= tc.events; i++ {
				if w := tr.Update(ev("x", uint64(i), "d")); w != (Want{}) {
					t.Fatalf("delta %d inside the run asked for %+v", i, w)
				}
			}
			last := uint64(tc.events + 1)
			if w := tr.Update(settled("x", last)); w != tc.want {
				t.Fatalf("run-settled after %d deltas asked for %+v, want %+v", tc.events, w, tc.want)
			}
			if !tc.want.Observe {
				return
			}
			tr.Update(obs("P2", "x", last, true, false, nil))
			v := tr.Snapshot()
			if string(v.History) != "P2" || len(v.Events) != 0 || v.From != last+1 || v.TailMarker != "" || v.SeamMarker != "" {
				t.Fatalf("after the fresh page: %s from %d, %d events", texts(v), v.From, len(v.Events))
			}
			if w := tr.Update(ev("x", last+1, "n")); w != (Want{}) || tr.Next() != last+2 {
				t.Fatalf("the stream after the fresh page: want %+v, next %d", w, tr.Next())
			}
		})
	}
}
