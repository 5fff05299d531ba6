package engine

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestOutputBoundedByBytes: an engine that writes large events faster
// than the reader takes them holds at most the byte bound (and one event)
// in the queue, however many it writes: the rest are dropped, one
// unavailable output-lost event stands where they were, Seq stays
// contiguous, and once the reader caught up events flow again.
func TestOutputBoundedByBytes(t *testing.T) {
	const bound = 1 << 20
	big := strings.Repeat("x", 64<<10)
	for _, tc := range []struct {
		name  string
		base  uint64
		count int
	}{
		{"from one", 0, 200},
		{"resumed", 7 << 32, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOutput(tc.base, bound)
			t.Cleanup(func() {
				o.End(nil)
				for range o.Events() {
				}
			})
			// The reader takes one event, then stalls: the delivery
			// goroutine blocks on the next one.
			o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: "a"})
			first := <-o.Events()
			for range tc.count {
				o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: big})
			}
			o.mu.Lock()
			held, queued := o.bytes, len(o.q)
			o.mu.Unlock()
			if held > bound+eventBytes(protocol.Event{Text: big}) {
				t.Fatalf("%d bytes in %d events held after %d events of %d bytes; want at most %d", held, queued, tc.count, len(big), bound)
			}
			dropped := int(o.Dropped())
			if dropped == 0 {
				t.Fatal("nothing dropped past the bound")
			}
			// Every event pushed, less the dropped, and the marker.
			got := []protocol.Event{first}
			for range tc.count - dropped + 1 {
				got = append(got, <-o.Events())
			}
			o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: "after"})
			after := <-o.Events()
			got = append(got, after)
			lost := 0
			for i, e := range got {
				if want := tc.base + uint64(i) + 1; e.Seq != want {
					t.Fatalf("event %d has seq %d, want %d (contiguous)", i, e.Seq, want)
				}
				if e.Reason == protocol.ReasonOutputLost {
					lost++
					if e.Kind != protocol.EventUnavailable || e.Execution != "x" || e.Text != "" || e.Dropped != uint64(dropped) {
						t.Fatalf("marker %+v; want it to count the %d events dropped", e, dropped)
					}
				}
			}
			if lost != 1 || after.Text != "after" {
				t.Fatalf("%d output-lost markers, last event %q; want one marker, then events again", lost, after.Text)
			}
		})
	}
}

// TestOutputEndsWithTheHole: an output that ends while events are being
// dropped (the reader never caught up) still delivers the one output-lost
// event, with the count of every event dropped, before Events closes.
func TestOutputEndsWithTheHole(t *testing.T) {
	const bound = 1 << 20
	big := strings.Repeat("x", 64<<10)
	for _, count := range []int{40, 400} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			o := NewOutput(0, bound)
			o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: "a"})
			<-o.Events()
			for range count {
				o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: big})
			}
			dropped := o.Dropped()
			o.End(nil)
			var markers []protocol.Event
			for e := range o.Events() {
				if e.Reason == protocol.ReasonOutputLost {
					markers = append(markers, e)
				}
			}
			if len(markers) != 1 || dropped == 0 || markers[0].Dropped != dropped {
				t.Fatalf("%d events dropped; markers %+v; want one counting them all", dropped, markers)
			}
		})
	}
}

// TestOutputLetsGoOfDelivered: an event the reader took is no longer
// held by the delivery goroutine while it waits to deliver the rest of
// its batch: the bytes it no longer counts are bytes it no longer holds,
// so the queue and the batch in delivery never hold twice the bound.
func TestOutputLetsGoOfDelivered(t *testing.T) {
	o := NewOutput(0, 1<<20)
	t.Cleanup(func() {
		o.End(nil)
		for range o.Events() {
		}
	})
	// The first event blocks the delivery goroutine, so the next two
	// are queued together and delivered as one batch.
	o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: "a"})
	var freed atomic.Bool
	tool := &protocol.Tool{CallID: "c", Result: []byte(strings.Repeat("x", 64<<10))}
	runtime.SetFinalizer(tool, func(*protocol.Tool) { freed.Store(true) })
	o.Push(protocol.Event{Kind: protocol.EventToolEnd, Execution: "x", Tool: tool})
	tool = nil
	o.Push(protocol.Event{Kind: protocol.EventTextDelta, Execution: "x", Text: "b"})
	<-o.Events()
	if e := <-o.Events(); e.Tool == nil {
		t.Fatalf("second event %+v, want the tool's", e)
	}
	// The reader dropped the tool's event; the third waits undelivered.
	for deadline := time.Now().Add(5 * time.Second); !freed.Load() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !freed.Load() {
		t.Fatal("a delivered event is still held while the rest of its batch waits")
	}
	<-o.Events()
}
