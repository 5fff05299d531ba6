package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// pageSession writes a session of n messages whose texts are size bytes
// long and returns its snapshot.
func pageSession(t *testing.T, n, size int) *history.Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".pi", "sessions")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"type":"session","version":3,"id":"s-1","timestamp":"2026-12-01T00:00:00.000Z","cwd":"/p"}`+"\n")
	parent, text := "null", strings.Repeat("x", size)
	for i := range n {
		fmt.Fprintf(f, `{"type":"message","id":"m%05d","parentId":%s,"timestamp":"2026-12-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"%s"}]}}`+"\n", i, parent, text)
		parent = fmt.Sprintf(`"m%05d"`, i)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := history.Read(path, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// Paging back from the newest page: every page within the caps and as
// full as they allow, the newest ending at the branch's last part, and
// the pages together exactly the branch's parts in order (no gap, no
// overlap), whether the part cap or the byte cap binds.
func TestPageBefore(t *testing.T) {
	tests := []struct {
		name     string
		n, size  int
		wantPart int // parts of the branch
	}{
		{name: "empty branch", n: 0, size: 10},
		{name: "one page", n: 40, size: 10, wantPart: 40},
		{name: "part cap binds", n: 250, size: 10, wantPart: 250},
		{name: "byte cap binds", n: 20, size: 900 << 10, wantPart: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := pageSession(t, tt.n, tt.size)
			branch := snap.DefaultBranch()
			total, err := snap.Count(branch)
			if err != nil || total != tt.wantPart {
				t.Fatalf("Count = %d, %v; want %d", total, err, tt.wantPart)
			}
			var got []string
			end := total
			for pages := 0; ; pages++ {
				p, err := snap.Before(branch, end)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(p)
				if len(p.Parts) > history.MaxPageParts || len(b) > history.MaxPageBytes || p.From+len(p.Parts) != end {
					t.Fatalf("page from %d: %d parts, %d bytes, ends at %d, want %d", p.From, len(p.Parts), len(b), p.From+len(p.Parts), end)
				}
				if p.More != (end < total) {
					t.Fatalf("page ending at %d of %d says more=%v", end, total, p.More)
				}
				// As full as the caps allow: one part more does not fit.
				if p.From > 0 {
					if fwd, err := snap.Page(branch, p.From-1); err != nil || fwd.From+len(fwd.Parts) >= end {
						t.Fatalf("the page from %d could hold part %d too (%v)", p.From, p.From-1, err)
					}
				}
				var ids []string
				for _, part := range p.Parts {
					ids = append(ids, part.Entry)
				}
				got = append(ids, got...)
				if end = p.From; end == 0 {
					if tt.size > 1<<19 && pages == 0 {
						t.Fatal("the byte cap never bound")
					}
					break
				}
			}
			var want []string
			for from := 0; ; {
				p, err := snap.Page(branch, from)
				if err != nil {
					t.Fatal(err)
				}
				for _, part := range p.Parts {
					want = append(want, part.Entry)
				}
				if from += len(p.Parts); !p.More {
					break
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("paging back read %d parts, forward %d: not the same sequence", len(got), len(want))
			}
		})
	}
}

// Observe shows the newest page of a conversation longer than a page;
// observe with its cursor pages back to the first entry without gap or
// overlap, over the real controller, while the file grows (the cursor's
// snapshot is what pages come from). Cursors are bound to their
// connection and replaced by its next observe.
func TestObservePagesBack(t *testing.T) {
	const n = 250
	r := newRig(t, plainScript, func(c *Config) { writeSession(t, c.Conversation.Session, c.Conversation.Project, n) })
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := r.libClient(ctx)
	obs, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	natives := func(raw json.RawMessage) []string {
		var p history.Page
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, part := range p.Parts {
			if part.Native != "" && strings.HasPrefix(part.Native, "m") {
				out = append(out, part.Native)
			}
		}
		return out
	}
	newest := natives(obs.History)
	if len(newest) == 0 || newest[len(newest)-1] != fmt.Sprintf("m%05d", n-1) || obs.Cursor == "" {
		t.Fatalf("observe of %d messages: page %v… cursor %q; want the newest page and a cursor", n, newest[:min(3, len(newest))], obs.Cursor)
	}
	// The conversation goes on; paging back still reads the old snapshot.
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx, "more"); err != nil {
		t.Fatal(err)
	}
	all, cursor := newest, obs.Cursor
	other := r.libClient(ctx)
	if _, err := other.OlderPage(ctx, cursor); protocol.CodeOf(err) != protocol.CodeCursorForeign {
		t.Fatalf("another connection's cursor: %v; want %s", err, protocol.CodeCursorForeign)
	}
	for cursor != "" {
		p, err := c.OlderPage(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		all = append(natives(p.History), all...)
		cursor = p.Cursor
	}
	if len(all) != n {
		t.Fatalf("paged back over %d messages, want %d", len(all), n)
	}
	for i, id := range all {
		if id != fmt.Sprintf("m%05d", i) {
			t.Fatalf("message %d is %s: a gap or an overlap", i, id)
		}
	}
	// A fresh observe replaces the connection's cursors.
	again, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OlderPage(ctx, obs.Cursor); protocol.CodeOf(err) != protocol.CodeCursorUnknown {
		t.Fatalf("a cursor from before the last observe: %v; want %s", err, protocol.CodeCursorUnknown)
	}
	if _, err := c.OlderPage(ctx, again.Cursor); err != nil {
		t.Fatalf("the new cursor: %v", err)
	}
	_, err = c.Do(ctx, protocol.Command{Type: protocol.CmdObserve, Cursor: again.Cursor, FromSeq: new(uint64)})
	if protocol.CodeOf(err) != protocol.CodeMalformed {
		t.Fatalf("cursor with fromSeq: %v; want malformed", err)
	}
}

// A second observer of an unchanged session gets the newest page from the
// snapshot the first one's observe cut (the controller keeps the last
// snapshot read). A Pi session starts with a model_change entry, which
// shows nothing; the second count of that snapshot once overflowed the
// range left to decode and panicked the controller.
func TestObserveUnchangedSessionTwice(t *testing.T) {
	const n = 30
	r := newRig(t, plainScript, func(c *Config) {
		writeSession(t, c.Conversation.Session, c.Conversation.Project, n)
		b, err := os.ReadFile(c.Conversation.Session)
		if err != nil {
			t.Fatal(err)
		}
		header, rest, _ := strings.Cut(string(b), "\n")
		mc := `{"type":"model_change","id":"mc","parentId":null,"timestamp":"2026-12-01T00:00:00.500Z","provider":"p","modelId":"x"}`
		rest = strings.Replace(rest, `"parentId":null`, `"parentId":"mc"`, 1)
		if err := os.WriteFile(c.Conversation.Session, []byte(header+"\n"+mc+"\n"+rest), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 2 {
		obs, err := r.libClient(ctx).Observe(ctx)
		if err != nil {
			t.Fatalf("observe %d: %v", i, err)
		}
		var p history.Page
		if err := json.Unmarshal(obs.History, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Parts) == 0 || p.Parts[len(p.Parts)-1].Native != fmt.Sprintf("m%05d", n-1) {
			t.Fatalf("observe %d: %d parts, not ending at the newest message", i, len(p.Parts))
		}
	}
}
