package protocol

import (
	"reflect"
	"slices"
	"testing"
)

// wideOrdinal is past the safe integers. An int cannot hold it on 32
// bits, where the conversion wraps it negative, also refused.
var wideOrdinal = uint64(maxSafeInteger)

func TestRunDeltas(t *testing.T) {
	run := Event{Record: RecordEvent, Kind: EventTextDelta, Execution: "x", Seq: 7, Message: "m", Role: "assistant",
		Block: Ordinal(1), BlockType: "text", Fragment: Ordinal(3), UpdateMode: UpdateAppend, Texts: []string{"a", "", "c"}}
	var got []Event
	for d := range run.Deltas() {
		got = append(got, d)
	}
	if len(got) != 3 || run.Last() != 9 {
		t.Fatalf("a run of 3 from seq 7: %d deltas, last %d", len(got), run.Last())
	}
	for i, d := range got {
		want := run
		want.Texts, want.Seq, want.Text, want.Fragment = nil, 7+uint64(i), run.Texts[i], Ordinal(3+i)
		if !reflect.DeepEqual(d, want) {
			t.Errorf("delta %d: %+v, want %+v", i, d, want)
		}
	}
	if *run.Fragment != 3 || !slices.Equal(run.Texts, []string{"a", "", "c"}) {
		t.Errorf("Deltas changed the run: fragment %d, texts %q", *run.Fragment, run.Texts)
	}
	single := Event{Kind: EventMessageEnd, Seq: 4}
	n := 0
	for d := range single.Deltas() {
		n++
		if !reflect.DeepEqual(d, single) {
			t.Errorf("a single event yields %+v", d)
		}
	}
	if n != 1 || single.Last() != 4 {
		t.Errorf("a single event: %d yielded, last %d", n, single.Last())
	}
}

func TestCheckRun(t *testing.T) {
	ok := func() Event {
		return Event{Kind: EventThinkingDelta, Seq: 1, Block: Ordinal(0), Fragment: Ordinal(0), UpdateMode: UpdateAppend, Texts: []string{"a", "b"}}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Event)
		valid bool
	}{
		{"a run of thinking deltas", func(*Event) {}, true},
		{"not a run", func(e *Event) { e.Texts = nil; e.Kind = EventMessageEnd }, true},
		{"a run of one", func(e *Event) { e.Texts = e.Texts[:1] }, true},
		{"a message-end", func(e *Event) { e.Kind = EventMessageEnd }, false},
		{"a tool-call delta", func(e *Event) { e.Kind = EventToolCallDelta }, false},
		{"no deltas", func(e *Event) { e.Texts = []string{} }, false},
		{"text beside texts", func(e *Event) { e.Text = "x" }, false},
		{"the block's last fragment", func(e *Event) { e.LastFragment = true }, false},
		{"cut", func(e *Event) { e.Truncated = true }, false},
		{"replace", func(e *Event) { e.UpdateMode = UpdateReplace }, false},
		{"no fragment", func(e *Event) { e.Fragment = nil }, false},
		{"no block", func(e *Event) { e.Block = nil }, false},
		{"seq 0", func(e *Event) { e.Seq = 0 }, false},
		{"past the safe integers", func(e *Event) { e.Seq = maxSafeInteger }, false},
		{"fragments past the safe integers", func(e *Event) { e.Fragment = Ordinal(int(wideOrdinal)) }, false},
		{"a negative fragment", func(e *Event) { e.Fragment = Ordinal(-1) }, false},
		{"a part", func(e *Event) { e.Part = Ordinal(0) }, false},
		{"a last part", func(e *Event) { e.LastPart = true }, false},
		{"a stop reason", func(e *Event) { e.StopReason = "stop" }, false},
		{"a reason", func(e *Event) { e.Reason = "output-lost" }, false},
		{"a native type", func(e *Event) { e.Native = "text_delta" }, false},
		{"dropped events", func(e *Event) { e.Dropped = 3 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok()
			tc.edit(&e)
			if err := CheckRun(&e); (err == nil) != tc.valid {
				t.Fatalf("CheckRun: %v, want valid %v", err, tc.valid)
			}
		})
	}
}
