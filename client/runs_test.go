package client

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestDialAsksForRuns: a client asks for runs of deltas only with
// Options.Runs, and says hello again in protocol 1 to a server older
// than runs.
func TestDialAsksForRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runs    bool
		speaks  int
		welcome int
		hellos  []int
	}{
		{"runs asked", true, 0, 2, []int{2}},
		{"runs not asked", false, 0, 1, []int{1}},
		{"runs asked of an older server", true, 1, 1, []int{2, 1}},
		{"runs not asked of an older server", false, 1, 1, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(f *fakeServer) { f.speaks = tc.speaks })
			c := dial(t, f, Options{Runs: tc.runs})
			if c.Welcome().Protocol != tc.welcome {
				t.Errorf("the welcome names protocol %d, want %d", c.Welcome().Protocol, tc.welcome)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !slices.Equal(f.hellos, tc.hellos) {
				t.Errorf("hellos named protocols %v, want %v", f.hellos, tc.hellos)
			}
		})
	}
}

// TestRunsTakenOnlyAsAsked: a run of deltas reaches Updates whole on a
// connection that asked for runs; on one that did not, or when the run
// is one the protocol does not allow, the connection ends as a protocol
// violation.
func TestRunsTakenOnlyAsAsked(t *testing.T) {
	run := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "x", Seq: 5, Message: "m",
		Role: "assistant", Block: protocol.Ordinal(0), BlockType: "text", Fragment: protocol.Ordinal(4),
		UpdateMode: protocol.UpdateAppend, Texts: []string{"a", "\"b\"", "c\n"}}
	closing := run
	closing.LastFragment = true
	end := run
	end.Kind = protocol.EventMessageEnd
	for _, tc := range []struct {
		name string
		runs bool
		ev   protocol.Event
		ok   bool
	}{
		{"asked", true, run, true},
		{"not asked", false, run, false},
		{"a closing fragment in a run", true, closing, false},
		{"a message-end with texts", true, end, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			c := dial(t, f, Options{Runs: tc.runs})
			f.mu.Lock()
			f.broadcast(func(*fakeConn) any { return tc.ev })
			f.mu.Unlock()
			for u := range c.Updates() {
				if u.Event == nil {
					continue
				}
				if !tc.ok {
					t.Fatalf("the client delivered %+v", u.Event)
				}
				want := tc.ev
				if !reflect.DeepEqual(*u.Event, want) {
					t.Fatalf("delivered %+v, want %+v", *u.Event, want)
				}
				return
			}
			if tc.ok || !errors.Is(c.Err(), ErrProtocol) {
				t.Fatalf("the connection ended: %v; want a delivered run (%v) or a protocol violation", c.Err(), tc.ok)
			}
		})
	}
}

// TestTranscriptTakesRuns: a transcript given a run holds what it holds
// given the run's deltas one by one.
func TestTranscriptTakesRuns(t *testing.T) {
	obs := &protocol.Observed{Record: protocol.RecordObserved,
		Seam: protocol.Seam{Execution: "x", Replay: "available", ReplayStart: 1, Quiet: true}}
	start := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventMessageStart, Execution: "x", Seq: 1, Message: "m", Role: "assistant"}
	run := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "x", Seq: 2, Message: "m",
		Role: "assistant", Block: protocol.Ordinal(0), BlockType: "text", Fragment: protocol.Ordinal(0),
		UpdateMode: protocol.UpdateAppend, Texts: []string{"a", "b", "c"}}
	next := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "x", Seq: 5, Message: "m",
		Role: "assistant", Block: protocol.Ordinal(0), BlockType: "text", Fragment: protocol.Ordinal(3),
		UpdateMode: protocol.UpdateAppend, Text: "d"}
	whole, split := NewTranscript(), NewTranscript()
	for _, tr := range []*Transcript{whole, split} {
		tr.Update(Update{Record: protocol.RecordObserved, Observed: obs})
		tr.Update(Update{Record: protocol.RecordEvent, Event: &start})
	}
	if w := whole.Update(Update{Record: protocol.RecordEvent, Event: &run}); w != (Want{}) {
		t.Fatalf("a run in order wants %+v", w)
	}
	for d := range run.Deltas() {
		split.Update(Update{Record: protocol.RecordEvent, Event: &d})
	}
	for _, tr := range []*Transcript{whole, split} {
		if w := tr.Update(Update{Record: protocol.RecordEvent, Event: &next}); w != (Want{}) {
			t.Fatalf("the delta after the run wants %+v", w)
		}
	}
	a, b := whole.Snapshot(), split.Snapshot()
	if !reflect.DeepEqual(a, b) || len(a.Events) != 5 {
		t.Fatalf("a run gave\n%+v\nits deltas one by one\n%+v", a, b)
	}
	// A run that repeats events held and goes on past them: the repeat
	// is dropped, the rest taken, as for single events.
	again := run
	again.Seq, again.Fragment, again.Texts = 4, protocol.Ordinal(2), []string{"c", "d", "e"}
	if w := whole.Update(Update{Record: protocol.RecordEvent, Event: &again}); w.Observe {
		t.Fatalf("a run overlapping what is held wants %+v", w)
	}
	if n := len(whole.Snapshot().Events); n != 6 {
		t.Fatalf("%d events after an overlapping run, want 6", n)
	}
}
