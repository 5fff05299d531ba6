package controller

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// delta is a text delta of message m, block blk, fragment frag, as the
// Pi adapter makes it.
func delta(seq uint64, m string, blk, frag int, text string) protocol.Event {
	return protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "x1", Seq: seq,
		Message: m, Role: "assistant", Block: protocol.Ordinal(blk), BlockType: "text", Fragment: protocol.Ordinal(frag),
		UpdateMode: protocol.UpdateAppend, Text: text}
}

// piecesOf publishes evs on a bus and takes them as a writer does.
func piecesOf(t *testing.T, evs []protocol.Event) []piece {
	t.Helper()
	b := newBus()
	b.reset("x1")
	s, _, _ := b.subscribeFrom(0, nil)
	for _, e := range evs {
		b.publish(e)
	}
	pieces, lost := b.take(s, nil)
	if lost != 0 || len(pieces) != len(evs) {
		t.Fatalf("took %d of %d events (lost at %d)", len(pieces), len(evs), lost)
	}
	return pieces
}

// decodeStrict decodes a line as a strict client does.
func decodeStrict(t *testing.T, line []byte) protocol.Event {
	t.Helper()
	if err := protocol.Validate(line[:len(line)-1]); err != nil {
		t.Fatalf("a joined line a strict client refuses: %v\n%s", err, line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var e protocol.Event
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	if err := protocol.CheckRun(&e); err != nil {
		t.Fatalf("a run the protocol does not allow: %v\n%s", err, line)
	}
	return e
}

func TestJoinRuns(t *testing.T) {
	thinking := delta(2, "m1", 0, 1, "b")
	thinking.Kind, thinking.BlockType = protocol.EventThinkingDelta, "thinking"
	closing := delta(3, "m1", 0, 2, "c")
	closing.LastFragment = true
	cut := delta(2, "m1", 0, 1, "b")
	cut.Truncated = true
	end := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventMessageEnd, Execution: "x1", Seq: 3, Message: "m1",
		Role: "assistant", UpdateMode: protocol.UpdateReplace, Part: protocol.Ordinal(0), LastPart: true,
		Content: []protocol.Block{{Type: "text", Text: "ab"}}}
	for _, tc := range []struct {
		name  string
		evs   []protocol.Event
		lines []int // how many deltas each line written stands for
	}{
		{"one delta", []protocol.Event{delta(1, "m1", 0, 0, "a")}, []int{1}},
		{"a run", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 1, "b"), delta(3, "m1", 0, 2, "c")}, []int{3}},
		{"escapes and every kind of character", []protocol.Event{delta(1, "m1", 0, 0, "\"q\"\\ \n\t\u2028 <&> é 🙂"),
			delta(2, "m1", 0, 1, "\x01\x1f"), delta(3, "m1", 0, 2, `","text":"`)}, []int{3}},
		{"two blocks", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 1, "b"),
			delta(3, "m1", 1, 0, "c"), delta(4, "m1", 1, 1, "d")}, []int{2, 2}},
		{"two messages", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m2", 0, 1, "b")}, []int{1, 1}},
		{"a fragment skipped", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 2, "b")}, []int{1, 1}},
		{"a fragment repeated", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 0, "b")}, []int{1, 1}},
		{"another kind in the same block", []protocol.Event{delta(1, "m1", 0, 0, "a"), thinking}, []int{1, 1}},
		{"the block's last fragment stays alone", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 1, "b"), closing}, []int{2, 1}},
		{"a cut delta stays alone", []protocol.Event{delta(1, "m1", 0, 0, "a"), cut, delta(3, "m1", 0, 2, "c")}, []int{1, 1, 1}},
		{"a message-end", []protocol.Event{delta(1, "m1", 0, 0, "a"), delta(2, "m1", 0, 1, "b"), end}, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces := piecesOf(t, tc.evs)
			lines, _ := joinRuns(pieces, nil, nil)
			if len(lines) != len(tc.lines) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tc.lines), bytes.Join(lines, nil))
			}
			var got []protocol.Event
			for i, line := range lines {
				e := decodeStrict(t, line)
				if n := max(len(e.Texts), 1); n != tc.lines[i] {
					t.Errorf("line %d stands for %d deltas, want %d: %s", i, n, tc.lines[i], line)
				}
				if tc.lines[i] == 1 && !bytes.Equal(line, pieces[len(got)].line) {
					t.Errorf("line %d is not the event's own: %s", i, line)
				}
				for d := range e.Deltas() {
					got = append(got, d)
				}
			}
			for i := range tc.evs {
				want := tc.evs[i].Strict()
				if i >= len(got) || !reflect.DeepEqual(got[i], want) {
					t.Fatalf("event %d after joining:\n%+v\nwant\n%+v", i, got[min(i, len(got)-1)], want)
				}
			}
			if len(got) != len(tc.evs) {
				t.Fatalf("%d events after joining, want %d", len(got), len(tc.evs))
			}
			plain, _ := linesOf(pieces, nil, nil, false)
			for i := range plain {
				if !bytes.Equal(plain[i], pieces[i].line) {
					t.Fatalf("a connection without runs is written line %d as %s", i, plain[i])
				}
			}
		})
	}
}
