package controller

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

func ev(exec string, seq uint64) protocol.Event {
	return protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: exec, Seq: seq, Text: "x"}
}

func seqOf(t *testing.T, line []byte) uint64 {
	t.Helper()
	var e protocol.Event
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	return e.Seq
}

// takeLines is take for a reader that wants the ring's own lines.
func takeLines(b *bus, s *subscriber, lines [][]byte) ([][]byte, uint64) {
	pieces, lost := b.take(s, nil)
	for _, p := range pieces {
		lines = append(lines, p.line)
	}
	return lines, lost
}

// drain takes everything s holds now, batch by batch.
func drain(b *bus, s *subscriber) (lines [][]byte, lost uint64) {
	for {
		n := len(lines)
		if lines, lost = takeLines(b, s, lines); lost != 0 || len(lines) == n {
			return lines, lost
		}
	}
}

// lostAt is the seq s missed first, once it lost its place (0 before).
func lostAt(b *bus, s *subscriber) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.lostAt
}

// seqs returns the seqs of lines.
func seqs(t *testing.T, lines [][]byte) []uint64 {
	t.Helper()
	var out []uint64
	for _, l := range lines {
		out = append(out, seqOf(t, l))
	}
	return out
}

// contiguous fails unless lines are the seqs from..to in order.
func contiguous(t *testing.T, what string, lines [][]byte, from, to uint64) {
	t.Helper()
	got := seqs(t, lines)
	if uint64(len(got)) != to-from+1 {
		t.Fatalf("%s: %d events, want %d..%d", what, len(got), from, to)
	}
	for i, seq := range got {
		if seq != from+uint64(i) {
			t.Fatalf("%s: event %d is seq %d, want %d", what, i, seq, from+uint64(i))
		}
	}
}

func TestBusReplayJoinsLive(t *testing.T) {
	b := newBus()
	b.reset("e1")
	for i := uint64(1); i <= 10; i++ {
		b.publish(ev("e1", i))
	}
	s, first, complete := b.subscribeFrom(4, nil)
	replay, _ := drain(b, s)
	if !complete || first != 5 {
		t.Fatalf("subscribe after 4: first %d, complete %v", first, complete)
	}
	contiguous(t, "replay after 4", replay, 5, 10)
	b.publish(ev("e1", 11))
	live, _ := drain(b, s)
	contiguous(t, "live", live, 11, 11)
	b.publish(ev("e0", 12)) // an old execution's late output
	if late, _ := drain(b, s); len(late) != 0 {
		t.Fatalf("late event of another execution delivered: %s", late[0])
	}
}

func TestBusWindowAndGap(t *testing.T) {
	b := newBus()
	b.reset("e1")
	n := uint64(ringSize + 100)
	for i := uint64(1); i <= n; i++ {
		b.publish(ev("e1", i))
	}
	_, from, until := b.window()
	if from != n-ringSize+1 || until != n {
		t.Fatalf("window %d..%d, want %d..%d", from, until, n-ringSize+1, n)
	}
	s, first, complete := b.subscribeFrom(0, nil)
	replay, _ := drain(b, s)
	if complete || first != from {
		t.Fatalf("replay from outside the window: first %d, complete %v", first, complete)
	}
	contiguous(t, "replay", replay, from, until)
}

// TestBusLosesPlaceAtTheBound: a subscriber that takes nothing keeps its
// place while it is fewer than maxLag events behind the newest and loses
// it with the next event, told the first seq it missed, which the ring
// still holds: a resume right then is complete. One that keeps up never
// notices, and one just short of the bound still gets every event in
// order.
func TestBusLosesPlaceAtTheBound(t *testing.T) {
	b := newBus()
	b.reset("e1")
	slow, _, _ := b.subscribeFrom(0, nil)
	lagging, _, _ := b.subscribeFrom(0, nil)
	fast, _, _ := b.subscribeFrom(0, nil)
	var fastGot [][]byte
	publish := func(from, to uint64) {
		for i := from; i <= to; i++ {
			b.publish(ev("e1", i))
			var lost uint64
			if fastGot, lost = takeLines(b, fast, fastGot); lost != 0 {
				t.Fatalf("the fast subscriber lost its place at %d", lost)
			}
		}
	}
	publish(1, 10)
	if got, _ := drain(b, lagging); len(got) != 10 {
		t.Fatalf("lagging took %d, want 10", len(got))
	}
	publish(11, maxLag)
	if lost := lostAt(b, slow); lost != 0 {
		t.Fatalf("lost its place at %d, %d events behind", lost, maxLag)
	}
	if n := b.lag(slow); n != maxLag {
		t.Fatalf("slow lag %d, want %d", n, maxLag)
	}
	publish(maxLag+1, maxLag+10)
	got, lost := takeLines(b, slow, nil)
	if lost != 1 || len(got) != 0 {
		t.Fatalf("slow: lost at %d with %d events, want lost at 1 with none", lost, len(got))
	}
	resumed, first, complete := b.subscribeFrom(lost-1, nil)
	if !complete || first != lost {
		t.Fatalf("a resume from %d right after the notice: first %d, complete %v", lost-1, first, complete)
	}
	replay, _ := drain(b, resumed)
	contiguous(t, "the resume", replay, 1, maxLag+10)
	rest, lost := drain(b, lagging)
	if lost != 0 {
		t.Fatalf("lagging, %d behind, lost its place at %d", maxLag, lost)
	}
	contiguous(t, "lagging", rest, 11, maxLag+10)
	contiguous(t, "fast", fastGot, 1, maxLag+10)
	b.mu.Lock()
	_, held := b.subs[slow]
	b.mu.Unlock()
	if held || b.lag(slow) != 0 {
		t.Fatal("the bus still feeds a subscriber that lost its place")
	}
}

