package controller

import (
	"fmt"
	"io"
	"testing"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestIndexBound: an index never holds more than its bound; making room
// forgets the oldest finished entry, and the oldest entry only when none
// is finished.
func TestIndexBound(t *testing.T) {
	done := func(v int) bool { return v < 0 }
	tests := []struct {
		name string
		puts []int // value i is put under key "k<i>" in order; negative values are finished
		want []string
	}{
		{"under the bound", []int{1, 2}, []string{"k1", "k2"}},
		{"oldest finished goes first", []int{1, -2, -3, 4}, []string{"k1", "k-3", "k4"}},
		{"oldest of all when none finished", []int{1, 2, 3, 4}, []string{"k2", "k3", "k4"}},
		{"a kept id is updated in place", []int{1, 2, 1, 3}, []string{"k1", "k2", "k3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newIndex[int](3)
			for _, v := range tt.puts {
				x.put(fmt.Sprintf("k%d", v), v, done)
			}
			if len(x.m) != len(x.order) || fmt.Sprint(x.order) != fmt.Sprint(tt.want) {
				t.Fatalf("kept %v (map of %d); want %v", x.order, len(x.m), tt.want)
			}
			for _, id := range tt.want {
				if _, ok := x.get(id); !ok {
					t.Fatalf("%s in the order but not in the map", id)
				}
			}
		})
	}
}

// TestStopsBounded: a controller that runs many stops keeps at most
// maxStops of them, and never forgets the current stop or an unfinished
// one to make room.
func TestStopsBounded(t *testing.T) {
	c := New(Config{Audit: audit.NewWriter("conv", io.Discard)})
	c.mu.Lock()
	defer c.mu.Unlock()
	running := &protocol.Stop{Record: "stop", ID: "s-running", Kind: "interrupt"}
	c.transitionLocked(running, "cancelling", "clear_queue, then abort")
	for i := range 3 * maxStops {
		s := &protocol.Stop{Record: "stop", ID: fmt.Sprintf("s-%d", i), Kind: "force-stop"}
		c.st.stop = s
		c.transitionLocked(s, "fenced", "admission closed")
		c.transitionLocked(s, "stopped", "cohort proof")
	}
	if n := len(c.stops.m); n > maxStops {
		t.Fatalf("%d stops kept; want at most %d", n, maxStops)
	}
	for _, id := range []string{"s-running", c.st.stop.ID} {
		if _, ok := c.stops.get(id); !ok {
			t.Fatalf("stop %s forgotten to make room", id)
		}
	}
}

// TestEligibilitiesBounded: eligibilities beyond maxEligibilities forget
// the used and stale ones first; an unused one of the current generation
// goes only when nothing else can.
func TestEligibilitiesBounded(t *testing.T) {
	c := New(Config{Audit: audit.NewWriter("conv", io.Discard)})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.generation = 2
	live := &eligibility{rec: protocol.Eligibility{ID: "el-live", Generation: 2}}
	c.keepEligibilityLocked(live)
	for i := range 3 * maxEligibilities {
		e := &eligibility{rec: protocol.Eligibility{ID: fmt.Sprintf("el-%d", i), Generation: int64(1 + i%2)}, used: i%2 == 1}
		c.keepEligibilityLocked(e)
	}
	if n := len(c.elig.m); n > maxEligibilities {
		t.Fatalf("%d eligibilities kept; want at most %d", n, maxEligibilities)
	}
	if _, ok := c.elig.get("el-live"); !ok {
		t.Fatal("the unused eligibility of this generation was forgotten while finished ones were kept")
	}
	for i := range maxEligibilities + 1 {
		c.keepEligibilityLocked(&eligibility{rec: protocol.Eligibility{ID: fmt.Sprintf("el-new-%d", i), Generation: 2}})
	}
	if n := len(c.elig.m); n != maxEligibilities {
		t.Fatalf("%d eligibilities kept; want %d", n, maxEligibilities)
	}
	if _, ok := c.elig.get("el-live"); ok {
		t.Fatal("the oldest eligibility is kept although only unused ones remained")
	}
}
