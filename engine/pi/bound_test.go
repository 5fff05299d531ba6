package pi

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestEngineIDsBounded: an engine that invents fresh ids forever (tool
// calls streamed, tools started and never ended) leaves the adapter's
// per-id state within its bounds: the tool call ids it remembers to name
// a message, and the tools it tracks in flight. Past the latter the turn
// is uncertain rather than a tool forgotten.
func TestEngineIDsBounded(t *testing.T) {
	const n = 3 * engine.MaxToolKeys
	for _, tc := range []struct {
		name string
		line func(i int) string
		kept func(c *Conn) (got, bound int)
	}{
		{"streamed tool calls", func(i int) string {
			return fmt.Sprintf(`{"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","contentIndex":0,"id":"c-%d","toolName":"bash"}}`, i)
		}, func(c *Conn) (int, int) { return c.mp.tools.Len(), engine.MaxToolKeys }},
		{"tools never ended", func(i int) string {
			return fmt.Sprintf(`{"type":"tool_execution_start","toolCallId":"t-%d","toolName":"bash","args":{}}`, i)
		}, func(c *Conn) (int, int) { return len(c.tr.open), engine.MaxOpenEffects }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, engine.Options{})
			for i := range n {
				p.emit(tc.line(i))
			}
			p.sync()
			p.drain()
			p.conn.mu.Lock()
			defer p.conn.mu.Unlock()
			if got, bound := tc.kept(p.conn); got > bound {
				t.Fatalf("%d ids kept after %d fresh ones; want at most %d", got, n, bound)
			}
		})
	}
	t.Run("untracked tools make the turn uncertain", func(t *testing.T) {
		p := startPeer(t, engine.Options{})
		for i := range engine.MaxOpenEffects + 1 {
			p.emit(fmt.Sprintf(`{"type":"tool_execution_start","toolCallId":"t-%d","toolName":"bash","args":{}}`, i))
		}
		p.sync()
		if st := p.conn.Turn(); !st.Uncertain || len(st.OpenTools) != engine.MaxOpenEffects {
			t.Fatalf("turn uncertain=%v with %d tools open, want uncertain with %d", st.Uncertain, len(st.OpenTools), engine.MaxOpenEffects)
		}
	})
}

// TestBlockIndexBounded: a streamed delta whose content index is outside
// [0, MaxBlockIndex) is unavailable, never an event addressing that
// ordinal (a client may size an array by it).
func TestBlockIndexBounded(t *testing.T) {
	for _, idx := range []string{"-1", "4096", "2147483648", "9007199254740991"} {
		t.Run(idx, func(t *testing.T) {
			p := startPeer(t, engine.Options{})
			p.emit(`{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending","timestamp":2}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":`+idx+`,"delta":"x"}}`)
			p.sync()
			for _, e := range p.drain() {
				if e.Block != nil && (*e.Block < 0 || *e.Block >= 4096) {
					t.Fatalf("event %+v addresses block %d", e, *e.Block)
				}
				if e.Kind == protocol.EventTextDelta {
					t.Fatalf("a delta at index %s was mapped: %+v", idx, e)
				}
			}
		})
	}
}

// TestAbandonedCommandsForgotten: an engine that never answers leaves no
// waiter behind per command given up on (a get_entries each poll, for as
// long as the execution lives), and an answer that comes after all is
// taken quietly, never shown as uncorrelated.
func TestAbandonedCommandsForgotten(t *testing.T) {
	const n = 4 * maxLate
	p := startPeer(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // every call gives up at once: the engine never answers
	var last map[string]any
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { _, _ = p.conn.GetState(ctx) })
		last = p.next("get_state")
	}
	wg.Wait()
	p.respond(last, map[string]any{})
	p.sync()
	p.conn.mu.Lock()
	kept := len(p.conn.wait)
	p.conn.mu.Unlock()
	if kept > 0 {
		t.Fatalf("%d waiters kept after %d commands given up on; want none", kept, n)
	}
	for _, e := range p.drain() {
		if e.Reason == "uncorrelated-response" {
			t.Fatalf("a late answer to a command given up on was shown: %+v", e)
		}
	}
}
