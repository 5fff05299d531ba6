package web

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

func parkedOf(ts *tabs, session string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, p := range ts.parked {
		if p.session == session {
			n++
		}
	}
	return n
}

// TestParkedPerSession: each session keeps at most maxParked places, its
// own oldest going first, so one session parking many tabs does not evict
// another's; and a parked tab is not resumed past MaxTabs open tabs of its
// session (web-tab), keeping its place.
func TestParkedPerSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Options{Store: &Store{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel() // stops the reaper
	ts := s.tabs
	for i := range maxParked {
		ts.keep(&tab{id: fmt.Sprint("a", i), session: "A", conv: "c"})
	}
	for i := range 3 * maxParked {
		ts.keep(&tab{id: fmt.Sprint("b", i), session: "B", conv: "c"})
	}
	if a, b := parkedOf(ts, "A"), parkedOf(ts, "B"); a != maxParked || b != maxParked {
		t.Fatalf("parked: A %d, B %d; want %d each", a, b, maxParked)
	}
	ts.mu.Lock()
	_, newest := ts.parked[fmt.Sprint("b", 3*maxParked-1)]
	ts.mu.Unlock()
	if !newest {
		t.Fatal("B's newest place was evicted instead of its oldest")
	}

	// Stand-ins for open tabs, with no connection: taken out again before
	// the test ends; left is now, so the reaper leaves them for TabGrace.
	ts.mu.Lock()
	for i := range MaxTabs {
		ts.m[fmt.Sprint("open", i)] = &tab{id: fmt.Sprint("open", i), session: "A", left: time.Now()}
	}
	ts.mu.Unlock()
	defer func() {
		ts.mu.Lock()
		clear(ts.m)
		ts.mu.Unlock()
	}()
	p := ts.unpark("a0", "A", "c")
	if p == nil {
		t.Fatal("A's parked tab a0 is gone")
	}
	_, err = ts.resume(ctx, p)
	var ref *protocol.Refusal
	if !errors.As(err, &ref) || ref.Code != protocol.CodeWebTab {
		t.Fatalf("resuming past %d open tabs: %v, want web-tab", MaxTabs, err)
	}
	if ts.unpark("a0", "A", "c") == nil {
		t.Fatal("the refused resume lost the tab's place")
	}
}
