package pi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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

// recordedDialog is the largest dialog pinned Pi 0.85.1 wrote in the
// dialogs recording (10-dialogs.stdout.jsonl:57), id made a format verb:
// 287 bytes of id, title and labels.
const recordedDialog = "{\"type\":\"extension_ui_request\",\"id\":\"5ca70a9d-dc2c-4e79-a8aa-%012d\",\"method\":\"select\",\"title\":\"Allow <b>rm -rf</b> **now**? [x](http://127.0.0.1/) `code` \\u001b[31mRED\\u001b[0m RLO:\u202eevil.exe\u202c LRI:\u2066iso\u2069 RLM:\u200f ZWJ:a\u200db Hebrew:שלום Arabic:مرحبا\",\"options\":[\"Allow <i>once</i>\",\"**Block**\",\"\u202egnp.exe\u202c (RLO label)\",\"\\u001b[1mbold-ansi\\u001b[0m\",\"multi\\nline\",\"אפשר (Hebrew)\"]}"

// heldDialogBytes adds up every string the open dialogs hold.
func heldDialogBytes(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, d := range c.dialogs {
		n += len(id) + len(d.title) + len(d.message)
		for _, o := range d.options {
			n += len(o)
		}
	}
	return n
}

// TestDialogBytesBounded: the dialogs held open stay within
// engine.MaxDecisionBytes as well as within maxOpenDialogs. Recorded
// dialogs meet only the count; large ones meet the bytes first, counted
// as held: decoded (a byte of invalid UTF-8 becomes three) and after
// framing cut the line. A request past either bound is the count's
// refusal: an unavailable unsupported-native-event, never answerable;
// a dialog closed makes room again.
func TestDialogBytesBounded(t *testing.T) {
	confirm := func(title []byte) func(i int) string {
		return func(i int) string {
			return fmt.Sprintf(`{"type":"extension_ui_request","id":"d-%d","method":"confirm","title":"%s"}`, i, title)
		}
	}
	for _, tc := range []struct {
		name string
		line func(i int) string
		open int
	}{
		// Each holds 287 bytes: 256 are 72 KiB.
		{"recorded dialogs", func(i int) string { return fmt.Sprintf(recordedDialog, i) }, maxOpenDialogs},
		// Whole lines (under engine.DefaultMaxLine), each holding 1 MiB
		// less 253 bytes: 16 fit, 17 pass 16 MiB.
		{"whole 1 MiB titles", confirm(bytes.Repeat([]byte("x"), 1<<20-256)), 16},
		// 8 MiB lines cut to a 1 MiB title of 0xFF, held as 3 MiB of
		// U+FFFD: 5 fit, 6 pass 16 MiB.
		{"8 MiB titles of invalid UTF-8, cut", confirm(bytes.Repeat([]byte{0xff}, 8<<20)), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, engine.Options{})
			for i := range tc.open + 1 {
				p.emit(tc.line(i))
			}
			p.sync()
			if n := p.conn.OpenDialogs(); n != tc.open {
				t.Fatalf("%d dialogs open after %d requests, want %d", n, tc.open+1, tc.open)
			}
			if held := heldDialogBytes(p.conn); held > engine.MaxDecisionBytes {
				t.Fatalf("the open dialogs hold %d bytes, want at most %d", held, engine.MaxDecisionBytes)
			}
			past := fmt.Sprintf("d-%d", tc.open)
			if tc.name == "recorded dialogs" {
				past = fmt.Sprintf("5ca70a9d-dc2c-4e79-a8aa-%012d", tc.open)
			}
			if err := p.conn.Answer(past, "false"); !errors.Is(err, engine.ErrDialogClosed) {
				t.Fatalf("answer to the request past the bound: %v, want ErrDialogClosed", err)
			}
			first := p.conn.Decisions()[0].ID
			p.conn.Forget(first)
			p.emit(tc.line(tc.open + 1))
			p.sync()
			if n := p.conn.OpenDialogs(); n != tc.open {
				t.Fatalf("%d dialogs open after one closed and one more request, want %d", n, tc.open)
			}
			var opened, refused int
			for _, e := range p.drain() {
				switch {
				case e.Kind == protocol.EventNativeUI:
					opened++
					if e.UI.ID == past {
						t.Fatalf("the request past the bound was shown as a dialog: %+v", e)
					}
				case e.Kind == protocol.EventUnavailable && e.Native == "extension_ui_request" && e.Reason == protocol.ReasonUnsupportedNative && e.UI == nil:
					refused++
				}
			}
			if opened != tc.open+1 || refused != 1 {
				t.Fatalf("%d dialogs shown and %d refused, want %d and 1", opened, refused, tc.open+1)
			}
		})
	}
}

// TestTimedOutDialogsMakeRoom: dialogs whose native timeout passed are
// closed in the engine (Pi resolved each by itself and wrote nothing), so
// they do not hold the bound open for ever while nobody forgot them yet:
// a controller whose pump fell behind an engine asking a confirm with a
// 1 ms timeout in a loop had every request past maxOpenDialogs refused,
// never shown and never answerable.
func TestTimedOutDialogsMakeRoom(t *testing.T) {
	p := startPeer(t, engine.Options{})
	line := func(i int) string {
		return fmt.Sprintf(`{"type":"extension_ui_request","id":"d-%d","method":"confirm","title":"again?","timeout":1}`, i)
	}
	for i := range maxOpenDialogs {
		p.emit(line(i))
	}
	p.sync()
	time.Sleep(2 * time.Millisecond) // past each one's timeout, from when it was read
	p.emit(line(maxOpenDialogs))
	p.sync()
	var opened, refused int
	for _, e := range p.drain() {
		switch {
		case e.Kind == protocol.EventNativeUI:
			opened++
		case e.Kind == protocol.EventUnavailable:
			refused++
		}
	}
	if opened != maxOpenDialogs+1 || refused != 0 {
		t.Fatalf("%d dialogs shown and %d refused after %d timed out, want %d and none", opened, refused, maxOpenDialogs, maxOpenDialogs+1)
	}
	if err := p.conn.Answer(fmt.Sprintf("d-%d", maxOpenDialogs), "false"); err != nil {
		t.Fatalf("answer to the dialog after the timed-out ones: %v", err)
	}
}
