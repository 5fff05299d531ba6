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
	first := diff(nil, tr.Items())
	if first == nil || first.N != n || len(first.Set) != n {
		t.Fatalf("the first patch: %+v, want every one of %d items", first, n)
	}
	add(n)
	items := tr.Items()
	p := diff(first.next, items)
	if p == nil || p.N != n+1 || len(p.Set) != 1 || p.Set[fmt.Sprint(n)] == nil {
		t.Fatalf("after one more message: want a patch of that one item, got n %d and %d items", p.N, len(p.Set))
	}
	if again := diff(p.next, tr.Items()); again != nil {
		t.Fatalf("nothing changed, yet a patch of %d items", len(again.Set))
	}
	allocs := testing.AllocsPerRun(5, func() { diff(first.next, items) })
	if allocs > 50 {
		t.Errorf("a diff of one changed item among %d allocates %.0f times: it costs the whole transcript, not the change", n, allocs)
	}
}
