package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// full as they allow, the newest ending at the last message, and the
// pages together exactly the branch's messages in order (no gap, no
// overlap), whether the part cap or the byte cap binds; a cursor is bound
// to its connection.
func TestClaudePagesBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, size int
	}{
		{"empty", 0, 10},
		{"one page", 40, 10},
		{"part cap binds", 250, 10},
		{"byte cap binds", 20, 900 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &claudeView{session: "s", leaf: "m", isNew: tc.n == 0}
			for i := range tc.n {
				v.msgs = append(v.msgs, engine.HistoryMessage{ID: fmt.Sprintf("m%05d", i), Role: "user",
					Blocks: []protocol.Block{{Type: "text", Text: strings.Repeat("x", tc.size)}}})
			}
			cs := newCursors()
			var got []string
			end, cursor := len(v.msgs), ""
			for pages := 0; ; pages++ {
				raw, start, err := claudePageBefore(v, end)
				if err != nil {
					t.Fatal(err)
				}
				var p history.Page
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatal(err)
				}
				if len(p.Parts) > history.MaxPageParts || len(raw) > history.MaxPageBytes || p.From != start || start+len(p.Parts) != end || p.More != (end < len(v.msgs)) {
					t.Fatalf("page %d: from %d, %d parts, %d bytes, more %v; want it to end at %d within the caps", pages, p.From, len(p.Parts), len(raw), p.More, end)
				}
				if start > 0 && len(p.Parts) < history.MaxPageParts && len(raw)+tc.size+512 < history.MaxPageBytes-claudePageReserve {
					t.Fatalf("page %d has %d parts and %d bytes: one more message would have fit", pages, len(p.Parts), len(raw))
				}
				var ids []string
				for _, part := range p.Parts {
					ids = append(ids, part.Native)
				}
				got = append(ids, got...)
				if start == 0 {
					break
				}
				cursor = cs.issueClaude("k1", v, start)
				if _, r := cs.use("k2", cursor); r == nil || r.Code != protocol.CodeCursorForeign {
					t.Fatalf("another connection's use of a cursor: %v", r)
				}
				pc, r := cs.use("k1", cursor)
				if r != nil || pc.claude != v || pc.end != start {
					t.Fatalf("cursor: %+v, %v", pc, r)
				}
				end = pc.end
			}
			if len(got) != tc.n {
				t.Fatalf("paged %d messages; want %d", len(got), tc.n)
			}
			for i, id := range got {
				if id != fmt.Sprintf("m%05d", i) {
					t.Fatalf("message %d is %s: a gap or an overlap", i, id)
				}
			}
		})
	}
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
