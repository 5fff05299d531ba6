package engine

import (
	"strings"
	"testing"

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
					if e.Kind != protocol.EventUnavailable || e.Execution != "x" || e.Text != "" {
						t.Fatalf("marker %+v", e)
					}
				}
			}
			if lost != 1 || after.Text != "after" {
				t.Fatalf("%d output-lost markers, last event %q; want one marker, then events again", lost, after.Text)
			}
		})
	}
}
