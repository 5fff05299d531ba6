package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// TestDiffCostFollowsTheChange: a stream sends the page only the items
// that changed, and finding them must cost what changed, not the whole
// conversation. Every delta of a streamed answer wakes each tab's stream
// (at most every flushEvery), so a diff that encoded every item to
// compare it made each delta cost the whole transcript, per open tab:
// 33 ms of a core at 20,000 messages, every 50 ms, while the engine
// writes. The count of allocations stands for that cost (no test times
// anything): one changed item among 2,000 must not allocate per item.
func TestDiffCostFollowsTheChange(t *testing.T) {
	tr := &terminal.Transcript{}
	add := func(i int) {
		tr.AddHistory(terminal.HistoryMessage{Role: "assistant", Content: []protocol.Block{{Type: "text",
			Text: fmt.Sprintf("message %d: %s", i, strings.Repeat("word ", 60))}}})
	}
	const n = 2000
	for i := range n {
		add(i)
	}
	first := diff(nil, 0, tr.Items(), 0)
	if first == nil || first.N != n || len(first.Set) != n {
		t.Fatalf("the first patch: %+v, want every one of %d items", first, n)
	}
	add(n)
	items := tr.Items()
	p := diff(first.next, 0, items, 0)
	if p == nil || p.N != n+1 || len(p.Set) != 1 || p.Set[fmt.Sprint(n)] == nil {
		t.Fatalf("after one more message: want a patch of that one item, got n %d and %d items", p.N, len(p.Set))
	}
	if again := diff(p.next, 0, tr.Items(), 0); again != nil {
		t.Fatalf("nothing changed, yet a patch of %d items", len(again.Set))
	}
	allocs := testing.AllocsPerRun(5, func() { diff(first.next, 0, items, 0) })
	if allocs > 50 {
		t.Errorf("a diff of one changed item among %d allocates %.0f times: it costs the whole transcript, not the change", n, allocs)
	}
}

// TestDiffWindow: a stream holds the newest maxShownItems items for its
// page, so an engine's endless output does not grow the tab's DOM: the
// first patch sends only the window, a new item moves it on and sends
// only that item, and a window moved back (older history read) sends
// again the items the page let go.
func TestDiffWindow(t *testing.T) {
	tr := &terminal.Transcript{}
	add := func(i int) {
		tr.AddHistory(terminal.HistoryMessage{Role: "assistant", Content: []protocol.Block{{Type: "text", Text: fmt.Sprintf("message %d", i)}}})
	}
	const n = maxShownItems + 500
	for i := range n {
		add(i)
	}
	var tb tab
	items := tr.Items()
	from := tb.windowFromLocked(len(items))
	first := diff(nil, 0, items, from)
	if first.From != from || len(first.Set) != maxShownItems || first.Set[fmt.Sprint(from-1)] != nil {
		t.Fatalf("the first patch holds %d items from %d, want the %d newest from %d", len(first.Set), first.From, maxShownItems, from)
	}
	add(n)
	items = tr.Items()
	next := diff(first.next, first.From, items, tb.windowFromLocked(len(items)))
	if next.From != from+1 || len(next.Set) != 1 || next.Set[fmt.Sprint(len(items)-1)] == nil {
		t.Fatalf("after one more item: %d items from %d, want the new one from %d", len(next.Set), next.From, from+1)
	}
	tb.widen = 11
	back := diff(next.next, next.From, items, tb.windowFromLocked(len(items)))
	if len(back.Set) != 11 || back.Set[fmt.Sprint(from-10)] == nil || back.Set[fmt.Sprint(from)] == nil {
		t.Fatalf("the window moved back 11 items: the patch holds %d, want those 11", len(back.Set))
	}
}
