package controller

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestClaudePagesBack: paging a Claude view back from its newest page
// through the cursors observe issues: every page within the caps and as
// full as they allow, the newest ending at the last part, and the pages
// together exactly the branch's messages in order (no gap, no overlap),
// whether the part cap or the byte cap binds; a message over the caps (a
// tool's output of any size, a text longer than a fragment, more blocks
// than a part holds, a tool call's name of any length) is cut into parts
// as a Pi entry is, never a page over the caps; a cursor is bound to its connection.
func TestClaudePagesBack(t *testing.T) {
	text := func(n int, b byte) []protocol.Block {
		return []protocol.Block{{Type: "text", Text: strings.Repeat(string(b), n)}}
	}
	uniform := func(n, size int) []engine.HistoryMessage {
		var ms []engine.HistoryMessage
		for i := range n {
			ms = append(ms, engine.HistoryMessage{ID: fmt.Sprintf("m%05d", i), Role: "user", Blocks: text(size, 'x')})
		}
		return ms
	}
	var blocks []protocol.Block
	for range 150 {
		blocks = append(blocks, text(10, 'b')...)
	}
	huge := []engine.HistoryMessage{
		{ID: "m00000", Role: "user", Blocks: text(10, 'x')},
		{ID: "m00001", Role: "assistant", Blocks: text(20<<20, 'x')},
		// A tool's output: its text is the block, and the raw result the
		// transcript also holds is not carried a second time.
		{ID: "m00002", Role: "toolResult", Tool: &protocol.Tool{CallID: "toolu_1", Result: json.RawMessage(`"` + strings.Repeat("r", 12<<20) + `"`)},
			Blocks: text(12<<20, 'r')},
		// Escaped, each of these is six bytes.
		{ID: "m00003", Role: "assistant", Blocks: text(900<<10, '<')},
		{ID: "m00004", Role: "assistant", Blocks: blocks},
		// A tool call's name is the engine's to write, of any length.
		{ID: "m00004b", Role: "assistant", Blocks: []protocol.Block{{Type: "toolCall", ToolCallID: "toolu_2", ToolName: strings.Repeat("n", 9<<20), Args: json.RawMessage(`{}`)}}},
		{ID: "m00005", Role: "user", Blocks: text(10, 'x')},
	}
	for _, tc := range []struct {
		name string
		msgs []engine.HistoryMessage
		full int // the message size, if every page must be as full as the caps allow
		leaf string
	}{
		{"empty", nil, 10, ""},
		{"one page", uniform(40, 10), 10, ""},
		{"part cap binds", uniform(250, 10), 10, ""},
		{"byte cap binds", uniform(20, 900<<10), 900 << 10, ""},
		{"messages over the caps", huge, 0, ""},
		// The leaf is the last entry's uuid, the engine's to write.
		{"a leaf id of any length", huge[:3], 0, strings.Repeat("u", 3<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := cmp.Or(tc.leaf, "m")
			v := newClaudeView("s", leaf, len(tc.msgs) == 0, tc.msgs)
			cs := newCursors()
			var got []history.Part
			end, cursor := v.count(), ""
			for pages := 0; ; pages++ {
				raw, start, err := claudePageBefore(v, end)
				if err != nil {
					t.Fatal(err)
				}
				var p history.Page
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatal(err)
				}
				if len(p.Parts) > history.MaxPageParts || len(raw) > history.MaxPageBytes || p.From != start || start+len(p.Parts) != end || p.More != (end < v.count()) {
					t.Fatalf("page %d: from %d, %d parts, %d bytes, more %v; want it to end at %d within the caps", pages, p.From, len(p.Parts), len(raw), p.More, end)
				}
				if tc.full > 0 && start > 0 && len(p.Parts) < history.MaxPageParts && len(raw)+tc.full+512 < history.MaxPageBytes-claudePageReserve {
					t.Fatalf("page %d has %d parts and %d bytes: one more message would have fit", pages, len(p.Parts), len(raw))
				}
				got = append(p.Parts, got...)
				if start == 0 {
					break
				}
				cursor = cs.issue("k1", v, start)
				if _, r := cs.use("k2", cursor); r == nil || r.Code != protocol.CodeCursorForeign {
					t.Fatalf("another connection's use of a cursor: %v", r)
				}
				pc, r := cs.use("k1", cursor)
				if r != nil || pc.view != pager(v) || pc.end != start {
					t.Fatalf("cursor: %+v, %v", pc, r)
				}
				end = pc.end
			}
			if msgs := joinParts(t, got); !equalMessages(msgs, tc.msgs) {
				t.Fatalf("the pages hold %d messages, not the branch's %d in order", len(msgs), len(tc.msgs))
			}
		})
	}
}

