package controller

import (
	"encoding/json"
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

func TestBusReplayJoinsLive(t *testing.T) {
	b := newBus()
	b.reset("e1")
	for i := uint64(1); i <= 10; i++ {
		b.publish(ev("e1", i))
	}
	replay, s, complete := b.subscribe(4)
	if !complete || len(replay) != 6 || seqOf(t, replay[0]) != 5 || seqOf(t, replay[5]) != 10 {
		t.Fatalf("replay after 4: %d events, complete %v", len(replay), complete)
	}
	b.publish(ev("e1", 11))
	if got := seqOf(t, <-s.ch); got != 11 {
		t.Fatalf("live event seq %d, want 11", got)
	}
	b.publish(ev("e0", 12)) // an old execution's late output
	select {
	case line := <-s.ch:
		t.Fatalf("late event of another execution delivered: %s", line)
	default:
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
	replay, _, complete := b.subscribe(0)
	if complete || uint64(len(replay)) != ringSize || seqOf(t, replay[0]) != from {
		t.Fatalf("replay from outside the window: %d events, complete %v", len(replay), complete)
	}
}

func TestBusSlowSubscriberLosesPlace(t *testing.T) {
	b := newBus()
	b.reset("e1")
	_, slow, _ := b.subscribe(0)
	_, fast, _ := b.subscribe(0)
	for i := uint64(1); i <= queueSize+5; i++ {
		b.publish(ev("e1", i))
		<-fast.ch // the fast reader keeps up
	}
	if missed := <-slow.lost; missed != queueSize+1 {
		t.Fatalf("slow subscriber missed from %d, want %d", missed, queueSize+1)
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != queueSize {
		t.Fatalf("slow subscriber kept %d queued events, want %d", n, queueSize)
	}
	b.publish(ev("e1", queueSize+6))
	if got := seqOf(t, <-fast.ch); got != queueSize+6 {
		t.Fatalf("fast subscriber after the slow one left: seq %d", got)
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
	replay, _, complete := b.subscribe(0)
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
	replay, _, _ := b.subscribe(0)
	if len(replay) != 1 {
		t.Fatalf("%d event lines, want 1", len(replay))
	}
	if len(replay[0]) > mclient.DefaultMaxLine {
		t.Fatalf("event line of %d bytes, over the client cap %d", len(replay[0]), mclient.DefaultMaxLine)
	}
}