// TestBusLosesPlaceOnBytes: with large events the byte bound takes a
// subscriber's place long before maxLag events, once it is maxLagBytes
// behind, and the ring still holds the event it missed.
func TestBusLosesPlaceOnBytes(t *testing.T) {
	b := newBus()
	b.reset("e1")
	s, _, _ := b.subscribeFrom(0, nil)
	big := strings.Repeat("x", 1<<20)
	var i uint64
	for i = 1; ; i++ {
		e := ev("e1", i)
		e.Text = big
		b.publish(e)
		if lost := lostAt(b, s); lost != 0 {
			if lost != 1 {
				t.Fatalf("missed from %d, want 1", lost)
			}
			break
		}
		if i > maxLagBytes>>20+1 {
			t.Fatalf("%d MiB-events published and the cursor at 1 still held", i)
		}
	}
	if i < maxLagBytes>>20-1 {
		t.Fatalf("lost its place after %d MiB, before %d MiB", i, maxLagBytes>>20)
	}
	if _, _, complete := b.subscribeFrom(0, nil); !complete {
		t.Fatal("the ring no longer holds the event the subscriber missed")
	}
}

// TestBusTakeBatches: a take hands over at most batchEvents events and
// batchBytes bytes (but always one event, however large), in order, and
// the next take goes on where it stopped.
func TestBusTakeBatches(t *testing.T) {
	b := newBus()
	b.reset("e1")
	wake := make(chan struct{}, 1)
	s, _, _ := b.subscribeFrom(0, wake)
	n := uint64(3*batchEvents + 7)
	for i := uint64(1); i <= n; i++ {
		b.publish(ev("e1", i))
	}
	huge := ev("e1", n+1)
	huge.Text = strings.Repeat("y", 2*batchBytes)
	b.publish(huge)
	var all [][]byte
	for {
		<-wake // every take that leaves events behind signals again
		batch, lost := takeLines(b, s, nil)
		if lost != 0 {
			t.Fatalf("lost at %d", lost)
		}
		if len(batch) == 0 {
			break
		}
		size := 0
		for _, l := range batch {
			size += len(l)
		}
		if len(batch) > batchEvents || (len(batch) > 1 && size > batchBytes) {
			t.Fatalf("a batch of %d events, %d bytes", len(batch), size)
		}
		all = append(all, batch...)
		if len(all) == int(n+1) {
			break
		}
	}
	contiguous(t, "batches", all, 1, n+1)
}

// TestBusResetKeepsUntakenLines: a subscriber behind when a new execution
// starts still gets the rest of the old one, then the new one from its
// first event, without a gap.
func TestBusResetKeepsUntakenLines(t *testing.T) {
	b := newBus()
	b.reset("e1")
	s, _, _ := b.subscribeFrom(0, nil)
	idle, _, _ := b.subscribeFrom(0, nil)
	for i := uint64(1); i <= 5; i++ {
		b.publish(ev("e1", i))
	}
	takeLines(b, s, nil) // takes 1..5
	drain(b, idle)
	b.publish(ev("e1", 6))
	b.publish(ev("e1", 7))
	b.reset("e2")
	for i := uint64(1); i <= 3; i++ {
		b.publish(ev("e2", i))
	}
	got, _ := drain(b, s)
	var names []string
	for _, l := range got {
		var e protocol.Event
		json.Unmarshal(l, &e)
		names = append(names, e.Execution+"/"+strconv.FormatUint(e.Seq, 10))
	}
	if want := "e1/6 e1/7 e2/1 e2/2 e2/3"; strings.Join(names, " ") != want {
		t.Fatalf("after the reset: %v, want %s", names, want)
	}
	if got, _ := drain(b, idle); len(got) != 5 {
		t.Fatalf("a subscriber in step got %d events, want e1/6, e1/7 and e2/1..3", len(got))
	}
}