// TestClaudePageCostsItsParts: a view counts a message of 200,000
// blocks (about 2.6 MB of transcript, 3,125 parts), and a page reads 100
// of its parts, without making a fragment of every block: an engine's
// message of many blocks costs an observe and each page back a pass over
// it, not a fragment made of every block (which, page after page, made
// paging back through it quadratic: at a million blocks, a gigabyte and
// most of a second an observe and a page).
func TestClaudePageCostsItsParts(t *testing.T) {
	blocks := make([]protocol.Block, 200000)
	for i := range blocks {
		blocks[i] = protocol.Block{Type: "unavailable"}
	}
	msgs := []engine.HistoryMessage{{ID: "m0", Role: "user", Blocks: blocks[:1]}, {ID: "m1", Role: "assistant", Blocks: blocks}}
	// A fragment is over 100 bytes in memory: a page of 6,400 of them
	// (its parts and its JSON) is about 6 MB made, one of every block of
	// the message about 150 MB.
	const most = 16 << 20
	var v *claudeView
	if n := allocated(func() { v = newClaudeView("s", "m", false, msgs) }); n > most {
		t.Errorf("counting the parts allocated %d bytes", n)
	}
	if v.count() != 1+len(blocks)/history.MaxPartBlocks {
		t.Fatalf("%d parts", v.count())
	}
	for _, end := range []int{v.count(), v.count() / 2, 101} {
		start := 0
		n := allocated(func() {
			var err error
			if _, start, err = claudePageBefore(v, end); err != nil {
				t.Fatal(err)
			}
		})
		if n > most || start != end-history.MaxPageParts {
			t.Errorf("the page before part %d starts at %d and allocated %d bytes", end, start, n)
		}
	}
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// joinParts joins paged parts back into messages, failing on a part out
// of its message's order or a fragment out of its block's.
func joinParts(t *testing.T, parts []history.Part) []engine.HistoryMessage {
	t.Helper()
	var out []engine.HistoryMessage
	next := 0 // the part of the last message expected next; 0 after a last part
	for i, p := range parts {
		if p.Part != next {
			t.Fatalf("part %d is part %d of %s, want part %d", i, p.Part, p.Native, next)
		}
		if p.Part == 0 {
			out = append(out, engine.HistoryMessage{ID: p.Native, Role: p.Role, Tool: p.Tool})
		}
		m := &out[len(out)-1]
		for _, f := range p.Blocks {
			switch {
			case f.Fragment == 0 && f.Block == len(m.Blocks):
				m.Blocks = append(m.Blocks, f.Content)
			case f.Fragment > 0 && f.Block == len(m.Blocks)-1:
				m.Blocks[f.Block].Text += f.Content.Text
			default:
				t.Fatalf("part %d: fragment %d of block %d of %s, after %d blocks", i, f.Fragment, f.Block, p.Native, len(m.Blocks))
			}
		}
		next = p.Part + 1
		if p.LastPart {
			next = 0
		}
	}
	return out
}

// equalMessages compares what a page shows of a message: id, role, the
// tool's id and error flag (its raw result is not carried), blocks.
func equalMessages(got, want []engine.HistoryMessage) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Role != w.Role || (g.Tool == nil) != (w.Tool == nil) || len(g.Blocks) != len(w.Blocks) {
			return false
		}
		if g.Tool != nil && (g.Tool.CallID != w.Tool.CallID || g.Tool.IsError != w.Tool.IsError || g.Tool.Result != nil) {
			return false
		}
		for k := range g.Blocks {
			if g.Blocks[k].Text != w.Blocks[k].Text || g.Blocks[k].Type != w.Blocks[k].Type {
				return false
			}
		}
	}
	return true
}

// TestClaudeObserveFollows: each observe of a Claude conversation reads
// the transcript as it is now, though it follows the one the observe
// before read: an append shows the new message, a line rewritten in place
// (which the follow refuses) and a replaced file show what is there now.
func TestClaudeObserveFollows(t *testing.T) {
	c, path := claudeObserver(t)
	const u1, a1, u2 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-000000000002"
	write := func(flag int, lines ...string) {
		t.Helper()
		f, err := os.OpenFile(path, flag|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	texts := func() []string {
		t.Helper()
		v, err := c.claudeRead()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range v.msgs {
			out = append(out, m.Role+":"+m.Blocks[0].Text)
		}
		return out
	}
	write(os.O_TRUNC, tline("prompt", u1, ""), tline("assistant", a1, u1))
	if got := texts(); len(got) != 2 {
		t.Fatalf("first observe: %v", got)
	}
	first := c.lastClaude
	write(os.O_APPEND, tline("prompt", u2, a1))
	if got := texts(); len(got) != 3 || c.lastClaude == first {
		t.Fatalf("after an append: %v", got)
	}
	rewritten := strings.Replace(tline("assistant", a1, u1), "hello", "HELLO", 1)
	write(os.O_TRUNC, tline("prompt", u1, ""), rewritten, tline("prompt", u2, a1))
	if got := texts(); len(got) != 3 || got[1] != "assistant:HELLO" {
		t.Fatalf("after a rewrite in place: %v", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(os.O_TRUNC, tline("prompt", u1, ""))
	if got := texts(); len(got) != 1 {
		t.Fatalf("after the file was replaced: %v", got)
	}
}

// TestClaudeObserveWaitsOutAHalfLine: an observe that comes while the CLI
// is writing a line waits for its LF and shows the message; a line that
// stays half written is answered unreadable, as a Read answers it.
func TestClaudeObserveWaitsOutAHalfLine(t *testing.T) {
	c, path := claudeObserver(t)
	const u1, a1 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-0000000000a1"
	last := tline("assistant", a1, u1)
	if err := os.WriteFile(path, []byte(tline("prompt", u1, "")+"\n"+last[:20]), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.WriteString(last[20:] + "\n")
	}()
	v, err := c.claudeRead()
	<-done
	if err != nil || len(v.msgs) != 2 {
		t.Fatalf("observe while a line was written: %v", err)
	}
	if err := os.WriteFile(path, []byte(tline("prompt", u1, "")+"\n"+last[:20]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.claudeRead(); protocol.CodeOf(err) != protocol.CodeUnreadable {
		t.Fatalf("observe of a line that stays half written: %v, want unreadable", err)
	}
}

// claudeObserver is a controller of a Claude conversation, not started,
// and the path of its transcript (not written).
func claudeObserver(t *testing.T) (*Controller, string) {
	t.Helper()
	root := t.TempDir()
	store, err := claims.Open(filepath.Join(root, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{ID: "cl-00000000000000000000", Project: "/work/p", EngineKind: "claude",
		Claude: &conversations.Claude{Session: watchSession}}
	c := New(Config{Claims: store, Conversation: cv})
	path, err := c.claudeRef(cv).Path()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	return c, path
}