// TestBusRingBoundedInBytes: large events shorten the replay window
// instead of growing it: the ring never holds more than ringBytes (plus
// the newest event), and what it holds replays in order without a gap.
func TestBusRingBoundedInBytes(t *testing.T) {
	b := newBus()
	b.reset("e1")
	big := string(make([]byte, 1<<20)) // 1 MiB of NULs: 6 MiB once escaped
	for i := uint64(1); i <= 100; i++ {
		e := ev("e1", i)
		e.Text = big[:(1<<20)/int(1+i%3)]
		b.publish(e)
		if b.bytes > ringBytes+7<<20 {
			t.Fatalf("after event %d the ring holds %d bytes", i, b.bytes)
		}
	}
	_, first, last := b.window()
	s, _, complete := b.subscribeFrom(0, nil)
	replay, _ := drain(b, s)
	if complete || last != 100 || first <= 1 || uint64(len(replay)) != last-first+1 {
		t.Fatalf("window %d..%d, %d replayed, complete %v", first, last, len(replay), complete)
	}
	held := 0
	for i, line := range replay {
		if got := seqOf(t, line); got != first+uint64(i) {
			t.Fatalf("replay %d is seq %d, want %d", i, got, first+uint64(i))
		}
		held += len(line)
	}
	if held != b.bytes {
		t.Fatalf("the ring counts %d bytes, holds %d", b.bytes, held)
	}
	b.reset("e2")
	if b.bytes != 0 || b.ring[5].line != nil {
		t.Fatal("reset kept the old execution's lines")
	}
}

// TestBusEventLineUnderClientCap: an event as large as a reduced engine
// line can make (3 MiB, its hard bound), made of the character HTML
// escaping grows sixfold, still fits a client's line.
func TestBusEventLineUnderClientCap(t *testing.T) {
	e := ev("e1", 1)
	e.Kind, e.Text = protocol.EventMessageEnd, ""
	for range 3 {
		e.Content = append(e.Content, protocol.Block{Type: "text", Text: strings.Repeat("<", engine.MaxLiveString), Truncated: true})
	}
	b := newBus()
	b.reset("e1")
	b.publish(e)
	s, _, _ := b.subscribeFrom(0, nil)
	replay, _ := drain(b, s)
	if len(replay) != 1 {
		t.Fatalf("%d event lines, want 1", len(replay))
	}
	if len(replay[0]) > mclient.DefaultMaxLine {
		t.Fatalf("event line of %d bytes, over the client cap %d", len(replay[0]), mclient.DefaultMaxLine)
	}
}

// TestBusEventLinesDecodeStrictly: an engine's raw tool arguments or
// result that a client's strict decoding would refuse (encoding/json read
// them and checks none of its rules) are left out of the event line,
// which says it is truncated, so no engine output ends every observer's
// connection; arguments it accepts, nested to the bound, pass as written.
func TestBusEventLinesDecodeStrictly(t *testing.T) {
	nest := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	for _, tc := range []struct {
		name string
		raw  json.RawMessage
		keep bool
	}{
		{"unsafe integer", json.RawMessage(`{"n":100000000000000000000}`), false},
		{"lone surrogate", json.RawMessage(`{"content":[{"type":"text","text":"\ud800"}]}`), false},
		{"duplicate key", json.RawMessage(`{"a":1,"a":2}`), false},
		{"invalid UTF-8", json.RawMessage("{\"s\":\"\xff\"}"), false},
		{"nesting past the bound", nest(64), false},
		{"nesting to the bound", nest(62), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := ev("e1", 1)
			start.Kind, start.Text, start.Tool = protocol.EventToolStart, "", &protocol.Tool{CallID: "c1", Name: "bash", Args: tc.raw}
			end := ev("e1", 2)
			end.Kind, end.Text, end.Tool = protocol.EventToolEnd, "", &protocol.Tool{CallID: "c1", Result: tc.raw}
			msg := ev("e1", 3)
			msg.Kind, msg.Text = protocol.EventMessageEnd, ""
			msg.Content = []protocol.Block{{Type: "text", Text: "hi"}, {Type: "toolCall", ToolCallID: "c1", ToolName: "bash", Args: tc.raw}}
			b := newBus()
			b.reset("e1")
			for _, e := range []protocol.Event{start, end, msg} {
				b.publish(e)
			}
			if start.Tool.Args == nil || msg.Content[1].Args == nil {
				t.Fatal("publish changed the engine's event")
			}
			s, _, _ := b.subscribeFrom(0, nil)
			lines, _ := drain(b, s)
			if len(lines) != 3 {
				t.Fatalf("%d event lines, want 3", len(lines))
			}
			for _, line := range lines {
				if err := protocol.Validate(line[:len(line)-1]); err != nil {
					t.Fatalf("a client refuses %.200s: %v", line, err)
				}
				var e protocol.Event
				if err := json.Unmarshal(line, &e); err != nil {
					t.Fatal(err)
				}
				raw := e.Tool != nil && (e.Tool.Args != nil || e.Tool.Result != nil) || len(e.Content) == 2 && e.Content[1].Args != nil
				if raw != tc.keep || e.Truncated == tc.keep || len(e.Content) == 2 && e.Content[1].Truncated == tc.keep {
					t.Fatalf("%s: raw kept %v, truncated %v, want the raw kept %v (%.200s)", e.Kind, raw, e.Truncated, tc.keep, line)
				}
			}
		})
	}
}
